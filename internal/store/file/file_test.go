package file_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := file.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestOptionsAreRefused(t *testing.T) {
	dir := t.TempDir()
	_, err := store.Open(context.Background(), "file://"+dir+"?foo=bar")
	if err == nil || !strings.Contains(err.Error(), "unknown option foo") || strings.Contains(err.Error(), "bar") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("file://...?foo=bar: %v, want a refusal naming the option (not its value) and the store", err)
	}
	if _, err := store.Open(context.Background(), "file://"+dir); err != nil {
		t.Fatal(err)
	}
}

// TestOpenCollectsStaleTempFiles: temporary files of writes killed midway
// (kill -9 of a snapshot) are removed once stale; a fresh one may belong to
// a write in progress and stays.
func TestOpenCollectsStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "archives", ".tmp-1234")
	fresh := filepath.Join(dir, "archives", ".tmp-5678")
	rootStale := filepath.Join(dir, ".tmp-99")
	os.MkdirAll(filepath.Dir(stale), 0o755)
	for _, p := range []string{stale, fresh, rootStale} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-file.TempMaxAge - time.Minute)
	os.Chtimes(stale, old, old)
	os.Chtimes(rootStale, old, old)
	if _, err := file.Open(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{stale, rootStale} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: stale temporary file not collected (%v)", p, err)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temporary file (a write in progress) was removed: %v", err)
	}
}
