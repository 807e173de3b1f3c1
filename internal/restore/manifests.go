package restore

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// manifestCopies keeps a copy of every manifest object the staging pass
// reads to its end, in the staging directory, and serves later whole reads
// of that object from it. The pass after the fetch (findExtras) runs
// once every archive byte is in, with nothing left to overlap a store's
// round trips and bandwidth with: through 20 ms of latency it cost more
// than a second of a medium home's restore, against a few tenths from the
// local disk. A copy is the object as the
// store below handed it over, authenticated where the store is, and is
// checked again as it is read (fetch.Plan); each is an unlinked file held
// open, so nothing can open it by name and it goes with the restore, and
// the disk, not the memory, holds it.
type manifestCopies struct {
	store.Store
	dir int // the staging directory

	mu    sync.Mutex
	files map[string]*os.File // complete copies, by key
	made  []*os.File          // every file created, closed with the restore
}

func (m *manifestCopies) Unwrap() store.Store { return m.Store }

func newManifestCopies(st store.Store, dir int) *manifestCopies {
	return &manifestCopies{Store: st, dir: dir, files: map[string]*os.File{}}
}

func (m *manifestCopies) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if offset != 0 || length >= 0 || !repo.IsManifestKey(key) {
		return m.Store.Get(ctx, key, offset, length)
	}
	m.mu.Lock()
	f := m.files[key]
	m.mu.Unlock()
	if f != nil {
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("read the staged copy of %s: %w", repo.Name(m.Store, key), err)
		}
		return io.NopCloser(io.NewSectionReader(f, 0, fi.Size())), nil
	}
	rc, err := m.Store.Get(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	f, err = m.create()
	if err != nil {
		return rc, nil // no copy: a later pass reads the store again
	}
	return &copying{ReadCloser: rc, m: m, key: key, f: f}, nil
}

// create makes an unlinked file in the staging directory.
func (m *manifestCopies) create() (*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := fmt.Sprintf("manifest-%d", len(m.made))
	fd, err := unix.Openat(m.dir, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Unlinkat(m.dir, name, 0); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	m.made = append(m.made, f)
	return f, nil
}

// keep makes f the copy of key, unless another read finished one first.
func (m *manifestCopies) keep(key string, f *os.File) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files[key] != nil {
		f.Close()
		return
	}
	m.files[key] = f
}

// close closes every file made, kept or not (which removes them).
func (m *manifestCopies) close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.made {
		f.Close()
	}
	clear(m.files)
	m.made = nil
}

// copying writes what is read into f, and keeps f once the object ended.
// A copy that fails to write is dropped, not the read.
type copying struct {
	io.ReadCloser
	m   *manifestCopies
	key string
	f   *os.File // nil once kept or dropped
}

func (c *copying) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if c.f != nil && n > 0 {
		if _, werr := c.f.Write(p[:n]); werr != nil {
			c.drop()
		}
	}
	if c.f != nil && err == io.EOF {
		c.m.keep(c.key, c.f)
		c.f = nil
	}
	return n, err
}

func (c *copying) Close() error {
	c.drop() // an object not read to its end
	return c.ReadCloser.Close()
}

func (c *copying) drop() {
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
}
