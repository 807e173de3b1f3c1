package restore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/homesnap/homesnap/internal/archive"
)

// innerDirs sets the metadata of the directories inside subtrees staged
// whole while the workers still write files elsewhere. A directory's mode
// and mtime are final only once nothing more is created in it: the stager
// queues a directory when it leaves it, with the number of runs started by
// then (every file below it is in one of them), and sets its metadata once
// all those runs are written. The queue is in the order directories are
// left, children before parents. (A second pass over the manifest once
// every file was in did this before, on one core while the other idled: a
// tenth of a medium home's restore.)
type innerDirs struct {
	r     *restorer
	queue []queuedDir

	mu       sync.Mutex
	next     atomic.Int64  // every run numbered below it is written
	written  map[int]bool  // runs written at or above next
	progress chan struct{} // a run was written
}

type queuedDir struct {
	e     *archive.Entry
	after int // the runs numbered below it hold its files
}

// maxQueuedDirs bounds the queue: past it the stager sends its open runs,
// so that a run that stays open (an archive with one file here and there
// in the chain) cannot hold back every directory left after it.
const maxQueuedDirs = 4096

func newInnerDirs(r *restorer) *innerDirs {
	return &innerDirs{r: r, written: map[int]bool{}, progress: make(chan struct{}, 1)}
}

// add queues directory e, whose files are in the runs numbered below after.
func (d *innerDirs) add(e *archive.Entry, after int) {
	d.queue = append(d.queue, queuedDir{e: e, after: after})
}

// full reports whether the queue has reached its bound.
func (d *innerDirs) full() bool { return len(d.queue) >= maxQueuedDirs }

// drain applies what it can until the queue is below its bound, waiting
// for runs to be written; the caller has sent every run the queue waits
// for.
func (d *innerDirs) drain(ctx context.Context) error {
	for {
		if err := d.apply(); err != nil || !d.full() {
			return err
		}
		select {
		case <-d.progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// runWritten records that every file of run seq is written. Workers call
// it, in any order.
func (d *innerDirs) runWritten(seq int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.written[seq] = true
	n := int(d.next.Load())
	for d.written[n] {
		delete(d.written, n)
		n++
	}
	d.next.Store(int64(n))
	select {
	case d.progress <- struct{}{}:
	default:
	}
}

// apply sets the metadata of the queued directories whose runs are all
// written, in queue order.
func (d *innerDirs) apply() error { return d.applyUpTo(int(d.next.Load())) }

// applyAll sets the metadata of every queued directory: the caller knows
// that all runs are written.
func (d *innerDirs) applyAll() error { return d.applyUpTo(math.MaxInt) }

func (d *innerDirs) applyUpTo(next int) error {
	i := 0
	for ; i < len(d.queue) && d.queue[i].after <= next; i++ {
		e := d.queue[i].e
		if err := d.r.setMeta(d.r.tree, e.Path, e, false); err != nil {
			return fmt.Errorf("stage %s: %w", e.Path, err)
		}
	}
	clear(d.queue[:i]) // the entries are no longer needed
	d.queue = d.queue[i:]
	return nil
}
