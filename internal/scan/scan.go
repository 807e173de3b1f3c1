// Package scan walks a home and reports the selected paths with their
// metadata, in archive.ComparePaths order, without following symlinks.
//
// The walk is depth first, as the order requires, but directory listings
// and the stat of every entry are fetched ahead by a few workers: with a
// cold cache each of those waits on the disk, and a sequential walk would
// wait for them one by one.
package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/selector"
)

// ReservedPrefix names homesnap's own working directories at the home root
// (restore staging); a walk never reports them.
const ReservedPrefix = ".homesnap-"

// Skipped is called for paths the walk leaves out (sockets, devices, paths
// that vanished while walking) so that callers can log them.
type Skipped func(rel, why string)

const (
	prefetchWorkers = 8
	// prefetchBudget bounds the entries listed ahead of the walk, and so
	// the memory the prefetching holds.
	prefetchBudget = 50000
)

// exists refuses a home that was not opened (nil, or homefs.Missing).
func exists(home *homefs.Home) error {
	switch {
	case home == nil:
		return errors.New("scan: no home")
	case !home.Exists():
		return fmt.Errorf("open home %s: %w", home.Path, unix.ENOENT)
	}
	return nil
}

// Walk calls fn for every selected path below home, parents first, in
// archive.ComparePaths order. Directories that are not selected themselves
// but lead to selected paths are reported with Implied set, just before
// their first selected descendant. Paths that vanish during the walk are
// skipped; any other error names the path and stops the walk.
func Walk(ctx context.Context, home *homefs.Home, sel *selector.Selector, skipped Skipped, fn func(*archive.Entry) error) error {
	if skipped == nil {
		skipped = func(string, string) {}
	}
	if err := exists(home); err != nil {
		return err
	}
	w := &walker{ctx: ctx, home: home.Path, root: home.Dir.Fd(), sel: sel, skipped: skipped, fn: fn}
	w.cond = sync.NewCond(&w.mu)
	var wg sync.WaitGroup
	for range prefetchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.prefetch()
		}()
	}
	defer func() {
		w.mu.Lock()
		w.stop = true
		w.cond.Broadcast()
		w.mu.Unlock()
		wg.Wait()
	}()
	l := w.list(&dirTask{rel: ""})
	if l.err != nil {
		return l.err
	}
	return w.dir(l, "", false)
}

type walker struct {
	ctx     context.Context
	home    string
	root    int
	sel     *selector.Selector
	skipped Skipped
	fn      func(*archive.Entry) error
	pending []*archive.Entry // implied ancestors not yet reported

	mu    sync.Mutex
	cond  *sync.Cond
	stack []*dirTask // listings to fetch, most urgent last
	ahead int        // entries listed and not yet walked
	stop  bool
}

// dirTask is one directory listing, fetched by a worker or by the walk
// itself, whichever gets to it first.
type dirTask struct {
	rel     string
	claimed bool // guarded by walker.mu
	done    chan struct{}
	l       *listing
}

// listing is a directory's sorted children with their metadata.
type listing struct {
	rel      string
	children []child
	err      error
	vanished bool
}

type child struct {
	name string
	st   unix.Stat_t
	link string
	err  error
}

// prefetch runs in a worker: it takes the most urgent listing and fetches
// it, while the walk's lead stays within the budget.
func (w *walker) prefetch() {
	for {
		w.mu.Lock()
		for !w.stop && (len(w.stack) == 0 || w.ahead > prefetchBudget) {
			w.cond.Wait()
		}
		if w.stop {
			w.mu.Unlock()
			return
		}
		t := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		if t.claimed {
			w.mu.Unlock()
			continue
		}
		t.claimed = true
		w.mu.Unlock()
		l := w.list(t)
		w.mu.Lock()
		w.ahead += len(l.children)
		w.mu.Unlock()
		t.l = l
		close(t.done)
	}
}

// await returns a task's listing, fetching it here if no worker has started.
func (w *walker) await(t *dirTask) *listing {
	w.mu.Lock()
	mine := !t.claimed
	t.claimed = true
	w.mu.Unlock()
	if mine {
		return w.list(t)
	}
	<-t.done
	w.mu.Lock()
	over := w.ahead > prefetchBudget
	w.ahead -= len(t.l.children)
	if over && w.ahead <= prefetchBudget { // wake the workers only when the lead drops under the budget
		w.cond.Broadcast()
	}
	w.mu.Unlock()
	return t.l
}

// list reads a directory and stats its children. The directory is opened
// from the home's descriptor with no symlink anywhere on the path, so a
// directory swapped for a link mid-walk is never followed. The home
// itself is opened again too: its descriptor is shared (by every walk of
// a command), and so would be its directory offset.
func (w *walker) list(t *dirTask) *listing {
	l := &listing{rel: t.rel}
	fd, err := homefs.Dir(w.root).OpenRaw(t.rel, unix.O_RDONLY|unix.O_DIRECTORY)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		l.vanished = true
		return l
	case err != nil:
		l.err = fmt.Errorf("open directory %s: %w", filepath.Join(w.home, t.rel), err)
		return l
	}
	defer unix.Close(fd)
	names, err := readNames(fd)
	if errors.Is(err, unix.ENOENT) {
		l.vanished = true
		return l
	}
	if err != nil {
		l.err = fmt.Errorf("read directory %s: %w", filepath.Join(w.home, t.rel), err)
		return l
	}
	slices.Sort(names)
	l.children = make([]child, 0, len(names))
	for _, name := range names {
		if t.rel == "" && strings.HasPrefix(name, ReservedPrefix) {
			continue
		}
		c := child{name: name}
		c.err = unix.Fstatat(fd, name, &c.st, unix.AT_SYMLINK_NOFOLLOW)
		if c.err == nil && c.st.Mode&unix.S_IFMT == unix.S_IFLNK {
			c.link, c.err = homefs.ReadlinkAt(fd, name)
			if errors.Is(c.err, unix.EINVAL) { // no longer a symlink: replaced since the stat
				c.err = unix.ENOENT
			}
		}
		l.children = append(l.children, c)
	}
	return l
}

// dir walks one listed directory.
func (w *walker) dir(l *listing, rel string, selected bool) error {
	if l.vanished {
		w.skipped(rel, "vanished")
		return nil
	}
	if l.err != nil {
		return l.err
	}
	// Decide first which children are entered, and queue their listings
	// so that the first one the walk will need is on top of the stack.
	type step struct {
		c        *child
		rel      string
		selected bool
		task     *dirTask
	}
	steps := make([]step, 0, len(l.children))
	var tasks []*dirTask
	for i := range l.children {
		c := &l.children[i]
		crel := c.name
		if rel != "" {
			crel = rel + "/" + c.name
		}
		s := step{c: c, rel: crel}
		if c.err == nil {
			isDir := c.st.Mode&unix.S_IFMT == unix.S_IFDIR
			s.selected = w.sel.SelectedIn(selected, crel)
			if !s.selected && !(isDir && w.sel.Enter(crel)) {
				continue
			}
			if isDir {
				s.task = &dirTask{rel: crel, done: make(chan struct{})}
				tasks = append(tasks, s.task)
			}
		}
		steps = append(steps, s)
	}
	if len(tasks) > 0 {
		w.mu.Lock()
		for i := len(tasks) - 1; i >= 0; i-- {
			w.stack = append(w.stack, tasks[i])
		}
		// One worker per new listing: waking all eight for every
		// directory made 2.5× the context switches of a million-path walk.
		for range min(len(tasks), prefetchWorkers) {
			w.cond.Signal()
		}
		w.mu.Unlock()
	}
	for _, s := range steps {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if err := w.visit(s.c, s.rel, s.selected, s.task); err != nil {
			return err
		}
	}
	if !selected && len(w.pending) > 0 && w.pending[len(w.pending)-1].Path == rel {
		w.pending = w.pending[:len(w.pending)-1]
	}
	return nil
}

// visit reports one child and descends into it when it is a directory.
func (w *walker) visit(c *child, rel string, selected bool, task *dirTask) error {
	if c.err != nil {
		if errors.Is(c.err, unix.ENOENT) {
			w.skipped(rel, "vanished")
			return nil
		}
		return fmt.Errorf("stat %s: %w", filepath.Join(w.home, rel), c.err)
	}
	e := FromStat(rel, &c.st)
	switch c.st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFDIR:
	case unix.S_IFLNK:
		e.Link = c.link
	default:
		w.skipped(rel, "not a regular file, directory or symlink")
		return nil
	}
	if selected {
		if err := w.flushPending(); err != nil {
			return err
		}
		if err := w.fn(e); err != nil {
			return err
		}
	} else {
		e.Implied = true
		w.pending = append(w.pending, e)
	}
	if task == nil {
		return nil
	}
	return w.dir(w.await(task), rel, selected)
}

// flushPending reports the implied ancestors of the path about to be
// reported.
func (w *walker) flushPending() error {
	for _, p := range w.pending {
		if err := w.fn(p); err != nil {
			return err
		}
	}
	w.pending = w.pending[:0]
	return nil
}

// direntBuffers are getdents buffers, one per listing in progress.
var direntBuffers = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

// readNames lists an open directory with getdents directly: an os.File
// would cost a dup, an fcntl and a close more per directory.
func readNames(fd int) ([]string, error) {
	bp := direntBuffers.Get().(*[]byte)
	defer direntBuffers.Put(bp)
	var names []string
	for {
		n, err := unix.ReadDirent(fd, *bp)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent((*bp)[:n], -1, names)
	}
}

// FromStat builds an entry's metadata from a stat result.
func FromStat(rel string, st *unix.Stat_t) *archive.Entry {
	e := &archive.Entry{
		Path:  rel,
		Mode:  Mode(uint32(st.Mode)), // uint16 on macOS
		UID:   int(st.Uid),
		GID:   int(st.Gid),
		MTime: st.Mtim.Nano(),
		CTime: st.Ctim.Nano(),
		Inode: st.Ino,
		Dev:   uint64(st.Dev),
		Links: uint32(st.Nlink), // uint16 on macOS
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.Type = archive.TypeDir
	case unix.S_IFLNK:
		e.Type = archive.TypeSymlink
	default:
		e.Type = archive.TypeFile
		e.Size = st.Size
	}
	return e
}

// Mode converts the permission and special bits of a raw st_mode.
func Mode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
