// Package runner is the snapshot sidecar's life: a snapshot every interval
// (with jitter, so a fleet of controllers does not hit the store at once)
// or on demand (one at a time, spaced apart), and a final one when the pod
// stops, taken only after Jenkins has written its shutdown state; and the
// port that serves its probes, metrics and requests. Time comes from a
// Clock so the schedule is tested without sleeping.
package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
)

// Clock is the runner's source of time.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a Runner. Take and Interval are required.
type Options struct {
	// Take takes one snapshot (snapshot.Snapshot with the sidecar's options);
	// trigger says why (repo.Trigger*), for its record; j is the change
	// journal, nil while it opens or when there is none (the snapshot
	// walks the whole home).
	Take     func(ctx context.Context, trigger string, j *snapshot.ChangeJournal) (*snapshot.Result, error)
	Interval time.Duration
	// OpenJournal, when set, opens the change journal. It runs beside the
	// snapshots, which walk until it returns: listing every directory of a
	// large home takes half a minute cold, and must hold back neither the
	// port's probes nor a snapshot, the final one included. Tests slow it
	// down to show that. It starts while nothing else reads the home: during
	// the wait for Jenkins (Start), or else once the first snapshot's walk
	// has read every directory it lists (at a million files the open took
	// 27 s alone on a cold cache, 62-68 s beside that walk, 5-6 s after it).
	// The runner closes what it returns.
	OpenJournal func() (*snapshot.ChangeJournal, error)
	// DemandSpacing is the least time between two snapshots asked for
	// with Demand (POST /snapshot); 0 means none.
	DemandSpacing time.Duration
	// Jitter spreads each wait uniformly over Interval ± Jitter×Interval;
	// 0 means 0.1, a negative value none.
	Jitter float64
	Final  Final
	// Start, when its URL is set, holds the first snapshot back until
	// Jenkins answers.
	Start Start
	Clock Clock          // nil: the system clock
	Rand  func() float64 // nil: math/rand/v2; in [0, 1)
	Log   zerolog.Logger
	// Observe, when set, is told about every attempt (metrics).
	Observe func(Attempt)
	// Lease, when set, makes this runner the store's one writer: it is
	// renewed every RenewEvery (default 20s) and before every snapshot, and
	// released after the final one. While another process holds it, no
	// snapshot is taken and the runner is not ready.
	Lease      Lease
	RenewEvery time.Duration
	// OnLease, when set, is told whether the lease is held (metrics).
	OnLease func(held bool)
}

// Lease is the one-writer lease (internal/lease).
type Lease interface {
	Acquire(ctx context.Context) error
	Release(ctx context.Context) error
}

// Attempt is one finished snapshot attempt.
type Attempt struct {
	Start, End time.Time
	Result     *snapshot.Result // nil on error
	Err        error
	Trigger    string // repo.Trigger*
}

// Runner runs snapshots on a schedule. Its methods are safe for concurrent
// use: the HTTP handlers read its status and trigger snapshots.
type Runner struct {
	o    Options
	wake chan struct{} // an on-demand snapshot may be pending

	mu          sync.Mutex
	pending     bool          // an on-demand snapshot waits for its turn
	demandRuns  bool          // an on-demand snapshot is being taken
	lastDemand  time.Time     // when Demand last accepted a request
	demandTook  time.Duration // how long the last on-demand snapshot took
	lastSuccess time.Time     // zero until a snapshot (or an unchanged check) succeeds
	last        Attempt
	started     time.Time
	leaseErr    error // why the lease is not held; nil when held or unused
	behind      error // a snapshot found the home behind the store: this runner writes no more

	journal        *snapshot.ChangeJournal // nil until open
	journalOpening bool
	stopped        bool // Run returned: a journal opened now is closed
}

// New returns a Runner; call Run to start it.
func New(o Options) *Runner {
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Jitter == 0 {
		o.Jitter = 0.1
	}
	return &Runner{o: o, wake: make(chan struct{}, 1), started: o.Clock.Now(), journalOpening: o.OpenJournal != nil}
}

// Trigger asks for a snapshot now from inside the pod (SIGUSR1), without
// the limits of Demand. Requests that arrive while one is pending collapse
// into it.
func (r *Runner) Trigger() {
	r.mu.Lock()
	r.pending = true
	r.mu.Unlock()
	r.poke()
}

func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// DemandRefused is why Demand refused a request, and when to ask again.
type DemandRefused struct {
	Busy       bool // one is pending or running; otherwise too soon after the last
	RetryAfter time.Duration
}

func (e *DemandRefused) Error() string {
	if e.Busy {
		return fmt.Sprintf("an on-demand snapshot is already pending or running; ask again in %d s", e.Seconds())
	}
	return fmt.Sprintf("the last on-demand snapshot was asked for less than the minimum spacing ago; ask again in %d s", e.Seconds())
}

// Seconds is RetryAfter in whole seconds, rounded up (Retry-After).
func (e *DemandRefused) Seconds() int {
	return int((e.RetryAfter + time.Second - 1) / time.Second)
}

// Demand asks for a snapshot on behalf of a network client (POST
// /snapshot): one at a time, and at least DemandSpacing apart, so that
// requests cannot keep the store busy. It returns a *DemandRefused when it
// takes none.
func (r *Runner) Demand() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.o.Clock.Now()
	wait := max(r.lastDemand.Add(r.o.DemandSpacing).Sub(now), 0)
	if r.pending || r.demandRuns {
		return &DemandRefused{Busy: true, RetryAfter: max(wait, r.demandTook, time.Second)}
	}
	if !r.lastDemand.IsZero() && wait > 0 {
		return &DemandRefused{RetryAfter: wait}
	}
	r.pending, r.lastDemand = true, now
	r.poke()
	return nil
}

// next waits for the next snapshot's turn and says what takes it; false
// when ctx ends first.
func (r *Runner) next(ctx context.Context) (string, bool) {
	timer := r.o.Clock.After(r.wait())
	for {
		select {
		case <-timer:
			return repo.TriggerScheduled, true
		case <-r.wake:
			r.mu.Lock()
			take := r.pending
			r.pending, r.demandRuns = false, take
			r.mu.Unlock()
			if take {
				r.o.Log.Info().Msg("snapshot requested")
				return repo.TriggerOnDemand, true
			}
		case <-ctx.Done():
			return "", false
		}
	}
}

// Run takes a snapshot at once (after Start's wait), then one per interval or trigger, until ctx
// ends; then it waits for Jenkins to stop (Final) and takes the final
// snapshot, whose error it returns.
func (r *Runner) Run(ctx context.Context) error {
	r.o.Log.Info().Dur("interval", r.o.Interval).Msg("snapshot sidecar started")
	openAfterFirst := r.o.OpenJournal != nil && r.o.Start.URL == ""
	if r.o.OpenJournal != nil && !openAfterFirst {
		go r.openJournal()
	}
	defer r.closeJournal()
	if !r.o.Start.wait(ctx, r.o.Clock, r.o.Log) {
		// Jenkins never started: the home may not hold the restored state,
		// so no final snapshot may overwrite the store's head with it.
		r.o.Log.Warn().Str("url", store.Redact(r.o.Start.URL)).Msg("stopped before Jenkins answered; no snapshot taken, the store is unchanged")
		return nil
	}
	if r.o.Lease != nil {
		go r.renew(ctx)
	}
	for trigger := repo.TriggerScheduled; ; {
		reclaim(r.attempt(ctx, trigger).Result)
		if openAfterFirst {
			openAfterFirst = false
			go r.openJournal()
		}
		var ok bool
		if trigger, ok = r.next(ctx); !ok {
			return r.final(ctx)
		}
	}
}

// openJournal opens the change journal and hands it to the snapshots that
// start afterwards; the first of them walks all the same (the journal saw
// nothing before it opened), and those after read only what changed.
func (r *Runner) openJournal() {
	j, err := r.o.OpenJournal() // it logs how it went
	r.mu.Lock()
	r.journalOpening = false
	late := r.stopped
	if err == nil && !late {
		r.journal = j
	}
	r.mu.Unlock()
	if err == nil && late {
		j.Close()
	}
}

// closeJournal stops following the home once the final snapshot is taken;
// an open still under way is not waited for.
func (r *Runner) closeJournal() {
	r.mu.Lock()
	j := r.journal
	r.journal, r.stopped = nil, true
	r.mu.Unlock()
	if j != nil {
		j.Close()
	}
}

// wait is the next interval with jitter.
func (r *Runner) wait() time.Duration {
	j := max(r.o.Jitter, 0)
	return time.Duration(float64(r.o.Interval) * (1 + j*(2*r.o.Rand()-1)))
}

func (r *Runner) final(ctx context.Context) error {
	f := r.o.Final
	deadline := f.Timeout
	if deadline <= 0 {
		deadline = 25 * time.Second
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deadline)
	defer cancel()
	r.o.Log.Info().Dur("deadline", deadline).Msg("stopping: waiting for Jenkins to finish, then taking the final snapshot")
	f.waitForJenkins(fctx, r.o.Clock, r.o.Log)
	a := r.attempt(fctx, repo.TriggerFinal)
	if r.o.Lease != nil {
		if err := r.o.Lease.Release(fctx); err != nil {
			r.o.Log.Warn().Err(err).Msg("could not release the store's lease; the next writer waits for it to expire")
		}
	}
	return a.Err
}

// renew keeps the lease while ctx lives, so a second sidecar keeps waiting
// between snapshots.
func (r *Runner) renew(ctx context.Context) {
	every := r.o.RenewEvery
	if every <= 0 {
		every = 20 * time.Second
	}
	for {
		select {
		case <-r.o.Clock.After(every):
			r.lease(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// lease takes or renews the lease, logging changes; it reports whether
// this runner may write.
func (r *Runner) lease(ctx context.Context) bool {
	if r.o.Lease == nil {
		return true
	}
	r.mu.Lock()
	stoodDown := r.behind != nil
	r.mu.Unlock()
	if stoodDown {
		return false
	}
	err := r.o.Lease.Acquire(ctx)
	r.mu.Lock()
	was := r.leaseErr
	r.leaseErr = err
	r.mu.Unlock()
	switch {
	case err == nil && was != nil:
		r.o.Log.Info().Msg("took the store's lease: this process is the writer now")
	case err != nil && (was == nil || was.Error() != err.Error()):
		r.o.Log.Warn().Err(err).Msg("not the store's writer")
	}
	if r.o.OnLease != nil {
		r.o.OnLease(err == nil)
	}
	return err == nil
}

// attempt takes one snapshot, if this runner holds the lease, and records
// how it went.
func (r *Runner) attempt(ctx context.Context, trigger string) Attempt {
	a := Attempt{Start: r.o.Clock.Now(), Trigger: trigger}
	if trigger == repo.TriggerOnDemand {
		defer func() {
			r.mu.Lock()
			r.demandRuns, r.demandTook = false, a.End.Sub(a.Start)
			r.mu.Unlock()
		}()
	}
	if !r.lease(ctx) {
		a.End = a.Start
		return a // not an attempt: Status says who writes
	}
	r.mu.Lock()
	j := r.journal
	r.mu.Unlock()
	a.Result, a.Err = r.o.Take(ctx, trigger, j)
	a.End = r.o.Clock.Now()
	if errors.Is(a.Err, snapshot.ErrBehind) {
		r.standDown(ctx, a.Err)
	}
	r.mu.Lock()
	r.last = a
	if a.Err == nil {
		r.lastSuccess = a.End
	}
	r.mu.Unlock()
	if r.o.Observe != nil {
		r.o.Observe(a)
	}
	return a
}

// standDown stops this runner writing for good: another writer committed
// to the store since its home last matched it, so every later snapshot
// would replace that writer's work. It lets the lease go at once, so the
// writer whose home is current takes it, and never takes it again; a
// restart restores the home and starts over.
func (r *Runner) standDown(ctx context.Context, err error) {
	r.mu.Lock()
	first := r.behind == nil
	r.behind = err
	r.mu.Unlock()
	if !first {
		return
	}
	r.o.Log.Error().Err(err).Msg("standing down: this sidecar takes no more snapshots; restart the pod to restore its home from the store")
	if r.o.Lease == nil {
		return
	}
	if err := r.o.Lease.Release(ctx); err != nil {
		r.o.Log.Warn().Err(err).Msg("could not release the store's lease; the other writer waits for it to expire")
	}
	if r.o.OnLease != nil {
		r.o.OnLease(false)
	}
}

// Why the runner is not ready: a fixed set, because /readyz answers any
// peer and an error's text names the home's paths, jobs and the store.
// The log has the detail.
const (
	NotWriter      = "lease held elsewhere"               // another sidecar writes to the store
	NoLease        = "lease unavailable"                  // the lease could not be read or taken
	Shrunk         = "last snapshot refused: home shrank" // --allow-shrink
	LastFailed     = "last snapshot failed"
	Overdue        = "snapshot overdue" // none succeeded within three intervals
	NoSnapshotYet  = "no snapshot yet"
	JournalOpening = "journal opening"       // snapshots walk the whole home until it is open
	Behind         = "home behind the store" // another writer committed since: stood down
)

// Status is what the probes report.
type Status struct {
	Ready       bool
	Reason      string // why not ready: one of the constants above
	LastSuccess time.Time
	LastError   error // for the log, never for the port
}

// Status reports readiness: the last attempt succeeded, a snapshot
// succeeded within the last three intervals (allowing a slow store), and
// the change journal, if any, is open.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{LastSuccess: r.lastSuccess, LastError: r.last.Err, Ready: true}
	now := r.o.Clock.Now()
	var held *lease.HeldError
	switch {
	case r.behind != nil:
		s.Ready, s.Reason, s.LastError = false, Behind, r.behind
	case errors.As(r.leaseErr, &held) || errors.Is(r.leaseErr, lease.ErrLost):
		s.Ready, s.Reason = false, NotWriter
	case r.leaseErr != nil:
		s.Ready, s.Reason = false, NoLease
	case errors.Is(r.last.Err, snapshot.ErrShrunk):
		s.Ready, s.Reason = false, Shrunk
	case r.last.Err != nil:
		s.Ready, s.Reason = false, LastFailed
	case r.lastSuccess.IsZero():
		s.Ready, s.Reason = false, NoSnapshotYet
	case now.Sub(r.lastSuccess) > 3*r.o.Interval:
		s.Ready, s.Reason = false, Overdue
	case r.journalOpening:
		s.Ready, s.Reason = false, JournalOpening
	}
	return s
}

// reclaim gives a snapshot's garbage back to the system, which the
// runtime would otherwise keep mapped, up to the soft memory limit, until
// the next snapshot needs it. A nothing-changed snapshot through the
// journal leaves almost none, and is not worth a collection; the final
// snapshot has no next one.
func reclaim(res *snapshot.Result) {
	if res != nil && res.Unchanged && res.ChangeJournal != nil && res.ChangeJournal.Mode == snapshot.JournalMode {
		return
	}
	debug.FreeOSMemory()
}
