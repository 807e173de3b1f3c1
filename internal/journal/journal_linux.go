//go:build linux

package journal

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// What a directory watch reports: everything that changes what a walk
// sees of its entries (IN_ATTRIB: mode, owner, times, link count of a
// directory; IN_MODIFY: size and mtime), and the watched directory's own
// end. IN_EXCL_UNLINK: a file unlinked but still open is no longer ours.
const dirMask = unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// A file with several names is watched itself: a change made through a
// name outside the selection, a link count change and a rename (both
// change the ctime every name shows) are told only to the inode's own
// watchers, not to the directories of its other names.
const fileMask = unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF

// watchLimitForTest makes tests see ENOSPC beyond that many watches
// (fs.inotify.max_user_watches is the machine's, not a test's to change).
var watchLimitForTest int

// Journal follows one home's selection. Its methods are safe for
// concurrent use.
type Journal struct {
	home string
	root homefs.Dir
	sel  *selector.Selector
	ifd  int // inotify instance
	wake int // eventfd: stops the reader
	done chan struct{}

	mu      sync.Mutex
	t       table
	watches map[int32]node // by watch descriptor
	// ended are the watches whose IN_IGNORED was read this interval and
	// the one before: an event racing a watch's removal can come after it.
	ended, endedBefore map[int32]bool
	top                node            // the home
	moves              map[uint32]node // directories moved away, until their IN_MOVED_TO (same cookie)
	changes            *Changes
	fail               *FullWalkError // why this interval cannot be trusted
	resync             bool           // the watches must be placed again before the next interval
	dead               bool           // no journal any more (watch limit, closed)
	stats              Stats
	buf                []byte // events
	dents              []byte // directory listings
}

// Open starts following the selection sel of home: it watches every
// directory a walk would enter, learning which ones from the directories'
// listings alone (no file is statted: on a cold cache that was most of a
// million-file home's open). Its first Take asks for a full walk (nothing
// before Open was seen); that walk tells Linked of the files with several
// names, which are watched themselves. When the watches do not fit
// (fs.inotify.max_user_watches, shared by all of the user's processes)
// Open fails with a *FullWalkError.
//
// A watch costs the kernel about 1.2 KiB: its mark (100–130 bytes) and the
// watched directory's inode, which cannot be evicted while watched (the
// kernel's own estimate, INOTIFY_WATCH_COST, is 1.3 KiB). A home of a
// million files in ~300,000 directories takes about 365 MiB of kernel
// memory, a sysctl raised to match, and ~45 bytes per watch here.
func Open(h *homefs.Home, sel *selector.Selector) (*Journal, error) {
	if !h.Exists() {
		return nil, errors.New("change journal: no home")
	}
	home := h.Path
	root, err := h.Dir.Reopen() // its own, closed with the journal
	if err != nil {
		return nil, fmt.Errorf("change journal: open %s: %w", home, err)
	}
	if fs := remoteFS(int(root)); fs != "" {
		root.Close()
		return nil, &FullWalkError{Reason: ReasonUnsupported, Detail: fmt.Sprintf(
			"%s is on a network file system (%s): inotify does not report changes made by other machines", home, fs)}
	}
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("change journal: inotify_init1: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		root.Close()
		unix.Close(ifd)
		return nil, fmt.Errorf("change journal: eventfd: %w", err)
	}
	j := &Journal{
		home: home, root: root, sel: sel, ifd: ifd, wake: wake, done: make(chan struct{}),
		t: newTable(), watches: map[int32]node{}, top: none, ended: map[int32]bool{}, endedBefore: map[int32]bool{},
		moves: map[uint32]node{}, changes: newChanges(),
		stats: Stats{Fallbacks: map[Reason]uint64{}}, buf: make([]byte, 64<<10), dents: make([]byte, 32<<10),
	}
	j.mu.Lock()
	j.rebuild()
	dead := j.dead
	fail := j.fail
	if fail == nil {
		j.fail = &FullWalkError{Reason: ReasonStarted, Detail: "the journal has just started"}
	}
	j.mu.Unlock()
	if dead {
		j.closeFds()
		return nil, fail
	}
	go j.run()
	return j, nil
}

// Take returns what changed since the previous Take, or a *FullWalkError
// when that cannot be trusted; then the caller must walk the whole
// selection, starting after Take returned.
func (j *Journal) Take() (*Changes, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.dead {
		j.drain(false) // everything completed before this call is queued by now
	}
	if fail := j.fail; fail != nil {
		j.stats.Fallbacks[fail.Reason]++
		if !j.dead {
			j.fail = nil
			if j.resync {
				j.resync = false
				j.drain(true)
				j.rebuild()
			}
		}
		j.changes = newChanges()
		return nil, fail
	}
	c := j.changes
	j.changes = newChanges()
	j.endedBefore, j.ended = j.ended, map[int32]bool{}
	return c, nil
}

// Seen reports whether the journal has recorded, since the last Take, a
// change at path or to a whole tree above it. A walk that ran after Take
// finds such a path as it is now, not as the changes taken left it: a
// difference there is a change made during the walk, which the next Take
// brings, not one the journal missed. False when the journal can no longer
// vouch for what it saw.
func (j *Journal) Seen(path string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.dead {
		j.drain(false)
	}
	return j.fail == nil && j.changes.covers(path)
}

// Invalidate makes the next Take ask for a full walk: the changes taken
// last were not applied (the snapshot failed), or a verification walk
// found what the journal missed.
func (j *Journal) Invalidate(why string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail == nil {
		j.fail = &FullWalkError{Reason: ReasonInvalidated, Detail: why}
	}
}

// Stats returns the counters.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.stats
	s.Fallbacks = make(map[Reason]uint64, len(j.stats.Fallbacks))
	for r, n := range j.stats.Fallbacks {
		s.Fallbacks[r] = n
	}
	for _, n := range j.watches {
		switch w := j.t.at(n); {
		case w.removed || w.deleted:
		case !w.file:
			s.DirWatches++
		default:
			s.FileWatches++
		}
	}
	return s
}

// Close stops the journal and releases its watches.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.dead && j.fail != nil && j.fail.Reason == ReasonClosed {
		j.mu.Unlock()
		return nil
	}
	j.mu.Unlock()
	var one = [8]byte{1}
	if _, err := unix.Write(j.wake, one[:]); err != nil {
		return fmt.Errorf("change journal: stop the reader: %w", err)
	}
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	j.dead = true
	j.fail = &FullWalkError{Reason: ReasonClosed, Detail: "the journal was closed"}
	j.watches, j.top, j.t = nil, none, table{}
	return j.closeFds()
}

func (j *Journal) closeFds() error {
	err := unix.Close(j.ifd) // frees every watch
	unix.Close(j.wake)
	j.root.Close()
	return err
}

// run reads events as they come, until Close.
func (j *Journal) run() {
	defer close(j.done)
	fds := []unix.PollFd{{Fd: int32(j.ifd), Events: unix.POLLIN}, {Fd: int32(j.wake), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || fds[1].Revents != 0 {
			if err != nil {
				j.mu.Lock()
				j.untrust(ReasonUnknown, "waiting for events: "+err.Error())
				j.mu.Unlock()
			}
			return
		}
		j.mu.Lock()
		j.drain(j.dead) // a dead journal still empties its queue
		j.mu.Unlock()
	}
}

// drain reads and handles every queued event (or drops them: discard).
func (j *Journal) drain(discard bool) {
	for {
		n, err := unix.Read(j.ifd, j.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) || n <= 0 {
			break
		}
		if err != nil {
			j.untrust(ReasonUnknown, "reading events: "+err.Error())
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&j.buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				j.untrust(ReasonUnknown, "a truncated event")
				break
			}
			name := strings.TrimRight(string(j.buf[off+unix.SizeofInotifyEvent:end]), "\x00")
			switch {
			case !discard:
				j.stats.Events++
				j.handle(ev.Wd, ev.Mask, ev.Cookie, name)
			case ev.Mask&unix.IN_IGNORED != 0: // the watch table still follows the kernel's
				if n, ok := j.watches[ev.Wd]; ok {
					delete(j.watches, ev.Wd)
					j.ended[ev.Wd] = true
					j.detach(n)
				}
			}
			off = end
		}
	}
	// A directory moved away with no IN_MOVED_TO after it left the
	// selection (or went where nothing is watched): its watches go.
	for c, n := range j.moves {
		delete(j.moves, c)
		j.unwatchTree(n)
	}
	j.t.compact(j.watches, &j.top) // no node is held outside the table here
}

// handle applies one event.
func (j *Journal) handle(wd int32, mask, cookie uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		j.untrust(ReasonOverflow, "the kernel's event queue overflowed and events were lost (fs.inotify.max_queued_events)")
		return
	}
	n, ok := j.watches[wd]
	if !ok && (j.ended[wd] || j.endedBefore[wd]) {
		return // raced its removal: a directory deleted, or no longer ours
	}
	if !ok {
		j.untrust(ReasonUnknown, fmt.Sprintf("event %#x for watch %d, which the journal does not know", mask, wd))
		return
	}
	w := j.t.at(n)
	if mask&unix.IN_DELETE_SELF != 0 {
		w.deleted = true
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(j.watches, wd)
		j.ended[wd] = true
		if !w.removed && !w.deleted {
			j.untrust(ReasonWatchLost, "the watch of "+j.describe(n)+" ended unexpectedly")
		}
		j.detach(n)
		return
	}
	if w.removed {
		return
	}
	if mask&unix.IN_UNMOUNT != 0 {
		j.untrust(ReasonUnmount, "the file system of "+j.describe(n)+" was unmounted")
		return
	}
	if w.file { // every name of it changed
		j.changes.Inodes[j.t.inos[n]] = true
		return
	}
	dir, attached := j.pathOf(n)
	if !attached {
		return // deleted or moved away: its old and new places are re-walked whole
	}
	if name == "" { // the directory itself
		switch {
		case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 && n == j.top:
			// Walks find the home by its path, the journal follows the
			// directory it opened: they no longer meet.
			j.end(&FullWalkError{Reason: ReasonUnknown, Detail: j.home + " itself was moved or deleted; the journal must be opened again"})
		case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			j.changes.path(dir, true)
		case mask&(unix.IN_ATTRIB|unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
			if n != j.top {
				j.changes.path(dir, false)
			}
		default:
			j.untrust(ReasonUnknown, fmt.Sprintf("event %#x on %s", mask, j.show(dir)))
		}
		return
	}
	if strings.Contains(name, "/") || name == "." || name == ".." {
		j.untrust(ReasonUnknown, fmt.Sprintf("event %#x with the name %q in %s", mask, name, j.show(dir)))
		return
	}
	p := join(dir, name)
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		j.dirChanged(n, dir)
		moved := none
		if m, ok := j.moves[cookie]; ok && mask&unix.IN_MOVED_TO != 0 {
			moved = m
			delete(j.moves, cookie)
		}
		switch {
		case isDir:
			if j.keep(p) {
				j.changes.path(p, true)
			}
			j.watchTree(n, name, moved)
		default:
			if j.keep(p) {
				j.changes.path(p, false)
			}
			// Even under a name the walk leaves out: a new name of a
			// selected file changes that file's link count.
			j.watchIfLinked(p)
		}
	case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
		j.dirChanged(n, dir)
		if j.keep(p) {
			j.changes.path(p, isDir)
		}
		if c := j.t.child(n, name); isDir && c != none {
			j.t.dropChild(n, name)
			j.t.at(c).parent = none
			if mask&unix.IN_MOVED_FROM != 0 {
				j.moves[cookie] = c
			}
		}
	case mask&(unix.IN_ATTRIB|unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
		if j.keep(p) {
			j.changes.path(p, false)
		}
	default:
		j.untrust(ReasonUnknown, fmt.Sprintf("event %#x on %s", mask, j.show(p)))
	}
}

// dirChanged records that a directory's entries changed (and so its mtime).
func (j *Journal) dirChanged(n node, dir string) {
	if n != j.top {
		j.changes.path(dir, false)
	}
}

// keep reports whether the walk can report p: selected, or a directory it
// enters (reported as implied).
func (j *Journal) keep(p string) bool {
	return !scan.Reserved(p) && (j.sel.Selected(p) || j.sel.Enter(p))
}

func (j *Journal) enter(p string) bool { return p == "" || !scan.Reserved(p) && j.sel.Enter(p) }

// rebuild watches the whole selection's directories afresh; the watches
// the kernel still has are reused and the rest removed.
func (j *Journal) rebuild() {
	old := make(map[int32]node, len(j.watches))
	for wd, n := range j.watches {
		old[wd] = n
	}
	clear(j.moves)
	top, err := j.add(int(j.root), "", "", none)
	if err == nil {
		j.top = top
		_, err = unix.Seek(int(j.root), 0, io.SeekStart) // listed again by every rebuild
	}
	if err == nil {
		var ents []dirent
		if ents, err = readDirents(int(j.root), j.dents, false); err != nil {
			j.untrust(ReasonWatchFailed, fmt.Sprintf("cannot list %s: %v", j.home, err))
		} else {
			j.placeBelow(top, ents)
		}
	}
	j.removeStale(old) // the files' watches too: the full walk that follows a rebuild places them again
}

// watchTree watches the directory name in parent, and every directory
// below it that the walk enters, each listed after its watch is in place
// (entries made before the watch are seen by the listing, those after by
// the watch). old is what was watched there before, if anything: its
// watches are reused or removed. It is for a tree that appeared since the
// last full walk: its files are statted for their link counts (Open and a
// resync place watches with placeBelow, and the full walk that follows
// tells Linked).
func (j *Journal) watchTree(parent node, name string, old node) {
	stale := map[int32]node{}
	j.collect(old, stale)
	defer j.removeStale(stale)
	dir, _ := j.pathOf(parent)
	rel := join(dir, name)
	if prev := j.t.child(parent, name); prev != none { // replaced by this one
		j.t.dropChild(parent, name)
		j.t.at(prev).parent = none
		j.collect(prev, stale)
	}
	if !j.enter(rel) {
		return
	}
	fd, err := j.root.OpenRaw(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return // gone or replaced since: that has its own event
	}
	if err != nil {
		j.untrust(ReasonWatchFailed, fmt.Sprintf("cannot open %s to watch it: %v", j.show(rel), err))
		return
	}
	defer unix.Close(fd)
	n, err := j.add(fd, rel, name, parent)
	if err != nil {
		return
	}
	j.t.addChild(parent, n)
	j.watchBelow(fd, n, rel, old)
}

// watchBelow lists the open directory fd (node n at rel) and watches what
// lies below it. Subdirectories are known by the type the listing gives;
// files are statted for their link counts.
func (j *Journal) watchBelow(fd int, n node, rel string, old node) {
	ents, err := readDirents(fd, j.dents, true)
	if errors.Is(err, unix.ENOENT) {
		return // deleted since it was opened: its delete is an event
	}
	if err != nil {
		j.untrust(ReasonWatchFailed, fmt.Sprintf("cannot list %s: %v", j.show(rel), err))
		return
	}
	slices.SortFunc(ents, func(a, b dirent) int { return strings.Compare(a.name, b.name) }) // each subdirectory's watch is appended to n.children
	for _, e := range ents {
		typ := e.typ
		var st unix.Stat_t
		if typ == unix.DT_UNKNOWN || typ == unix.DT_REG {
			if err := unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone since the listing: its delete is an event
			}
			typ = dtype(st.Mode)
		}
		switch {
		case typ == unix.DT_DIR: // watchTree asks whether the walk enters it
			o := none
			if old != none {
				o = j.t.child(old, e.name)
			}
			j.watchTree(n, e.name, o)
		case typ == unix.DT_REG && st.Nlink > 1:
			// Under any name, selected or not, it may be another name
			// of a selected file; in a directory new to the journal it
			// may have been linked before the watch landed, and so moved
			// the ctime of its other names.
			j.changes.Inodes[st.Ino] = true
			j.watchFile(fd, e.name, join(rel, e.name), st.Ino)
		}
		if j.dead {
			return
		}
	}
}

// watchIfLinked watches a file that appeared with several names; those
// other names' link count (so their ctime) changed too.
func (j *Journal) watchIfLinked(rel string) {
	dir, name, err := j.root.Parent(rel)
	if err != nil {
		return // gone: an event of its own
	}
	defer dir.Close()
	var st unix.Stat_t
	if unix.Fstatat(int(dir), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink < 2 {
		return
	}
	j.changes.Inodes[st.Ino] = true
	j.watchFile(int(dir), name, rel, st.Ino)
}

// Linked watches the file at rel, which a full walk found with several
// names as inode ino with the ctime ctime: a change made through a name
// the walk does not see is told only to the file's own watchers. A change
// between the walk's stat and the watch moved the ctime; then the file is
// marked changed, as the next snapshot must read it again.
func (j *Journal) Linked(rel string, ino uint64, ctime int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.dead {
		return
	}
	dir, name, err := j.root.Parent(rel)
	if err != nil {
		return // gone: the event of its parent's watch says so
	}
	defer dir.Close()
	if now, ok := j.watchFile(int(dir), name, rel, ino); ok && now != ctime {
		j.changes.Inodes[ino] = true
	}
}

// watchFile watches the file name in the open directory dir, if it is
// still the inode ino, and returns its ctime once watched.
func (j *Journal) watchFile(dir int, name, rel string, ino uint64) (ctime int64, ok bool) {
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Ino != ino || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, false // replaced since: an event of its own
	}
	wd, err := j.addWatch(fd, rel, fileMask)
	if err != nil {
		return 0, false
	}
	j.watches[wd] = j.t.addFile(wd, ino)
	if unix.Fstat(fd, &st) != nil {
		return 0, false
	}
	return st.Ctim.Nano(), true
}

// add watches the open directory fd (at rel), name in parent, and
// returns its node.
func (j *Journal) add(fd int, rel, name string, parent node) (node, error) {
	wd, err := j.addWatch(fd, rel, dirMask)
	if err != nil {
		return none, err
	}
	n := j.node(wd, name, parent)
	if n == none {
		return none, errNamesFull
	}
	return n, nil
}

// namesLimit bounds the table's names buffer (its offsets are 32 bits);
// tests lower it.
var namesLimit uint64 = math.MaxUint32

var errNamesFull = errors.New("the watched directories' names fill the journal's table")

// node records the directory watch wd, name in parent. Names past
// namesLimit, which only a hostile tree of long names could reach, end the
// journal: a walk sees what it cannot name.
func (j *Journal) node(wd int32, name string, parent node) node {
	if uint64(len(j.t.names))+uint64(len(name)) > namesLimit {
		unix.InotifyRmWatch(j.ifd, uint32(wd))
		j.end(&FullWalkError{Reason: ReasonWatchLimit, Detail: fmt.Sprintf("%s: %v (%d bytes)", j.home, errNamesFull, len(j.t.names))})
		return none
	}
	n := j.t.add(wd, name, parent)
	j.watches[wd] = n
	return n
}

// addWatch places a watch on the inode fd was opened on. The descriptor's
// /proc link names that inode, not a path: nothing is resolved again, so
// a symlink swapped in since the open is never followed. (IN_DONT_FOLLOW
// would not follow the /proc link itself and watch that.)
func (j *Journal) addWatch(fd int, rel string, mask uint32) (int32, error) {
	wd, err := unix.InotifyAddWatch(j.ifd, "/proc/self/fd/"+strconv.Itoa(fd), mask)
	return j.placedWatch(int32(wd), err, rel)
}

// placedWatch handles inotify_add_watch's answer for rel.
func (j *Journal) placedWatch(wd int32, err error, rel string) (int32, error) {
	if watchLimitForTest > 0 && len(j.watches) >= watchLimitForTest {
		wd, err = -1, unix.ENOSPC
	}
	switch {
	case err == nil:
		return wd, nil
	case errors.Is(err, unix.ENOSPC):
		j.limitReached()
	default:
		j.untrust(ReasonWatchFailed, fmt.Sprintf("cannot watch %s: %v", j.show(rel), err))
	}
	return -1, err
}

// limitReached ends the journal: with some directories unwatched it can
// never be trusted.
func (j *Journal) limitReached() {
	if j.dead {
		return
	}
	j.end(&FullWalkError{Reason: ReasonWatchLimit, Detail: fmt.Sprintf(
		"the selection of %s needs more than %d inotify watches; raise the sysctl fs.inotify.max_user_watches (%s, shared by every process of the user) to at least the number of directories in the selection plus what other programs use",
		j.home, len(j.watches), watchLimit())})
}

// watchLimit describes the limits that apply: the node's, and a user
// namespace's own where it is lower (a pod with hostUsers: false, a
// rootless container), which only that namespace's owner can raise.
func watchLimit() string {
	node, ns := readSysctl("fs/inotify/max_user_watches"), readSysctl("user/max_inotify_watches")
	n, err1 := strconv.Atoi(node)
	u, err2 := strconv.Atoi(ns)
	if err1 == nil && err2 == nil && u < n {
		return fmt.Sprintf("now %s; in this user namespace user.max_inotify_watches is %s", node, ns)
	}
	return "now " + node
}

// end stops the journal for good, giving its watches back; every Take
// from now on returns fail.
func (j *Journal) end(fail *FullWalkError) {
	for wd := range j.watches {
		unix.InotifyRmWatch(j.ifd, uint32(wd))
	}
	j.fail, j.dead = fail, true
	clear(j.watches)
	clear(j.moves) // were watched, so removed above; their nodes go with the table
	j.top, j.t = none, newTable()
}

// collect adds the watches of n's tree to into.
func (j *Journal) collect(n node, into map[int32]node) {
	if n == none {
		return
	}
	if wd := j.t.at(n).wd; j.watches[wd] == n {
		into[wd] = n
	}
	for _, c := range j.t.kids[n] {
		j.collect(c, into)
	}
}

// removeStale removes the watches of old that no new node reuses.
func (j *Journal) removeStale(old map[int32]node) {
	for wd, n := range old {
		if cur, ok := j.watches[wd]; ok && cur == n && !j.t.at(n).removed && !j.t.at(n).deleted {
			j.unwatch(wd, n)
		}
	}
}

func (j *Journal) unwatchTree(n node) {
	ws := map[int32]node{}
	j.collect(n, ws)
	j.removeStale(ws)
}

// unwatch removes a watch. It stays known until its IN_IGNORED, which
// the kernel queues also when the watch was gone already (EINVAL).
func (j *Journal) unwatch(wd int32, n node) {
	j.t.at(n).removed = true
	unix.InotifyRmWatch(j.ifd, uint32(wd))
	j.detach(n)
}

// detach takes a directory's node out of the tree.
func (j *Journal) detach(n node) {
	w := j.t.at(n)
	if w.parent == none || w.file {
		return
	}
	if name := j.t.name(n); j.t.child(w.parent, name) == n {
		j.t.dropChild(w.parent, name)
		w.parent = none
	}
}

// untrust marks the interval as one that needs a full walk, and the
// watches as needing to be placed again.
func (j *Journal) untrust(r Reason, detail string) {
	if j.fail == nil {
		j.fail = &FullWalkError{Reason: r, Detail: detail}
	}
	j.resync = true
}

// pathOf returns n's path, or false when n is no longer in the tree.
func (j *Journal) pathOf(n node) (string, bool) {
	var parts []string
	for ; n != j.top; n = j.t.at(n).parent {
		if n == none {
			return "", false
		}
		parts = append(parts, j.t.name(n))
	}
	for i, k := 0, len(parts)-1; i < k; i, k = i+1, k-1 {
		parts[i], parts[k] = parts[k], parts[i]
	}
	return strings.Join(parts, "/"), true
}

func (j *Journal) describe(n node) string {
	if j.t.at(n).file {
		return fmt.Sprintf("the file with inode %d", j.t.inos[n])
	}
	if p, ok := j.pathOf(n); ok {
		return j.show(p)
	}
	return "a directory no longer in " + j.home
}

func (j *Journal) show(rel string) string {
	if rel == "" {
		return j.home
	}
	return j.home + "/" + rel
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// remoteFS names the network file system fd is on, or returns "".
func remoteFS(fd int) string {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil {
		return ""
	}
	switch uint32(fs.Type) {
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC:
		return "smb"
	case unix.FUSE_SUPER_MAGIC:
		return "fuse"
	case unix.CEPH_SUPER_MAGIC:
		return "ceph"
	case unix.AFS_SUPER_MAGIC, unix.AFS_FS_MAGIC:
		return "afs"
	}
	return ""
}

func readSysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
