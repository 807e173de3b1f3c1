package archive

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// ChainReader streams the resolved entries of a snapshot whose manifest is
// a chain of layers: a full manifest, then deltas, each on the one before.
// It merges the layers in path order; for each path the topmost layer that
// names it wins, and a deletion marker drops the path. It holds one entry
// per layer, so memory grows with the chain's length, never with the
// number of entries.
type ChainReader struct {
	// Header is the top layer's: the snapshot being read.
	Header Header
	// Totals is the top layer's trailer, set once Next has returned io.EOF
	// after the resolved entries matched it.
	Totals *Totals
	layers []*ManifestReader
	names  []string // for messages: which object each layer is
	heads  []*Entry // each layer's next line; nil once it ended
	// With PassSpans: the full layer's next span, not begun (its first
	// entry is not in heads).
	spans bool
	span  *Span
	fresh bool // the full layer's first line is not read yet
	// met and covered count the entries of the spans reached with
	// PassSpans, and of those a layer above had a line in (Coverage).
	met, covered int64
	files        int64
	bytes        int64
	n            int64
}

// NewChainReader merges layers, the full manifest first and the snapshot's
// own last; names say which object each is, for errors. It checks that
// each delta's base is the layer below it and that the chain is the one
// the top layer names. The chain owns the layers: Close closes them, and
// so does an error.
func NewChainReader(layers []*ManifestReader, names []string) (*ChainReader, error) {
	c := &ChainReader{layers: layers, names: names, heads: make([]*Entry, len(layers))}
	if len(layers) == 0 || len(names) != len(layers) {
		return nil, errors.New("manifest chain: no layers")
	}
	if err := c.start(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *ChainReader) start() error {
	layers, names := c.layers, c.names
	top := layers[len(layers)-1].Header
	c.Header = top
	want := top.Layers()
	ids := make([]string, len(layers))
	for i, l := range layers {
		ids[i] = l.Header.ID
		base := ""
		if i > 0 {
			base = layers[i-1].Header.ID
		}
		if l.Header.Base != base {
			return fmt.Errorf("%s: %w manifest: its base is %q, the chain of %s has %q below it", names[i], ErrCorrupt, l.Header.Base, top.ID, base)
		}
		if l.Header.Base != "" && !slices.Equal(l.Header.Chain, ids[:i+1]) {
			return fmt.Errorf("%s: %w manifest: its chain %q differs from the layers below it %q", names[i], ErrCorrupt, l.Header.Chain, ids[:i+1])
		}
	}
	if !slices.Equal(ids, want) {
		return fmt.Errorf("%s: %w manifest: the chain has layers %q, the manifest names %q", names[len(names)-1], ErrCorrupt, ids, want)
	}
	// The full layer's first line is read on first use, so that a reader
	// that passes over spans (PassSpans) can pass over the first one.
	for i := 1; i < len(layers); i++ {
		if err := c.advance(i); err != nil {
			return err
		}
	}
	c.fresh = true
	return nil
}

// begin reads the full layer's first line, once.
func (c *ChainReader) begin() error {
	if !c.fresh {
		return nil
	}
	c.fresh = false
	return c.advance(0)
}

// Layers returns the snapshot IDs of the layers, the full manifest first.
func (c *ChainReader) Layers() []string { return c.Header.Layers() }

func (c *ChainReader) advance(i int) error {
	if i == 0 && c.spans && c.span == nil {
		sp, err := c.layers[0].Span()
		if err != nil {
			return fmt.Errorf("%s: %w", c.names[0], err)
		}
		if c.span = sp; sp != nil {
			c.heads[0] = nil
			return nil
		}
	}
	e, err := c.layers[i].Next()
	switch {
	case errors.Is(err, io.EOF):
		c.heads[i] = nil
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", c.names[i], err)
	}
	c.heads[i] = e
	return nil
}

// Next returns the next resolved entry, or io.EOF after the whole chain
// was read and matched the top layer's totals.
func (c *ChainReader) Next() (*Entry, error) {
	for {
		top, _, err := c.NextPair(len(c.layers) - 1)
		if err != nil || top != nil {
			return top, err
		}
	}
}

// NextPair returns, path by path, the entry the whole chain resolves to
// (top) and the one the layers up to index cut resolve to (below): what a
// delta on the snapshot of layer cut compares with (cut -1: always nil).
// Either is nil where its view lacks the path; a path neither has is
// skipped. io.EOF as Next.
func (c *ChainReader) NextPair(cut int) (top, below *Entry, err error) {
	if err := c.begin(); err != nil {
		return nil, nil, err
	}
	for {
		if c.span != nil && !c.above(func(p string) bool { return ComparePaths(p, c.span.First) < 0 }) {
			// The span is next: its entries are read one by one.
			c.met += c.span.Entries
			if c.above(func(p string) bool { return ComparePaths(p, c.span.Last) <= 0 }) {
				c.covered += c.span.Entries
			}
			if err := c.advance(0); err != nil {
				return nil, nil, err
			}
			c.span = nil
		}
		var path string
		found := false
		for _, h := range c.heads {
			if h != nil && (!found || ComparePaths(h.Path, path) < 0) {
				path, found = h.Path, true
			}
		}
		if !found {
			return nil, nil, c.end()
		}
		// Resolve bottom up, so a deletion marker that deletes nothing
		// (damage) is caught.
		var e *Entry
		for i, h := range c.heads {
			if h != nil && h.Path == path {
				if h.Type == TypeDeleted {
					if e == nil {
						return nil, nil, fmt.Errorf("%s: %w manifest: deletes %q, which its base does not have", c.names[i], ErrCorrupt, path)
					}
					e = nil
				} else {
					e = h
				}
				if err := c.advance(i); err != nil {
					return nil, nil, err
				}
			}
			if i == cut {
				below = e
			}
		}
		if e == nil && below == nil {
			continue
		}
		if e != nil {
			c.n++
			if e.Type == TypeFile {
				c.files++
				c.bytes += e.Size
			}
		}
		return e, below, nil
	}
}

// PassSpans lets the reader pass over the spans of the full layer (see
// Span), instead of reading its lines ahead (ReadAhead). Call it before
// Next.
func (c *ChainReader) PassSpans() { c.spans = true }

// above reports whether a layer above the full one is at a path for which
// at is true.
func (c *ChainReader) above(at func(path string) bool) bool {
	for _, h := range c.heads[1:] {
		if h != nil && at(h.Path) {
			return true
		}
	}
	return false
}

// Span returns the span of the full layer's entries that Next resolves to
// as they are (no layer above has a path in its range), when Next would
// begin with it; nil otherwise. SkipSpan passes over it.
func (c *ChainReader) Span() (*Span, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	if c.span == nil || c.above(func(p string) bool { return ComparePaths(p, c.span.Last) <= 0 }) {
		return nil, nil
	}
	return c.span, nil
}

// SkipSpan passes over the span Span returned: its entries count as read.
func (c *ChainReader) SkipSpan() error {
	sp := c.span
	if sp == nil {
		return errors.New("manifest chain: no span to pass over")
	}
	if err := c.layers[0].SkipSpan(); err != nil {
		return fmt.Errorf("%s: %w", c.names[0], err)
	}
	c.n += sp.Entries
	c.files += sp.Files
	c.bytes += sp.Bytes
	c.span = nil
	c.met += sp.Entries
	return c.advance(0)
}

// Coverage counts the entries of the full layer's spans the reader
// reached with PassSpans (met), and of those a delta layer had a line in
// (covered), which had to be decoded whatever changed. As the deltas of a
// chain accumulate, so does its coverage, until the next full manifest.
func (c *ChainReader) Coverage() (covered, met int64) { return c.covered, c.met }

// DeltaLines sums the lines of the delta layers up to index upTo, once
// the chain was read to its end; ok is false before.
func (c *ChainReader) DeltaLines(upTo int) (n int64, ok bool) {
	for _, l := range c.layers[1 : upTo+1] {
		if l.Totals == nil {
			return 0, false
		}
		n += l.Totals.Lines
	}
	return n, true
}

func (c *ChainReader) end() error {
	t := c.layers[len(c.layers)-1].Totals
	if t == nil { // cannot happen: every layer ended with its trailer
		return fmt.Errorf("%s: %w manifest: no trailer", c.names[len(c.names)-1], ErrCorrupt)
	}
	if t.Entries != c.n || t.Files != c.files || t.Bytes != c.bytes {
		return fmt.Errorf("%s: %w manifest: its trailer counts %d entries, %d files, %d bytes; its chain resolves to %d, %d, %d",
			c.names[len(c.names)-1], ErrCorrupt, t.Entries, t.Files, t.Bytes, c.n, c.files, c.bytes)
	}
	c.Totals = t
	return io.EOF
}

// ReadAhead makes every layer decode its lines ahead of the merge, in a
// goroutine of its own (see ManifestReader.ReadAhead).
func (c *ChainReader) ReadAhead() {
	for _, l := range c.layers {
		l.ReadAhead()
	}
}

// Close releases every layer's decoder.
func (c *ChainReader) Close() {
	for _, l := range c.layers {
		l.Close()
	}
}
