package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/engine"
	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/runner"
)

// vital names the top-level paths of a Jenkins home whose disappearance
// refuses a snapshot: without them agents cannot reconnect.
var vital = []string{"secrets", "nodes"}

// Sidecar is what the long-running snapshot adds to --once.
type Sidecar struct {
	Listen    string        `envconfig:"HOMESNAP_LISTEN" default:":9090" flag:"listen" desc:"address of /healthz, /readyz, /metrics and POST /snapshot (off: none)"`
	WaitURL   string        `envconfig:"HOMESNAP_FINAL_WAIT_URL" flag:"final-wait-url" desc:"classic sidecars: before the final snapshot, wait until Jenkins stops answering at this URL (e.g. http://127.0.0.1:8080/login)"`
	WaitQuiet time.Duration `envconfig:"HOMESNAP_FINAL_WAIT_QUIET" flag:"final-wait-quiet" desc:"classic sidecars: before the final snapshot, wait until the selected files have not changed for this long"`
	StartURL  string        `envconfig:"HOMESNAP_START_WAIT_URL" flag:"start-wait-url" desc:"when the restore runs inside the Jenkins container (the Jenkins operator), take the first snapshot only once Jenkins answers at this URL (e.g. http://127.0.0.1:8080/login)"`
	LeaseTTL  time.Duration `envconfig:"HOMESNAP_LEASE_TTL" default:"60s" flag:"lease-ttl" desc:"the one-writer lease lasts this long after each renewal (renewed every third of it); another sidecar takes over after it expires"`
}

// sidecar runs snapshots every interval, on SIGUSR1 and on POST /snapshot,
// and a final one when ctx ends (SIGTERM), until the final one is taken.
func sidecar(ctx context.Context, cfg *snapshotConfig, opts engine.SnapshotOptions, once func(context.Context, engine.SnapshotOptions) (*engine.SnapshotResult, error), l *lease.Lease, m *metrics.Metrics, log zerolog.Logger) error {
	opts.Store = l.Fence(opts.Store) // m counts beneath it and the encryption
	r := runner.New(runner.Options{
		Lease:      l,
		RenewEvery: cfg.LeaseTTL / 3,
		OnLease:    m.LeaseHeld,
		Take:       func(ctx context.Context) (*engine.SnapshotResult, error) { return once(ctx, opts) },
		Interval:   cfg.Interval,
		Start:      runner.Start{URL: cfg.StartURL},
		Log:        log,
		Observe:    func(a runner.Attempt) { m.Observe(a.Start, a.End, a.Result, a.Err) },
		Final: runner.Final{
			Timeout: cfg.Grace, WaitURL: cfg.WaitURL, Quiet: cfg.WaitQuiet,
			LastWrite: runner.LastWrite(opts.Home, opts.Selector),
		},
	})
	if cfg.Listen != "" && cfg.Listen != "off" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return usageError{fmt.Errorf("listen on %s (--listen, HOMESNAP_LISTEN): %w", cfg.Listen, err)}
		}
		srv := &http.Server{Handler: runner.Handler(r, m.Handler()), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		log.Info().Str("listen", ln.Addr().String()).Msg("serving /healthz, /readyz, /metrics and POST /snapshot")
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer func() { signal.Stop(usr1); close(usr1) }()
	go func() {
		for range usr1 {
			r.Trigger()
		}
	}()
	return r.Run(ctx)
}
