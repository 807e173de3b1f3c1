package gen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// CompareOptions tunes Compare.
type CompareOptions struct {
	// IgnoreDirTimes skips directory mtimes, for tools that do not restore
	// them.
	IgnoreDirTimes bool
	// Skip, when set, leaves out rel (slash-separated, relative to the tree
	// root) and, for a directory, everything below it.
	Skip func(rel string, isDir bool) bool
}

// Entry is what Compare checks for one path.
type Entry struct {
	Mode   fs.FileMode // type bits and permissions
	Size   int64       // regular files only
	Mtime  time.Time
	Target string // symlink target
}

// Scan lists every path below root (root itself excluded), keyed by
// slash-separated relative path. Symlinks are not followed.
func Scan(root string, skip func(rel string, isDir bool) bool) (map[string]Entry, error) {
	out := map[string]Entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		r, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(r)
		if skip != nil && skip(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := Entry{Mode: info.Mode(), Mtime: info.ModTime()}
		switch {
		case info.Mode().IsRegular():
			e.Size = info.Size()
		case info.Mode()&fs.ModeSymlink != 0:
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		out[rel] = e
		return nil
	})
	return out, err
}

// Compare reports every way tree b differs from tree a: missing or extra
// paths, type and permission bits, size, nanosecond mtime, symlink target
// and file content. An empty result means the trees are identical.
func Compare(a, b string, opt CompareOptions) ([]string, error) {
	ea, err := Scan(a, opt.Skip)
	if err != nil {
		return nil, err
	}
	eb, err := Scan(b, opt.Skip)
	if err != nil {
		return nil, err
	}
	var diffs []string
	for rel, x := range ea {
		y, ok := eb[rel]
		if !ok {
			diffs = append(diffs, rel+": missing")
			continue
		}
		d, err := diffEntry(filepath.Join(a, rel), filepath.Join(b, rel), x, y, opt)
		if err != nil {
			return nil, err
		}
		if d != "" {
			diffs = append(diffs, rel+": "+d)
		}
	}
	for rel := range eb {
		if _, ok := ea[rel]; !ok {
			diffs = append(diffs, rel+": extra")
		}
	}
	slices.Sort(diffs)
	return diffs, nil
}

func diffEntry(pa, pb string, x, y Entry, opt CompareOptions) (string, error) {
	switch {
	case x.Mode != y.Mode:
		return fmt.Sprintf("mode %v != %v", x.Mode, y.Mode), nil
	case x.Size != y.Size:
		return fmt.Sprintf("size %d != %d", x.Size, y.Size), nil
	case x.Target != y.Target:
		return fmt.Sprintf("symlink target %q != %q", x.Target, y.Target), nil
	case !x.Mtime.Equal(y.Mtime) && !(x.Mode.IsDir() && opt.IgnoreDirTimes):
		return fmt.Sprintf("mtime %s != %s", x.Mtime.Format(time.RFC3339Nano), y.Mtime.Format(time.RFC3339Nano)), nil
	}
	if x.Mode.IsRegular() {
		same, err := sameContent(pa, pb)
		if err != nil || !same {
			return "content differs", err
		}
	}
	return "", nil
}

func sameContent(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64*kib), make([]byte, 64*kib)
	for {
		na, errA := io.ReadFull(fa, ba)
		nb, errB := io.ReadFull(fb, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		eofA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		eofB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		switch {
		case errA != nil && !eofA:
			return false, errA
		case errB != nil && !eofB:
			return false, errB
		case eofA || eofB:
			return eofA == eofB, nil
		}
	}
}
