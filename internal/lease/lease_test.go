package lease

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestOneWriterTakeoverAndFencing(t *testing.T) {
	ctx := context.Background()
	st, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	a := New(st, Holder{ID: "a", Pod: "jenkins-0", Host: "node-1", PID: 7}, time.Minute, c.Now)
	b := New(st, Holder{ID: "b", Pod: "jenkins-1", Host: "node-2", PID: 9}, time.Minute, c.Now)
	// The same StatefulSet in another namespace: a pod of the same name,
	// told apart by its namespace.
	other := New(st, Holder{ID: "c", Pod: "jenkins-0", Namespace: "staging", Host: "jenkins-0", PID: 1}, time.Minute, c.Now)

	if err := other.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	var held *HeldError
	if err := a.Acquire(ctx); !errors.As(err, &held) || !strings.Contains(err.Error(), "staging/jenkins-0 (pid 1)") {
		t.Fatalf("a pod of the same name: %v, want the holder named with its namespace", err)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}

	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx); !errors.As(err, &held) || held.Holder.Pod != "jenkins-0" || !strings.Contains(err.Error(), "jenkins-0 (pid 7)") {
		t.Fatalf("second writer: %v, want it told who holds the lease", err)
	}
	// a renews: b keeps waiting past a's first expiry.
	c.Add(50 * time.Second)
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	c.Add(50 * time.Second)
	if err := b.Acquire(ctx); !errors.As(err, &held) {
		t.Fatalf("b took a renewed lease: %v", err)
	}
	// a stalls past its expiry: b takes over, and a is fenced.
	fencedA := a.Fence(st)
	c.Add(11 * time.Second)
	if err := b.Acquire(ctx); err != nil {
		t.Fatalf("b after expiry: %v", err)
	}
	if _, err := fencedA.Swap(ctx, repo.HeadKey, []byte("{}"), ""); !errors.Is(err, ErrLost) {
		t.Errorf("a moved the head after losing the lease: %v", err)
	}
	if err := fencedA.Delete(ctx, "archives/x"); !errors.Is(err, ErrLost) {
		t.Errorf("a deleted after losing the lease: %v", err)
	}
	if err := a.Acquire(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("a renewing a lost lease: %v, want ErrLost", err)
	}
	if _, err := b.Fence(st).Swap(ctx, repo.HeadKey, []byte("{}"), ""); err != nil {
		t.Errorf("the holder cannot move the head: %v", err)
	}
	// b stops and releases: a takes over at once.
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx); err != nil {
		t.Errorf("after release: %v", err)
	}
	if err := b.Check(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("b still thinks it holds the lease: %v", err)
	}
}

// Many processes racing for a free lease: exactly one wins each round.
func TestRaceForAFreeLease(t *testing.T) {
	ctx := context.Background()
	st, _ := file.Open(t.TempDir())
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for round := range 20 {
		var wg sync.WaitGroup
		wins := make(chan string, 8)
		for i := range 8 {
			l := New(st, Holder{ID: string(rune('a' + i))}, time.Minute, func() time.Time { return now })
			wg.Add(1)
			go func() {
				defer wg.Done()
				if l.Acquire(ctx) == nil {
					wins <- l.me.ID
				}
			}()
		}
		wg.Wait()
		close(wins)
		if n := len(wins); n != 1 {
			t.Fatalf("round %d: %d holders", round, n)
		}
		now = now.Add(2 * time.Minute) // everyone's lease expires
	}
}

// A lease on a fresh store leaves it a store the first snapshot accepts; a
// prefix holding something else is refused before anything is written.
func TestLeaseOnFreshAndForeignPrefixes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, _ := file.Open(dir)
	if err := New(st, Holder{ID: "a"}, time.Minute, nil).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := repo.CheckMarker(ctx, st); err != nil {
		t.Errorf("a fresh store with a lease is refused: %v", err)
	}
	foreign, _ := file.Open(t.TempDir())
	foreign.Put(ctx, "backup.tar", strings.NewReader("x"))
	if err := New(foreign, Holder{ID: "a"}, time.Minute, nil).Acquire(ctx); !errors.Is(err, repo.ErrWrongStore) {
		t.Errorf("lease on a foreign prefix: %v", err)
	}
	if _, _, err := foreign.Load(ctx, Key); err == nil {
		t.Error("a lease was written into a foreign prefix")
	}
}

// dropping fails the first n swaps as a reset connection would, after
// applying the first one when landed is set (the answer was lost).
type dropping struct {
	store.Store
	n      int
	landed bool
}

func (d *dropping) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	if d.n > 0 {
		d.n--
		if d.landed {
			d.landed = false
			d.Store.Swap(ctx, key, data, old)
		}
		return "", errors.New("read: connection reset by peer")
	}
	return d.Store.Swap(ctx, key, data, old)
}

// TestReleaseSurvivesDroppedConnections: a release lost to a dropped
// connection would refuse the next writer for a whole TTL.
func TestReleaseSurvivesDroppedConnections(t *testing.T) {
	ctx := context.Background()
	for _, landed := range []bool{false, true} {
		st, err := file.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		d := &dropping{Store: st}
		a := New(d, Holder{ID: "a", Host: "node-1", PID: 7}, time.Minute, nil)
		b := New(st, Holder{ID: "b", Host: "node-2", PID: 9}, time.Minute, nil)
		if err := a.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		d.n, d.landed = 3, landed
		if err := a.Release(ctx); err != nil {
			t.Fatalf("landed=%v: release after three dropped connections: %v", landed, err)
		}
		if err := b.Acquire(ctx); err != nil {
			t.Errorf("landed=%v: the next writer is refused after a release: %v", landed, err)
		}
	}
	// A store that never answers: the release gives up with ctx.
	st, _ := file.Open(t.TempDir())
	d := &dropping{Store: st}
	a := New(d, Holder{ID: "a"}, time.Minute, nil)
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	d.n = 1 << 30
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := a.Release(tctx); err == nil {
		t.Error("a release that never reached the store reported success")
	}
}
