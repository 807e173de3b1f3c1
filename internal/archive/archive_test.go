package archive

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

type testFile struct {
	e       *Entry
	content []byte
}

// buildArchive writes files through a FrameWriter the way a snapshot does
// and returns the archive bytes with each entry's range filled in.
func buildArchive(t *testing.T, files []testFile) []byte {
	t.Helper()
	c, err := NewCompressor(Level(3), 2)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var offs []int64
	fw := NewFrameWriter(c, func(f []byte) error {
		offs = append(offs, int64(out.Len()))
		out.Write(f)
		return nil
	})
	type span struct{ first, last int }
	spans := make([]span, len(files))
	for i, f := range files {
		if err := fw.WriteHeader(f.e); err != nil {
			t.Fatal(err)
		}
		spans[i].first = fw.Frame()
		for b := f.content; len(b) > 0; {
			n := min(len(b), 100<<10)
			if _, err := fw.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		spans[i].last = fw.Frame()
	}
	if err := fw.Cut(); err != nil {
		t.Fatal(err)
	}
	offs = append(offs, int64(out.Len()))
	out.Write(c.EndFrame())
	for i, f := range files {
		f.e.Offset = offs[spans[i].first]
		f.e.Length = offs[spans[i].last+1] - f.e.Offset
	}
	return out.Bytes()
}

func sampleFiles() []testFile {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	text := bytes.Repeat([]byte("Started by timer\n"), 4000)
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("é", 90) // > 255 bytes
	files := []testFile{
		{&Entry{Path: "jobs", Type: TypeDir, Mode: 0o755}, nil},
		{&Entry{Path: "jobs/a", Type: TypeFile, Mode: 0o644}, text},
		{&Entry{Path: "jobs/big", Type: TypeFile, Mode: 0o600}, random(FrameSize*2 + 12345)},
		{&Entry{Path: "jobs/after-big", Type: TypeFile, Mode: 0o644}, []byte("tail\n")},
		{&Entry{Path: "jobs/empty", Type: TypeFile, Mode: 0o644}, nil},
		{&Entry{Path: "jobs/link", Type: TypeSymlink, Link: "-1"}, nil},
		{&Entry{Path: "jobs/" + strings.Repeat("d", 120), Type: TypeDir, Mode: 0o755}, nil},
		{&Entry{Path: "jobs/" + long, Type: TypeFile, Mode: 0o644}, random(5000)},
	}
	for _, f := range files {
		f.e.Size = int64(len(f.content))
		f.e.MTime = 1700000000_000000000
	}
	return files
}

func TestEveryEntryDecodesFromItsOwnRange(t *testing.T) {
	files := sampleFiles()
	data := buildArchive(t, files)
	for _, f := range files {
		if f.e.Type != TypeFile || f.e.Size == 0 {
			continue
		}
		rr, err := NewRangeReader(bytes.NewReader(data[f.e.Offset:f.e.Offset+f.e.Length]), MaxDecoded(1, f.e.Size))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for {
			h, err := rr.Next()
			if err != nil {
				break
			}
			if h.Name == f.e.Path {
				got, err := io.ReadAll(rr)
				if err != nil {
					t.Fatalf("%s: %v", f.e.Path, err)
				}
				if !bytes.Equal(got, f.content) {
					t.Fatalf("%s: content differs", f.e.Path)
				}
				found = true
				break
			}
		}
		rr.Close()
		if !found {
			t.Errorf("%s not found in its range [%d,+%d)", f.e.Path, f.e.Offset, f.e.Length)
		}
	}
}

func TestGNUTarExtractsTheArchive(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Fatal("GNU tar is required for this test")
	}
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Fatal("zstd is required for tar --zstd (apt-get install zstd)")
	}
	files := sampleFiles()
	dir := t.TempDir()
	a := filepath.Join(dir, "a.tar.zst")
	if err := os.WriteFile(a, buildArchive(t, files), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	cmd := exec.Command("tar", "--zstd", "-xf", a, "-C", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar --zstd -xf: %v\n%s", err, msg)
	}
	for _, f := range files {
		p := filepath.Join(out, f.e.Path)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("tar did not extract %s: %v", f.e.Path, err)
		}
		switch f.e.Type {
		case TypeFile:
			got, _ := os.ReadFile(p)
			if sha256.Sum256(got) != sha256.Sum256(f.content) {
				t.Errorf("%s: content differs after tar -x", f.e.Path)
			}
			if fi.Mode().Perm() != f.e.Mode.Perm() {
				t.Errorf("%s: mode %v", f.e.Path, fi.Mode())
			}
		case TypeSymlink:
			if l, _ := os.Readlink(p); l != f.e.Link {
				t.Errorf("%s: link %q", f.e.Path, l)
			}
		case TypeDir:
			if !fi.IsDir() {
				t.Errorf("%s: not a directory", f.e.Path)
			}
		}
	}
}

// ComparePaths skips equal prefixes a word at a time: it must agree with
// the byte-by-byte order ('/' lowest) wherever the paths first differ.
func TestComparePathsAgreesByteByByte(t *testing.T) {
	rank := func(c byte) int {
		if c == '/' {
			return -1
		}
		return int(c)
	}
	want := func(a, b string) int {
		for i := 0; i < min(len(a), len(b)); i++ {
			if a[i] != b[i] {
				return cmp.Compare(rank(a[i]), rank(b[i]))
			}
		}
		return cmp.Compare(len(a), len(b))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := "ab/.-\xff"
	for range 20000 {
		a := make([]byte, rng.IntN(40))
		for i := range a {
			a[i] = alphabet[rng.IntN(len(alphabet))]
		}
		b := slices.Clone(a[:rng.IntN(len(a)+1)])
		for range rng.IntN(3) { // differ here and there, or only in length
			if len(b) > 0 {
				b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		b = append(b, alphabet[:rng.IntN(3)]...)
		if got, w := ComparePaths(string(a), string(b)), want(string(a), string(b)); got != w {
			t.Fatalf("ComparePaths(%q, %q) = %d, want %d", a, b, got, w)
		}
	}
}

func TestComparePathsIsWalkOrder(t *testing.T) {
	paths := []string{"a.b", "a/b", "a", "a-b/c", "a/b/c", "ab", "a/c", "b", "a/b.c", "é"}
	slices.SortFunc(paths, ComparePaths)
	want := []string{"a", "a/b", "a/b/c", "a/b.c", "a/c", "a-b/c", "a.b", "ab", "b", "é"}
	if !slices.Equal(paths, want) {
		t.Fatalf("got %q\nwant %q", paths, want)
	}
	// The order agrees with sorting each directory's names, depth first.
	if ComparePaths("x/y", "x.y") >= 0 || ComparePaths("x", "x") != 0 {
		t.Fatal("component order broken")
	}
	sort.Strings(want) // plain byte order would differ: keep the test honest
	if slices.Equal(paths, want) {
		t.Fatal("test data does not distinguish walk order from byte order")
	}
}

func TestManifestRoundTripAndDamage(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewManifestWriter(&buf, Header{ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var h Hash
	h[0] = 1
	entries := []*Entry{
		{Path: "jobs", Type: TypeDir, Mode: 0o755, MTime: 1},
		{Path: "jobs/a", Type: TypeFile, Mode: 0o644, Size: 3, Hash: &h, Archive: "s1", Offset: 0, Length: 10, MTime: 123456789012345678},
		{Path: "jobs/l", Type: TypeSymlink, Link: "../x"},
	}
	for _, e := range entries {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(&Entry{Path: "jobs/a", Type: TypeDir}); err == nil {
		t.Fatal("out-of-order write accepted")
	}
	if _, err := w.Close(1, 3); err != nil {
		t.Fatal(err)
	}
	read := func(b []byte) ([]*Entry, error) {
		r, err := NewManifestReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		var got []*Entry
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			if err != nil {
				return got, err
			}
			got = append(got, e)
		}
	}
	got, err := read(buf.Bytes())
	if err != nil || len(got) != 3 || got[1].MTime != 123456789012345678 || *got[1].Hash != h || got[2].Link != "../x" {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	if _, err := read(buf.Bytes()[:buf.Len()-8]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated manifest: %v, want ErrCorrupt", err)
	}
}

func TestCheckPath(t *testing.T) {
	for _, bad := range []string{"", "/etc", "a/../b", "..", "a//b", "./a", "a/", "a\x00b"} {
		if CheckPath(bad) == nil {
			t.Errorf("CheckPath(%q) accepted", bad)
		}
	}
	for _, good := range []string{"a", "jobs/x y/é", "..a", "a..", strings.Repeat("x", 300)} {
		if err := CheckPath(good); err != nil {
			t.Errorf("CheckPath(%q): %v", good, err)
		}
	}
}

// A restore or an incremental merges every layer of a manifest chain, a
// reader per layer: each must cost little memory whatever the layer holds
// (with zstd's default 8 MiB window, a dozen small deltas took 100 MB).
func TestManifestReaderAllocatesLittle(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewManifestWriter(&buf, Header{ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 { // over a zstd block: a frame of unknown size
		if err := w.Write(&Entry{Path: fmt.Sprintf("jobs/j%05d", i), Type: TypeDir, Mode: 0o755, MTime: int64(i) << 30}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(0, 0); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := NewManifestReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	r.Close()
	if n := after.TotalAlloc - before.TotalAlloc; n > 2<<20 {
		t.Errorf("a manifest reader allocated %d bytes", n)
	}
}
