package runner

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/store"
)

// Start configures what the sidecar waits for before its first snapshot.
// Where the restore runs inside the Jenkins container, in front of the JVM
// (the Jenkins operator's pods have no init containers), the sidecar starts
// beside a home that is still being restored: a snapshot then would record
// a half-restored or empty home. Jenkins answering at URL proves the
// restore is over, since the JVM starts only after it.
type Start struct {
	URL  string        // Jenkins' HTTP endpoint; "" means no wait
	Poll time.Duration // 0 means 1s
}

// wait returns true once Jenkins answers (any status, even 503 while it
// loads), false when ctx ends first.
func (s Start) wait(ctx context.Context, clock Clock, log zerolog.Logger) bool {
	if s.URL == "" {
		return true
	}
	poll := s.Poll
	if poll <= 0 {
		poll = time.Second
	}
	log.Info().Str("url", store.Redact(s.URL)).Msg("waiting for Jenkins to answer (the restore in front of it is over then) before the first snapshot")
	client := &http.Client{Timeout: max(poll, time.Second)}
	for !answers(ctx, client, s.URL) {
		select {
		case <-clock.After(poll):
		case <-ctx.Done():
			return false
		}
	}
	log.Info().Str("url", store.Redact(s.URL)).Msg("Jenkins answers; starting the snapshots")
	return true
}
