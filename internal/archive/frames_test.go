package archive

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// framedFiles are text that compresses and random bytes that do not, some
// past a frame, so that frames of both kinds (and mixed ones) are written.
func framedFiles() []testFile {
	random := rand.NewChaCha8([32]byte{5})
	line := []byte("12:00:01 [Pipeline] sh + mvn -B test: Tests run: 42, Failures: 0\n")
	var files []testFile
	for i, size := range []int{2<<20 + 1, 700 << 10, 1 << 20, 90 << 10, 300, 512 << 10} {
		var data []byte
		if i%2 == 0 {
			data = make([]byte, size)
			random.Read(data)
		} else {
			data = bytes.Repeat(line, size/len(line)+1)[:size]
			data[size/3] = 'X'
		}
		files = append(files, testFile{
			e:       &Entry{Path: fmt.Sprintf("jobs/a/builds/%d/archive/out.bin", i), Type: TypeFile, Mode: 0o644, Size: int64(size), MTime: 1_700_000_000_000_000_000},
			content: data,
		})
	}
	return files
}

// The frames a snapshot writes go to the store and are handed back for the
// next frame: every archive must still decode byte-exact, with this
// library and with the zstd CLI an operator would use (tar --zstd).
func TestReusedFrameBuffersWriteValidZstd(t *testing.T) {
	files := framedFiles()
	c, err := NewCompressor(zstd.SpeedFastest, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	frames := 0
	fw := NewFrameWriter(c, func(f []byte) error {
		out.Write(f) // a copy, as the store's upload makes
		c.Release(f)
		frames++
		return nil
	})
	for _, f := range files {
		if err := fw.WriteHeader(f.e); err != nil {
			t.Fatal(err)
		}
		for b := f.content; len(b) > 0; {
			n := min(len(b), 256<<10)
			if _, err := fw.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
	}
	if err := fw.Cut(); err != nil {
		t.Fatal(err)
	}
	out.Write(c.EndFrame())
	if frames < 3 {
		t.Fatalf("%d frames: the fixture should span several", frames)
	}

	d, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	lib, err := d.DecodeAll(out.Bytes(), nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	checkTar(t, "klauspost/compress", lib, files)

	if _, err := exec.LookPath("zstd"); err != nil {
		t.Fatal("zstd is required for this test (apt-get install zstd)")
	}
	a := filepath.Join(t.TempDir(), "a.tar.zst")
	if err := os.WriteFile(a, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cli, err := exec.Command("zstd", "-dc", a).Output()
	if err != nil {
		t.Fatalf("zstd -dc: %v", err)
	}
	checkTar(t, "zstd CLI", cli, files)
}

// checkTar reads a decoded archive and compares each file with its content.
func checkTar(t *testing.T, by string, stream []byte, files []testFile) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(stream))
	for _, f := range files {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: %s: %v", by, f.e.Path, err)
		}
		got, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", by, f.e.Path, err)
		}
		if h.Name != f.e.Path || !bytes.Equal(got, f.content) {
			t.Fatalf("%s: %s (%d bytes) decodes as %s (%d bytes), not byte-exact", by, f.e.Path, len(f.content), h.Name, len(got))
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("%s: after the last file: %v, want the end of the archive", by, err)
	}
}

// A frame that does not compress fits the buffer it is given, and a
// released buffer is the next frame's: the steady state allocates next to
// nothing per frame. (Before, each frame took a 1 MiB buffer from a
// sync.Pool that the frequent collections emptied, and a frame of random
// bytes grew it by append to ~2.3 MiB: four allocations and copies.)
func TestFramesReuseReleasedBuffers(t *testing.T) {
	c, err := NewCompressor(zstd.SpeedFastest, 1)
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, FrameSize) // a frame's worth: no repeats inside one
	rand.NewChaCha8([32]byte{7}).Read(random)
	var emitted int
	fw := NewFrameWriter(c, func(f []byte) error {
		if len(f) < FrameSize {
			t.Errorf("a frame of random bytes compressed to %d bytes", len(f))
		}
		emitted++
		c.Release(f)
		return nil
	})
	if err := fw.WriteHeader(&Entry{Path: "big", Type: TypeFile, Mode: 0o644, Size: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	write := func() { // one frame, in a snapshot's chunks
		for p := random; len(p) > 0; p = p[256<<10:] {
			if _, err := fw.Write(p[:256<<10]); err != nil {
				t.Fatal(err)
			}
		}
	}
	write()
	write() // the first frame is cut and its buffer released
	const frames = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range frames {
		write()
	}
	runtime.ReadMemStats(&after)
	if perFrame := (after.TotalAlloc - before.TotalAlloc) / frames; perFrame > 64<<10 {
		t.Errorf("%d bytes allocated per frame, want next to none", perFrame)
	}
	if emitted != frames+1 {
		t.Fatalf("%d frames emitted, want %d", emitted, frames+1)
	}
}

func TestBuffersKeepWhatTheyCanReuse(t *testing.T) {
	b := NewBuffers(2, 100)
	p, q, r := b.Get(100), b.Get(60), b.Get(26)
	if len(p) != 0 || cap(p) < 100 {
		t.Fatalf("Get: len %d cap %d, want an empty buffer with room for 100", len(p), cap(p))
	}
	p = append(p, "frame"...)
	b.Put(p)
	b.Put(make([]byte, 10)) // not one of Get's: too small to keep
	b.Put(q)
	b.Put(r) // past what the list keeps
	if got := b.Get(100); &got[:1][0] != &p[0] || len(got) != 0 {
		t.Errorf("Get after Put returned another buffer, or a non-empty one (len %d)", len(got))
	}
	if got := b.Get(100); cap(got) < 100 {
		t.Errorf("a small buffer was kept: cap %d", cap(got))
	}
}

// TestBuffersGiveSmallNeedsSmallBuffers: a few KB of changes to compress
// or load take a buffer of their size, not a kept full-size one, and leave
// the kept ones alone.
func TestBuffersGiveSmallNeedsSmallBuffers(t *testing.T) {
	b := NewBuffers(2, 1000)
	full := b.Get(1000)
	b.Put(full)
	small := b.Get(250)
	if cap(small) != 250 {
		t.Errorf("Get(250) of a list of 1000-byte buffers: cap %d, want 250", cap(small))
	}
	b.Put(small) // too small to keep
	if got := b.Get(251); &got[:1][0] != &full[:1][0] {
		t.Errorf("Get(251) did not return the kept full-size buffer (cap %d)", cap(got))
	}
	if got := b.Get(5000); cap(got) < 5000 {
		t.Errorf("Get(5000) beyond the list's size: cap %d", cap(got))
	}
}
