package runner

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// Final configures the snapshot taken when the pod stops. A native sidecar
// (Kubernetes 1.29+) is stopped after Jenkins has exited, so it needs no
// waiting. A classic sidecar is stopped together with Jenkins: it first
// waits, within Timeout, until Jenkins is gone, so that the snapshot holds
// what Jenkins writes while it shuts down.
type Final struct {
	Timeout time.Duration // for the waiting and the snapshot together
	// WaitURL is Jenkins' HTTP endpoint; the wait ends when it stops
	// answering (any answer, even an error status, means Jenkins runs).
	WaitURL string
	// Quiet is how long the home must go without writes; LastWrite
	// reports the newest change.
	Quiet     time.Duration
	LastWrite func(ctx context.Context) (time.Time, error)
	Poll      time.Duration // 0 means 500ms
}

// waitForJenkins returns when Jenkins is gone and the home is quiet, or when
// ctx ends (then the final snapshot is taken anyway: a snapshot missing the
// last seconds beats none).
func (f Final) waitForJenkins(ctx context.Context, clock Clock, log zerolog.Logger) {
	poll := f.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-clock.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if f.WaitURL != "" {
		// A Jenkins too busy to answer within a second is taken as gone.
		client := &http.Client{Timeout: max(poll, time.Second)}
		for answers(ctx, client, f.WaitURL) {
			if !sleep(poll) {
				log.Warn().Str("url", store.Redact(f.WaitURL)).Msg("Jenkins still answers at the deadline; taking the final snapshot anyway")
				return
			}
		}
		log.Info().Str("url", store.Redact(f.WaitURL)).Msg("Jenkins has stopped answering")
	}
	if f.Quiet > 0 && f.LastWrite != nil {
		for {
			last, err := f.LastWrite(ctx)
			if err != nil {
				log.Warn().Err(err).Msg("cannot tell when the home was last written; taking the final snapshot now")
				return
			}
			idle := clock.Now().Sub(last)
			if idle >= f.Quiet {
				log.Info().Dur("quiet_for", idle).Msg("the home is quiet")
				return
			}
			if !sleep(min(f.Quiet-idle, poll)) {
				log.Warn().Time("last_write", last).Msg("the home is still being written at the deadline; taking the final snapshot anyway")
				return
			}
		}
	}
}

func answers(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// LastWrite returns a function reporting the newest modification or status
// change among the selected paths of home: a stat walk, the cost of a
// snapshot that finds nothing changed.
func LastWrite(home *homefs.Home, sel *selector.Selector) func(ctx context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		var newest int64
		err := scan.Walk(ctx, home, sel, func(string, string) {}, func(e *archive.Entry) error {
			newest = max(newest, e.MTime, e.CTime)
			return nil
		})
		return time.Unix(0, newest), err
	}
}
