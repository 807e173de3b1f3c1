package runner

import (
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// connLimit caps the open connections of an http.Server. At the cap, a
// new connection takes the place of the connection that has been idle (or
// silent since it opened) longest; when there is none, it is closed at
// once. Closing beats blocking in Accept: a blocked Accept leaves clients
// queued in the kernel, where a probe waits out its timeout behind the
// flood and, once the queue is full, SYNs are dropped and clients hang; a
// closed connection tells the client at once and costs the sidecar
// nothing. Evicting idle connections first means that a peer holding many
// keep-alive connections cannot lock the kubelet's probes out: to hold the
// port it has to keep every connection busy, and the server's timeouts
// bound each request.
type connLimit struct {
	net.Listener
	max    int
	silent time.Duration // see silentFor

	mu   sync.Mutex
	open map[*limitedConn]connState
}

type connState struct {
	state http.ConnState
	since time.Time
}

// silentFor is how long a new connection may stay without a request
// before it may be evicted: legitimate clients send theirs at once.
const silentFor = time.Second

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.open) >= l.max && !l.evict() {
			l.mu.Unlock()
			c.Close()
			continue
		}
		lc := &limitedConn{Conn: c, l: l}
		l.open[lc] = connState{http.StateNew, time.Now()}
		l.mu.Unlock()
		return lc, nil
	}
}

// evict closes the connection idle or silent longest, if any; l.mu is held.
func (l *connLimit) evict() bool {
	var victim *limitedConn
	var since time.Time
	now := time.Now()
	for c, s := range l.open {
		idle := s.state == http.StateIdle || s.state == http.StateNew && now.Sub(s.since) >= l.silent
		if idle && (victim == nil || s.since.Before(since)) {
			victim, since = c, s.since
		}
	}
	if victim == nil {
		return false
	}
	delete(l.open, victim)
	victim.Conn.Close() // the server sees it fail and lets it go
	return true
}

// track is the server's ConnState hook.
func (l *connLimit) track(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.open[lc]; open && state != http.StateClosed && state != http.StateHijacked {
		l.open[lc] = connState{state, time.Now()}
	}
}

// limitedConn gives its place back when closed.
type limitedConn struct {
	net.Conn
	l *connLimit
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.open, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// stdLogger turns what net/http prints into debug lines.
func stdLogger(l zerolog.Logger) *log.Logger {
	return log.New(debugWriter{l}, "", 0)
}

type debugWriter struct{ l zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.l.Debug().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
