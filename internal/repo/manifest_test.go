package repo_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// ctxStore hands out readers that fail once the context of their Get has
// ended, as the object-store backends' streams do.
type ctxStore struct{ store.Store }

type ctxReader struct {
	ctx context.Context
	io.ReadCloser
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.ReadCloser.Read(p)
}

func (s ctxStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key, off, n)
	return ctxReader{ctx, rc}, err
}

func putManifest(t *testing.T, s store.Store, hdr archive.Header, write func(*archive.ManifestWriter)) {
	t.Helper()
	var buf bytes.Buffer
	w, err := archive.NewManifestWriter(&buf, hdr)
	if err != nil {
		t.Fatal(err)
	}
	write(w)
	if _, err := w.Close(0, 0); err != nil {
		t.Fatal(err)
	}
	put(t, s, repo.ManifestKey(hdr.ID), buf.String())
}

// TestOpenManifestMergesItsChain: a delta's layers are opened from the
// store and stay readable for as long as the caller's context lives.
func TestOpenManifestMergesItsChain(t *testing.T) {
	const s1, s2 = "20261201T100000.000Z-aaaaaa", "20261201T110000.000Z-bbbbbb"
	st := ctxStore{newStore(t)}
	a := &archive.Entry{Path: "a", Type: archive.TypeDir, Mode: 0o755}
	b := &archive.Entry{Path: "b", Type: archive.TypeDir, Mode: 0o755}
	c := &archive.Entry{Path: "c", Type: archive.TypeDir, Mode: 0o700}
	// The base is large enough that it is still being read after opening.
	files := make([]*archive.Entry, 50000)
	for i := range files {
		h := archive.Hash(sha256.Sum256([]byte(fmt.Sprint(i))))
		files[i] = &archive.Entry{Path: fmt.Sprintf("a/%06d", i), Type: archive.TypeFile, Hash: &h}
	}
	putManifest(t, st, archive.Header{ID: s1}, func(w *archive.ManifestWriter) {
		w.Write(a)
		for _, f := range files {
			w.Write(f)
		}
		w.Write(b)
	})
	putManifest(t, st, archive.Header{ID: s2, Base: s1, Chain: []string{s1, s2}}, func(w *archive.ManifestWriter) {
		w.WriteOver(a, a)
		for _, f := range files {
			w.WriteOver(f, f)
		}
		w.Delete("b")
		w.Write(c)
	})
	m, err := repo.OpenManifest(context.Background(), st, s2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var got []string
	for {
		e, err := m.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Path)
	}
	if len(got) != 50002 || got[0] != "a" || got[50001] != "c" {
		t.Errorf("resolved %d entries, want a, its 50000 files and c", len(got))
	}
}
