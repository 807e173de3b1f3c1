package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
)

func mustFileStore(t *testing.T) store.Store {
	t.Helper()
	st, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// scrape is what Prometheus reads from /metrics.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	return string(b)
}

// The store-size gauges: absent until a listing sets them, then every put
// of an object snapshots write adds to its kind.
func TestStoreContents(t *testing.T) {
	m := New()
	st := m.Store(mustFileStore(t))
	ctx := context.Background()
	put := func(key, data string) {
		t.Helper()
		if err := st.Put(ctx, key, strings.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	id := repo.NewID(time.Now())
	put(repo.ArchiveKey(id), "before the listing")
	if got := scrape(t, m); strings.Contains(got, "homesnap_store_bytes{") {
		t.Fatalf("store size exported before any listing:\n%s", got)
	}
	m.StoreContents([]store.Object{{Key: repo.ArchiveKey(id), Size: 18}, {Key: "head.json", Size: 99}})
	put(repo.ManifestKey(id), "12345")
	put(repo.RecordKey(id), "123")
	put("lease.json", "not a kind snapshots write")
	got := scrape(t, m)
	for _, want := range []string{
		`homesnap_store_bytes{kind="archive"} 18`, `homesnap_store_objects{kind="archive"} 1`,
		`homesnap_store_bytes{kind="manifest"} 5`, `homesnap_store_bytes{kind="record"} 3`,
		`homesnap_store_bytes{kind="tag"} 0`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, got)
		}
	}
	if strings.Contains(got, `kind="other"`) {
		t.Errorf("objects of no kind counted:\n%s", got)
	}
}
