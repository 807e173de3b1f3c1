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
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/homefs"
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
	var token func() ([]byte, error)
	if cfg.Listen != "" && cfg.Listen != "off" {
		var err error
		if token, err = cfg.Sidecar.tokenSource(log); err != nil {
			return err
		}
	}
	openJournal, err := cfg.journalOpener(opts, m, log)
	if err != nil {
		return err
	}
	var own string // the snapshot this sidecar committed last: its home's, whatever the mark says
	r := runner.New(runner.Options{
		Lease:      l,
		RenewEvery: cfg.LeaseTTL / 3,
		OnLease:    m.LeaseHeld,
		Take: func(ctx context.Context, trigger string, j *snapshot.ChangeJournal) (*snapshot.Result, error) {
			o := opts
			o.Trigger, o.ChangeJournal, o.OwnCommitted = trigger, j, own
			res, err := once(ctx, o)
			if err == nil && !res.Unchanged {
				own = res.ID
			}
			return res, err
		},
		OpenJournal:   openJournal,
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

// journalOpenDelay names the test hook that slows the change journal's
// open down, as a home of a million files does (about a minute): tests,
// in a cluster too, show that nothing waits for it. Not for production.
const journalOpenDelay = "HOMESNAP_TEST_JOURNAL_OPEN_DELAY"

// journalOpener returns what opens the change journal for the runner,
// which runs it beside the port and the snapshots; nil with --journal=off.
func (c *snapshotConfig) journalOpener(opts snapshot.Options, m *metrics.Metrics, log zerolog.Logger) (func() (*snapshot.ChangeJournal, error), error) {
	if c.Journal != "auto" {
		m.JournalState(metrics.JournalOff)
		return nil, nil
	}
	var delay time.Duration
	if v := os.Getenv(journalOpenDelay); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, usageError{fmt.Errorf("%s=%q: want a duration such as 90s (a test hook: unset it)", journalOpenDelay, v)}
		}
		log.Warn().Dur("delay", d).Msg(journalOpenDelay + " is set: the change journal opens that much later (a test hook)")
		delay = d
	}
	// The runner does not wait for an open under way when it stops, so the
	// open may outlive the command's home: it gets a descriptor of its own.
	own, err := opts.Home.Dir.Reopen()
	if err != nil {
		return nil, fmt.Errorf("open home %s: %w", opts.Home.Path, err)
	}
	m.JournalState(metrics.JournalOpening)
	return func() (*snapshot.ChangeJournal, error) {
		defer own.Close() // the journal keeps one of its own
		opening := time.Now()
		log.Info().Msg("opening the change journal; snapshots walk the whole home until it is open")
		time.Sleep(delay)
		// The open usually follows the first snapshot (runner.Options),
		// whose garbage the heap still holds; the listings and watches it
		// allocates (~45 bytes a watch, 300,000 at a million files) would
		// come on top of it (BENCHMARKS.md: the open after the first
		// snapshot).
		debug.FreeOSMemory()
		j, err := snapshot.OpenChangeJournal(&homefs.Home{Dir: own, Path: opts.Home.Path}, opts.Selector, c.JournalVerify)
		if err != nil {
			m.JournalState(metrics.JournalOff)
			log.Warn().Err(err).Msg("no change journal: every snapshot walks the whole home")
			return nil, err
		}
		m.JournalState(metrics.JournalOn)
		log.Info().Int("watches", j.Watches()).Dur("opened_in", time.Since(opening)).Dur("verify_interval", c.JournalVerify).Msg("change journal on: snapshots read only what changed")
		if limit := makeRoom(j.HeldBytes()); limit > 0 {
			log.Info().Int64("memory_limit_mib", limit>>20).Int("watches", j.Watches()).Msg("the soft memory limit is raised to keep a snapshot's room beside the change journal's watches (GOMEMLIMIT sets it)")
		}
		return j, nil
	}, nil
}

// minTokenLen refuses tokens short enough to guess.
const minTokenLen = 16

// maxTokenFile bounds what is read of the token's file.
const maxTokenFile = 4 << 10

// token is POST /snapshot's bearer token, from the file or the variable;
// nil when neither is set. Surrounding white space (a file's final
// newline) is not part of it.
func (c *Sidecar) token() ([]byte, error) {
	switch {
	case c.TokenFile != "" && c.Token != "":
		return nil, usageError{errors.New("the trigger token is set twice (--trigger-token-file/HOMESNAP_TRIGGER_TOKEN_FILE and HOMESNAP_TRIGGER_TOKEN): keep one")}
	case c.TokenFile != "":
		tok, err := readToken(c.TokenFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("%w (--trigger-token-file/HOMESNAP_TRIGGER_TOKEN_FILE)", err)}
		}
		return tok, nil
	case c.Token != "":
		tok, err := checkToken([]byte(c.Token))
		if err != nil {
			return nil, usageError{fmt.Errorf("%w (HOMESNAP_TRIGGER_TOKEN)", err)}
		}
		return tok, nil
	}
	return nil, nil
}

// tokenSource is what the listener asks for the token at every POST
// /snapshot: a token file is read again whenever it changed (a Secret's
// update), and one that turns unreadable or invalid refuses every request
// until it is fixed. A bad token at start is a usage error.
func (c *Sidecar) tokenSource(log zerolog.Logger) (func() ([]byte, error), error) {
	seen, _ := os.Stat(c.TokenFile) // before the read: a change between is read again
	tok, err := c.token()
	if err != nil || tok == nil {
		return nil, err
	}
	if c.TokenFile == "" {
		return func() ([]byte, error) { return tok, nil }, nil
	}
	f := &tokenFile{path: c.TokenFile, log: log, seen: seen, tok: tok}
	return f.get, nil
}

// tokenFile follows the trigger token's file. The kubelet updates a
// mounted Secret by pointing the symbolic link ..data at a new directory:
// the file's path then names another inode.
type tokenFile struct {
	path string
	log  zerolog.Logger

	mu   sync.Mutex
	seen os.FileInfo // the version tok came from; nil: read again
	tok  []byte
	err  error // why the last read failed
}

func (f *tokenFile) get() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err == nil && f.seen != nil && os.SameFile(fi, f.seen) && fi.ModTime().Equal(f.seen.ModTime()) && fi.Size() == f.seen.Size() {
		return f.tok, nil
	}
	tok, rerr := readToken(f.path)
	if err != nil {
		rerr = fmt.Errorf("trigger token: %w", err)
	}
	if rerr != nil { // fail closed, and read again at the next request
		if f.err == nil || f.err.Error() != rerr.Error() { // once per change, not per request
			f.log.Error().Err(rerr).Str("file", f.path).Msg("the trigger token's file changed and cannot be used: POST /snapshot is refused until it is fixed")
		}
		f.seen, f.tok, f.err = nil, nil, rerr
		return nil, rerr
	}
	if f.err != nil || !bytes.Equal(tok, f.tok) {
		f.log.Info().Str("file", f.path).Msg("the trigger token's file changed: POST /snapshot takes the new token")
	}
	f.seen, f.tok, f.err = fi, tok, nil
	return tok, nil
}

// readToken reads a token file: at most maxTokenFile bytes, one token.
func readToken(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trigger token: %w", err)
	}
	defer f.Close()
	tok, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("trigger token: read %s: %w", path, err)
	}
	if len(tok) > maxTokenFile {
		return nil, fmt.Errorf("trigger token file %s is over 4 KiB: point it at the token alone", path)
	}
	return checkToken(tok)
}

// checkToken trims a token and refuses one that is short or not one word.
func checkToken(tok []byte) ([]byte, error) {
	tok = bytes.TrimSpace(tok)
	if len(tok) < minTokenLen || bytes.ContainsAny(tok, " \t\r\n") {
		return nil, fmt.Errorf("the trigger token must be at least %d characters on one line without spaces: generate one with `openssl rand -hex 32`", minTokenLen)
	}
	return tok, nil
}

func (c *Sidecar) validate() error {
	if c.ListenMax <= 0 {
		return usageError{fmt.Errorf("--listen-max-connections/HOMESNAP_LISTEN_MAX_CONNECTIONS %d: must be positive", c.ListenMax)}
	}
	return nonNegative("--trigger-min-interval/HOMESNAP_TRIGGER_MIN_INTERVAL", c.TriggerGap, "0 means no spacing")
}
