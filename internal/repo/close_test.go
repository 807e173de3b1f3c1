package repo_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// bodyStore counts the bodies its Gets hand out that are still open.
type bodyStore struct {
	store.Store
	mu   sync.Mutex
	open map[string]int
}

type body struct {
	io.ReadCloser
	s    *bodyStore
	key  string
	once sync.Once
}

func (b *body) Close() error {
	b.once.Do(func() {
		b.s.mu.Lock()
		b.s.open[b.key]--
		b.s.mu.Unlock()
	})
	return b.ReadCloser.Close()
}

func (s *bodyStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.open[key]++
	s.mu.Unlock()
	return &body{ReadCloser: rc, s: s, key: key}, nil
}

// A manifest chain closed before its end closes every layer's store
// response: on an HTTP store each open body holds a connection.
func TestOpenManifestClosedEarlyClosesItsBodies(t *testing.T) {
	const s1, s2 = "20261201T100000.000Z-aaaaaa", "20261201T110000.000Z-bbbbbb"
	st := &bodyStore{Store: newStore(t), open: map[string]int{}}
	files := make([]*archive.Entry, 20000) // more than one read of each layer
	for i := range files {
		h := archive.Hash(sha256.Sum256([]byte(fmt.Sprint(i))))
		files[i] = &archive.Entry{Path: fmt.Sprintf("a/%06d", i), Type: archive.TypeFile, Hash: &h}
	}
	putManifest(t, st, archive.Header{ID: s1}, func(w *archive.ManifestWriter) {
		for _, f := range files {
			w.Write(f)
		}
	})
	putManifest(t, st, archive.Header{ID: s2, Base: s1, Chain: []string{s1, s2}}, func(w *archive.ManifestWriter) {
		for i, f := range files {
			g := *f
			if i%2 == 0 {
				g.Mode = 0o600 // half the entries differ: the delta is long too
			}
			w.WriteOver(&g, f)
		}
	})
	for _, read := range []int{0, 1, 100} {
		m, err := repo.OpenManifest(context.Background(), st, s2)
		if err != nil {
			t.Fatal(err)
		}
		for range read {
			if _, err := m.Next(); err != nil {
				t.Fatal(err)
			}
		}
		m.Close()
		st.mu.Lock()
		for key, n := range st.open {
			if n != 0 {
				t.Errorf("after %d entries and Close: %d bodies of %s still open", read, n, key)
			}
		}
		st.mu.Unlock()
	}
}

// A hint that is not the chain costs requests, never the result: the
// header decides which layers are merged, and the hinted layers it does
// not name are closed.
func TestOpenManifestHintDoesNotDecide(t *testing.T) {
	const s0, s1, s2, gone = "20261201T090000.000Z-000000", "20261201T100000.000Z-aaaaaa", "20261201T110000.000Z-bbbbbb", "20261201T095000.000Z-999999"
	st := &bodyStore{Store: newStore(t), open: map[string]int{}}
	dir := func(p string) *archive.Entry { return &archive.Entry{Path: p, Type: archive.TypeDir, Mode: 0o755} }
	putManifest(t, st, archive.Header{ID: s0}, func(w *archive.ManifestWriter) { w.Write(dir("other")) })
	putManifest(t, st, archive.Header{ID: s1}, func(w *archive.ManifestWriter) { w.Write(dir("a")); w.Write(dir("b")) })
	putManifest(t, st, archive.Header{ID: s2, Base: s1, Chain: []string{s1, s2}}, func(w *archive.ManifestWriter) {
		w.WriteOver(dir("a"), dir("a"))
		w.Delete("b")
		w.Write(dir("c"))
	})
	for _, hint := range [][]string{nil, {s1, s2}, {s0, s2}, {gone, s2}, {s0, s1, s2}, {s1}, {s2, s1}, {"../x", s2}} {
		m, err := repo.OpenManifest(context.Background(), st, s2, hint...)
		if err != nil {
			t.Errorf("hint %q: %v", hint, err)
			continue
		}
		var got []string
		for e, err := range repo.Entries(m.Next) {
			if err != nil {
				t.Fatalf("hint %q: %v", hint, err)
			}
			got = append(got, e.Path)
		}
		m.Close()
		if fmt.Sprint(got) != "[a c]" {
			t.Errorf("hint %q: resolved %q, want a and c", hint, got)
		}
		st.mu.Lock()
		for key, n := range st.open {
			if n != 0 {
				t.Errorf("hint %q: %d bodies of %s still open", hint, n, key)
			}
		}
		st.mu.Unlock()
	}
}
