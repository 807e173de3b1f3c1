//go:build linux

package journal

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// placers watch and list directories in parallel when the whole selection
// is watched (Open, and again after the journal lost track): with a cold
// cache each directory waits on the disk for its inode and its entries,
// ~300,000 of them at a million files, and one at a time those waits were
// most of the open.
const placers = 8

// placeTask is a directory to watch and list: name in parent, at rel.
type placeTask struct {
	parent node
	name   string
	rel    string
}

// placed is what a placer did with a task, syscalls only: the journal's
// state is changed by placeBelow alone, under the journal's lock.
type placed struct {
	t    placeTask
	wd   int32
	err  error  // of the step that failed
	step string // "open", "watch" or "list"
	ents []dirent
}

// placeBelow watches every directory the walk enters below top (the home,
// watched and listed as ents), each listed after its watch is in place,
// as watchTree does one by one. Called with j.mu held.
func (j *Journal) placeBelow(top node, ents []dirent) {
	tasks, results := make(chan placeTask), make(chan placed)
	var wg sync.WaitGroup
	for range placers {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			for t := range tasks {
				results <- j.place(t, buf)
			}
		})
	}
	var stack []placeTask
	push := func(parent node, rel string, ents []dirent) {
		for i := len(ents) - 1; i >= 0; i-- { // the first name on top: roughly the order a walk reads them
			if crel := join(rel, ents[i].name); ents[i].typ == unix.DT_DIR && j.enter(crel) {
				stack = append(stack, placeTask{parent: parent, name: ents[i].name, rel: crel})
			}
		}
	}
	push(top, "", ents)
	// A dead journal (the watch limit) places nothing more: only what is in
	// flight is waited for, whatever remains on the stack.
	for inflight := 0; len(stack) > 0 && !j.dead || inflight > 0; {
		var send chan placeTask
		var t placeTask
		if len(stack) > 0 && !j.dead {
			send, t = tasks, stack[len(stack)-1]
		}
		select {
		case send <- t:
			stack = stack[:len(stack)-1]
			inflight++
		case r := <-results:
			inflight--
			if j.dead { // the watch limit: the journal gave its watches back
				stack = nil
				if r.wd >= 0 {
					unix.InotifyRmWatch(j.ifd, uint32(r.wd))
				}
				continue
			}
			if n := j.adopt(r); n != none {
				push(n, r.t.rel, r.ents)
			}
		}
	}
	close(tasks)
	wg.Wait()
}

// place opens, watches and lists one directory.
func (j *Journal) place(t placeTask, buf []byte) placed {
	r := placed{t: t, wd: -1}
	fd, err := j.root.OpenRaw(t.rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		r.err, r.step = err, "open"
		return r
	}
	defer unix.Close(fd)
	wd, err := unix.InotifyAddWatch(j.ifd, "/proc/self/fd/"+strconv.Itoa(fd), dirMask) // as addWatch
	if err != nil {
		r.err, r.step = err, "watch"
		return r
	}
	r.wd = int32(wd)
	if r.ents, err = readDirents(fd, buf, false); err != nil {
		r.err, r.step = err, "list"
		return r
	}
	for i := range r.ents { // a file system that does not fill d_type
		if e := &r.ents[i]; e.typ == unix.DT_UNKNOWN {
			var st unix.Stat_t
			if unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				e.typ = dtype(st.Mode)
			}
		}
	}
	return r
}

// adopt records what a placer did, as watchTree would have; it returns the
// directory's node when its entries are to be placed in turn.
func (j *Journal) adopt(r placed) node {
	switch {
	case r.step == "open" && (errors.Is(r.err, unix.ENOENT) || errors.Is(r.err, unix.ENOTDIR) || errors.Is(r.err, unix.ELOOP)):
		return none // gone or replaced since: that has its own event
	case r.step == "open":
		j.untrust(ReasonWatchFailed, fmt.Sprintf("cannot open %s to watch it: %v", j.show(r.t.rel), r.err))
		return none
	}
	wd, err := j.placedWatch(r.wd, r.err, r.t.rel)
	if err != nil {
		return none
	}
	n := j.node(wd, r.t.name, r.t.parent)
	if n == none {
		return none
	}
	j.t.addChild(r.t.parent, n)
	switch {
	case r.step == "list" && errors.Is(r.err, unix.ENOENT):
		return none // deleted since it was opened: its delete is an event
	case r.step == "list":
		j.untrust(ReasonWatchFailed, fmt.Sprintf("cannot list %s: %v", j.show(r.t.rel), r.err))
		return none
	}
	return n
}
