package restore

import (
	"sync"
	"sync/atomic"
)

// writebackEvery is how many staged bytes start the next early writeback.
const writebackEvery = 64 << 20

// writeback has the kernel write staged files to disk while the restore
// still decodes and writes the next ones. The kernel starts on its own
// only once dirty pages pass a share of memory (10 % by default, gigabytes
// here), so a restore smaller than that would otherwise leave every byte
// to the final syncfs, with the CPUs idle while the disk catches up. The
// final syncfs still decides durability; these only move the writing
// earlier, one at a time.
type writeback struct {
	fd      int         // the staging tree's
	every   int64       // staged bytes between writebacks
	done    func(error) // told of each writeback's end (tests); may be nil
	pending atomic.Int64
	running atomic.Bool
	wg      sync.WaitGroup
}

// wrote counts n staged bytes, starting a writeback when enough are
// pending and none is running.
func (w *writeback) wrote(n int64) {
	if w == nil || w.pending.Add(n) < w.every || !w.running.CompareAndSwap(false, true) {
		return
	}
	w.pending.Store(0)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.running.Store(false)
		err := syncFS(w.fd) // an error shows again in the final syncfs, which is checked
		if w.done != nil {
			w.done(err)
		}
	}()
}

// wait returns once no writeback runs, before the descriptor is closed.
func (w *writeback) wait() {
	if w != nil {
		w.wg.Wait()
	}
}
