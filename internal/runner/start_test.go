package runner

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/snapshot"
)

// TestFirstSnapshotWaitsForJenkins: with a start URL, nothing is taken while
// Jenkins does not answer (its container is still restoring); the first
// snapshot follows its first answer, even a 503 while it loads.
func TestFirstSnapshotWaitsForJenkins(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens yet: the restore is running
	var up atomic.Bool
	taken := make(chan bool, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := newFakeClock()
	r := New(Options{
		Interval: time.Hour, Log: zerolog.Nop(), Clock: clock,
		Take: func(context.Context, string, *snapshot.ChangeJournal) (*snapshot.Result, error) {
			taken <- up.Load()
			return &snapshot.Result{}, nil
		},
		Start: Start{URL: "http://" + addr + "/login", Poll: time.Second},
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	// Each wait on the clock follows a poll that found no Jenkins; the
	// runner is parked there, so what it took so far is all it took.
	for poll := range 3 {
		<-clock.waiting
		select {
		case <-taken:
			t.Fatalf("a snapshot was taken before Jenkins answered (after %d polls)", poll+1)
		default:
		}
		clock.Advance(time.Second)
	}
	<-clock.waiting
	jenkins := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Jenkins is getting ready to work", http.StatusServiceUnavailable)
	}))
	if jenkins.Listener, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	up.Store(true)
	jenkins.Start()
	defer jenkins.Close()
	clock.Advance(time.Second)
	if !expect(t, "first snapshot after Jenkins answered", taken) {
		t.Error("the first snapshot ran before Jenkins answered")
	}
	cancel()
	<-done
}

// TestNoSnapshotWhenJenkinsNeverStarted: stopped while waiting (the restore
// failed, the pod is deleted), the runner takes no final snapshot, which
// would record the unrestored home as the newest state.
func TestNoSnapshotWhenJenkinsNeverStarted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var calls atomic.Int32
	r := New(Options{
		Interval: time.Hour, Log: zerolog.Nop(),
		Take: func(context.Context, string, *snapshot.ChangeJournal) (*snapshot.Result, error) {
			calls.Add(1)
			return &snapshot.Result{}, nil
		},
		Final: Final{Timeout: time.Second},
		Start: Start{URL: "http://" + addr + "/login", Poll: 10 * time.Millisecond},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v, want nil (nothing to save)", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d snapshots taken although Jenkins never answered", n)
	}
}

// TestWaitURLsAreLoggedWithoutCredentials: a start URL may carry basic-auth
// credentials or a token in its query; the log names its host only.
func TestWaitURLsAreLoggedWithoutCredentials(t *testing.T) {
	jenkins := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer jenkins.Close()
	var logged syncBuf
	taken := make(chan bool, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := strings.TrimPrefix(jenkins.URL, "http://")
	r := New(Options{
		Interval: time.Hour, Log: zerolog.New(&logged),
		Take: func(context.Context, string, *snapshot.ChangeJournal) (*snapshot.Result, error) {
			taken <- true
			return &snapshot.Result{}, nil
		},
		Start: Start{URL: "http://admin:canary-password@" + host + "/login?token=canary-token", Poll: 10 * time.Millisecond},
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	expect(t, "first snapshot", taken)
	cancel()
	<-done
	out := logged.String()
	if strings.Contains(out, "canary") {
		t.Errorf("the log holds the start URL's credentials:\n%s", out)
	}
	if !strings.Contains(out, host) {
		t.Errorf("the log does not name the start URL's host %s:\n%s", host, out)
	}
}
