package archive

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// FrameSize is how many uncompressed tar bytes go into one frame before it
// is cut: big enough for a good ratio, small enough that several frames in
// flight stay within the memory budget and a ranged read fetches little
// more than it needs.
const FrameSize = 2 << 20

// Level names a compression level.
type Level = zstd.EncoderLevel

// Compressor turns tar bytes into independent zstd frames. It is safe for
// concurrent use.
type Compressor struct {
	enc *zstd.Encoder
	// frames holds buffers with room for the largest frame, so that the
	// encoder never grows one (a frame that hardly compresses used to grow
	// a smaller buffer by append, four copies).
	frames *Buffers
}

// frameSlack is how far a frame's tar bytes may run past FrameSize: the
// frame is cut before a write once full, and writers hand over at most
// this much at once (a larger write still works, in a grown buffer).
const frameSlack = 256 << 10

// frameWindow is the encoders' window. Frames are independent, so a match
// reaches back a frame at most; the default window kept a history of
// about 3.7 MiB per encoder, this one 1.7 MiB, at the same ratio and speed
// (BenchmarkFrameOfContent). A frame past FrameSize plus a block shifts
// the history once.
const frameWindow = FrameSize

// NewCompressor returns a compressor for up to concurrency parallel frames.
func NewCompressor(level Level, concurrency int) (*Compressor, error) {
	concurrency = max(1, concurrency)
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(concurrency),
		zstd.WithEncoderCRC(true),
		zstd.WithWindowSize(frameWindow),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, err
	}
	// Frames in flight: one being filled per worker and a couple each
	// waiting to be written; more than that are left to the collector.
	return &Compressor{enc: enc, frames: NewBuffers(2*concurrency+2, enc.MaxEncodedSize(FrameSize+frameSlack))}, nil
}

// Frame compresses raw into one complete frame appended to dst.
func (c *Compressor) Frame(raw, dst []byte) []byte { return c.enc.EncodeAll(raw, dst) }

// EndFrame is the frame that closes an archive: tar's end-of-archive marker.
func (c *Compressor) EndFrame() []byte { return c.Frame(make([]byte, 1024), nil) }

// Release hands back a frame the FrameWriter emitted once it is written;
// the frame must not be used after.
func (c *Compressor) Release(frame []byte) { c.frames.Put(frame) }

// Buffers is a bounded free list of byte buffers of one capacity. Unlike a
// sync.Pool it is not emptied by garbage collections, which come several
// times a second during a snapshot under the sidecar's memory limit, each
// new multi-MiB buffer then costing an allocation, zeroing and page
// faults. It lives as long as its owner (one snapshot's pipeline), so an
// idle sidecar keeps none.
type Buffers struct {
	free chan []byte
	size int
}

// NewBuffers returns a free list keeping up to n buffers of size bytes.
func NewBuffers(n, size int) *Buffers { return &Buffers{free: make(chan []byte, n), size: size} }

// Get returns an empty buffer with room for n bytes: one of the list's
// size when n needs more than a quarter of it, else one of just n bytes,
// left to the collector after use. A snapshot of scattered changes fills
// its jobs and frames with a few KB each, and a full-size buffer for each
// of those in flight was tens of MB beside a million-file journal.
func (b *Buffers) Get(n int) []byte {
	if n <= b.size/4 || n > b.size {
		return make([]byte, 0, n)
	}
	select {
	case p := <-b.free:
		return p
	default:
		return make([]byte, 0, b.size)
	}
}

// Put hands p back for reuse; p must not be used after. A buffer smaller
// than size (not one of Get's), or one more than the list keeps, is left
// to the collector.
func (b *Buffers) Put(p []byte) {
	if cap(p) < b.size {
		return
	}
	select {
	case b.free <- p[:0]:
	default:
	}
}

// FrameWriter lays entries out as a tar stream and cuts it into frames,
// handing each compressed frame to emit. A frame holding a header always
// begins on a header boundary; an entry's data may run on into following
// frames of its own.
type FrameWriter struct {
	c        *Compressor
	emit     func([]byte) error
	raw      bytes.Buffer
	blk      [blockSize]byte // a header, laid out in place
	entry    string          // the current entry's path, for errors
	left     int64           // its data still to be written
	pad      int             // zeros after it, to the next block
	frames   int             // frames emitted so far
	midEntry bool            // the current frame began inside an entry's data
}

// NewFrameWriter returns a writer that emits frames through emit.
func NewFrameWriter(c *Compressor, emit func(frame []byte) error) *FrameWriter {
	f := &FrameWriter{c: c}
	f.raw.Grow(FrameSize + frameSlack)
	f.Reset(emit)
	return f
}

// Reset readies the writer for a new, independent run of frames, keeping
// its buffer: workers reuse one writer for many jobs.
func (f *FrameWriter) Reset(emit func(frame []byte) error) {
	f.emit, f.frames, f.midEntry = emit, 0, false
	f.left, f.pad = 0, 0
	f.raw.Reset()
}

// Frame is the index of the frame being filled, counted from the first
// frame this writer emitted.
func (f *FrameWriter) Frame() int { return f.frames }

// Pending reports how many uncompressed bytes wait in the current frame.
func (f *FrameWriter) Pending() int { return f.raw.Len() }

// WriteHeader starts entry e. The caller then writes exactly e.Size bytes of
// a regular file's content with Write.
func (f *FrameWriter) WriteHeader(e *Entry) error {
	if err := f.endEntry(); err != nil {
		return err
	}
	if f.midEntry || f.raw.Len() >= FrameSize {
		if err := f.cut(false); err != nil {
			return err
		}
	}
	h := tarHeader(e)
	if ustarBlock(&f.blk, &h) {
		f.raw.Write(f.blk[:])
	} else if err := writeTarHeader(&f.raw, h); err != nil {
		return err
	}
	f.entry = e.Path
	if h.Typeflag == tar.TypeReg {
		f.left, f.pad = h.Size, int(-h.Size&(blockSize-1))
	}
	return nil
}

// Write appends content of the current entry, cutting a frame first when
// the current one is full. Past the entry's size it writes nothing more
// and fails, as archive/tar's writer does.
func (f *FrameWriter) Write(p []byte) (int, error) {
	if f.raw.Len() >= FrameSize {
		if err := f.cut(true); err != nil {
			return 0, err
		}
	}
	if int64(len(p)) > f.left {
		n, _ := f.raw.Write(p[:f.left])
		f.left = 0
		return n, tar.ErrWriteTooLong
	}
	f.left -= int64(len(p))
	return f.raw.Write(p)
}

// Cut closes the current frame after padding the last entry; the next
// frame starts on a header boundary.
func (f *FrameWriter) Cut() error {
	if err := f.endEntry(); err != nil {
		return err
	}
	return f.cut(false)
}

// endEntry pads the current entry's data to a whole block, once all of it
// was written.
func (f *FrameWriter) endEntry() error {
	if f.left > 0 {
		return fmt.Errorf("archive: %d bytes of %q were not written", f.left, f.entry)
	}
	f.raw.Write(zeroBlock[:f.pad])
	f.pad = 0
	return nil
}

var zeroBlock [blockSize]byte

func (f *FrameWriter) cut(midEntry bool) error {
	if f.raw.Len() > 0 {
		frame := f.c.Frame(f.raw.Bytes(), f.c.frames.Get(f.c.enc.MaxEncodedSize(f.raw.Len())))
		f.raw.Reset()
		f.frames++
		if err := f.emit(frame); err != nil {
			return err
		}
	}
	f.midEntry = midEntry
	return nil
}

// writeTarHeader writes what ustarBlock leaves to archive/tar. It takes
// its own copy of h, which escapes, so that the caller's stays on its stack.
func writeTarHeader(w io.Writer, h tar.Header) error { return tar.NewWriter(w).WriteHeader(&h) }

// tarHeader describes e as a tar header. Owner names are left out on
// purpose: numeric ids are what a container restores.
func tarHeader(e *Entry) tar.Header {
	h := tar.Header{
		Name:    e.Path,
		Mode:    int64(e.Mode.Perm()) | modeBits(e),
		Uid:     e.UID,
		Gid:     e.GID,
		ModTime: time.Unix(0, e.MTime),
	}
	switch e.Type {
	case TypeDir:
		h.Typeflag, h.Name = tar.TypeDir, e.Path+"/"
	case TypeSymlink:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
	default:
		h.Typeflag, h.Size = tar.TypeReg, e.Size
	}
	return h
}

// Decoders are pooled: a restore opens one per ranged read. They skip the
// frames' checksums: every reader of a range checks each file it takes
// against the SHA-256 of the manifest (and its header against the
// manifest's entry), so the frames' xxhash only cost a medium restore
// 0.14 s of CPU.
var decoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.IgnoreChecksum(true),
		zstd.WithDecoderMaxWindow(maxWindow), zstd.WithDecoderMaxMemory(maxWindow))
	if err != nil {
		panic(err)
	}
	return d
}}

// RangeReader reads the tar entries of a fetched byte range of an archive:
// Next moves to the next entry, Read reads its data.
type RangeReader struct {
	*tarReader
	zr  *zstd.Decoder
	src *sourceReader
	out *boundedReader
}

// MaxDecoded is what a range holding entries of the given total size may
// decode to: their data padded to tar blocks, a header each, and the rest
// of the frame their first header is in (frames are cut after FrameSize
// bytes, plus at most one write or header; older archives used 4 MiB
// frames, hence the margin). Decoding stops there, so a range whose tar
// stream claims a huge entry before the wanted one (a "skip bomb") costs
// no more than an honest one.
func MaxDecoded(entries int, size int64) int64 {
	return size + int64(entries)*(2*512) + frameMargin
}

const frameMargin = 16 << 20

// ErrTooLarge marks a range that decodes to more than its entries need.
var ErrTooLarge = fmt.Errorf("%w archive range: decodes to more than the manifest accounts for", ErrCorrupt)

// NewRangeReader decodes r, a range that starts on a frame holding a header,
// up to maxDecoded bytes (see MaxDecoded); reading past that fails with
// ErrTooLarge.
func NewRangeReader(r io.Reader, maxDecoded int64) (*RangeReader, error) {
	src := &sourceReader{r: r}
	zr := decoders.Get().(*zstd.Decoder)
	if err := zr.Reset(src); err != nil {
		decoders.Put(zr)
		if src.err != nil {
			return nil, src.err
		}
		return nil, fmt.Errorf("%w archive range: %v", ErrCorrupt, err)
	}
	out := &boundedReader{r: zr, left: maxDecoded}
	return &RangeReader{tarReader: &tarReader{r: out}, zr: zr, src: src, out: out}, nil
}

// Exceeded reports whether decoding stopped at the bound.
func (r *RangeReader) Exceeded() bool { return r.out.exceeded }

// boundedReader fails once more than left bytes were read.
type boundedReader struct {
	r        io.Reader
	left     int64
	exceeded bool
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.exceeded = true
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// SourceErr returns the error reading the range itself failed with, if
// any: then a decoding error is a failed read (a network cut, a deadline),
// not a damaged archive.
func (r *RangeReader) SourceErr() error { return r.src.err }

// sourceReader remembers the first error of the reader under a decoder.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// Close returns the decoder to the pool.
func (r *RangeReader) Close() {
	if r.zr != nil {
		r.zr.Reset(nil)
		decoders.Put(r.zr)
		r.zr = nil
	}
}
