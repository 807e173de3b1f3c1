package archive

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// archiveTarHeader is what archive/tar's writer writes for h: its header
// blocks, before any data.
func archiveTarHeader(h *tar.Header) ([]byte, error) {
	var b bytes.Buffer
	err := tar.NewWriter(&b).WriteHeader(h)
	return b.Bytes(), err
}

// isUSTAR reports whether b is one header block in the ustar format: what
// archive/tar chose when it needed no pax or GNU records.
func isUSTAR(b []byte) bool {
	return len(b) == blockSize && string(b[257:265]) == "ustar\x0000"
}

func TestUSTARBlockIsArchiveTars(t *testing.T) {
	for _, e := range append(tarEntries(),
		&Entry{Path: strings.Repeat("p", 100), Type: TypeFile, Size: 1<<33 - 1, MTime: 1},
		&Entry{Path: strings.Repeat("d", 99), Type: TypeDir, Mode: 0o1777, MTime: 499_999_999},
		&Entry{Path: "jobs/a/" + strings.Repeat("x", 100), Type: TypeFile, MTime: 500_000_000},
		&Entry{Path: "jobs/a/setuid", Type: TypeFile, Mode: 0o755 | fs.ModeSetuid | fs.ModeSticky, UID: 1<<21 - 1, GID: 1<<21 - 1},
		&Entry{Path: "jobs/a/link", Type: TypeSymlink, Link: strings.Repeat("l", 100), MTime: -1},
		&Entry{Path: "jobs/a/huge", Type: TypeFile, Size: 1 << 33},
		&Entry{Path: "jobs/a/old", Type: TypeFile, MTime: -2e9},
		// Each side of each bound: the prefix's 155 bytes, the name's 100
		// after a split, the link's 100, ASCII's last byte.
		&Entry{Path: strings.Repeat("a", 155) + "/b", Type: TypeFile},
		&Entry{Path: strings.Repeat("a", 156) + "/b", Type: TypeFile},
		&Entry{Path: strings.Repeat("a", 60) + "/" + strings.Repeat("b", 94), Type: TypeDir}, // 156 with its slash
		&Entry{Path: "a/" + strings.Repeat("b", 100), Type: TypeFile},
		&Entry{Path: "a/" + strings.Repeat("b", 101), Type: TypeFile},
		&Entry{Path: "jobs/a/link101", Type: TypeSymlink, Link: strings.Repeat("l", 101)},
		&Entry{Path: "jobs/\x7f", Type: TypeFile},
		&Entry{Path: "jobs/\x80", Type: TypeFile},
	) {
		h := tarHeader(e)
		want, err := archiveTarHeader(&h)
		if err != nil {
			t.Fatalf("%s: archive/tar: %v", e.Path, err)
		}
		var blk [blockSize]byte
		ok := ustarBlock(&blk, &h)
		if ok != isUSTAR(want) {
			t.Errorf("%.40s: ustarBlock says %v, archive/tar wrote %d bytes", e.Path, ok, len(want))
		}
		if ok && !bytes.Equal(blk[:], want) {
			t.Errorf("%.40s: the block differs from archive/tar's:\n%q\n%q", e.Path, blk[:], want)
		}
	}
}

// FuzzUSTARBlock holds ustarBlock to archive/tar for the header shapes
// tarHeader makes: it lays out a block exactly when archive/tar would
// write one ustar block, and then the same bytes.
func FuzzUSTARBlock(f *testing.F) {
	f.Add("jobs/a/config.xml", "", int64(0o644), 1000, 1000, int64(700), int64(1_765_130_400_123_456_789), byte(0))
	f.Add("jobs/"+strings.Repeat("f", 150)+"/x", "", int64(0o755), 0, 0, int64(0), int64(0), byte(1))
	f.Add("jobs/a/lastStable", "builds/42", int64(0o777), 0, 0, int64(0), int64(-1), byte(2))
	f.Add("jobs/ü/log", "", int64(0o644), -1, 1<<21, int64(-1), int64(1<<33*1e9), byte(0))
	f.Fuzz(func(t *testing.T, name, link string, mode int64, uid, gid int, size, mtime int64, kind byte) {
		h := &tar.Header{Name: name, Mode: mode, Uid: uid, Gid: gid, Size: size, ModTime: time.Unix(0, mtime)}
		switch kind % 3 {
		case 0:
			h.Typeflag = tar.TypeReg
		case 1:
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag, h.Linkname = tar.TypeSymlink, link
		}
		want, err := archiveTarHeader(h)
		var blk [blockSize]byte
		ok := ustarBlock(&blk, h)
		if ok != (err == nil && isUSTAR(want)) {
			t.Fatalf("%+v: ustarBlock says %v, archive/tar wrote %d bytes (%v)", h, ok, len(want), err)
		}
		if ok && !bytes.Equal(blk[:], want) {
			t.Fatalf("%+v: the block differs from archive/tar's:\n%q\n%q", h, blk[:], want)
		}
	})
}

// TestFrameWriterWritesWhatArchiveTarWrites: the frames of a FrameWriter,
// decoded and joined, are archive/tar's stream of the same entries byte for
// byte (its end-of-archive blocks apart, which are EndFrame's), with frames
// cut between and inside entries.
func TestFrameWriterWritesWhatArchiveTarWrites(t *testing.T) {
	es := tarEntries()
	for i := range 3000 { // past a frame, so some are cut
		es = append(es, &Entry{Path: "jobs/b/builds/" + strings.Repeat("n", i%120) + "/log", Type: TypeFile,
			Mode: 0o644, Size: int64(i * 7 % 4000), MTime: int64(i) * 1e8})
	}
	es = append(es, &Entry{Path: "jobs/b/archive.zip", Type: TypeFile, Mode: 0o644, Size: 3*FrameSize + 5})
	c, err := NewCompressor(zstd.SpeedFastest, 1)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var got []byte
	frames := 0
	fw := NewFrameWriter(c, func(frame []byte) error {
		frames++
		got, err = dec.DecodeAll(frame, got)
		return err
	})
	for _, e := range es {
		if err := fw.WriteHeader(e); err != nil {
			t.Fatal(err)
		}
		if e.Type == TypeFile {
			data := content(e)
			for len(data) > 0 { // in writes of up to 100 KiB, as snapshots do
				n := min(len(data), 100<<10)
				if _, err := fw.Write(data[:n]); err != nil {
					t.Fatal(err)
				}
				data = data[n:]
			}
		}
	}
	if err := fw.Cut(); err != nil {
		t.Fatal(err)
	}
	want := tarStream(t, es)
	want = want[:len(want)-2*blockSize]
	if frames < 4 {
		t.Errorf("%d frames: the stream was not cut", frames)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the frames hold %d bytes, archive/tar's stream %d; they differ from byte %d", len(got), len(want), i)
	}
}

// TestFrameWriterHoldsEntriesToTheirSize: an entry's data past its size
// is refused as archive/tar refuses it, and a header or a cut before all
// of it was written fails rather than misframing the stream.
func TestFrameWriterHoldsEntriesToTheirSize(t *testing.T) {
	c, err := NewCompressor(zstd.SpeedFastest, 1)
	if err != nil {
		t.Fatal(err)
	}
	fw := NewFrameWriter(c, func([]byte) error { return nil })
	e := &Entry{Path: "jobs/a/log", Type: TypeFile, Mode: 0o644, Size: 4}
	if err := fw.WriteHeader(e); err != nil {
		t.Fatal(err)
	}
	if n, err := fw.Write([]byte("abcdef")); n != 4 || !errors.Is(err, tar.ErrWriteTooLong) {
		t.Errorf("6 bytes into an entry of 4: wrote %d, %v; want 4 and %v", n, err, tar.ErrWriteTooLong)
	}
	if err := fw.WriteHeader(e); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	if err := fw.Cut(); err == nil || !strings.Contains(err.Error(), `2 bytes of "jobs/a/log"`) {
		t.Errorf("a cut 2 bytes short of an entry: %v, want an error naming the 2 bytes", err)
	}
	if err := fw.WriteHeader(e); err == nil {
		t.Error("a header 2 bytes short of the last entry: no error")
	}
	dir := &Entry{Path: "jobs/b", Type: TypeDir, Mode: 0o755}
	fw.Reset(func([]byte) error { return nil })
	if err := fw.WriteHeader(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write([]byte("x")); !errors.Is(err, tar.ErrWriteTooLong) {
		t.Errorf("data after a directory's header: %v, want %v", err, tar.ErrWriteTooLong)
	}
}

// BenchmarkTarHeaderWrite writes the tar stream of 10,000 small files
// (BenchmarkTarHeaders' shape) with archive/tar's writer and with
// ustarBlock, as FrameWriter.WriteHeader does.
func BenchmarkTarHeaderWrite(b *testing.B) {
	es := make([]*Entry, 10_000)
	for i := range es {
		es[i] = &Entry{Path: fmt.Sprintf("jobs/job-%d/builds/%d/log", i%300, i), Type: TypeFile, Mode: 0o644,
			Size: 1400, MTime: time.Date(2026, 12, 7, 18, 0, 0, i+1, time.UTC).UnixNano()}
	}
	data := make([]byte, 1400)
	var out bytes.Buffer
	out.Grow(len(es) * 2048)
	b.Run("archive-tar", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out.Reset()
			tw := tar.NewWriter(&out)
			for _, e := range es {
				h := tarHeader(e)
				if err := tw.WriteHeader(&h); err != nil {
					b.Fatal(err)
				}
				tw.Write(data)
			}
			tw.Flush()
		}
	})
	b.Run("ustarBlock", func(b *testing.B) {
		b.ReportAllocs()
		var blk [blockSize]byte
		for b.Loop() {
			out.Reset()
			for _, e := range es {
				h := tarHeader(e)
				if !ustarBlock(&blk, &h) {
					b.Fatal("not a ustar header")
				}
				out.Write(blk[:])
				out.Write(data)
				out.Write(zeroBlock[:-len(data)&(blockSize-1)])
			}
		}
	})
}
