package runner

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// The listener's defaults. Anything in the cluster can reach the port, so
// every connection is bounded in time and in number. Its legitimate
// clients are few and quick: the kubelet's probes, one Prometheus, and
// whoever holds the trigger token.
const (
	DefaultMaxConns          = 64
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 15 * time.Second
	// DefaultIdleTimeout keeps a scraper's connection across the usual
	// 15-30 s scrape interval, and no longer.
	DefaultIdleTimeout = 30 * time.Second
	maxHeaderBytes     = 8 << 10
	maxBodyBytes       = 4 << 10 // no endpoint takes a body
)

// Listen configures the sidecar's port. Zero values take the defaults.
type Listen struct {
	// Token returns the bearer token POST /snapshot requires, asked at
	// every request so that a rotated Secret takes effect at once; nil:
	// on-demand snapshots over HTTP are off. While it fails, every request
	// is refused (never let through).
	Token   func() ([]byte, error)
	Metrics http.Handler // nil: no /metrics
	Log     zerolog.Logger
	// MaxConns caps the open connections; at the cap, an idle (or silent)
	// connection is closed to make room, or else the new one is.
	MaxConns int
	// Timeouts; tests shorten them.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// Server serves the sidecar's port.
type Server struct {
	srv *http.Server
	ln  *connLimit
}

// Serve serves ln in the background until Close.
func Serve(ln net.Listener, r *Runner, l Listen) *Server {
	cl := &connLimit{Listener: ln, max: cmpOr(l.MaxConns, DefaultMaxConns), silent: silentFor, open: map[*limitedConn]connState{}}
	srv := &http.Server{
		Handler:           Handler(r, l),
		ReadHeaderTimeout: cmpOr(l.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       cmpOr(l.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      cmpOr(l.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       cmpOr(l.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         cl.track,
		// What the server would print (a client's bad TLS, a broken
		// connection) is a peer's doing: debug, never info.
		ErrorLog: stdLogger(l.Log),
	}
	go srv.Serve(cl)
	return &Server{srv: srv, ln: cl}
}

// Addr is where the server listens.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server and closes every connection.
func (s *Server) Close() error { return s.srv.Close() }

func cmpOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Handler serves the sidecar's port: /healthz (the process is alive),
// /readyz (the last snapshot succeeded, recently) and, when l.Metrics is
// set, /metrics, open to every client, as the kubelet and Prometheus need;
// and POST /snapshot (take one now), only with l.Token. The probes answer
// status only, never an error's text: anyone can read them. Nothing is
// logged per probe.
func Handler(r *Runner, l Listen) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		s := r.Status()
		if !s.Ready {
			http.Error(w, "not ready: "+s.Reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("POST /snapshot", &trigger{r: r, token: l.Token, log: l.Log, refusals: &logLimit{every: time.Minute, clock: r.o.Clock}})
	if l.Metrics != nil {
		mux.Handle("GET /metrics", l.Metrics)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.ContentLength > maxBodyBytes {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		req.Body = http.MaxBytesReader(w, req.Body, maxBodyBytes)
		mux.ServeHTTP(w, req)
	})
}

// trigger is POST /snapshot.
type trigger struct {
	r        *Runner
	token    func() ([]byte, error)
	log      zerolog.Logger
	refusals *logLimit
}

func (t *trigger) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if t.token == nil {
		t.refuse(req, "on-demand snapshots are off (no trigger token is configured)")
		http.Error(w, "on-demand snapshots are off: this sidecar has no trigger token configured", http.StatusForbidden)
		return
	}
	want, err := t.token()
	if err == nil && len(want) == 0 {
		err = errors.New("it is empty")
	}
	if err != nil { // fail closed
		t.refuse(req, "the trigger token cannot be used: "+err.Error())
		http.Error(w, "on-demand snapshots are unavailable: the trigger token cannot be read (the sidecar's log says why)", http.StatusServiceUnavailable)
		return
	}
	if !authorized(req, want) {
		t.refuse(req, "no or wrong bearer token")
		w.Header().Set("WWW-Authenticate", `Bearer realm="homesnap"`)
		http.Error(w, "a valid bearer token is required (Authorization: Bearer <token>)", http.StatusUnauthorized)
		return
	}
	var refused *DemandRefused
	switch err := t.r.Demand(); {
	case errors.As(err, &refused):
		t.refuse(req, err.Error())
		w.Header().Set("Retry-After", strconv.Itoa(refused.Seconds()))
		code := http.StatusTooManyRequests
		if refused.Busy {
			code = http.StatusConflict
		}
		http.Error(w, err.Error(), code)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		t.log.Info().Str("remote", req.RemoteAddr).Msg("POST /snapshot accepted") // spaced apart: no flood
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, "snapshot requested")
	}
}

// authorized compares the request's bearer token with want in constant
// time; the digests hide want's length from the timing.
func authorized(req *http.Request, want []byte) bool {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got, exp := sha256.Sum256([]byte(strings.TrimSpace(token))), sha256.Sum256(want)
	return subtle.ConstantTimeCompare(got[:], exp[:]) == 1
}

// refuse logs a refused request, at most once per period: a flood of
// requests must not flood the log. The token is never logged.
func (t *trigger) refuse(req *http.Request, why string) {
	if n, ok := t.refusals.allow(); ok {
		t.log.Warn().Str("remote", req.RemoteAddr).Str("why", why).Int("refused_since_last_line", n).
			Msg("refused POST /snapshot")
	}
}

// logLimit lets one line through per period and counts the others.
type logLimit struct {
	every time.Duration
	clock Clock

	mu         sync.Mutex
	next       time.Time
	suppressed int
}

// allow reports whether a line may be logged now, and how many were held
// back since the last.
func (l *logLimit) allow() (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if now.Before(l.next) {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.next, l.suppressed = now.Add(l.every), 0
	return n, true
}
