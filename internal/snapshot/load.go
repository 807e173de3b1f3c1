package snapshot

import (
	"context"
	"slices"

	"github.com/homesnap/homesnap/internal/archive"
)

// With a cold cache every small file is a wait on the disk, and a worker
// that reads its own files leaves its CPU idle at each wait. So a few
// loaders read the small files of the next jobs into memory while the
// workers hash, tar and compress the jobs before them: the disk has several
// reads in flight and the CPUs have work. Larger files are streamed by the
// workers, where the kernel's readahead keeps the disk busy.
const (
	loaders = 4
	// readChunk is the most a worker reads and writes at once, and so the
	// largest file a loader reads ahead (a frame may run over its size by
	// one chunk).
	readChunk = 256 << 10
)

// loadSize is the room a job's loaded bytes need: at most a frame of new
// bytes and the last file that crossed it.
const loadSize = archive.FrameSize + readChunk

// readAhead is how many of a job's small files a loader has opened and
// asked the kernel for (posix_fadvise WILLNEED) before it reads them: with
// a cold cache the reads of a loader's next files are then in flight while
// it waits for the first, rather than one at a time.
const readAhead = 64

// opened is a file a loader has asked the kernel for, not yet read.
type opened struct {
	it *item
	f  *regularFile
}

// load reads the job's small new files into j.data. An error is kept in
// j.err for the job's worker to report in order.
func (s *snapshotter) load(ctx context.Context, j *job) {
	var ahead []opened // a window, oldest first
	defer func() {
		for _, o := range ahead {
			o.f.Close()
		}
	}()
	next := 0
	for {
		for ; next < len(j.items) && len(ahead) < readAhead; next++ {
			it := &j.items[next]
			if !loadable(it) {
				continue
			}
			if err := ctx.Err(); err != nil {
				j.err = err
				return
			}
			f, err := s.openItem(it)
			if err != nil {
				j.err = err
				return
			}
			if f != nil {
				f.willNeed(it.e.Size)
				ahead = append(ahead, opened{it, f})
			}
		}
		if len(ahead) == 0 {
			return
		}
		o := ahead[0]
		ahead = ahead[1:]
		if j.data == nil {
			j.data = s.loads.Get(j.loads)
		}
		j.err = s.loadFile(j, o.it, o.f)
		o.f.Close()
		if j.err != nil {
			return
		}
	}
}

// loadable: a loader reads it ahead (a small file the snapshot writes).
func loadable(it *item) bool {
	return it.write && !it.fromStore && it.e.Type == archive.TypeFile && it.e.Size <= readChunk
}

// loadFile reads the opened file of it into j.data.
func (s *snapshotter) loadFile(j *job, it *item, f *regularFile) error {
	size := int(it.e.Size) // as of the open: it may have grown since the walk
	if size > readChunk {
		return nil // the worker streams it
	}
	it.at = len(j.data)
	// Not zeroed: readContent fills every byte (zeros where the file
	// shrank), and clearing a million small buffers costs a CPU second.
	j.data = slices.Grow(j.data, size)[:it.at+size]
	if err := s.readContent(f, it.e, j.data[it.at:], func([]byte) error { return nil }); err != nil {
		return err
	}
	it.loaded = true
	return nil
}

// releaseLoad returns a processed job's buffer for reuse.
func (s *snapshotter) releaseLoad(j *job) {
	if j.data != nil {
		s.loads.Put(j.data)
		j.data = nil
	}
}
