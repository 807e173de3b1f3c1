// Package file is the local-directory store, the embedded default: every key
// is a file under the root directory. Writes go to a temporary file inside
// the root and are renamed into place, so a reader never sees a partial
// object; conditional writes are serialised with an flock on the root.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/backend"
)

func init() {
	store.Register("file", func(_ context.Context, u *url.URL) (store.Store, error) {
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("store %s: file URLs need an absolute path (file:///path), got host %q", store.RedactURL(u), u.Host)
		}
		// Like the object stores' unknown options: a typo must not be ignored.
		if err := backend.NewOptions(u).Err(); err != nil {
			return nil, err
		}
		return open(filepath.FromSlash(u.Path))
	})
}

// tmpPrefix marks in-progress writes; List never shows them.
const tmpPrefix = ".tmp-"

// Store is a directory-backed store.
type Store struct {
	root   string
	direct bool // big ranges are read past the page cache (openDirect)
}

// Open opens the directory store at root, which must exist and be a
// directory (like a bucket, it is not created implicitly: a typo must not
// silently start a new, empty store). Like every store from store.Open, it
// comes wrapped by store.Checked, whose key rule keeps keys inside root.
func Open(root string) (store.Store, error) {
	s, err := open(root)
	if err != nil {
		return nil, err
	}
	return store.Checked(s), nil
}

func open(root string) (*Store, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("store directory %q: path must be absolute", root)
	}
	fi, err := os.Stat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &store.Error{Op: "open", Store: "file://" + root, Err: fmt.Errorf("%w: create the directory (mkdir -p %s) or correct the store URL", store.ErrNotExist, root)}
	}
	if err != nil {
		return nil, &store.Error{Op: "open", Store: "file://" + root, Err: err}
	}
	if !fi.IsDir() {
		return nil, &store.Error{Op: "open", Store: "file://" + root, Err: errors.New("not a directory")}
	}
	s := &Store{root: root, direct: localDisk(root)}
	s.collectTemp(time.Now().Add(-TempMaxAge))
	return s, nil
}

// TempMaxAge is how long a temporary file may go unmodified before Open
// removes it. A live write appends to its file continuously, so one this
// stale was left by a process killed mid-write (kill -9, node loss).
const TempMaxAge = time.Hour

// collectTemp removes temporary files last modified before cutoff. It is
// best effort: a store opened read-only leaves them for a writer.
func (s *Store) collectTemp(cutoff time.Time) {
	filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().Before(cutoff) {
			os.Remove(p)
		}
		return nil
	})
}

func (s *Store) String() string { return "file://" + filepath.ToSlash(s.root) }

func (s *Store) Close() error { return nil }

func (s *Store) fail(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, store.ErrNotExist) {
		err = fmt.Errorf("%w (%v)", store.ErrNotExist, err)
	}
	return &store.Error{Op: op, Store: s.String(), Key: key, Err: err}
}

// path maps a key, a clean relative path (store.Checked saw to that), to a
// file, refusing the names of temporary files.
func (s *Store) path(key string) (string, error) {
	if strings.HasPrefix(path.Base(key), tmpPrefix) {
		return "", fmt.Errorf("invalid key %q: reserved name", key)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	p, err := s.path(key)
	if err != nil {
		return s.fail("put", key, err)
	}
	if err := s.writeAtomic(p, r); err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

// writeAtomic copies r to a temporary file beside p, syncs it and renames it
// over p.
func (s *Store) writeAtomic(p string, r io.Reader) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := io.Copy(&writeback{f: f}, r); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return err
	}
	done = true
	return nil
}

// writebackChunk is how many bytes are written before the kernel is asked
// to start writing them out.
const writebackChunk = 8 << 20

// writeback starts the kernel writing each chunk of a file as soon as it is
// complete, so the Sync that makes an archive durable waits for its tail
// only, not for hundreds of megabytes of dirty pages written at the end.
type writeback struct {
	f              *os.File
	started, wrote int64
}

func (w *writeback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.wrote += int64(n)
	if w.wrote-w.started >= writebackChunk {
		// Only a hint: the Sync at the end is what makes the data durable.
		startWriteback(w.f, w.started, w.wrote-w.started)
		w.started = w.wrote
	}
	return n, err
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	if s.direct {
		r, err := openDirect(p, offset, length)
		if err != nil {
			return nil, s.fail("get", key, err)
		}
		if r != nil {
			return r, nil
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, s.fail("get", key, err)
		}
	}
	if length < 0 {
		return f, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, length), f}, nil
}

func (s *Store) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	// Walk only the directory that can hold matching keys.
	base := prefix
	if i := strings.LastIndex(base, "/"); i >= 0 {
		base = base[:i]
	} else {
		base = ""
	}
	start := filepath.Join(s.root, filepath.FromSlash(base))
	var objs []store.Object
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == start {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), tmpPrefix) || d.Name() == lockName && filepath.Dir(p) == s.root {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while listing
		}
		if err != nil {
			return err
		}
		objs = append(objs, store.Object{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
		return nil
	})
	if err != nil {
		return s.fail("list", prefix, err)
	}
	// WalkDir's order is per directory; keys must come in lexical order.
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) Delete(ctx context.Context, keys ...string) error {
	for _, key := range keys {
		p, err := s.path(key)
		if err != nil {
			return s.fail("delete", key, err)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return s.fail("delete", key, err)
		}
	}
	return nil
}

func (s *Store) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, "", s.fail("load", key, err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, "", s.fail("load", key, err)
	}
	return data, version(data), nil
}

// lockName is the flock file that serialises conditional writes.
const lockName = ".lock"

func (s *Store) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	p, err := s.path(key)
	if err != nil {
		return "", s.fail("swap", key, err)
	}
	unlock, err := s.lock()
	if err != nil {
		return "", s.fail("swap", key, err)
	}
	defer unlock()
	cur, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if old != "" {
			return "", s.fail("swap", key, store.ErrPrecondition)
		}
	case err != nil:
		return "", s.fail("swap", key, err)
	case version(cur) != old:
		return "", s.fail("swap", key, store.ErrPrecondition)
	}
	if err := ctx.Err(); err != nil {
		return "", s.fail("swap", key, err) // as late as possible: the lock may have waited
	}
	if err := s.writeAtomic(p, strings.NewReader(string(data))); err != nil {
		return "", s.fail("swap", key, err)
	}
	return version(data), nil
}

// lock takes an exclusive flock, which also excludes other processes.
func (s *Store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.root, lockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// version is a content hash: two writes of the same bytes share a version,
// which is exactly what a compare-and-swap on content needs.
func version(data []byte) store.Version {
	sum := sha256.Sum256(data)
	return store.Version(hex.EncodeToString(sum[:16]))
}
