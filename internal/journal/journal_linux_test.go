//go:build linux

package journal

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

func jenkinsHome(t *testing.T) (string, *selector.Selector) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	(&driver{t: t, home: home}).initial()
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		t.Fatal(err)
	}
	return home, sel
}

func open(t *testing.T, home string, sel *selector.Selector) *Journal {
	t.Helper()
	j, err := Open(testhome.Open(t, home), sel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// A real overflow of the kernel's queue (the reader held off while more
// events than fs.inotify.max_queued_events happen) sends the next
// snapshot to a full walk; the interval after it is trusted again.
func TestKernelQueueOverflowNeedsAFullWalk(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	next(t, j, home, sel, nil)
	max, err := strconv.Atoi(readSysctl("fs/inotify/max_queued_events"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "jobs/a/builds/1")
	j.mu.Lock() // the reader waits: the kernel queues until it overflows
	for i := range max/2 + 100 {
		fd, err := unix.Open(filepath.Join(dir, "f"+strconv.Itoa(i)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			j.mu.Unlock()
			t.Fatal(err)
		}
		unix.Close(fd) // IN_CREATE and IN_CLOSE_WRITE
	}
	j.mu.Unlock()
	_, err = j.Take()
	var fw *FullWalkError
	if !errors.As(err, &fw) || fw.Reason != ReasonOverflow {
		t.Fatalf("Take after an overflow: %v, want a full walk for the overflow", err)
	}
	base := walkAll(t, home, sel)
	tellLinked(j, base)
	if err := os.WriteFile(filepath.Join(dir, "f1"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(home, "jobs/a/builds/3"), 0o755)
	os.WriteFile(filepath.Join(home, "jobs/a/builds/3/log"), []byte("x"), 0o644)
	got, fw := next(t, j, home, sel, base)
	if fw != nil {
		t.Fatalf("the interval after the full walk: %v", fw)
	}
	if ds := diff(walkAll(t, home, sel), got, 5); len(ds) > 0 {
		t.Fatalf("after the overflow, journal + rescan differs from a full walk:\n%s", strings.Join(ds, "\n"))
	}
	if n := j.Stats().Fallbacks[ReasonOverflow]; n != 1 {
		t.Fatalf("overflow fallbacks counted: %d, want 1", n)
	}
}

// When the watches do not fit, the journal says which sysctl to raise,
// gives its watches back, and every later Take asks for a full walk.
func TestWatchLimitEndsTheJournal(t *testing.T) {
	home, sel := jenkinsHome(t)
	watchLimitForTest = 3
	_, err := Open(testhome.Open(t, home), sel)
	var fw *FullWalkError
	if !errors.As(err, &fw) || fw.Reason != ReasonWatchLimit || !strings.Contains(err.Error(), "fs.inotify.max_user_watches") {
		watchLimitForTest = 0
		t.Fatalf("Open beyond the watch limit: %v, want a watch_limit error naming fs.inotify.max_user_watches", err)
	}
	watchLimitForTest = 0
	j := open(t, home, sel)
	n := j.Stats().DirWatches
	watchLimitForTest = n + 1
	defer func() { watchLimitForTest = 0 }()
	next(t, j, home, sel, nil)
	for _, d := range []string{"jobs/x", "jobs/y", "jobs/z"} {
		os.Mkdir(filepath.Join(home, d), 0o755)
	}
	for range 2 {
		if _, err := j.Take(); !errors.As(err, &fw) || fw.Reason != ReasonWatchLimit {
			t.Fatalf("Take past the watch limit: %v, want watch_limit", err)
		}
	}
	st := j.Stats()
	if st.Fallbacks[ReasonWatchLimit] != 2 || st.DirWatches != 0 {
		t.Fatalf("stats %+v: want 2 watch_limit fallbacks and no watches left", st)
	}
}

// A watch that ends with no delete to explain it is a fallback.
func TestWatchLostNeedsAFullWalk(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	next(t, j, home, sel, nil)
	j.mu.Lock()
	var wd int32 = -1
	for w, x := range j.watches {
		if !j.t.at(x).file && x != j.top {
			wd = w
			break
		}
	}
	unix.InotifyRmWatch(j.ifd, uint32(wd)) // behind the journal's back
	j.mu.Unlock()
	var fw *FullWalkError
	if _, err := j.Take(); !errors.As(err, &fw) || fw.Reason != ReasonWatchLost {
		t.Fatalf("Take after a watch ended unexplained: %v, want watch_lost", err)
	}
	// The full walk's interval: the watches are placed again.
	base := walkAll(t, home, sel)
	tellLinked(j, base)
	os.WriteFile(filepath.Join(home, "jobs/a/builds/1/log"), []byte("more"), 0o644)
	got, fw := next(t, j, home, sel, base)
	if fw != nil {
		t.Fatal(fw)
	}
	if ds := diff(walkAll(t, home, sel), got, 5); len(ds) > 0 {
		t.Fatalf("after a resync:\n%s", strings.Join(ds, "\n"))
	}
}

// No watch is ever placed through a symlink: a directory swapped for a
// link to elsewhere is not followed, at Open or later.
func TestSymlinksAreNeverWatchedThrough(t *testing.T) {
	home, sel := jenkinsHome(t)
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "d/e"), 0o755)
	if err := os.Symlink(outside, filepath.Join(home, "jobs/evil")); err != nil {
		t.Fatal(err)
	}
	j := open(t, home, sel)
	base, _ := next(t, j, home, sel, nil)
	before := j.Stats().DirWatches
	// Swapped in while running: a directory, then a link in its place.
	os.RemoveAll(filepath.Join(home, "jobs/b/jobs"))
	os.Symlink(outside, filepath.Join(home, "jobs/b/jobs"))
	j.mu.Lock()
	j.drain(false)
	j.watchTree(j.t.child(j.t.child(j.top, "jobs"), "b"), "jobs", none) // as if its IN_CREATE came late
	j.mu.Unlock()
	os.WriteFile(filepath.Join(outside, "d/e/f"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(outside, "d/g"), 0o755)
	got, fw := next(t, j, home, sel, base)
	if fw != nil {
		t.Fatal(fw)
	}
	if ds := diff(walkAll(t, home, sel), got, 5); len(ds) > 0 {
		t.Fatalf("%s", strings.Join(ds, "\n"))
	}
	// jobs/b/jobs and jobs/b/jobs/c were unwatched; nothing outside was.
	if after := j.Stats().DirWatches; after != before-2 {
		t.Fatalf("watches: %d before, %d after; want 2 fewer", before, after)
	}
	ch, err := j.Take()
	if err != nil || !ch.Empty() {
		t.Fatalf("changes outside the home were seen: %+v, %v", ch, err)
	}
}

// A file with a second name in an excluded workspace, written through
// that name: no watched directory hears of it, the file's own watch does.
func TestWriteThroughAnUnwatchedHardLinkIsSeen(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	base, _ := next(t, j, home, sel, nil)
	if err := os.WriteFile(filepath.Join(home, "jobs/a/workspace/lnk"), []byte("rewritten"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, err := j.Take()
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Inodes) != 1 {
		t.Fatalf("changes %+v: want the linked file's inode", ch)
	}
	got := rescanAll(t, home, sel, base, ch)
	if ds := diff(walkAll(t, home, sel), got, 5); len(ds) > 0 {
		t.Fatalf("%s", strings.Join(ds, "\n"))
	}
}

// The journal under a writer that never stops (run with -race): Take,
// Rescan and Stats race the reader, and once the writer stops, journal +
// rescan equals a full walk.
func TestJournalWithAConcurrentWriter(t *testing.T) {
	testenv.Long(t, "races a writer against the journal")
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	base, _ := next(t, j, home, sel, nil)
	var stop atomic.Bool
	var ops atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d := &driver{t: t, r: rand.New(rand.NewSource(7)), home: home, sel: sel} // op never calls t
		for !stop.Load() {
			d.op()
			d.log = d.log[:0]
			ops.Add(1)
		}
	}()
	fallbacks := 0
	for i := 0; i < 40 || ops.Load() < 1000; i++ {
		got, fw := next(t, j, home, sel, base)
		if fw != nil {
			fallbacks++
		}
		base = got
		j.Stats()
	}
	stop.Store(true)
	wg.Wait()
	got, fw := next(t, j, home, sel, base)
	if fw != nil {
		t.Fatalf("after the writer stopped: %v", fw)
	}
	if ds := diff(walkAll(t, home, sel), got, 10); len(ds) > 0 {
		t.Fatalf("after a concurrent writer, journal + rescan differs from a full walk:\n%s", strings.Join(ds, "\n"))
	}
	if fallbacks > 0 {
		t.Fatalf("%d intervals fell back to a full walk with nothing lost", fallbacks)
	}
}

// An event the journal cannot place (a mask it never asked for, a watch
// it does not know) is a fallback, never ignored.
func TestUninterpretableEventsNeedAFullWalk(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	next(t, j, home, sel, nil)
	for _, ev := range []struct {
		wd   int32
		mask uint32
	}{{-2, unix.IN_ACCESS}, {1 << 30, unix.IN_MODIFY}} {
		j.mu.Lock()
		wd := ev.wd
		if wd == -2 {
			wd = j.t.at(j.top).wd
		}
		j.handle(wd, ev.mask, 0, "config.xml")
		j.mu.Unlock()
		var fw *FullWalkError
		if _, err := j.Take(); !errors.As(err, &fw) || fw.Reason != ReasonUnknown {
			t.Fatalf("Take after event %#x on watch %d: %v, want a full walk for an unknown event", ev.mask, wd, err)
		}
	}
}

// The generator's churn (appended logs, builds added and deleted, configs
// rewritten, chmods, files turned into symlinks, directory times set
// back): after each round journal + rescan equals a full walk.
func TestJournalFollowsTheGeneratorsChurn(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if _, err := gen.Generate(home, gen.Options{Preset: "tiny", Seed: 11}); err != nil {
		t.Fatal(err)
	}
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	j := open(t, home, sel)
	base, _ := next(t, j, home, sel, nil)
	for round := range int64(6) {
		cs, err := gen.Churn(home, gen.ChurnOptions{Fraction: 0.05, Seed: round + 1})
		if err != nil {
			t.Fatal(err)
		}
		got, fw := next(t, j, home, sel, base)
		if fw != nil {
			t.Fatalf("round %d: %v", round, fw)
		}
		if ds := diff(walkAll(t, home, sel), got, 10); len(ds) > 0 {
			t.Fatalf("round %d (%s): journal + rescan differs from a full walk:\n%s", round, cs, strings.Join(ds, "\n"))
		}
		base = got
	}
}

// An entry the previous snapshot read while it changed (Changed, and from
// a manifest: no device) is reported as the walk finds it now, so the
// snapshot reads it again, though the journal saw nothing happen to it.
func TestRescanRestatsWhatWasReadWhileChanging(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	next(t, j, home, sel, nil)
	want := walkAll(t, home, sel)
	var base []*archive.Entry
	marked := 0
	for _, e := range want {
		c := *e
		c.Dev = 0 // a manifest does not store it
		if e.Type == archive.TypeFile && marked < 2 {
			c.Changed, c.MTime = true, 1
			marked++
		}
		base = append(base, &c)
	}
	ch, err := j.Take()
	if err != nil {
		t.Fatal(err)
	}
	got := rescanAll(t, home, sel, base, ch)
	for i, e := range got {
		if e.Changed {
			if e.Dev == 0 || e.MTime == 1 {
				t.Fatalf("%s was passed on as read while changing, not statted again", e.Path)
			}
			t.Fatalf("%s still marked changed", e.Path)
		}
		if want[i].Path != e.Path {
			t.Fatalf("entry %d: %s, want %s", i, e.Path, want[i].Path)
		}
	}
	for i := range got {
		if base[i].Changed && show(got[i]) != show(want[i]) {
			t.Fatalf("got %s\nwant %s", show(got[i]), show(want[i]))
		}
	}
}

// The home moved away: walks find whatever is at its path now, the
// journal follows the directory it opened. It ends, for good.
func TestHomeMovedEndsTheJournal(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	next(t, j, home, sel, nil)
	if err := os.Rename(home, home+".old"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var fw *FullWalkError
		if _, err := j.Take(); !errors.As(err, &fw) || !strings.Contains(err.Error(), "opened again") {
			t.Fatalf("Take after the home moved: %v, want a full walk saying to open the journal again", err)
		}
	}
	if st := j.Stats(); st.DirWatches != 0 {
		t.Fatalf("%d watches left", st.DirWatches)
	}
}

// A tree whose directory names would overflow the table's names buffer
// ends the journal, at the open or later, as the watch limit does.
func TestNamesPastTheTablesLimitEndTheJournal(t *testing.T) {
	home, sel := jenkinsHome(t)
	defer func(n uint64) { namesLimit = n }(namesLimit)
	namesLimit = 8
	var fw *FullWalkError
	if _, err := Open(testhome.Open(t, home), sel); !errors.As(err, &fw) || fw.Reason != ReasonWatchLimit || !strings.Contains(err.Error(), "names fill") {
		t.Fatalf("Open with 8 bytes for names: %v, want a watch_limit error about the names", err)
	}
	namesLimit = math.MaxUint32
	j := open(t, home, sel)
	next(t, j, home, sel, nil)
	j.mu.Lock()
	namesLimit = uint64(len(j.t.names)) + 10
	j.mu.Unlock()
	os.Mkdir(filepath.Join(home, "jobs", strings.Repeat("x", 20)), 0o755)
	for range 2 {
		if _, err := j.Take(); !errors.As(err, &fw) || fw.Reason != ReasonWatchLimit {
			t.Fatalf("Take after a name past the limit: %v, want watch_limit", err)
		}
	}
	if st := j.Stats(); st.DirWatches != 0 {
		t.Fatalf("%d watches left", st.DirWatches)
	}
}

// A directory moved out of the home, then the home itself, in one batch of
// events: the journal ends at the second, and the first, still waiting for
// its IN_MOVED_TO, goes with it.
func TestHomeMovedAfterADirectoryLeftIt(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	next(t, j, home, sel, nil)
	if err := os.Rename(filepath.Join(home, "jobs/a"), filepath.Join(filepath.Dir(home), "a-moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(home, home+".old"); err != nil {
		t.Fatal(err)
	}
	var fw *FullWalkError
	if _, err := j.Take(); !errors.As(err, &fw) || !strings.Contains(err.Error(), "opened again") {
		t.Fatalf("Take after the home moved: %v, want a full walk saying to open the journal again", err)
	}
}

// A snapshot that failed after its Take did not apply the changes: the
// next one walks, and the interval after it is trusted again.
func TestInvalidateAsksForOneFullWalk(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	next(t, j, home, sel, nil)
	os.WriteFile(filepath.Join(home, "jobs/a/config.xml"), []byte("<changed/>"), 0o644)
	if _, err := j.Take(); err != nil {
		t.Fatal(err)
	}
	j.Invalidate("the snapshot failed: store unreachable")
	var fw *FullWalkError
	if _, err := j.Take(); !errors.As(err, &fw) || fw.Reason != ReasonInvalidated || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("Take after Invalidate: %v, want a full walk saying why", err)
	}
	if _, err := j.Take(); err != nil {
		t.Fatalf("the interval after the full walk: %v", err)
	}
}

// The way watches are placed: on the inode a descriptor (opened beneath
// the home, no symlink) names, through its /proc link, which is resolved to
// that inode and never to a path. A symlink swapped in at the directory's
// path after the open leads the watch nowhere else. (With IN_DONT_FOLLOW
// the /proc link itself would be watched: the kernel refuses it with
// IN_ONLYDIR, ENOTDIR.)
func TestWatchIsOnTheOpenedDirectoryNotItsPath(t *testing.T) {
	home, outside := t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(home, "d"), 0o755)
	root, err := homefs.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fd, err := root.OpenRaw("d", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	os.Rename(filepath.Join(home, "d"), filepath.Join(home, "e"))
	os.Symlink(outside, filepath.Join(home, "d"))
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ifd)
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	if _, err := unix.InotifyAddWatch(ifd, proc, dirMask|unix.IN_DONT_FOLLOW); !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("IN_DONT_FOLLOW on the /proc link: %v, want ENOTDIR (it names the link, not the directory)", err)
	}
	if _, err := unix.InotifyAddWatch(ifd, proc, dirMask); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "planted"), nil, 0o644)
	os.WriteFile(filepath.Join(home, "e", "real"), nil, 0o644)
	buf := make([]byte, 4096)
	n, err := unix.Read(ifd, buf)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for off := 0; off < n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		names = append(names, strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00"))
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	if len(names) == 0 || slices.Contains(names, "planted") || !slices.Contains(names, "real") {
		t.Fatalf("events for %q; want those of the opened directory only", names)
	}
}

// Seen answers for the changes made since the last Take: the path itself,
// or anything below a tree that appeared; nothing once taken, and nothing
// when the journal can no longer vouch for what it saw.
func TestSeenIsWhatChangedSinceTheLastTake(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	base, _ := next(t, j, home, sel, nil)
	if j.Seen("jobs/a/config.xml") {
		t.Fatal("Seen before any change")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(home, "jobs/a/config.xml"), []byte("<project>v2</project>"), 0o644))
	must(os.MkdirAll(filepath.Join(home, "jobs/a/builds/3/archive"), 0o755))
	must(os.WriteFile(filepath.Join(home, "jobs/a/builds/3/archive/out.txt"), []byte("out"), 0o644))
	for path, want := range map[string]bool{
		"jobs/a/config.xml":               true,  // written
		"jobs/a/builds/3":                 true,  // created
		"jobs/a/builds/3/archive/out.txt": true,  // below a tree created
		"jobs/a/builds/1/log":             false, // untouched
		"jobs/b/config.xml":               false,
	} {
		if got := j.Seen(path); got != want {
			t.Errorf("Seen(%q) = %v, want %v", path, got, want)
		}
	}
	next(t, j, home, sel, base)
	if j.Seen("jobs/a/config.xml") {
		t.Error("Seen still reports a change the last Take returned")
	}
	must(os.WriteFile(filepath.Join(home, "jobs/b/config.xml"), []byte("<project>v2</project>"), 0o644))
	j.Invalidate("test")
	if j.Seen("jobs/b/config.xml") {
		t.Error("Seen vouches for a change after the journal was invalidated")
	}
}

// A directory's watched subdirectories are kept sorted by name (a slice,
// not a map: the journal holds ~300,000 directories at a million files).
// Many siblings made before Open (listed) and after (events, in random
// order), renamed among themselves and deleted: the journal follows each
// by name, and every interval rescans to what a walk reports.
func TestManySiblingDirectories(t *testing.T) {
	home, sel := jenkinsHome(t)
	builds := filepath.Join(home, "jobs/a/builds")
	rng := rand.New(rand.NewSource(1))
	for _, i := range rng.Perm(150) {
		if err := os.MkdirAll(filepath.Join(builds, "old"+strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j := open(t, home, sel)
	base, _ := next(t, j, home, sel, nil)
	check := func(step string) {
		t.Helper()
		base = trusted(t, j, home, sel, base, step)
		j.mu.Lock()
		defer j.mu.Unlock()
		n := j.t.child(j.t.child(j.t.child(j.top, "jobs"), "a"), "builds")
		names, _ := os.ReadDir(builds)
		if n == none || len(j.t.kids[n]) != len(names) ||
			!slices.IsSortedFunc(j.t.kids[n], func(a, b node) int { return strings.Compare(j.t.name(a), j.t.name(b)) }) {
			t.Fatalf("%s: the journal's node of jobs/a/builds does not hold its %d subdirectories in order", step, len(names))
		}
		for _, e := range names {
			if c := j.t.child(n, e.Name()); c == none || j.watches[j.t.at(c).wd] != c {
				t.Fatalf("%s: %s is not followed", step, e.Name())
			}
		}
	}
	for _, i := range rng.Perm(150) {
		os.Mkdir(filepath.Join(builds, "new"+strconv.Itoa(i)), 0o755)
	}
	check("created")
	for _, i := range rng.Perm(150)[:75] { // renamed over each other's names too
		os.Rename(filepath.Join(builds, "old"+strconv.Itoa(i)), filepath.Join(builds, "new"+strconv.Itoa(rng.Intn(200))))
	}
	check("renamed")
	for k, i := range rng.Perm(150) {
		p := filepath.Join(builds, "new"+strconv.Itoa(i))
		if k%3 == 0 {
			os.RemoveAll(p)
		} else {
			os.WriteFile(filepath.Join(p, "log"), []byte("line"), 0o644)
		}
	}
	check("deleted and written")
}

// An entry Rescan passes on is the taker's: a snapshot's worker rewrites
// it with the file's fresh stat while the rescan goes on. Rescan must not
// read it again (it did, racing the worker): here the taker clobbers each
// entry as soon as it has it, and the rescan still reports what a walk does.
func TestRescanLeavesPassedEntriesAlone(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	base, _ := next(t, j, home, sel, nil)
	for _, d := range []string{"jobs/new/builds/1", "jobs/new/builds/2/archive", "jobs/a/builds/9"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(home, d, "log"), []byte("x"), 0o644)
	}
	os.WriteFile(filepath.Join(home, "jobs/new/config.xml"), []byte("<project/>"), 0o644)
	os.WriteFile(filepath.Join(home, "jobs/a/builds/1/log"), []byte("more"), 0o644)
	ch, err := j.Take()
	if err != nil {
		t.Fatal(err)
	}
	var got []*archive.Entry
	if err := Rescan(context.Background(), testhome.Open(t, home), sel, Entries(base), resolve(t, ch, base), nil, func(e *archive.Entry) error {
		c := *e
		got = append(got, &c)
		*e = archive.Entry{Path: "clobbered"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ds := diff(walkAll(t, home, sel), got, 5); len(ds) > 0 {
		t.Fatalf("journal + rescan differs from a walk when the taker rewrites what it gets:\n%s", strings.Join(ds, "\n"))
	}
}

// Open watches directories only, from their listings: no file is
// statted, so none with several names is watched until the full walk
// that follows tells Linked of them (the two of jenkinsHome whose
// selected name has a second one). Fails on the old Open, which statted
// every file and watched those two itself.
func TestOpenWatchesLinkedFilesOnlyOnceTheWalkTells(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	if st := j.Stats(); st.FileWatches != 0 || st.DirWatches == 0 {
		t.Fatalf("after Open: %+v, want directory watches and no file watch", st)
	}
	next(t, j, home, sel, nil)
	if st := j.Stats(); st.FileWatches != 2 {
		t.Fatalf("after the full walk: %d file watches, want 2", st.FileWatches)
	}
}

// A file with several names changed through a name no watched directory
// sees, after the full walk statted it and before that walk told Linked:
// its watch was not there yet, so Linked, finding the ctime moved, marks
// it changed; the next Take brings it.
func TestLinkedMarksAChangeBeforeItsWatch(t *testing.T) {
	home, sel := jenkinsHome(t)
	j := open(t, home, sel)
	if _, err := j.Take(); err == nil {
		t.Fatal("the first Take must ask for a full walk")
	}
	base := walkAll(t, home, sel)
	if err := os.WriteFile(filepath.Join(home, "jobs/a/workspace/lnk"), []byte("rewritten before the watch"), 0o644); err != nil {
		t.Fatal(err)
	}
	tellLinked(j, base)
	got, fw := next(t, j, home, sel, base)
	if fw != nil {
		t.Fatal(fw)
	}
	if ds := diff(walkAll(t, home, sel), got, 5); len(ds) > 0 {
		t.Fatalf("journal + rescan differs from a full walk:\n%s", strings.Join(ds, "\n"))
	}
	ch, err := j.Take()
	if err != nil || !ch.Empty() {
		t.Fatalf("the interval after: %+v, %v; want nothing changed", ch, err)
	}
}

// The table drops the nodes of removed watches once they are over half of
// it, and renumbers the rest: every surviving directory, nested ones too,
// is still followed by its path, and new ones are placed after it.
func TestCompactedTableStillFollowsEveryDirectory(t *testing.T) {
	home, sel := jenkinsHome(t)
	builds := filepath.Join(home, "jobs/a/builds")
	for i := range 1200 {
		if err := os.MkdirAll(filepath.Join(builds, strconv.Itoa(i), "archive"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j := open(t, home, sel)
	base, _ := next(t, j, home, sel, nil)
	step := func(name string) {
		t.Helper()
		base = trusted(t, j, home, sel, base, name)
		j.mu.Lock()
		defer j.mu.Unlock()
		for wd, n := range j.watches {
			w := j.t.at(n)
			if w.wd != wd {
				t.Fatalf("%s: watch %d's node says %d", name, wd, w.wd)
			}
			if w.file || n == j.top {
				continue
			}
			if p := w.parent; p == none || j.t.child(p, j.t.name(n)) != n {
				t.Fatalf("%s: %q is not its parent's child", name, j.t.name(n))
			}
		}
	}
	step("placed")
	j.mu.Lock()
	placed := len(j.t.nodes)
	j.mu.Unlock()
	for i := 100; i < 1200; i++ {
		os.RemoveAll(filepath.Join(builds, strconv.Itoa(i)))
	}
	step("most deleted")
	j.mu.Lock()
	left, live := len(j.t.nodes), len(j.watches)
	j.mu.Unlock()
	if left >= placed || left > max(1024, 2*live) { // compact waits for 1,024 nodes
		t.Fatalf("after most directories went: %d nodes for %d watches (%d before): not compacted", left, live, placed)
	}
	for i := range 100 { // below renumbered nodes, and new ones beside them
		os.WriteFile(filepath.Join(builds, strconv.Itoa(i), "archive/out.txt"), []byte("x"), 0o644)
		if i%10 == 0 {
			os.Rename(filepath.Join(builds, strconv.Itoa(i)), filepath.Join(builds, "moved"+strconv.Itoa(i)))
			os.MkdirAll(filepath.Join(builds, "new"+strconv.Itoa(i), "archive"), 0o755)
		}
	}
	step("written, renamed and created after the compaction")
	for i := range 100 {
		if i%10 == 0 {
			os.WriteFile(filepath.Join(builds, "moved"+strconv.Itoa(i), "archive/out.txt"), []byte("yy"), 0o644)
			os.WriteFile(filepath.Join(builds, "new"+strconv.Itoa(i), "archive/log"), []byte("z"), 0o644)
		}
	}
	step("written below the moved and the new")
}
