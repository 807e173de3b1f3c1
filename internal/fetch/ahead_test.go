package fetch_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
)

// slowStore answers every ranged read after a delay, as a distant store
// does, and counts the reads whose answer is open (not yet closed).
type slowStore struct {
	store.Store
	mu        sync.Mutex
	open, max int
}

func (s *slowStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	time.Sleep(time.Millisecond) // the store's latency: time passing on purpose
	rc, err := s.Store.Get(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.open++
	s.max = max(s.max, s.open)
	s.mu.Unlock()
	return &closeCounted{ReadCloser: rc, s: s}, nil
}

func (s *slowStore) opened() (open, max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open, s.max
}

type closeCounted struct {
	io.ReadCloser
	s    *slowStore
	once sync.Once
}

func (c *closeCounted) Close() error {
	c.once.Do(func() { c.s.mu.Lock(); c.s.open--; c.s.mu.Unlock() })
	return c.ReadCloser.Close()
}

// While every worker is busy with a run, the next runs' requests are
// already sent (up to OpenAhead of them, no more), so that their round
// trips pass during the workers' reads rather than after them.
func TestRequestsAreSentWhileTheWorkersRead(t *testing.T) {
	home, base := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Write(t, home, "jobs/ahead/config.xml", "<ahead/>")
	snap := snaptest.Snap(t, home, base)
	ctx := context.Background()
	var file *archive.Entry
	for e, err := range repo.ManifestEntries(ctx, base, snap.ID) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Path == "jobs/ahead/config.xml" {
			file = e
		}
	}
	if file == nil {
		t.Fatal("the snapshot lacks jobs/ahead/config.xml")
	}
	data := snaptest.Object(t, base, repo.ArchiveKey(file.Archive))

	// The same bytes under many archive names: one run each.
	const jobs, runs = 2, 12
	st := &slowStore{Store: base}
	workers := fetch.NewWorkers(jobs)
	release, dispatched := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // a failed test lets its workers go
	f := &fetch.Fetcher{Store: st, Fetched: new(atomic.Int64), Verb: "check", File: func(e *archive.Entry, src io.Reader) error {
		<-release
		return fetch.ReadChecked(src, e, nil)
	}}
	var g errgroup.Group
	g.SetLimit(workers.InFlight())
	builder := fetch.NewRunBuilder(func(rn *fetch.Run) { g.Go(func() error { return f.FetchWith(ctx, workers, rn) }) })
	go func() {
		defer close(dispatched)
		for i := range runs {
			id := fmt.Sprintf("20261205T000000.000Z-%06d", i)
			if err := base.Put(ctx, repo.ArchiveKey(id), bytes.NewReader(data)); err != nil {
				t.Error(err)
				return
			}
			e := *file
			e.Archive = id
			builder.Add(&e)
		}
		builder.Flush()
	}()

	want := jobs + fetch.OpenAhead
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if open, _ := st.opened(); open >= want {
			break
		}
		if time.Now().After(deadline) {
			open, _ := st.opened()
			t.Fatalf("with %d workers busy, %d requests were open; want %d (the workers' and %d ahead)", jobs, open, want, fetch.OpenAhead)
		}
	}
	// Every slot is held by a run whose request is open and which waits
	// for a worker or in File: no further request can be sent until the
	// workers are let go.
	if g.TryGo(func() error { return nil }) {
		t.Fatalf("with %d requests open, another run could start: more than %d in flight", want, want)
	}
	if _, most := st.opened(); most != want {
		t.Fatalf("%d requests were open at once, want at most %d", most, want)
	}
	free()
	<-dispatched
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if open, most := st.opened(); open != 0 || most != want {
		t.Fatalf("after the fetch: %d requests open, at most %d at once (want 0, %d)", open, most, want)
	}
}
