package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/testhome"
)

// Issue 31, item 5: a peer on the port reads the probes; they said the
// last error's text, which names the home's paths, jobs and the store.
// Now they answer a status and a fixed category; the log has the rest.
func TestProbesAnswerStatusOnly(t *testing.T) {
	const secretish = "/var/jenkins_home/jobs/payroll-deploy/config.xml"
	fail := fmt.Errorf("snapshot of %s into file:///srv/backups/ci: %w", secretish, errors.New("permission denied"))
	ls := &leaseSays{}
	p := servePort(t, Listen{}, Options{Lease: ls})
	p.tk.err.Store(&fail)
	p.run(t)
	allowed := map[string]bool{"ok\n": true}
	for _, c := range []string{NotWriter, NoLease, Shrunk, LastFailed, Overdue, NoSnapshotYet, JournalOpening} {
		allowed["not ready: "+c+"\n"] = true
	}
	probe := func(when string, wantCode int, want string) {
		t.Helper()
		for _, path := range []string{"/readyz", "/healthz"} {
			resp, body := p.do(t, "GET", path, "")
			if !allowed[body] {
				t.Errorf("%s: GET %s answers %q, not a status and one of the fixed categories", when, path, body)
			}
			for _, leak := range []string{"jenkins_home", "payroll", "/srv/backups", "jenkins-0", "permission denied"} {
				if strings.Contains(body, leak) {
					t.Errorf("%s: GET %s shows a peer %q: %q", when, path, leak, body)
				}
			}
			if path == "/readyz" && (resp.StatusCode != wantCode || body != want) {
				t.Errorf("%s: /readyz %d %q, want %d %q", when, resp.StatusCode, body, wantCode, want)
			}
		}
	}
	waitFor(t, "the failed snapshot recorded", func() bool { return p.r.Status().Reason == LastFailed })
	probe("after a failed snapshot", http.StatusServiceUnavailable, "not ready: "+LastFailed+"\n")

	held := error(&lease.HeldError{Holder: lease.Holder{Pod: "jenkins-0", Host: "node-a"}, Expires: p.clock.Now().Add(time.Minute)})
	ls.err.Store(&held)
	p.r.Trigger()
	waitFor(t, "the lease refused", func() bool { return p.r.Status().Reason == NotWriter })
	probe("while another sidecar holds the lease", http.StatusServiceUnavailable, "not ready: "+NotWriter+"\n")

	ls.err.Store(nil)
	p.tk.err.Store(nil)
	p.r.Trigger()
	expect(t, "a snapshot", p.tk.calls)
	waitFor(t, "a success", func() bool { return p.r.Status().Ready })
	probe("after a success", http.StatusOK, "ok\n")
	if !strings.Contains(p.log.String(), "jenkins-0") {
		t.Errorf("the log does not name the lease's holder:\n%s", p.log.String())
	}
}

// waitFor polls cond, which a goroutine of the runner makes true.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 2000 {
			t.Fatalf("no %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// heldOpen is an OpenJournal that opens a real journal only when the
// test lets it: a journal whose open takes as long as the test wants.
type heldOpen struct {
	release chan struct{}
	home    *homefs.Home
	opened  atomic.Pointer[snapshot.ChangeJournal]
}

func holdOpen(t *testing.T) *heldOpen {
	t.Helper()
	h := &heldOpen{release: make(chan struct{}), home: testhome.Open(t, t.TempDir())}
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	return h
}

func (h *heldOpen) open() (*snapshot.ChangeJournal, error) {
	<-h.release
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		return nil, err
	}
	j, err := snapshot.OpenChangeJournal(h.home, sel, 0)
	if err == nil {
		h.opened.Store(j)
	}
	return j, err
}

// Issue 29, scenario 4: the journal's open (a minute on a large home) held
// the port back, so the startup probe held Jenkins. Now the port answers
// and snapshots walk (no journal) while it opens; readiness says so; then
// the snapshots get the journal.
func TestSlowJournalHoldsNothingBack(t *testing.T) {
	h := holdOpen(t)
	p := servePort(t, Listen{Token: fixed(token)}, Options{OpenJournal: h.open})
	p.run(t) // the first snapshot, taken while the open is held
	if resp, body := p.do(t, "GET", "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz while the journal opens: %d %s", resp.StatusCode, body)
	}
	if resp, body := p.do(t, "GET", "/readyz", ""); resp.StatusCode != http.StatusServiceUnavailable || body != "not ready: journal opening\n" {
		t.Errorf("/readyz while the journal opens: %d %q, want 503 saying the journal is opening", resp.StatusCode, body)
	}
	if resp, body := p.do(t, "POST", "/snapshot", "Bearer "+token); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /snapshot while the journal opens: %d %s", resp.StatusCode, body)
	}
	expect(t, "a snapshot on demand while the journal opens", p.tk.calls)
	<-p.clock.waiting

	close(h.release)
	waitFor(t, "readiness once the journal is open", func() bool { return p.r.Status().Ready })
	p.r.Trigger()
	expect(t, "a snapshot once the journal is open", p.tk.calls)
	p.tk.mu.Lock()
	defer p.tk.mu.Unlock()
	j := h.opened.Load()
	if got := p.tk.journals; len(got) != 3 || got[0] != nil || got[1] != nil || got[2] == nil || got[2] != j {
		t.Errorf("the snapshots were given the journals %v, want none, none, then the opened one %p", got, j)
	}
}

// The final snapshot on SIGTERM neither waits for an open under way nor
// needs it: it walks.
func TestFinalSnapshotDoesNotWaitForTheJournal(t *testing.T) {
	h := holdOpen(t)
	clock, tk := newFakeClock(), &takes{calls: make(chan bool, 4)}
	r := New(Options{Take: tk.take, Interval: time.Hour, Clock: clock, Log: zerolog.Nop(), OpenJournal: h.open, Final: Final{Timeout: time.Minute}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	expect(t, "the first snapshot", tk.calls)
	<-clock.waiting
	cancel()
	expect(t, "the final snapshot", tk.calls)
	if err := <-done; err != nil { // the open is still held: Run did not wait for it
		t.Fatalf("Run = %v", err)
	}
	tk.mu.Lock()
	if got := tk.journals; len(got) != 2 || got[1] != nil || tk.triggers[1] != "final" {
		t.Errorf("the final snapshot was given %v (%v), want no journal", got, tk.triggers)
	}
	tk.mu.Unlock()
	close(h.release) // the open ends after Run: the runner closes what it opened, keeps nothing
	waitFor(t, "the late open to end", func() bool { return r.Status().Reason != JournalOpening })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.journal != nil || h.opened.Load() == nil {
		t.Errorf("after Run the late journal was kept (%p) or never opened (%p)", r.journal, h.opened.Load())
	}
}

// Issue 33: the journal's open lists every directory of the home, as the
// first snapshot's walk does. Side by side on a cold million-file home the
// open took 62-68 s where alone it took 27 s, and after the walk 5-6 s:
// the directories are cached. So the open starts once the first snapshot is over, or,
// when the runner waits for Jenkins first, during that wait, when nothing
// reads the home.
func TestJournalOpensWhenNothingElseReadsTheHome(t *testing.T) {
	opening := func(took *atomic.Int32, seen chan<- int32) func() (*snapshot.ChangeJournal, error) {
		return func() (*snapshot.ChangeJournal, error) {
			seen <- took.Load()
			return nil, errors.New("no journal here")
		}
	}
	t.Run("after the first snapshot", func(t *testing.T) {
		var took atomic.Int32
		seen := make(chan int32, 1)
		clock := newFakeClock()
		r := New(Options{Interval: time.Hour, Log: zerolog.Nop(), Clock: clock, OpenJournal: opening(&took, seen),
			Take: func(context.Context, string, *snapshot.ChangeJournal) (*snapshot.Result, error) {
				if took.Load() == 0 { // an open started beside this snapshot gets a second to begin
					time.Sleep(time.Second)
				}
				took.Add(1)
				return &snapshot.Result{ID: "x"}, nil
			}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go r.Run(ctx)
		if n := <-seen; n != 1 {
			t.Errorf("the journal began to open after %d snapshots, want after the first", n)
		}
	})
	t.Run("while Jenkins starts", func(t *testing.T) {
		var took atomic.Int32
		seen := make(chan int32, 1)
		var opened atomic.Bool
		jenkins := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if !opened.Load() { // no answer yet: the connection closes as a closed port's would
				if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
					c.Close()
				}
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		defer jenkins.Close()
		taken := make(chan bool, 4)
		r := New(Options{Interval: time.Hour, Log: zerolog.Nop(), Start: Start{URL: jenkins.URL, Poll: 10 * time.Millisecond},
			OpenJournal: func() (*snapshot.ChangeJournal, error) {
				defer opened.Store(true)
				return opening(&took, seen)()
			},
			Take: func(context.Context, string, *snapshot.ChangeJournal) (*snapshot.Result, error) {
				took.Add(1)
				taken <- true
				return &snapshot.Result{ID: "x"}, nil
			}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go r.Run(ctx)
		if n := <-seen; n != 0 {
			t.Errorf("the journal began to open after %d snapshots, want during the wait for Jenkins", n)
		}
		expect(t, "the first snapshot once Jenkins answers", taken)
	})
}
