package gen

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"
)

// writer creates entries below root with exact modes and mtimes. Modes are
// set with chmod after creation so the process umask cannot change them.
// One writer belongs to one goroutine.
type writer struct {
	root  string
	made  map[string]bool      // directories known to exist
	dirty map[string]bool      // directories whose entries changed (churn)
	times map[string]time.Time // created dirs → newest mtime of entries written into them
	stats Stats                // entries this writer created
	bw    *bufio.Writer
	buf   []byte // scratch for random bytes
	bytes int64  // bytes written to regular files
}

func newWriter(root string) *writer {
	return &writer{
		root:  root,
		made:  map[string]bool{".": true},
		dirty: map[string]bool{},
		times: map[string]time.Time{},
		bw:    bufio.NewWriterSize(nil, 256*kib),
		buf:   make([]byte, 256*kib),
	}
}

func (w *writer) abs(rel string) string { return filepath.Join(w.root, filepath.FromSlash(rel)) }

// dirMode is the mode of every directory the generator creates: Jenkins
// keeps secrets/ private, everything else is world-readable.
func dirMode(rel string) fs.FileMode {
	if rel == "secrets" {
		return 0o700
	}
	return 0o755
}

// mkdir creates rel and its missing parents. Concurrent writers may race to
// create shared parents such as jobs/; losing that race is fine.
func (w *writer) mkdir(rel string) error {
	if w.made[rel] {
		return nil
	}
	if err := w.mkdir(path.Dir(rel)); err != nil {
		return err
	}
	p := w.abs(rel)
	err := os.Mkdir(p, dirMode(rel))
	switch {
	case err == nil:
		if err := os.Chmod(p, dirMode(rel)); err != nil {
			return err
		}
		w.dirty[rel] = true
		w.dirty[path.Dir(rel)] = true
		w.stats.Dirs++
		w.noteTime(rel, time.Time{})
	case errors.Is(err, fs.ErrExist):
	default:
		return err
	}
	w.made[rel] = true
	return nil
}

// create writes a regular file through fill, replacing any existing one.
func (w *writer) create(rel string, mode fs.FileMode, mt time.Time, fill func(*bufio.Writer) error) error {
	if err := w.mkdir(path.Dir(rel)); err != nil {
		return err
	}
	p := w.abs(rel)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	w.bw.Reset(f)
	err = fill(w.bw)
	err = errors.Join(err, w.bw.Flush(), f.Chmod(mode), f.Close())
	w.bw.Reset(nil)
	if err != nil {
		return err
	}
	w.dirty[path.Dir(rel)] = true
	w.stats.Files++
	w.noteTime(path.Dir(rel), mt)
	return os.Chtimes(p, mt, mt)
}

// noteTime records that dir holds an entry with mtime t, so Generate can
// later give directories their final mtimes without walking the tree.
func (w *writer) noteTime(dir string, t time.Time) {
	if old, ok := w.times[dir]; !ok || t.After(old) {
		w.times[dir] = t
	}
}

// file writes a small text file.
func (w *writer) file(rel string, mode fs.FileMode, mt time.Time, data string) error {
	w.bytes += int64(len(data))
	return w.create(rel, mode, mt, func(b *bufio.Writer) error {
		_, err := b.WriteString(data)
		return err
	})
}

// random writes size incompressible bytes, like archived artifacts.
func (w *writer) random(rel string, mode fs.FileMode, mt time.Time, size int64, r *rng) error {
	w.bytes += size
	return w.create(rel, mode, mt, func(b *bufio.Writer) error {
		for left := size; left > 0; {
			n := min(left, int64(len(w.buf)))
			r.fill(w.buf[:n])
			if _, err := b.Write(w.buf[:n]); err != nil {
				return err
			}
			left -= n
		}
		return nil
	})
}

// stream writes a file whose content comes from fill, which returns how
// many bytes it wrote.
func (w *writer) stream(rel string, mode fs.FileMode, mt time.Time, fill func(io.Writer) (int64, error)) error {
	return w.create(rel, mode, mt, func(b *bufio.Writer) error {
		n, err := fill(b)
		w.bytes += n
		return err
	})
}

// symlink creates rel pointing at target (which may dangle).
func (w *writer) symlink(rel, target string, mt time.Time) error {
	if err := w.mkdir(path.Dir(rel)); err != nil {
		return err
	}
	p := w.abs(rel)
	if err := os.Symlink(target, p); err != nil {
		return err
	}
	w.dirty[path.Dir(rel)] = true
	w.stats.Symlinks++
	w.noteTime(path.Dir(rel), mt)
	return lchtimes(p, mt)
}

// replaceAtomic writes rel the way Jenkins does: to rel-atomic<digits>tmp
// first, then rename over the original (new inode, same name).
func (w *writer) replaceAtomic(rel string, mode fs.FileMode, mt time.Time, data string, r *rng) error {
	tmp := rel + "-atomic" + strconv.FormatInt(100000+r.Int64N(1e10), 10) + "tmp"
	if err := w.file(tmp, mode, mt, data); err != nil {
		return err
	}
	return os.Rename(w.abs(tmp), w.abs(rel))
}
