package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/klauspost/compress/zstd"
)

// FormatVersion is written into every manifest; readers refuse newer ones.
// Format 1 manifests are always full; format 2 adds delta manifests (see
// Header.Base); format 3 sums up the runs of a full manifest's entries in
// spans (see Span).
const FormatVersion = 3

// Selection is the selection a snapshot was taken with, as its manifest
// records it: a preset's name and the include and exclude globs. What the
// names mean is internal/selector's (selector.Spec has the same fields);
// the format only carries them.
type Selection struct {
	Preset  string   `json:"preset"`
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// Header is the first line of a manifest.
type Header struct {
	Format    int       `json:"format"`
	ID        string    `json:"id"`
	Parent    string    `json:"parent,omitempty"`
	Created   time.Time `json:"created"`
	Host      string    `json:"host,omitempty"`
	Selection Selection `json:"selection"`
	// Base, set in a delta manifest, is the snapshot whose resolved entries
	// this manifest changes: its lines are only the entries that are new or
	// differ from the base's, and a deletion marker (TypeDeleted) for each
	// path the base has and this snapshot does not. Empty for a full one.
	Base string `json:"base,omitempty"`
	// Chain lists the manifests (snapshot IDs) a reader merges to resolve
	// this snapshot, the full one first and this one last: the base's
	// chain plus this ID. Empty for a full manifest.
	Chain []string `json:"chain,omitempty"`
}

// Layers returns the snapshot IDs whose manifests resolve this one.
func (h *Header) Layers() []string {
	if h.Base == "" {
		return []string{h.ID}
	}
	return h.Chain
}

// Totals is the manifest trailer: it proves the manifest is complete and
// summarises the snapshot.
type Totals struct {
	Entries int64 `json:"entries"`
	Files   int64 `json:"files"`
	Bytes   int64 `json:"bytes"`
	// New counts entries whose bytes (or metadata) were written in this
	// snapshot's own archive; NewBytes their file bytes.
	New      int64 `json:"new"`
	NewBytes int64 `json:"new_bytes"`
	// Archives lists the snapshot archives the entries refer to.
	Archives []string `json:"archives"`
	// Lines counts the lines of this manifest between header and trailer
	// (entries and deletion markers): for a delta, far fewer than Entries,
	// which always counts the resolved snapshot. Format 2 only.
	Lines int64 `json:"lines,omitempty"`
}

type trailer struct {
	End *Totals `json:"end"`
}

// ManifestWriter streams a manifest: entries must come in ComparePaths order.
// A delta manifest (Header.Base set) is given every entry of the snapshot
// with its base's entry (WriteOver) and every path deleted since the base
// (Delete), and writes only what differs; its totals still describe the
// whole snapshot.
type ManifestWriter struct {
	zw     *zstd.Encoder
	bw     *bufio.Writer
	enc    *json.Encoder
	delta  bool
	last   string
	any    bool  // an entry or deletion was given: last is set
	n      int64 // lines written
	totals Totals
	seen   map[string]bool
	line   []byte
	// A full manifest's lines wait in block until their span is written
	// before them.
	spans bool
	span  Span
	block []byte
}

// manifestWindow is the zstd window manifests are written with. A reader
// holds a window per layer it merges, and with the default 8 MiB a chain
// of a dozen small deltas took 100 MB before its first line; sorted lines
// repeat what is near them, so the smaller window compresses as well (a
// 409 MB manifest: 58.1 MB with 8 MiB, 57.0 MB with 256 KiB).
const manifestWindow = 256 << 10

// NewManifestWriter writes hdr and returns a writer for the entries.
func NewManifestWriter(w io.Writer, hdr Header) (*ManifestWriter, error) {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(manifestWindow))
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(zw, 256<<10)
	m := &ManifestWriter{zw: zw, bw: bw, enc: json.NewEncoder(bw), seen: map[string]bool{}, delta: hdr.Base != "", spans: hdr.Base == ""}
	m.enc.SetEscapeHTML(false)
	hdr.Format = FormatVersion
	if m.delta && (len(hdr.Chain) < 2 || hdr.Chain[len(hdr.Chain)-1] != hdr.ID || hdr.Chain[len(hdr.Chain)-2] != hdr.Base) {
		return nil, fmt.Errorf("delta manifest %s: chain %q does not end in its base %s and itself", hdr.ID, hdr.Chain, hdr.Base)
	}
	if !m.delta {
		hdr.Chain = nil
	}
	if err := m.enc.Encode(hdr); err != nil {
		return nil, err
	}
	return m, nil
}

// Write appends one entry of the snapshot (in a delta, as a new one).
func (m *ManifestWriter) Write(e *Entry) error { return m.WriteOver(e, nil) }

// WriteOver appends one entry of the snapshot whose base had base at the
// same path (nil: none). A delta writes it only when it differs.
func (m *ManifestWriter) WriteOver(e, base *Entry) error {
	if err := m.order(e.Path); err != nil {
		return err
	}
	m.totals.Entries++
	if e.Type == TypeFile {
		m.totals.Files++
		m.totals.Bytes += e.Size
	}
	m.archive(e.Archive)
	if m.delta && base != nil && e.Equal(base) {
		return nil
	}
	return m.put(e)
}

// put writes e's line; a full manifest gathers its lines into spans.
func (m *ManifestWriter) put(e *Entry) error {
	m.n++
	if !m.spans {
		if e.Type == TypeDeleted {
			m.line = appendDeletion(m.line[:0], e.Path)
		} else {
			m.line = appendEntry(m.line[:0], e)
		}
		_, err := m.bw.Write(m.line)
		return err
	}
	if m.span.Entries > 0 && topName(e.Path) != topName(m.span.First) {
		// A span under one top-level name: a reader that must decode
		// some (the agent guard's nodes/, secrets/) passes over the rest.
		if err := m.endSpan(); err != nil {
			return err
		}
	}
	m.block = appendEntry(m.block, e)
	m.span.Add(e)
	if m.span.Entries == SpanEntries {
		return m.endSpan()
	}
	return nil
}

// endSpan writes the span and the lines it sums up.
func (m *ManifestWriter) endSpan() error {
	if m.span.Entries == 0 {
		return nil
	}
	m.line = appendSpan(m.line[:0], &m.span)
	_, err := m.bw.Write(m.line)
	if err == nil {
		_, err = m.bw.Write(m.block)
	}
	m.block, m.span = m.block[:0], Span{}
	return err
}

// finish writes the last span and the trailer, and flushes.
func (m *ManifestWriter) finish(t *Totals) error {
	if err := m.endSpan(); err != nil {
		return err
	}
	if err := m.enc.Encode(trailer{End: t}); err != nil {
		return err
	}
	if err := m.bw.Flush(); err != nil {
		return err
	}
	return m.zw.Close()
}

func (m *ManifestWriter) archive(a string) {
	if a != "" && !m.seen[a] {
		m.seen[a] = true
		m.totals.Archives = append(m.totals.Archives, a)
	}
}

// Tally sums entries of a snapshot that its delta manifest's base has as
// they are (Equal), which the delta leaves out: a snapshot carries their
// count from its walk to the manifest instead of the entries, which at a
// million files held tens of MB while the walk ran ahead of the writer.
type Tally struct {
	Entries, Files, Bytes int64
	Archives              []string // those the entries refer to, in the order met
}

// Add counts e.
func (t *Tally) Add(e *Entry) {
	t.Entries++
	if e.Type == TypeFile {
		t.Files++
		t.Bytes += e.Size
	}
	// Neighbouring entries mostly share an archive: the list is searched
	// only where it changes.
	if a := e.Archive; a != "" && (len(t.Archives) == 0 || t.Archives[len(t.Archives)-1] != a) && !slices.Contains(t.Archives, a) {
		t.Archives = append(t.Archives, a)
	}
}

// Unchanged counts t's entries where they fall in the order, as WriteOver
// of each with its equal base entry would: in the totals, without a line.
// Only a delta leaves entries out.
func (m *ManifestWriter) Unchanged(t *Tally) error {
	if !m.delta {
		return errors.New("manifest: entries left out of a full manifest")
	}
	m.totals.Entries += t.Entries
	m.totals.Files += t.Files
	m.totals.Bytes += t.Bytes
	for _, a := range t.Archives {
		m.archive(a)
	}
	return nil
}

// Delete records that the base's path is gone from the snapshot: a delta
// writes a deletion marker, a full manifest nothing.
func (m *ManifestWriter) Delete(path string) error {
	if err := m.order(path); err != nil {
		return err
	}
	if !m.delta {
		return nil
	}
	return m.put(&Entry{Path: path, Type: TypeDeleted})
}

func (m *ManifestWriter) order(path string) error {
	if m.any && ComparePaths(m.last, path) >= 0 {
		return fmt.Errorf("manifest: %q written after %q: entries out of order", path, m.last)
	}
	m.last, m.any = path, true
	return nil
}

// Close writes the trailer and flushes; new and newBytes describe what this
// snapshot's archive added.
func (m *ManifestWriter) Close(newEntries, newBytes int64) (Totals, error) {
	m.totals.New, m.totals.NewBytes, m.totals.Lines = newEntries, newBytes, m.n
	if m.totals.Archives == nil {
		m.totals.Archives = []string{}
	}
	return m.totals, m.finish(&m.totals)
}

// ErrCorrupt marks a manifest or archive that cannot be trusted.
var ErrCorrupt = errors.New("corrupt")

// ManifestReader streams a manifest's entries, checking order, path safety
// and that the trailer is present.
type ManifestReader struct {
	zr     *zstd.Decoder
	src    *sourceReader
	br     *bufio.Reader
	Header Header
	Totals *Totals // set once Next has returned io.EOF
	last   string
	n      int64
	long   []byte // a line longer than br's buffer
	// With ReadAhead: the batches decoded ahead, the stop that ends their
	// goroutine, the batch being handed out and the error after it.
	ahead    chan batch
	stop     chan struct{}
	batch    []*Entry
	batchErr error
	// archives interns archive IDs: a manifest names few archives, and a
	// restore holds the entries of its ranged reads in flight.
	archives map[string]string
	// The span whose entries are being read (nil between spans), how
	// many of them are left, what those read add up to, and whether one
	// was read (then it can no longer be passed over).
	span    *Span
	left    int64
	got     Span
	entered bool
}

// MaxLine bounds one manifest line (the header or an entry): an entry
// holds at most two PATH_MAX paths, base64-encoded, and a few numbers, so
// anything longer is damage or an attack, refused before it fills memory.
const MaxLine = 1 << 20

// maxWindow bounds the zstd window a manifest or archive frame may ask
// for; homesnap writes 8 MiB windows at most. With lowmem decoding this
// keeps a reader's memory to a few windows whatever the input says.
const maxWindow = 8 << 20

// NewManifestReader reads the header from r.
func NewManifestReader(r io.Reader) (*ManifestReader, error) {
	src := &sourceReader{r: r}
	zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxWindow), zstd.WithDecoderMaxMemory(maxWindow))
	if err != nil {
		return nil, err
	}
	m := &ManifestReader{zr: zr, src: src, br: bufio.NewReaderSize(zr, 256<<10)}
	line, err := m.readLine()
	if err == nil {
		err = json.Unmarshal(line, &m.Header)
	}
	if err != nil {
		zr.Close()
		if src.err != nil {
			return nil, fmt.Errorf("read manifest: %w", src.err)
		}
		return nil, fmt.Errorf("%w manifest header: %v", ErrCorrupt, err)
	}
	if m.Header.Format < 1 || m.Header.Format > FormatVersion {
		zr.Close()
		return nil, fmt.Errorf("manifest format %d is not supported by this homesnap (supports up to %d): upgrade homesnap", m.Header.Format, FormatVersion)
	}
	if err := m.Header.checkLayers(); err != nil {
		zr.Close()
		return nil, err
	}
	return m, nil
}

// maxChain bounds the layers a delta manifest may name, so that a damaged
// header cannot make a reader open an unbounded number of objects.
const maxChain = 256

// checkLayers refuses a header whose base and chain disagree.
func (h *Header) checkLayers() error {
	switch {
	case h.Base == "" && len(h.Chain) == 0:
		return nil
	case h.Format < 2:
		return fmt.Errorf("%w manifest header: a format %d manifest cannot be a delta", ErrCorrupt, h.Format)
	case h.Base == "" || len(h.Chain) < 2 || len(h.Chain) > maxChain || h.Chain[len(h.Chain)-1] != h.ID || h.Chain[len(h.Chain)-2] != h.Base:
		return fmt.Errorf("%w manifest header: base %q and chain of %d manifests do not agree", ErrCorrupt, h.Base, len(h.Chain))
	}
	seen := map[string]bool{}
	for _, id := range h.Chain {
		if id == "" || seen[id] {
			return fmt.Errorf("%w manifest header: chain names %q twice or empty", ErrCorrupt, id)
		}
		seen[id] = true
	}
	return nil
}

// readLine returns the next whole line; it is valid until the next call.
func (m *ManifestReader) readLine() ([]byte, error) {
	line, err := m.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		m.long = append(m.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(m.long) > MaxLine {
				return nil, fmt.Errorf("%w manifest: line %d is longer than %d bytes", ErrCorrupt, m.n+1, MaxLine)
			}
			line, err = m.br.ReadSlice('\n')
			m.long = append(m.long, line...)
		}
		line = m.long
	}
	if errors.Is(err, io.EOF) {
		return nil, io.ErrUnexpectedEOF // every line, the trailer too, ends in a newline
	}
	return line, err
}

var trailerPrefix = []byte(`{"end":`)

// Next returns the next entry, or io.EOF after a complete manifest.
func (m *ManifestReader) Next() (*Entry, error) {
	if m.ahead == nil {
		return m.next()
	}
	for len(m.batch) == 0 {
		if m.batchErr != nil {
			return nil, m.batchErr
		}
		b, ok := <-m.ahead
		if !ok { // cannot happen: the last batch carries io.EOF or the error
			return nil, fmt.Errorf("%w manifest: read ahead ended early", ErrCorrupt)
		}
		m.batch, m.batchErr = b.entries, b.err
	}
	e := m.batch[0]
	m.batch[0] = nil
	m.batch = m.batch[1:]
	return e, nil
}

// aheadBatch is how many entries the reader decodes ahead per hand-over,
// and aheadBatches how many hand-overs it keeps ready.
const aheadBatch, aheadBatches = 256, 4

type batch struct {
	entries []*Entry
	err     error // ends the reading: io.EOF or what Next returns
}

// ReadAhead makes the reader decompress and decode its lines in a
// goroutine of its own, a few batches ahead of Next, so that a caller
// merging the entries (a snapshot over its parent's manifest) does not
// wait for the decoding. Close stops it. Call it once, before Next.
func (m *ManifestReader) ReadAhead() {
	if m.ahead != nil {
		return
	}
	m.ahead, m.stop = make(chan batch, aheadBatches), make(chan struct{})
	go func() {
		defer close(m.ahead)
		for {
			b := batch{entries: make([]*Entry, 0, aheadBatch)}
			for len(b.entries) < aheadBatch && b.err == nil {
				var e *Entry
				if e, b.err = m.next(); b.err == nil {
					b.entries = append(b.entries, e)
				}
			}
			select {
			case m.ahead <- b:
			case <-m.stop:
				return
			}
			if b.err != nil {
				return
			}
		}
	}()
}

// entryLine returns the next line, which belongs to the entries.
func (m *ManifestReader) entryLine() ([]byte, error) {
	line, err := m.readLine()
	if err != nil && m.src.err != nil { // the read failed, not the data
		return nil, fmt.Errorf("read manifest after entry %d: %w", m.n, m.src.err)
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w manifest: truncated after %d entries (no trailer)", ErrCorrupt, m.n)
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, fmt.Errorf("%w manifest after entry %d: %v", ErrCorrupt, m.n, err)
	}
	return line, nil
}

// spanned: the entries of this manifest come in spans (a full one of
// format 3); every entry belongs to one.
func (m *ManifestReader) spanned() bool { return m.Header.Format >= 3 && m.Header.Base == "" }

// startSpan reads a span line.
func (m *ManifestReader) startSpan(line []byte) error {
	if !m.spanned() || m.span != nil {
		return fmt.Errorf("%w manifest: a span line after entry %d, where none may be", ErrCorrupt, m.n)
	}
	last := m.last
	if m.n == 0 {
		last = ""
	}
	sp, err := parseSpan(line, last)
	if err != nil {
		return fmt.Errorf("%w manifest after entry %d: %v", ErrCorrupt, m.n, err)
	}
	m.span, m.left, m.got, m.entered = sp, sp.Entries, Span{}, false
	return nil
}

// Span returns the span of entries Next would begin with, or nil when
// Next is within one, at the trailer, or the reader reads ahead (which
// decodes every line). SkipSpan passes over it.
func (m *ManifestReader) Span() (*Span, error) {
	if m.ahead != nil || !m.spanned() {
		return nil, nil
	}
	if m.span == nil {
		if b, _ := m.br.Peek(len(spanPrefix)); !bytes.Equal(b, spanPrefix) {
			return nil, nil // the trailer, or damage Next reports
		}
		line, err := m.entryLine()
		if err != nil {
			return nil, err
		}
		if err := m.startSpan(line); err != nil {
			return nil, err
		}
	}
	if m.entered {
		return nil, nil
	}
	return m.span, nil
}

// SkipSpan passes over the entries of the span Span returned, without
// decoding them: they count as read.
func (m *ManifestReader) SkipSpan() error {
	if m.span == nil || m.entered {
		return errors.New("manifest: no span to pass over")
	}
	for ; m.left > 0; m.left-- {
		line, err := m.entryLine()
		if err != nil {
			return err
		}
		if bytes.HasPrefix(line, spanPrefix) || bytes.HasPrefix(line, trailerPrefix) {
			return fmt.Errorf("%w manifest: the span after entry %d ends %d entries early", ErrCorrupt, m.n, m.left)
		}
	}
	m.n += m.span.Entries
	m.last, m.span = m.span.Last, nil
	return nil
}

func (m *ManifestReader) next() (*Entry, error) {
	line, err := m.entryLine()
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(line, spanPrefix) {
		if err := m.startSpan(line); err != nil {
			return nil, err
		}
		if line, err = m.entryLine(); err != nil {
			return nil, err
		}
	}
	if m.span != nil && (bytes.HasPrefix(line, trailerPrefix) || bytes.HasPrefix(line, spanPrefix)) {
		return nil, fmt.Errorf("%w manifest: the span after entry %d ends %d entries early", ErrCorrupt, m.n-(m.span.Entries-m.left), m.left)
	}
	if bytes.HasPrefix(line, trailerPrefix) {
		var t trailer
		if err := json.Unmarshal(line, &t); err != nil || t.End == nil {
			return nil, fmt.Errorf("%w manifest trailer: %v", ErrCorrupt, err)
		}
		lines := t.End.Entries // format 1: every line is an entry
		if m.Header.Format >= 2 {
			lines = t.End.Lines
		}
		if lines != m.n || m.Header.Base == "" && t.End.Entries != m.n {
			return nil, fmt.Errorf("%w manifest: trailer counts %d lines, read %d", ErrCorrupt, lines, m.n)
		}
		// Nothing may follow the trailer, and reading on to the end lets
		// a verifying source (internal/auth) check the whole object.
		if _, err := m.br.ReadByte(); err != io.EOF || m.src.err != nil {
			if m.src.err != nil {
				return nil, fmt.Errorf("read manifest after its trailer: %w", m.src.err)
			}
			return nil, fmt.Errorf("%w manifest: data after the trailer", ErrCorrupt)
		}
		m.Totals = t.End
		return nil, io.EOF
	}
	e := new(Entry)
	if m.archives == nil {
		m.archives = map[string]string{}
	}
	if err := parseEntry(line, e, m.archives); err != nil {
		return nil, fmt.Errorf("%w manifest after entry %d: %v", ErrCorrupt, m.n, err)
	}
	if err := CheckPath(e.Path); err != nil {
		return nil, fmt.Errorf("%w manifest: %v", ErrCorrupt, err)
	}
	if m.n > 0 && ComparePaths(m.last, e.Path) >= 0 {
		return nil, fmt.Errorf("%w manifest: %q after %q: out of order", ErrCorrupt, e.Path, m.last)
	}
	switch e.Type {
	case TypeFile:
		if e.Hash == nil || e.Size < 0 || (e.Size > 0 && (e.Archive == "" || e.Length <= 0 || e.Offset < 0)) {
			return nil, fmt.Errorf("%w manifest: file %q has no valid hash or location", ErrCorrupt, e.Path)
		}
	case TypeDir:
	case TypeSymlink:
		if e.Link == "" {
			return nil, fmt.Errorf("%w manifest: symlink %q has no target", ErrCorrupt, e.Path)
		}
	case TypeDeleted:
		if m.Header.Base == "" {
			return nil, fmt.Errorf("%w manifest: full manifest marks %q deleted", ErrCorrupt, e.Path)
		}
	default:
		return nil, fmt.Errorf("%w manifest: %q has unknown type %q", ErrCorrupt, e.Path, e.Type)
	}
	m.last = e.Path
	m.n++
	switch {
	case m.span != nil:
		m.entered = true
		m.got.Add(e)
		if m.left--; m.left == 0 {
			if !m.span.same(&m.got) {
				return nil, fmt.Errorf("%w manifest: the span ending at entry %d does not sum up its entries", ErrCorrupt, m.n)
			}
			m.span = nil
		}
	case m.spanned():
		return nil, fmt.Errorf("%w manifest: entry %d is in no span", ErrCorrupt, m.n)
	}
	return e, nil
}

// Close releases the decoder, once the read-ahead (if any) stopped, and
// closes the source when it is an io.Closer (a store's response body): a
// reader that stops before the trailer must not keep the connection.
func (m *ManifestReader) Close() {
	if m.ahead != nil && m.stop != nil {
		close(m.stop)
		for range m.ahead { // until it stops: it reads the source
		}
		m.stop = nil
	}
	m.zr.Close()
	if c, ok := m.src.r.(io.Closer); ok {
		c.Close()
	}
}

// ForceWrite writes e without the order check: tests use it to build
// hostile manifests that readers must refuse.
func (m *ManifestWriter) ForceWrite(e *Entry) error {
	if e.Type != TypeDeleted {
		m.totals.Entries++
	}
	if e.Type == TypeFile {
		m.totals.Files++
		m.totals.Bytes += e.Size
	}
	return m.put(e)
}
