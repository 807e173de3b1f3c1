package snapshot_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/testhome"
)

// fullStore fails writes of keys matching full with ENOSPC, like a store
// volume that filled up; everything else passes through.
type fullStore struct {
	store.Store
	full func(key string) bool
}

func (s *fullStore) Put(ctx context.Context, key string, r io.Reader) error {
	if s.full(key) {
		io.Copy(io.Discard, r)
		return &store.Error{Op: "put", Store: s.String(), Key: key, Err: syscall.ENOSPC}
	}
	return s.Store.Put(ctx, key, r)
}

func (s *fullStore) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	if s.full(key) {
		return "", &store.Error{Op: "swap", Store: s.String(), Key: key, Err: syscall.ENOSPC}
	}
	return s.Store.Swap(ctx, key, data, old)
}

// TestStoreFullAtCommitRemovesWhatTheSnapshotWrote: when the store fills
// up at the manifest, the record or the head, the snapshot fails and the
// objects it had stored (a whole archive) are removed, so that freeing a
// little space is enough for the next snapshot, which then succeeds.
func TestStoreFullAtCommitRemovesWhatTheSnapshotWrote(t *testing.T) {
	for name, full := range map[string]func(key string) bool{
		"manifest": func(key string) bool { return strings.HasSuffix(key, ".json.zst") },
		"record":   func(key string) bool { return strings.HasPrefix(key, "snapshots/") && strings.HasSuffix(key, ".json") },
		"head":     func(key string) bool { return key == repo.HeadKey },
	} {
		t.Run(name, func(t *testing.T) {
			home, base := snaptest.NewHome(t), snaptest.NewStore(t)
			first := snaptest.Snap(t, home, base)
			before := snaptest.Keys(t, base)
			snaptest.WriteRandomFile(t, home, "jobs/test/builds/9/log", 1<<20)
			full := &fullStore{Store: base, full: full}
			_, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: full, Selector: snaptest.Jenkins(t), Log: zerolog.Nop()})
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("snapshot into a full store: %v, want ENOSPC", err)
			}
			if got := snaptest.Keys(t, base); strings.Join(got, " ") != strings.Join(before, " ") {
				t.Errorf("the failed snapshot left objects behind:\nbefore %v\nafter  %v", before, got)
			}
			next := snaptest.Snap(t, home, base)
			if next.Parent != first.ID {
				t.Errorf("next snapshot's parent %q, want %s", next.Parent, first.ID)
			}
		})
	}
}

// TestLostRaceRemovesTheDiscardedSnapshot: a snapshot whose head swap loses
// to another writer removes its own objects (nobody references them).
func TestLostRaceRemovesTheDiscardedSnapshot(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	snaptest.WriteRandomFile(t, home, "jobs/test/builds/9/log", 1<<20)
	other := t.TempDir()
	snaptest.WriteRandomFile(t, other, "jobs/x/config.xml", 10)
	racing := &raceStore{Store: st, before: func() { // another writer commits first
		if _, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, other), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), AllowShrink: true}); err != nil {
			t.Error(err)
		}
	}}
	_, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: racing, Selector: snaptest.Jenkins(t), Log: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "another writer") {
		t.Fatalf("lost race: %v", err)
	}
	h, err := repo.LoadHistory(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Snapshots) != 2 || len(h.Unreferenced) != 0 {
		t.Errorf("history %d snapshots, unreferenced %v; want the 2 committed and nothing else", len(h.Snapshots), h.Unreferenced)
	}
	for _, k := range snaptest.Keys(t, st) {
		if strings.HasPrefix(k, "archives/") || strings.HasPrefix(k, "snapshots/") {
			id := k[strings.Index(k, "/")+1:]
			for _, ext := range []string{".tar.zst", ".json.zst", ".json"} {
				id = strings.TrimSuffix(id, ext)
			}
			if h.Find(id) == nil {
				t.Errorf("%s belongs to no committed snapshot", k)
			}
		}
	}
}

// raceStore runs before once, just before the first head swap.
type raceStore struct {
	store.Store
	before func()
	once   sync.Once
}

func (s *raceStore) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	if key == repo.HeadKey {
		s.once.Do(s.before)
	}
	return s.Store.Swap(ctx, key, data, old)
}
