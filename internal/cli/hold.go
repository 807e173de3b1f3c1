package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/store"
)

// underLease runs fn as the store's one writer, as every command that
// writes to a store does (one writer per store prefix): it takes the lease,
// or refuses at once naming who holds it (hint says what to do instead);
// renews it every third of ttl while fn runs, however long that takes;
// ends fn's context when another process took it over; and gives it up
// afterwards. fn writes through stores wrapped with fence, so that a lost
// lease stops it before it moves the head or deletes anything.
func underLease(ctx context.Context, st store.Store, ttl time.Duration, what, hint string, log zerolog.Logger, fn func(ctx context.Context, fence func(store.Store) store.Store) error) error {
	l := lease.New(st, lease.Me(), ttl, nil)
	if err := l.Acquire(ctx); err != nil {
		var held *lease.HeldError
		if !errors.As(err, &held) { // not another writer: the store (or the deadline) failed
			log.Error().Err(err).Str("store", st.String()).Msg(what + " failed: cannot take the store's lease")
			return reported{err}
		}
		log.Error().Err(err).Str("store", st.String()).Msg(what + " refused: " + hint)
		return reported{err}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var renewing sync.WaitGroup
	stop := make(chan struct{})
	renewing.Go(func() {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			err := l.Acquire(ctx)
			var held *lease.HeldError
			switch {
			case errors.Is(err, lease.ErrLost), errors.As(err, &held):
				log.Error().Err(err).Str("store", st.String()).Msg(what + " stopped: the store's lease was taken over")
				cancel(err)
				return
			case err != nil && ctx.Err() == nil:
				// Retried at the next tick; the fence refuses the head
				// move if the lease expires meanwhile.
				log.Warn().Err(err).Str("store", st.String()).Msg("could not renew the store's lease")
			}
		}
	})
	defer func() {
		close(stop)
		renewing.Wait() // no renewal may follow the release
		cancel(nil)
		// Bounded: a store that is gone must not hold the exit up (a
		// --timeout is a promise), and an unreleased lease expires on its
		// own; two seconds give a dropped connection a few retries.
		rctx, done := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer done()
		l.Release(rctx)
	}()
	err := fn(ctx, l.Fence)
	if cause := context.Cause(ctx); err != nil && cause != nil && cause != ctx.Err() {
		err = fmt.Errorf("%w: %w", cause, err) // the lease was lost
	}
	return err
}
