package archive

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// maxReaderAlloc bounds what reading one manifest may allocate in total,
// whatever its bytes say: lines are bounded (MaxLine), the zstd window too.
const maxReaderAlloc = 96 << 20

// FuzzManifestReader feeds arbitrary bytes to the manifest reader as a
// compressed manifest. It must never panic, never accept an unsafe path,
// and stay within a memory bound. Seeds: an honest manifest, and every
// manifest of the hostile-store corpus (testdata/hostile).
//
//	go test ./internal/archive -run '^$' -fuzz FuzzManifestReader -fuzztime 1m
func FuzzManifestReader(f *testing.F) {
	var honest bytes.Buffer
	w, err := NewManifestWriter(&honest, Header{ID: "20260101T000000.000Z-000000", Created: time.Unix(0, 0), Selection: Selection{Preset: "jenkins"}})
	if err != nil {
		f.Fatal(err)
	}
	sum := Hash{1, 2, 3}
	for _, e := range []*Entry{
		{Path: "jobs", Type: TypeDir, Mode: 0o755},
		{Path: "jobs/a", Type: TypeFile, Mode: 0o644, Size: 5, Hash: &sum, Archive: "20260101T000000.000Z-000000", Length: 99},
		{Path: "jobs/empty", Type: TypeFile, Mode: 0o644, Hash: &sum},
		{Path: "jobs/link", Type: TypeSymlink, Link: "a"},
		{Path: "jobs/\xff\x01", Type: TypeDir, Mode: 0o2755},
	} {
		if err := w.Write(e); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := w.Close(0, 0); err != nil {
		f.Fatal(err)
	}
	f.Add(honest.Bytes())
	seeds, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "hostile", "*", "snapshots", "*.json.zst"))
	if len(seeds) == 0 {
		f.Fatal("no hostile manifests in testdata/hostile")
	}
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		readManifest(t, data)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > maxReaderAlloc {
			t.Fatalf("reading a %d-byte manifest allocated %d MiB", len(data), n>>20)
		}
	})
}

// readManifest reads data twice: every line decoded, then passing over
// every other span.
func readManifest(t *testing.T, data []byte) {
	readPassing(t, data, false)
	readPassing(t, data, true)
}

func readPassing(t *testing.T, data []byte, pass bool) {
	m, err := NewManifestReader(bytes.NewReader(data))
	if err != nil {
		return
	}
	defer m.Close()
	for n := 0; ; n++ {
		if sp, err := m.Span(); pass && n%2 == 0 && sp != nil && err == nil {
			if err := m.SkipSpan(); err != nil {
				return
			}
			continue
		} else if err != nil {
			return
		}
		e, err := m.Next()
		if err == io.EOF {
			if m.Totals == nil {
				t.Fatal("EOF without a trailer")
			}
			return
		}
		if err != nil {
			return
		}
		if CheckPath(e.Path) != nil {
			t.Fatalf("unsafe path %q accepted", e.Path)
		}
	}
}
