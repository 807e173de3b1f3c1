package cli

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/store"
)

// holdLease makes this one-shot command the store's one writer: it takes
// the lease (refused, logged with refused, while another process holds
// it), keeps it renewed while the command works, however long that takes,
// and release gives it back. Writes go through l.Fence.
func holdLease(ctx context.Context, st store.Store, ttl time.Duration, log zerolog.Logger, refused string) (l *lease.Lease, release func(), err error) {
	l = lease.New(st, lease.Me(), ttl, nil)
	if err := l.Acquire(ctx); err != nil {
		log.Error().Err(err).Str("store", st.String()).Msg(refused)
		return nil, nil, reported{err}
	}
	kctx, stop := context.WithCancel(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		l.Keep(kctx, func(err error) {
			log.Warn().Err(err).Str("store", st.String()).Msg("could not renew the store's lease; the head will not move if it is lost")
		})
	}()
	return l, func() {
		stop()
		<-kept
		// Bounded: a store that is gone must not hold the exit up, and an
		// unreleased lease expires on its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		l.Release(rctx)
	}, nil
}
