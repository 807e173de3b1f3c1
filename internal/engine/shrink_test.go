package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

func TestCheckShrink(t *testing.T) {
	home := census{files: 100, bytes: 1000, top: map[string]int64{"jobs": 90, "secrets": 5, "nodes": 5}}
	vital := []string{"secrets", "nodes"}
	for _, c := range []struct {
		name string
		next census
		want string // substring of the refusal; "" for accepted
	}{
		{"same", home, ""},
		{"grew", census{files: 300, bytes: 9000, top: home.top}, ""},
		{"lost exactly half the files", census{files: 50, bytes: 900, top: home.top}, ""},
		{"lost over half the files", census{files: 49, bytes: 900, top: home.top}, "files 100 → 49"},
		{"lost over half the bytes", census{files: 90, bytes: 499, top: home.top}, "bytes 1000 → 499"},
		{"emptied", census{}, "files 100 → 0, bytes 1000 → 0, secrets/ vanished, nodes/ vanished"},
		{"secrets gone", census{files: 95, bytes: 990, top: map[string]int64{"jobs": 90, "nodes": 5}}, "secrets/ vanished"},
	} {
		err := checkShrink(home, c.next, vital)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrShrunk) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want a refusal naming %q", c.name, err, c.want)
		}
	}
	// A first snapshot, or a parent that never had the vital paths, is
	// never a shrink.
	if err := checkShrink(census{}, census{}, vital); err != nil {
		t.Errorf("empty parent: %v", err)
	}
	if err := checkShrink(census{files: 1, top: map[string]int64{"jobs": 1}}, census{files: 1, top: map[string]int64{"jobs": 1}}, vital); err != nil {
		t.Errorf("no vital paths in the parent: %v", err)
	}
}

// A home whose secrets/ was wiped (a controller that started without its
// restore) must not replace the head; --allow-shrink lets it.
func TestShrunkHomeDoesNotReplaceTheHead(t *testing.T) {
	home, st := newHome(t), newStore(t)
	first := snap(t, home, st)
	if err := os.RemoveAll(filepath.Join(home, "secrets")); err != nil {
		t.Fatal(err)
	}
	opts := SnapshotOptions{Home: home, Store: st, Selector: jenkins(t), Log: zerolog.Nop(), Vital: []string{"secrets", "nodes"}}
	_, err := Snapshot(context.Background(), opts)
	if !errors.Is(err, ErrShrunk) || !strings.Contains(err.Error(), "secrets/ vanished") {
		t.Fatalf("got %v, want ErrShrunk naming secrets/", err)
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
		if strings.Contains(k, "snapshots/") && k != repo.ManifestKey(first.ID) || strings.Contains(k, "archives/") && k != repo.ArchiveKey(first.ID) {
			t.Errorf("refused snapshot left %s in the store", k)
		}
	}
	opts.AllowShrink = true
	res, err := Snapshot(context.Background(), opts)
	if err != nil || res.Parent != first.ID {
		t.Fatalf("with AllowShrink: %+v %v", res, err)
	}
}
