//go:build linux

package journal

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
)

// prefetchers stat changed paths ahead of a rescan. With a cold cache each
// stat waits on the disk for its inode; the rescan's own stats come one
// after the other, between the parent's entries, so a few stats in flight
// ahead of it take those waits off its path.
const prefetchers = 8

// minPrefetch: below this many changed paths the waits are too few to
// be worth the goroutines.
const minPrefetch = 16

// prefetch stats paths (in walk order) with a few workers and discards
// what it learns: the rescan stats them again, from the cache. It stops
// when ctx ends; the returned func stops it and waits for it.
func prefetch(ctx context.Context, root homefs.Dir, paths []string) (stop func()) {
	if len(paths) < minPrefetch {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	next := make(chan string)
	var wg sync.WaitGroup
	for range prefetchers {
		wg.Go(func() {
			var st unix.Stat_t
			for rel := range next {
				_, _ = scan.Lstat(root, rel, &st) // a warm-up: the rescan's own stat reports what fails
			}
		})
	}
	wg.Go(func() {
		defer close(next)
		for _, p := range paths {
			select {
			case next <- p:
			case <-ctx.Done():
				return
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
