package repo_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// loadCounter counts Loads by key, and fails the keys in fail.
type loadCounter struct {
	store.Store
	mu    sync.Mutex
	loads map[string]int
	fail  map[string]error
}

func (c *loadCounter) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	c.mu.Lock()
	c.loads[key]++
	err := c.fail[key]
	c.mu.Unlock()
	if err != nil {
		return nil, "", err
	}
	return c.Store.Load(ctx, key)
}

func (c *loadCounter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads[key]
}

func TestReadOnceLoadsEachObjectOnce(t *testing.T) {
	ctx := context.Background()
	inner := &loadCounter{Store: newStore(t), loads: map[string]int{}, fail: map[string]error{}}
	put(t, inner, repo.MarkerKey, `{"homesnap":3}`)
	put(t, inner, repo.HeadKey, `{"snapshot":"20261201T100000.000Z-aaaaaa"}`)
	st := repo.ReadOnce(ctx, inner, repo.MarkerKey, repo.HeadKey)

	var wg sync.WaitGroup
	for range 8 { // readers at once share the prefetch's request
		wg.Go(func() {
			if _, _, err := repo.LoadHead(ctx, st); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, key := range []string{repo.MarkerKey, repo.HeadKey} {
		if n := inner.count(key); n != 1 {
			t.Errorf("%s loaded %d times, want once", key, n)
		}
	}

	// A caller changing its bytes does not change the next caller's.
	data, _, _ := st.Load(ctx, repo.HeadKey)
	clear(data)
	if h, _, err := repo.LoadHead(ctx, st); err != nil || h.Snapshot != "20261201T100000.000Z-aaaaaa" {
		t.Errorf("the head after a caller changed its copy: %+v, %v", h, err)
	}

	// An absent object is an answer, kept; a failure is not.
	const absent, failing = "snapshots/20261201T100000.000Z-aaaaaa.json", "snapshots/20261201T110000.000Z-bbbbbb.json"
	inner.fail[failing] = errors.New("connection reset")
	for range 2 {
		if _, _, err := st.Load(ctx, absent); !errors.Is(err, store.ErrNotExist) {
			t.Errorf("absent object: %v", err)
		}
		if _, _, err := st.Load(ctx, failing); err == nil {
			t.Error("a failing load succeeded")
		}
	}
	if n := inner.count(absent); n != 1 {
		t.Errorf("an absent object was asked for %d times, want once", n)
	}
	if n := inner.count(failing); n != 2 {
		t.Errorf("a failed load was asked for %d times, want each time (2)", n)
	}

	// A write through it is read back.
	if _, err := st.Swap(ctx, repo.HeadKey, []byte(`{"snapshot":"20261201T110000.000Z-bbbbbb"}`), ""); err == nil {
		t.Fatal("a swap from the wrong version succeeded")
	}
	_, v, _ := st.Load(ctx, repo.HeadKey)
	if _, err := st.Swap(ctx, repo.HeadKey, []byte(`{"snapshot":"20261201T110000.000Z-bbbbbb"}`), v); err != nil {
		t.Fatal(err)
	}
	if h, _, err := repo.LoadHead(ctx, st); err != nil || h.Snapshot != "20261201T110000.000Z-bbbbbb" {
		t.Errorf("the head after a swap through the store: %+v, %v", h, err)
	}
}
