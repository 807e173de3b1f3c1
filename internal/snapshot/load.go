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

// load reads the job's small new files into j.data. An error is kept in
// j.err for the job's worker to report in order.
func (s *snapshotter) load(ctx context.Context, j *job) {
	for i := range j.items {
		it := &j.items[i]
		if !loadable(it) {
			continue
		}
		if err := ctx.Err(); err != nil {
			j.err = err
			return
		}
		if j.data == nil {
			j.data = s.loads.Get(j.loads)
		}
		if j.err = s.loadFile(j, it); j.err != nil {
			return
		}
	}
}

// loadable: a loader reads it ahead (a small file the snapshot writes).
func loadable(it *item) bool {
	return it.write && !it.fromStore && it.e.Type == archive.TypeFile && it.e.Size <= readChunk
}

func (s *snapshotter) loadFile(j *job, it *item) error {
	f, err := s.openItem(it)
	if f == nil {
		return err
	}
	defer f.Close()
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
