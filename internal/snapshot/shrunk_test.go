package snapshot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/testhome"
)

// A home whose secrets/ was wiped (a controller that started without its
// restore) must not replace the head; --allow-shrink lets it.
func TestShrunkHomeDoesNotReplaceTheHead(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	first := snaptest.Snap(t, home, st)
	if err := os.RemoveAll(filepath.Join(home, "secrets")); err != nil {
		t.Fatal(err)
	}
	opts := snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), Vital: []string{"secrets", "nodes"}}
	_, err := snapshot.Snapshot(context.Background(), opts)
	if !errors.Is(err, snapshot.ErrShrunk) || !strings.Contains(err.Error(), "secrets/ vanished") {
		t.Fatalf("got %v, want snapshot.ErrShrunk naming secrets/", err)
	}
	head, _, err := repo.LoadHead(context.Background(), st)
	if err != nil || head.Snapshot != first.ID {
		t.Fatalf("head = %+v %v, want %s", head, err, first.ID)
	}
	// The refused snapshot left nothing behind in the store.
	var keys []string
	if err := st.List(context.Background(), "", func(o store.Object) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, "snapshots/") && k != repo.ManifestKey(first.ID) && k != repo.RecordKey(first.ID) || strings.Contains(k, "archives/") && k != repo.ArchiveKey(first.ID) {
			t.Errorf("refused snapshot left %s in the store", k)
		}
	}
	opts.AllowShrink = true
	res, err := snapshot.Snapshot(context.Background(), opts)
	if err != nil || res.Parent != first.ID {
		t.Fatalf("with AllowShrink: %+v %v", res, err)
	}
}
