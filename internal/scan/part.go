package scan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/selector"
)

// The hooks below let a change journal re-walk only part of a home and
// still report exactly what Walk would.

// Subtrees walks parts of a home, as Walk would walk them, with one open
// home and one set of prefetching workers for all of them.
type Subtrees struct {
	w  *walker
	wg sync.WaitGroup
}

// OpenSubtrees prepares walks below directories of home; Close ends them.
func OpenSubtrees(ctx context.Context, home *homefs.Home, sel *selector.Selector, skipped Skipped) (*Subtrees, error) {
	if skipped == nil {
		skipped = func(string, string) {}
	}
	if err := exists(home); err != nil {
		return nil, err
	}
	s := &Subtrees{w: &walker{ctx: ctx, home: home.Path, root: home.Dir.Fd(), sel: sel, skipped: skipped}}
	s.w.cond = sync.NewCond(&s.w.mu)
	for range prefetchWorkers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.w.prefetch()
		}()
	}
	return s, nil
}

// Below calls fn for what Walk would report below the directory rel (not
// rel itself), in the same order; selected says whether rel itself is
// selected. A rel that is gone, or no longer a directory, has nothing
// below it.
func (s *Subtrees) Below(rel string, selected bool, fn func(*archive.Entry) error) error {
	if rel == "" {
		return errors.New("scan: Below needs a directory below the home; use Walk for the whole home")
	}
	w := s.w
	w.fn, w.pending = fn, w.pending[:0]
	l := w.list(&dirTask{rel: rel})
	if l.vanished {
		return nil
	}
	if l.err != nil {
		return l.err
	}
	return w.dir(l, rel, selected)
}

// Close stops the workers (the home stays open: it is the caller's).
func (s *Subtrees) Close() error {
	s.w.mu.Lock()
	s.w.stop = true
	s.w.cond.Broadcast()
	s.w.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Lstat returns the entry Walk would make of rel, and its raw metadata,
// or nil when rel is gone, lies behind a symlink, or is of a type Walk
// leaves out. Whether rel is selected is the caller's to decide.
func Lstat(root homefs.Dir, rel string, st *unix.Stat_t) (*archive.Entry, error) {
	dir, name, err := root.Parent(rel)
	if gone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the directory of %s: %w", rel, err)
	}
	defer dir.Close()
	if err := unix.Fstatat(int(dir), name, st, unix.AT_SYMLINK_NOFOLLOW); gone(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	e := FromStat(rel, st)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFDIR:
	case unix.S_IFLNK:
		e.Link, err = homefs.ReadlinkAt(int(dir), name)
		if gone(err) || errors.Is(err, unix.EINVAL) { // replaced since the stat
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read link %s: %w", rel, err)
		}
	default:
		return nil, nil
	}
	return e, nil
}

// Reserved reports whether rel lies in homesnap's own working directories,
// which Walk never reports.
func Reserved(rel string) bool {
	top, _, _ := strings.Cut(rel, "/")
	return strings.HasPrefix(top, ReservedPrefix)
}

func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}
