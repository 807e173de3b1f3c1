package restore

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
)

// getCounter counts the reads of each object.
type getCounter struct {
	store.Store
	mu   sync.Mutex
	gets map[string]int
}

func (c *getCounter) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	c.mu.Lock()
	c.gets[key]++
	c.mu.Unlock()
	return c.Store.Get(ctx, key, offset, length)
}

// The passes after the fetch (directory metadata, extras) read the
// manifest the staging pass copied, not the store: each manifest object of
// the chain is read from the store once, while the fetch can overlap it.
func TestRestoreReadsEachManifestLayerOnce(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	first := snaptest.Snap(t, home, st)
	snaptest.Write(t, home, "jobs/added/config.xml", "<new/>")
	second := snaptest.Snap(t, home, st)

	for _, tc := range []struct {
		name  string
		delta bool // the home is at the first snapshot
	}{{"empty home", false}, {"delta from the first snapshot", true}} {
		t.Run(tc.name, func(t *testing.T) {
			target := t.TempDir()
			if tc.delta {
				if err := restore(target, st, first.ID); err != nil {
					t.Fatal(err)
				}
			}
			counted := &getCounter{Store: st, gets: map[string]int{}}
			res, err := restoreWith(target, counted, second.ID, func(o *Options, s *staged) { s.delta = tc.delta })
			if err != nil {
				t.Fatal(err)
			}
			manifests := 0
			for key, n := range counted.gets {
				if !repo.IsManifestKey(key) {
					continue
				}
				manifests++
				if n != 1 {
					t.Errorf("%s was read %d times from the store, want once", key, n)
				}
			}
			if manifests != 2 {
				t.Errorf("the restore of a two-layer chain read %d manifest objects: %v", manifests, counted.gets)
			}
			if res.Written == 0 {
				t.Fatal("the restore wrote nothing: the test restores nothing")
			}
			snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.Selected(t, target))
			snaptest.AssertNoStaging(t, target)
		})
	}
}
