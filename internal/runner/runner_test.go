package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
)

// fakeClock moves only when the test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	waiting chan time.Duration // each After call, for the test to see
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), waiting: make(chan time.Duration, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	c.mu.Unlock()
	c.waiting <- d
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// takes records the snapshots a runner takes.
type takes struct {
	calls chan bool // ctx still alive at the call
	err   atomic.Pointer[error]

	mu       sync.Mutex
	triggers []string
	journals []*snapshot.ChangeJournal // what each was given
}

func (tk *takes) take(ctx context.Context, trigger string, j *snapshot.ChangeJournal) (*snapshot.Result, error) {
	tk.mu.Lock()
	tk.triggers = append(tk.triggers, trigger)
	tk.journals = append(tk.journals, j)
	tk.mu.Unlock()
	tk.calls <- ctx.Err() == nil
	if p := tk.err.Load(); p != nil {
		return nil, *p
	}
	return &snapshot.Result{ID: "x"}, nil
}

func expect(t *testing.T, what string, ch <-chan bool) bool {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
	return false
}

func TestScheduleTriggerAndFinalSnapshot(t *testing.T) {
	clock, tk := newFakeClock(), &takes{calls: make(chan bool, 4)}
	var finals atomic.Int32
	r := New(Options{
		Take: tk.take, Interval: 5 * time.Minute, Clock: clock, Log: zerolog.Nop(),
		Rand:    func() float64 { return 0 }, // the shortest jitter: 0.9 × interval
		Observe: func(a Attempt) { finals.Add(map[bool]int32{true: 1}[a.Trigger == repo.TriggerFinal]) },
		Final:   Final{Timeout: time.Minute},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	expect(t, "snapshot at start", tk.calls)
	if d := <-clock.waiting; d != 270*time.Second {
		t.Errorf("waits %v, want 4m30s (5m − 10 %% jitter)", d)
	}
	clock.Advance(269 * time.Second)
	select {
	case <-tk.calls:
		t.Fatal("snapshot before the interval ended")
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(time.Second)
	expect(t, "scheduled snapshot", tk.calls)
	<-clock.waiting
	r.Trigger()
	expect(t, "triggered snapshot", tk.calls)
	<-clock.waiting
	cancel()
	if alive := expect(t, "final snapshot", tk.calls); !alive {
		t.Error("the final snapshot ran with a cancelled context")
	}
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if finals.Load() != 1 {
		t.Errorf("%d final attempts, want 1", finals.Load())
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if got := strings.Join(tk.triggers, " "); got != "scheduled scheduled on-demand final" {
		t.Errorf("snapshots taken for %s, want scheduled scheduled on-demand final", got)
	}
}

func TestJitterStaysWithinTenPercent(t *testing.T) {
	for _, x := range []float64{0, 0.25, 0.5, 0.999} {
		r := New(Options{Interval: time.Minute, Rand: func() float64 { return x }})
		if d := r.wait(); d < 54*time.Second || d > 66*time.Second {
			t.Errorf("rand %v: wait %v outside 1m ± 10 %%", x, d)
		}
	}
	if d := New(Options{Interval: time.Minute, Jitter: -1, Rand: func() float64 { return 0 }}).wait(); d != time.Minute {
		t.Errorf("no jitter: wait %v", d)
	}
}

// leaseSays is a lease whose Acquire answers err.
type leaseSays struct{ err atomic.Pointer[error] }

func (l *leaseSays) Acquire(context.Context) error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}
func (l *leaseSays) Release(context.Context) error { return nil }

func TestReadiness(t *testing.T) {
	clock, tk, ls := newFakeClock(), &takes{calls: make(chan bool, 8)}, &leaseSays{}
	r := New(Options{Take: tk.take, Interval: time.Minute, Clock: clock, Log: zerolog.Nop(), Lease: ls})
	want := func(when, reason string) {
		t.Helper()
		if s := r.Status(); s.Ready != (reason == "") || s.Reason != reason {
			t.Errorf("%s: %+v, want reason %q", when, s, reason)
		}
	}
	take := func(err error) {
		t.Helper()
		tk.err.Store(nil)
		if err != nil {
			tk.err.Store(&err)
		}
		r.attempt(context.Background(), repo.TriggerScheduled)
		<-tk.calls
	}
	want("before any snapshot", NoSnapshotYet)
	take(errors.New("put /srv/store/archives/x: connection refused"))
	want("after a failure", LastFailed)
	take(fmt.Errorf("home /var/jenkins_home: %w", snapshot.ErrShrunk))
	want("after a refused shrink", Shrunk)
	take(nil)
	want("after a success", "")
	clock.Advance(3*time.Minute + time.Second)
	want("three intervals later", Overdue)
	take(nil)

	held := error(&lease.HeldError{Holder: lease.Holder{Pod: "jenkins-0"}, Expires: clock.Now().Add(time.Minute)})
	ls.err.Store(&held)
	r.attempt(context.Background(), repo.TriggerScheduled) // takes none
	want("while another sidecar writes", NotWriter)
	lost := fmt.Errorf("%w: jenkins-1 holds it now", lease.ErrLost)
	ls.err.Store(&lost)
	r.attempt(context.Background(), repo.TriggerScheduled)
	want("after losing the lease", NotWriter)
	unreachable := errors.New("load lease.json: dial tcp: connection refused")
	ls.err.Store(&unreachable)
	r.attempt(context.Background(), repo.TriggerScheduled)
	want("when the lease cannot be read", NoLease)
}

// A classic sidecar's final snapshot waits until Jenkins stops answering.
func TestFinalSnapshotWaitsForJenkinsToStop(t *testing.T) {
	jenkins := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "shutting down", http.StatusServiceUnavailable) // still an answer
	}))
	var stopped, sawStopped atomic.Bool
	clock := newFakeClock()
	r := New(Options{
		Interval: time.Hour, Log: zerolog.Nop(), Clock: clock,
		Take: func(context.Context, string, *snapshot.ChangeJournal) (*snapshot.Result, error) {
			sawStopped.Store(stopped.Load())
			return &snapshot.Result{}, nil
		},
		Final: Final{Timeout: time.Minute, WaitURL: jenkins.URL, Poll: time.Second},
	})
	done := make(chan error, 1)
	go func() { done <- r.final(context.Background()) }()
	// A wait on the clock follows each answer from Jenkins: it answers
	// four times, then it is gone.
	for answer := range 4 {
		select {
		case <-clock.waiting:
		case err := <-done:
			t.Fatalf("the final snapshot was taken (%v) after %d answers, while Jenkins still answered", err, answer)
		}
		if answer == 3 {
			stopped.Store(true)
			jenkins.Close()
		}
		clock.Advance(time.Second)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !sawStopped.Load() {
		t.Error("the final snapshot was taken while Jenkins still answered")
	}
}

// stepClock advances by whatever is waited for, at once.
type stepClock struct{ fakeClock }

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func TestFinalSnapshotWaitsForAQuietHome(t *testing.T) {
	clock := &stepClock{*newFakeClock()}
	start := clock.Now()
	// Jenkins writes for 7 more seconds after the stop signal.
	lastWrite := func(context.Context) (time.Time, error) {
		if end := start.Add(7 * time.Second); clock.Now().After(end) {
			return end, nil
		}
		return clock.Now(), nil
	}
	var at time.Time
	r := New(Options{
		Interval: time.Hour, Log: zerolog.Nop(), Clock: clock,
		Take: func(context.Context, string, *snapshot.ChangeJournal) (*snapshot.Result, error) {
			at = clock.Now()
			return &snapshot.Result{}, nil
		},
		Final: Final{Timeout: time.Minute, Quiet: 3 * time.Second, LastWrite: lastWrite},
	})
	if err := r.final(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := at.Sub(start); got < 10*time.Second {
		t.Errorf("final snapshot %v after the stop, want ≥ 10s (7s of writes + 3s quiet)", got)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// countingLease counts what the runner asks of the lease.
type countingLease struct{ acquired, released atomic.Int32 }

func (l *countingLease) Acquire(context.Context) error { l.acquired.Add(1); return nil }
func (l *countingLease) Release(context.Context) error { l.released.Add(1); return nil }

// A sidecar whose home is behind the store (another controller wrote
// since) lets the lease go at once and never takes it again, so the
// writer whose home is current gets it; readiness says why.
func TestHomeBehindTheStoreStandsDown(t *testing.T) {
	tk, l := &takes{calls: make(chan bool, 8)}, &countingLease{}
	var held []bool
	r := New(Options{Take: tk.take, Interval: time.Minute, Clock: newFakeClock(), Log: zerolog.Nop(), Lease: l,
		OnLease: func(h bool) { held = append(held, h) }})
	behind := error(&snapshot.BehindError{Home: "/var/jenkins_home", Head: "b", HeadSeq: 9, Mark: "a", MarkSeq: 4})
	tk.err.Store(&behind)
	r.attempt(context.Background(), repo.TriggerScheduled)
	<-tk.calls
	if l.released.Load() != 1 || len(held) == 0 || held[len(held)-1] {
		t.Fatalf("after a home behind the store: %d releases, lease held %v; want it released", l.released.Load(), held)
	}
	acquired := l.acquired.Load()
	tk.err.Store(nil)
	for _, trigger := range []string{repo.TriggerScheduled, repo.TriggerOnDemand, repo.TriggerFinal} {
		r.attempt(context.Background(), trigger)
	}
	r.lease(context.Background()) // as renew does
	if l.acquired.Load() != acquired || len(tk.calls) != 0 {
		t.Fatalf("after standing down: %d more acquisitions, %d more snapshots; want none", l.acquired.Load()-acquired, len(tk.calls))
	}
	if s := r.Status(); s.Ready || s.Reason != Behind || !errors.Is(s.LastError, snapshot.ErrBehind) {
		t.Errorf("status %+v, want not ready: %q", s, Behind)
	}
}
