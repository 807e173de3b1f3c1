package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/runner"
	"github.com/homesnap/homesnap/internal/snapshot"
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

	// Anything in the cluster can reach --listen: POST /snapshot needs the
	// trigger token (off without one), and connections are capped.
	ListenMax int `envconfig:"HOMESNAP_LISTEN_MAX_CONNECTIONS" default:"64" flag:"listen-max-connections" desc:"connections --listen keeps open at most; at the cap a new one replaces an idle one, or is closed"`
	// The trigger token: POST /snapshot is off without one.
	TokenFile  string        `envconfig:"HOMESNAP_TRIGGER_TOKEN_FILE" flag:"trigger-token-file" desc:"file holding the bearer token POST /snapshot requires (a mounted Secret); without a token, POST /snapshot is off"`
	Token      string        `envconfig:"HOMESNAP_TRIGGER_TOKEN" desc:"the bearer token POST /snapshot requires, when not in a file"`
	TriggerGap time.Duration `envconfig:"HOMESNAP_TRIGGER_MIN_INTERVAL" default:"1m" flag:"trigger-min-interval" desc:"least time between two snapshots asked for with POST /snapshot; sooner requests get 429 and Retry-After (0: no spacing; still one at a time)"`

	Journal       string        `envconfig:"HOMESNAP_JOURNAL" default:"auto" flag:"journal" desc:"auto: the sidecar follows changes with inotify and each snapshot reads only what changed (a full walk when the watches do not fit or an interval cannot be vouched for); off: every snapshot walks the whole home"`
	JournalVerify time.Duration `envconfig:"HOMESNAP_JOURNAL_VERIFY_INTERVAL" default:"1h" flag:"journal-verify-interval" desc:"with the journal, walk the whole home this often and compare with what the journal gave; differences are logged and counted, and the walk's result is stored (0: never)"`
}

// sidecar runs snapshots every interval, on SIGUSR1 and on POST /snapshot,
// and a final one when ctx ends (SIGTERM), until the final one is taken.
func sidecar(ctx context.Context, cfg *snapshotConfig, opts snapshot.Options, once func(context.Context, snapshot.Options) (*snapshot.Result, error), l *lease.Lease, m *metrics.Metrics, log zerolog.Logger) error {
	opts.Store = l.Fence(opts.Store) // m counts beneath it and the encryption
	m.Interval(cfg.Interval)
	m.StoreAuthenticated(opts.Authenticated)
	if cfg.Journal == "auto" {
		opening := time.Now()
		if j, err := snapshot.OpenJournal(opts.Home, opts.Selector, cfg.JournalVerify); err != nil {
			log.Warn().Err(err).Msg("no change journal: every snapshot walks the whole home")
		} else {
			defer j.Close()
			opts.Journal = j
			log.Info().Int("watches", j.Watches()).Dur("opened_in", time.Since(opening)).Dur("verify_interval", cfg.JournalVerify).Msg("change journal on: snapshots read only what changed")
		}
	}
	r := runner.New(runner.Options{
		Lease:      l,
		RenewEvery: cfg.LeaseTTL / 3,
		OnLease:    m.LeaseHeld,
		Take: func(ctx context.Context, trigger string) (*snapshot.Result, error) {
			o := opts
			o.Trigger = trigger
			return once(ctx, o)
		},
		Interval:      cfg.Interval,
		DemandSpacing: cfg.TriggerGap,
		Start:         runner.Start{URL: cfg.StartURL},
		Log:           log,
		Observe:       func(a runner.Attempt) { m.Observe(a.Start, a.End, a.Result, a.Err) },
		Final: runner.Final{
			Timeout: cfg.Grace, WaitURL: cfg.WaitURL, Quiet: cfg.WaitQuiet,
			LastWrite: runner.LastWrite(opts.Home, opts.Selector),
		},
	})
	if cfg.Listen != "" && cfg.Listen != "off" {
		token, err := cfg.Sidecar.token()
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return usageError{fmt.Errorf("listen on %s (--listen, HOMESNAP_LISTEN): %w", cfg.Listen, err)}
		}
		srv := runner.Serve(ln, r, runner.Listen{Token: token, Metrics: m.Handler(), Log: log, MaxConns: cfg.ListenMax})
		defer srv.Close()
		trigger := "POST /snapshot with the trigger token"
		if token == nil {
			trigger = "POST /snapshot is off (no --trigger-token-file or HOMESNAP_TRIGGER_TOKEN)"
		}
		log.Info().Str("listen", ln.Addr().String()).Str("on_demand", trigger).Msg("serving /healthz, /readyz, /metrics and POST /snapshot")
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

// minTokenLen refuses tokens short enough to guess.
const minTokenLen = 16

// token is POST /snapshot's bearer token, from the file or the variable;
// nil when neither is set. Surrounding white space (a file's final
// newline) is not part of it.
func (c *Sidecar) token() ([]byte, error) {
	var tok []byte
	switch {
	case c.TokenFile != "" && c.Token != "":
		return nil, usageError{errors.New("the trigger token is set twice (--trigger-token-file/HOMESNAP_TRIGGER_TOKEN_FILE and HOMESNAP_TRIGGER_TOKEN): keep one")}
	case c.TokenFile != "":
		f, err := os.Open(c.TokenFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("trigger token (--trigger-token-file/HOMESNAP_TRIGGER_TOKEN_FILE): %w", err)}
		}
		defer f.Close()
		tok, err = io.ReadAll(io.LimitReader(f, 4<<10+1))
		if err != nil {
			return nil, usageError{fmt.Errorf("trigger token (--trigger-token-file/HOMESNAP_TRIGGER_TOKEN_FILE): read %s: %w", c.TokenFile, err)}
		}
		if len(tok) > 4<<10 {
			return nil, usageError{fmt.Errorf("trigger token file %s (--trigger-token-file/HOMESNAP_TRIGGER_TOKEN_FILE) is over 4 KiB: point it at the token alone", c.TokenFile)}
		}
	case c.Token != "":
		tok = []byte(c.Token)
	default:
		return nil, nil
	}
	tok = bytes.TrimSpace(tok)
	if len(tok) < minTokenLen || bytes.ContainsAny(tok, " \t\r\n") {
		return nil, usageError{fmt.Errorf("the trigger token (--trigger-token-file/HOMESNAP_TRIGGER_TOKEN_FILE or HOMESNAP_TRIGGER_TOKEN) must be at least %d characters on one line without spaces: generate one with `openssl rand -hex 32`", minTokenLen)}
	}
	return tok, nil
}

func (c *Sidecar) validate() error {
	if c.ListenMax <= 0 {
		return usageError{fmt.Errorf("--listen-max-connections/HOMESNAP_LISTEN_MAX_CONNECTIONS %d: must be positive", c.ListenMax)}
	}
	return nonNegative("--trigger-min-interval/HOMESNAP_TRIGGER_MIN_INTERVAL", c.TriggerGap, "0 means no spacing")
}
