package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/snapshot"
)

const token = "s3cret-trigger-token-0123456789"

// fixed is a token that never changes.
func fixed(tok string) func() ([]byte, error) {
	return func() ([]byte, error) { return []byte(tok), nil }
}

// syncBuf is a log sink the server's goroutines may write to.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sidecarPort runs a runner (fake clock) behind the real server on a
// loopback port.
type sidecarPort struct {
	clock *fakeClock
	tk    *takes
	r     *Runner
	srv   *Server
	url   string
	log   *syncBuf
}

func servePort(t *testing.T, l Listen, o Options) *sidecarPort {
	t.Helper()
	p := &sidecarPort{clock: newFakeClock(), tk: &takes{calls: make(chan bool, 16)}, log: &syncBuf{}}
	m := metrics.New()
	o.Interval, o.Clock = time.Hour, p.clock
	o.Log = zerolog.New(p.log).Level(zerolog.InfoLevel)
	o.Observe = func(a Attempt) { m.Observe(a.Start, a.End, a.Result, a.Err) }
	if o.Take == nil {
		o.Take = p.tk.take
	}
	p.r = New(o)
	l.Metrics, l.Log = m.Handler(), o.Log
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.srv = Serve(ln, p.r, l)
	t.Cleanup(func() { p.srv.Close() })
	p.url = "http://" + p.srv.Addr().String()
	return p
}

// run starts the runner and waits for its first (scheduled) snapshot.
func (p *sidecarPort) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.r.Run(ctx)
	expect(t, "first snapshot", p.tk.calls)
	<-p.clock.waiting
}

func (p *sidecarPort) do(t *testing.T, method, path, auth string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, p.url+path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func noSnapshot(t *testing.T, p *sidecarPort, why string) {
	t.Helper()
	select {
	case <-p.tk.calls:
		t.Fatalf("a snapshot was taken %s", why)
	case <-time.After(100 * time.Millisecond):
	}
}

// Probes and metrics answer anyone; POST /snapshot only the token's holder.
func TestProbesOpenTriggerNeedsTheToken(t *testing.T) {
	p := servePort(t, Listen{Token: fixed(token)}, Options{})
	p.run(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp, body := p.do(t, "GET", path, ""); resp.StatusCode != 200 {
			t.Errorf("GET %s without a token: %d %s", path, resp.StatusCode, body)
		}
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, token, "Bearer"} {
		resp, body := p.do(t, "POST", "/snapshot", auth)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("POST /snapshot with %q: %d %s, want 401 with WWW-Authenticate", auth, resp.StatusCode, body)
		}
	}
	noSnapshot(t, p, "for an unauthenticated request")
	if resp, body := p.do(t, "POST", "/snapshot", "bearer "+token); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /snapshot with the token: %d %s", resp.StatusCode, body)
	}
	expect(t, "requested snapshot", p.tk.calls)
	p.tk.mu.Lock()
	defer p.tk.mu.Unlock()
	if got := p.tk.triggers[len(p.tk.triggers)-1]; got != "on-demand" {
		t.Errorf("the requested snapshot was taken as %q, want on-demand", got)
	}
	if resp, _ := p.do(t, "GET", "/snapshot", "Bearer "+token); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /snapshot %d, want 405", resp.StatusCode)
	}
}

func TestTriggerOffWithoutAToken(t *testing.T) {
	p := servePort(t, Listen{}, Options{})
	p.run(t)
	for _, auth := range []string{"", "Bearer ", "Bearer anything"} {
		resp, body := p.do(t, "POST", "/snapshot", auth)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "off") {
			t.Errorf("POST /snapshot with %q and no token configured: %d %s, want 403 saying it is off", auth, resp.StatusCode, body)
		}
	}
	noSnapshot(t, p, "with no token configured")
	if resp, _ := p.do(t, "GET", "/healthz", ""); resp.StatusCode != 200 {
		t.Errorf("/healthz %d", resp.StatusCode)
	}
}

// One on-demand snapshot at a time, and DemandSpacing between two.
func TestOnDemandOneAtATimeAndSpaced(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 16)
	take := func(_ context.Context, trigger string, _ *snapshot.ChangeJournal) (*snapshot.Result, error) {
		started <- trigger
		if trigger == "on-demand" {
			<-release
		}
		return &snapshot.Result{ID: "x"}, nil
	}
	p := servePort(t, Listen{Token: fixed(token)}, Options{Take: take, DemandSpacing: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.r.Run(ctx)
	<-started
	<-p.clock.waiting
	post := func() (int, string) {
		resp, _ := p.do(t, "POST", "/snapshot", "Bearer "+token)
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if code, _ := post(); code != http.StatusAccepted {
		t.Fatalf("first request: %d", code)
	}
	if got := <-started; got != "on-demand" {
		t.Fatalf("took %s", got)
	}
	// Running: a second request is refused, and says when to come back.
	if code, retry := post(); code != http.StatusConflict || retry != "60" {
		t.Errorf("request while one runs: %d Retry-After %q, want 409 and 60", code, retry)
	}
	close(release)
	<-p.clock.waiting // the runner is back to waiting
	p.clock.Advance(20 * time.Second)
	if code, retry := post(); code != http.StatusTooManyRequests || retry != "40" {
		t.Errorf("request 20s after the last: %d Retry-After %q, want 429 and 40", code, retry)
	}
	select {
	case got := <-started:
		t.Fatalf("a refused request took a %s snapshot", got)
	case <-time.After(100 * time.Millisecond):
	}
	p.clock.Advance(40 * time.Second)
	if code, _ := post(); code != http.StatusAccepted {
		t.Errorf("request a minute after the last: %d, want 202", code)
	}
	if got := <-started; got != "on-demand" {
		t.Errorf("took %s", got)
	}
}

// A queued request counts as busy, also with no spacing at all.
func TestDemandQueuedIsBusy(t *testing.T) {
	r := New(Options{Interval: time.Hour, Clock: newFakeClock(), Log: zerolog.Nop()})
	if err := r.Demand(); err != nil {
		t.Fatal(err)
	}
	var refused *DemandRefused
	if err := r.Demand(); !errors.As(err, &refused) || !refused.Busy || refused.RetryAfter <= 0 {
		t.Errorf("second Demand while one is queued = %v, want busy with a retry time", err)
	}
}

// Probes are not logged; refused triggers are, once a minute at most and
// never with the token.
func TestRefusalsLoggedRarelyWithoutTheToken(t *testing.T) {
	p := servePort(t, Listen{Token: fixed(token)}, Options{})
	p.run(t)
	before := p.log.String()
	for range 20 {
		p.do(t, "GET", "/healthz", "")
		p.do(t, "GET", "/readyz", "")
		p.do(t, "GET", "/metrics", "")
	}
	if got := p.log.String(); got != before {
		t.Errorf("probes were logged:\n%s", strings.TrimPrefix(got, before))
	}
	for i := range 20 {
		p.do(t, "POST", "/snapshot", fmt.Sprintf("Bearer %s-%d", token, i))
	}
	lines := grep(strings.TrimPrefix(p.log.String(), before), "refused")
	if n := strings.Count(lines, "\n") + 1; lines == "" || n != 1 {
		t.Errorf("20 refused requests logged %d lines, want 1:\n%s", n, lines)
	}
	if strings.Contains(p.log.String(), token) {
		t.Errorf("the log holds a token:\n%s", p.log.String())
	}
	p.clock.Advance(time.Minute)
	p.do(t, "POST", "/snapshot", "")
	if !strings.Contains(p.log.String(), `"refused_since_last_line":19`) {
		t.Errorf("a minute later the log does not count the 19 held back:\n%s", grep(p.log.String(), "refused"))
	}
}

// The server is bounded: header and body sizes, and the connections a
// peer may hold open.
func TestServerBounds(t *testing.T) {
	p := servePort(t, Listen{Token: fixed(token)}, Options{})
	s := p.srv.srv
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("an unbounded setting: read header %v, read %v, write %v, idle %v, max header bytes %d",
			s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
	req, _ := http.NewRequest("GET", p.url+"/healthz", nil)
	req.Header.Set("X-Padding", strings.Repeat("x", 64<<10))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("64 KiB of headers: %d, want 431", resp.StatusCode)
		}
	}
	req, _ = http.NewRequest("POST", p.url+"/snapshot", strings.NewReader(strings.Repeat("x", 1<<20)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 MiB body: %d, want 413", resp.StatusCode)
	}
	noSnapshot(t, p, "for a request with an oversized body")
}

// dial opens a raw connection and, when request is set, sends a keep-alive
// GET and reads its answer, leaving the connection idle.
func dial(t *testing.T, addr string, request bool) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	if request {
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return c, br
}

// closed reports whether the server has closed c, waiting up to 10 s.
func closed(c net.Conn, br *bufio.Reader) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func (p *sidecarPort) open() int {
	p.srv.ln.mu.Lock()
	defer p.srv.ln.mu.Unlock()
	return len(p.srv.ln.open)
}

// waitIdle waits until n connections are idle: the server marks one idle
// just after the client has its answer.
func (p *sidecarPort) waitIdle(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		p.srv.ln.mu.Lock()
		idle := 0
		for _, s := range p.srv.ln.open {
			if s.state == http.StateIdle {
				idle++
			}
		}
		p.srv.ln.mu.Unlock()
		if idle >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("fewer than %d idle connections", n)
}

// At the cap, a new connection takes an idle one's place, so that many
// keep-alive connections cannot lock the probes out.
func TestConnectionCapEvictsIdleConnections(t *testing.T) {
	p := servePort(t, Listen{MaxConns: 4}, Options{})
	addr := p.srv.Addr().String()
	type conn struct {
		c  net.Conn
		br *bufio.Reader
	}
	var idle []conn
	for range 4 {
		c, br := dial(t, addr, true)
		idle = append(idle, conn{c, br})
		p.waitIdle(t, len(idle))
	}
	for range 40 { // each evicts the oldest idle one
		dial(t, addr, true)
		p.waitIdle(t, 4)
		if n := p.open(); n > 4 {
			t.Fatalf("%d connections open, cap 4", n)
		}
	}
	for i, c := range idle {
		if !closed(c.c, c.br) {
			t.Errorf("idle connection %d still open", i)
		}
	}
}

// At the cap with no idle connection to evict, a new one is closed at once.
func TestConnectionCapClosesExcess(t *testing.T) {
	p := servePort(t, Listen{MaxConns: 3}, Options{})
	p.srv.ln.mu.Lock()
	p.srv.ln.silent = time.Hour // the silent connections below stay protected
	p.srv.ln.mu.Unlock()
	addr := p.srv.Addr().String()
	for range 3 {
		dial(t, addr, false)
	}
	for range 3 {
		c, br := dial(t, addr, false)
		if !closed(c, br) {
			t.Error("a connection over the cap stayed open")
		}
	}
	if n := p.open(); n != 3 {
		t.Errorf("%d connections open, want the 3 first", n)
	}
}

// Idle keep-alive and silent connections are closed by the timeouts.
func TestIdleAndSilentConnectionsTimeOut(t *testing.T) {
	p := servePort(t, Listen{IdleTimeout: 100 * time.Millisecond, ReadHeaderTimeout: 100 * time.Millisecond}, Options{})
	addr := p.srv.Addr().String()
	c, br := dial(t, addr, true)
	if !closed(c, br) {
		t.Error("an idle keep-alive connection outlived the idle timeout")
	}
	c, br = dial(t, addr, false)
	if !closed(c, br) {
		t.Error("a connection that sent nothing outlived the read-header timeout")
	}
	for i := 0; p.open() > 0 && i < 100; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if n := p.open(); n != 0 {
		t.Errorf("%d connections still counted after they closed", n)
	}
}
