package file

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Ranges at any offset and length read past the page cache give the bytes
// a buffered read gives, also where the range runs past the file's end.
func TestBigRangesAreReadPastThePageCache(t *testing.T) {
	root := t.TempDir()
	s, err := open(root)
	if err != nil {
		t.Fatal(err)
	}
	if !s.direct {
		t.Fatalf("%s is not on ext4, xfs or btrfs: run the tests where direct reads are used", root)
	}
	data := make([]byte, 2*directChunk+300_777)
	rand.New(rand.NewSource(1)).Read(data)
	if err := os.MkdirAll(filepath.Join(root, "archives"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "archives", "a.tar.zst"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	for _, c := range []struct{ off, n int64 }{
		{0, -1},
		{0, size},
		{1, directMin},
		{directAlign - 1, directChunk + 2},
		{directChunk - 3, directChunk + directAlign + 5},
		{size - directMin, directMin},
		{size - directMin + 17, -1},
		{size - 300_000, 600_000}, // past the end: what is there
		{size + 10, -1},
		{-5, directMin}, // from the start, as a buffered read
	} {
		rc, err := s.Get(context.Background(), "archives/a.tar.zst", c.off, c.n)
		if err != nil {
			t.Fatalf("get %d+%d: %v", c.off, c.n, err)
		}
		d, ok := rc.(*directReader)
		if !ok {
			t.Fatalf("get %d+%d: read through the cache (%T), want past it", c.off, c.n, rc)
		}
		if fl, err := unix.FcntlInt(uintptr(d.fd), unix.F_GETFL, 0); err != nil || fl&unix.O_DIRECT == 0 {
			t.Fatalf("get %d+%d: O_DIRECT not set (%v): the file system of %s refuses it? run the tests on ext4, xfs or btrfs", c.off, c.n, err, root)
		}
		got := readOdd(t, rc)
		off := max(c.off, 0)
		end := size
		if c.n >= 0 {
			end = min(size, off+c.n)
		}
		want := data[min(off, size):max(end, min(off, size))]
		if !bytes.Equal(got, want) {
			t.Errorf("get %d+%d: %d bytes, not the file's %d from there", c.off, c.n, len(got), len(want))
		}
	}
	rc, err := s.Get(context.Background(), "archives/a.tar.zst", 5, directMin-1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.(*directReader); ok {
		t.Error("a small range was read past the cache: one synchronous read for a few bytes")
	}
	if got := readOdd(t, rc); !bytes.Equal(got, data[5:5+directMin-1]) {
		t.Error("a small range read wrong bytes")
	}
}

// A range read after its Close says so, naming the file, rather than
// reading through a descriptor number that may belong to another file.
func TestDirectReadAfterCloseFails(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a")
	if err := os.WriteFile(p, make([]byte, directMin), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := openDirect(p, 0, -1)
	if err != nil || rc == nil {
		t.Fatalf("openDirect: %v, %v", rc, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(make([]byte, 10)); !errors.Is(err, fs.ErrClosed) || !strings.Contains(err.Error(), p) {
		t.Errorf("read after close: %v, want fs.ErrClosed naming %s", err, p)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("a second close: %v", err)
	}
}

// A device that refuses the alignment (here an unaligned offset the kernel
// refuses) has the rest read through the cache, the same bytes.
func TestRefusedDirectReadsGoThroughTheCache(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a")
	data := make([]byte, directChunk+1000)
	rand.New(rand.NewSource(2)).Read(data)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := openDirect(p, 0, -1)
	if err != nil || rc == nil {
		t.Fatalf("openDirect: %v, %v", rc, err)
	}
	d := rc.(*directReader)
	d.next = 1001 // not a multiple of the block size: EINVAL with O_DIRECT
	if got := readOdd(t, rc); !bytes.Equal(got, data[1001:]) {
		t.Fatalf("read %d bytes, not the file's from 1001", len(got))
	}
	if d.direct {
		t.Error("O_DIRECT kept after the refusal")
	}
}

// readOdd reads rc to its end in reads of an odd size and closes it.
func readOdd(t *testing.T, rc io.ReadCloser) []byte {
	t.Helper()
	var out bytes.Buffer
	if _, err := io.CopyBuffer(struct{ io.Writer }{&out}, struct{ io.Reader }{rc}, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
