//go:build linux

package journal

import (
	"flag"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

var (
	seedFlag  = flag.Int64("journal.seed", 0, "run the equivalence test with this seed only")
	stepsFlag = flag.Int("journal.steps", 150, "steps of the equivalence test per seed")
)

// regressionSeeds failed once; they run every time. (A hard link made
// under a name the walk leaves out; an implied directory above one that
// changed; a renamed file whose other name kept the old ctime; a
// directory deleted while it was being listed for its watch; a file
// linked into a directory before its watch was placed, and under a name
// the selection excludes; an event that raced the removal of its watch.)
var regressionSeeds = []int64{
	1796491178432441351, 1796491178432441352, 1796491178432441353,
	1796491802688050201, 1796491802688050202, 1796491815283136852,
	1796492498740336210, 1796492744235144799,
}

// selections the equivalence test runs with: the jenkins preset (whole
// trees, excluded workspaces and temp files), the controller preset (the
// whole home less some names anywhere), and one made of implied
// directories leading to single files.
var selections = map[string]selector.Spec{
	"jenkins":    {Preset: "jenkins"},
	"controller": {Preset: "controller"}, // everything but what Jenkins rebuilds: the home's root watched too
	"implied":    {Preset: "none", Include: []string{"jobs/*/config.xml", "users/*/config.xml", "nodes"}, Exclude: []string{"**/*-atomic*tmp"}},
}

// TestJournalRescanEqualsFullWalk drives a home through random operations
// and checks after every few that the journal's changes applied by Rescan
// to the previous result give exactly what a full walk gives; sometimes
// with an overflow injected (events lost), after which the journal must
// ask for a full walk.
func TestJournalRescanEqualsFullWalk(t *testing.T) {
	testenv.Long(t, "compares journal rescans with full walks over many rounds")
	seeds := append([]int64{}, regressionSeeds...)
	if *seedFlag != 0 {
		seeds = []int64{*seedFlag}
	} else {
		now := time.Now().UnixNano()
		for i := range 3 {
			seeds = append(seeds, now+int64(i))
		}
	}
	for name, spec := range selections {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				runEquivalence(t, spec, seed, *stepsFlag, 0.04)
			})
		}
	}
}

func runEquivalence(t *testing.T, spec selector.Spec, seed int64, steps int, overflowRate float64) {
	sel, err := selector.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	d := &driver{t: t, r: rand.New(rand.NewSource(seed)), home: home, sel: sel}
	d.initial()
	j, err := Open(testhome.Open(t, home), sel)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	base, fw := next(t, j, home, sel, nil)
	if fw == nil || fw.Reason != ReasonStarted {
		t.Fatalf("the first Take gave %v, want a full walk because the journal just started", fw)
	}
	// Half the steps run with the reader held off, so that every event of
	// the step is read after all of its changes (watches placed late, the
	// worst case; and the step replays exactly from the seed); the others
	// race the reader.
	held := rand.New(rand.NewSource(seed ^ 0x5eed))
	for step := range steps {
		d.log, d.fresh = d.log[:0], d.fresh[:0]
		hold := held.Intn(2) == 0
		if hold {
			j.mu.Lock()
		}
		for range 1 + d.r.Intn(4) {
			d.op()
		}
		if hold {
			j.mu.Unlock()
		}
		overflow := d.r.Float64() < overflowRate
		if overflow {
			j.injectOverflow()
		}
		got, fw := next(t, j, home, sel, base)
		if overflow && (fw == nil || fw.Reason != ReasonOverflow) {
			t.Fatalf("seed %d step %d: after an overflow Take gave %v, want a full walk for the overflow", seed, step, fw)
		}
		if !overflow && fw != nil {
			t.Fatalf("seed %d step %d: the journal asked for a full walk: %v\nops:\n  %s", seed, step, fw, strings.Join(d.log, "\n  "))
		}
		want := walkAll(t, home, sel)
		if ds := diff(want, got, 10); len(ds) > 0 {
			t.Fatalf("seed %d step %d: journal + rescan differs from a full walk:\n  %s\nops of this step:\n  %s\n(rerun: go test -run 'TestJournalRescanEqualsFullWalk' ./internal/journal/ -journal.seed=%d)",
				seed, step, strings.Join(ds, "\n  "), strings.Join(d.log, "\n  "), seed)
		}
		base = got
		if w, n := j.Stats().DirWatches, d.entered(); w != n {
			t.Fatalf("seed %d step %d: %d directories watched, but the walk enters %d\nops of this step:\n  %s", seed, step, w, n, strings.Join(d.log, "\n  "))
		}
	}
	st := j.Stats()
	if st.DirWatches == 0 || st.Events == 0 {
		t.Fatalf("stats %+v: no watches or no events", st)
	}
}

// driver makes random changes to a home, as build code and Jenkins do.
type driver struct {
	t     testing.TB
	r     *rand.Rand
	home  string
	sel   *selector.Selector
	log   []string
	fresh []string // second names given this step to files that had one
}

// touchesFresh reports whether a path, or what lies below it, is a fresh
// second name.
func (d *driver) touchesFresh(paths ...string) bool {
	for _, p := range paths {
		for _, f := range d.fresh {
			if f == p || below(f, p) {
				return true
			}
		}
	}
	return false
}

var names = []string{"a", "b", "c", "config.xml", "build.xml", "log", "7", "builds", "jobs",
	"workspace", "workspace@2", "x-atomic12tmp", "nodes", ".homesnap-stage", "é"}

func (d *driver) initial() {
	files := map[string]string{
		"jobs/a/config.xml":          "<project/>",
		"jobs/a/builds/1/build.xml":  "<build/>",
		"jobs/a/builds/1/log":        "started\n",
		"jobs/a/builds/2/log":        "started\nfinished\n",
		"jobs/a/workspace/src.c":     "int main;",
		"jobs/b/config.xml":          "<project/>",
		"jobs/b/jobs/c/config.xml":   "<project/>",
		"nodes/n1/config.xml":        "<slave/>",
		"secrets/master.key":         strings.Repeat("k", 256),
		"secret.key":                 "s",
		"identity.key.enc":           "i",
		"users/u/config.xml":         "<user/>",
		"outside/x/y":                "y",
		"plugins/p.jpi":              "jar",
		"jobs/b/builds/1/log":        "x",
		"jobs/a/builds/2/junit.xml":  "<r/>",
		".homesnap-stage/jobs/a/log": "staged",
	}
	for rel, data := range files {
		p := filepath.Join(d.home, rel)
		d.must(os.MkdirAll(filepath.Dir(p), 0o755))
		d.must(os.WriteFile(p, []byte(data), 0o644))
	}
	d.must(os.Link(filepath.Join(d.home, "jobs/a/builds/1/log"), filepath.Join(d.home, "jobs/b/hard")))
	d.must(os.Link(filepath.Join(d.home, "jobs/a/builds/2/log"), filepath.Join(d.home, "jobs/a/workspace/lnk")))
	d.must(os.Symlink("builds/2", filepath.Join(d.home, "jobs/a/lastSuccessful")))
	d.must(os.Symlink("-1", filepath.Join(d.home, "jobs/a/lastFailed")))
}

func (d *driver) must(err error) {
	if err != nil {
		d.t.Helper()
		d.t.Fatal(err)
	}
}

// tree lists the home without following symlinks: directories (the home
// as ""), regular files and the rest.
func (d *driver) tree() (dirs, files, others []string) {
	filepath.WalkDir(d.home, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(d.home, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		switch {
		case de.IsDir():
			dirs = append(dirs, rel)
		case de.Type().IsRegular():
			files = append(files, rel)
		default:
			others = append(others, rel)
		}
		return nil
	})
	return dirs, files, others
}

func (d *driver) pick(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[d.r.Intn(len(list))]
}

func (d *driver) abs(rel string) string { return filepath.Join(d.home, rel) }

func (d *driver) name() string {
	if d.r.Intn(4) == 0 {
		return fmt.Sprintf("n%d", d.r.Intn(30))
	}
	return names[d.r.Intn(len(names))]
}

// write never follows a symlink nor waits on a FIFO.
func (d *driver) write(p string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_NONBLOCK, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *driver) data() []byte {
	b := make([]byte, d.r.Intn(64))
	d.r.Read(b)
	return b
}

func (d *driver) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

func (d *driver) past() unix.Timespec {
	return unix.NsecToTimespec(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() + d.r.Int63n(1e18))
}

// entered counts the directories the walk enters, the home included.
func (d *driver) entered() int {
	dirs, _, _ := d.tree()
	n := 0
	for _, dir := range dirs {
		if d.watched(dir) {
			n++
		}
	}
	return n
}

// watched reports whether the journal watches directory rel: the walk
// enters it.
func (d *driver) watched(rel string) bool {
	return rel == "" || d.sel.Enter(rel) && !strings.HasPrefix(rel, ".homesnap-")
}

// op makes one random change. Errors (a name taken, a directory moved
// into itself) are part of the game: the change just does not happen.
func (d *driver) op() {
	dirs, files, others := d.tree()
	nonRoot := dirs[1:]
	switch d.r.Intn(22) {
	case 0, 1: // create a file
		p := join(d.pick(dirs), d.name())
		d.logf("create %s: %v", p, d.write(d.abs(p), d.data(), 0o644))
	case 2: // rewrite keeping size and mtime: only ctime tells
		p := d.pick(files)
		if p == "" {
			return
		}
		var st unix.Stat_t
		if unix.Lstat(d.abs(p), &st) != nil {
			return
		}
		b := make([]byte, st.Size)
		d.r.Read(b)
		err := d.write(d.abs(p), b, 0o644)
		if err == nil {
			err = unix.UtimesNanoAt(unix.AT_FDCWD, d.abs(p), []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
		}
		d.logf("rewrite same size and mtime %s: %v", p, err)
	case 3: // truncate
		p := d.pick(files)
		if p == "" {
			return
		}
		d.logf("truncate %s: %v", p, os.Truncate(d.abs(p), int64(d.r.Intn(8))))
	case 4: // append
		p := d.pick(files)
		if p == "" {
			return
		}
		f, err := os.OpenFile(d.abs(p), os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err == nil {
			_, err = f.Write(d.data())
			f.Close()
		}
		d.logf("append %s: %v", p, err)
	case 5: // chmod
		p := d.pick(append(files, nonRoot...))
		if p == "" {
			return
		}
		modes := []uint32{0o600, 0o644, 0o755, 0o700, 0o444, 0o4755, 0o2775, 0o1777}
		m := modes[d.r.Intn(len(modes))]
		d.logf("chmod %o %s: %v", m, p, unix.Chmod(d.abs(p), m))
	case 6: // chown, symlinks too
		p := d.pick(append(append(files, nonRoot...), others...))
		if p == "" {
			return
		}
		uid := []int{0, 1000, 1001}[d.r.Intn(3)]
		d.logf("chown %d %s: %v", uid, p, os.Lchown(d.abs(p), uid, uid))
	case 7: // utimes back in time, symlinks too
		p := d.pick(append(append(files, nonRoot...), others...))
		if p == "" {
			return
		}
		ts := d.past()
		d.logf("utimes %s: %v", p, unix.UtimesNanoAt(unix.AT_FDCWD, d.abs(p), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW))
	case 8, 9: // rename a file or link, within, into or out of the selection
		p := d.pick(append(files, others...))
		if p == "" {
			return
		}
		to := join(d.pick(dirs), d.name())
		if fi, err := os.Lstat(d.abs(to)); err == nil && fi.IsDir() || d.touchesFresh(p, to) {
			return
		}
		d.logf("rename %s %s: %v", p, to, os.Rename(d.abs(p), d.abs(to)))
	case 10, 11: // rename a directory, within, into or out of the selection
		p := d.pick(nonRoot)
		if p == "" {
			return
		}
		to := join(d.pick(dirs), d.name())
		if d.touchesFresh(p, to) {
			return
		}
		d.logf("rename dir %s %s: %v", p, to, os.Rename(d.abs(p), d.abs(to)))
	case 12: // hard link
		p := d.pick(files)
		dir := d.pick(dirs)
		if p == "" {
			return
		}
		var st unix.Stat_t
		if unix.Lstat(d.abs(p), &st) != nil {
			return
		}
		// Known limit: a selected file with one name given a second one
		// where nothing is watched changes only its ctime, and inotify
		// tells only the file's own watchers (there are none yet).
		// So is a second name removed again before the journal read of
		// its creation (fresh: the ops of this step leave it alone).
		if !d.watched(dir) && st.Nlink == 1 {
			return
		}
		to := join(dir, d.name())
		if st.Nlink == 1 {
			d.fresh = append(d.fresh, to)
		}
		d.logf("link %s %s: %v", p, to, os.Link(d.abs(p), d.abs(to)))
	case 13: // a symlink
		to := join(d.pick(dirs), d.name())
		target := []string{"-1", "builds/2", "../..", "/etc"}[d.r.Intn(4)]
		d.logf("symlink %s -> %s: %v", to, target, os.Symlink(target, d.abs(to)))
	case 14: // a directory swapped for a symlink
		p := d.pick(nonRoot)
		if p == "" || d.touchesFresh(p) {
			return
		}
		err := os.RemoveAll(d.abs(p))
		if err == nil {
			err = os.Symlink("/", d.abs(p))
		}
		d.logf("swap dir %s for a symlink: %v", p, err)
	case 15: // a symlink swapped for a directory
		p := d.pick(others)
		if p == "" {
			return
		}
		err := os.Remove(d.abs(p))
		if err == nil {
			err = os.Mkdir(d.abs(p), 0o755)
		}
		if err == nil {
			err = d.write(d.abs(p+"/f"), d.data(), 0o644)
		}
		d.logf("swap %s for a directory: %v", p, err)
	case 16: // delete a subtree
		p := d.pick(nonRoot)
		if p == "" || d.touchesFresh(p) {
			return
		}
		d.logf("remove tree %s: %v", p, os.RemoveAll(d.abs(p)))
	case 17: // create and delete within one interval
		p := join(d.pick(dirs), d.name())
		err := os.MkdirAll(d.abs(p+"/t/u"), 0o755)
		if err == nil {
			err = d.write(d.abs(p+"/t/u/f"), d.data(), 0o644)
		}
		if err == nil {
			err = os.RemoveAll(d.abs(p + "/t"))
		}
		d.logf("create and delete %s/t: %v", p, err)
	case 18, 19: // new directories, with content made before any watch could land
		p := join(d.pick(dirs), d.name())
		err := os.MkdirAll(d.abs(p+"/"+d.name()), 0o755)
		if err == nil { // often another name: then ENOENT, and only the directories are new
			err = d.write(d.abs(p+"/"+d.name()+"/f"), d.data(), 0o644)
		}
		d.logf("mkdir %s: %v", p, err)
	case 20: // Jenkins' atomic write: a temp file renamed over the name
		dir := d.pick(dirs)
		tmp := join(dir, "config.xml-atomic42tmp")
		if d.touchesFresh(join(dir, "config.xml")) {
			return
		}
		err := d.write(d.abs(tmp), d.data(), 0o644)
		if err == nil {
			err = os.Rename(d.abs(tmp), d.abs(join(dir, "config.xml")))
		}
		d.logf("atomic write %s/config.xml: %v", dir, err)
	case 21: // remove a file, or a FIFO the walk leaves out
		if d.r.Intn(3) == 0 {
			p := join(d.pick(dirs), d.name())
			d.logf("mkfifo %s: %v", p, unix.Mkfifo(d.abs(p), 0o644))
			return
		}
		p := d.pick(append(files, others...))
		if p == "" || d.touchesFresh(p) {
			return
		}
		d.logf("remove %s: %v", p, os.Remove(d.abs(p)))
	}
}
