package gen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ChurnOptions describes one round of changes.
type ChurnOptions struct {
	// Fraction of the home's files and symlinks to touch, in (0, 1].
	Fraction float64
	// Seed is the round number: it picks what changes, and round r's mtimes
	// lie in [r h, r+1 h) after the generated history, so later rounds are
	// always newer.
	Seed int64
}

// ChurnStats reports one round.
type ChurnStats struct {
	Entries       int // files and symlinks in the home before the round
	Touched       int // paths created, modified, re-moded, retyped or removed
	LogsAppended  int
	BuildsAdded   int
	BuildsDeleted int
	ConfigsEdited int
	Chmods        int
	Symlinked     int // regular files replaced by symlinks
	BytesWritten  int64
}

func (s ChurnStats) String() string {
	return fmt.Sprintf("touched %d of %d entries: %d logs appended, %d builds added, %d deleted, %d configs edited, %d chmods, %d files→symlinks, %.1f MiB written",
		s.Touched, s.Entries, s.LogsAppended, s.BuildsAdded, s.BuildsDeleted, s.ConfigsEdited, s.Chmods, s.Symlinked, float64(s.BytesWritten)/mib)
}

// churnSizing shapes builds added by churn (the preset is not known here).
var churnSizing = sizing{logMedian: 16 * kib, logSigma: 1.2, logMax: 2 * mib, artifactRate: 0.2, artifactMedian: 64 * kib, flowNodes: 10}

type churn struct {
	root   string
	w      *writer
	r      *rng
	inv    *inventory
	used   map[string]bool // paths already changed this round
	stats  ChurnStats
	t      time.Time // time of the current operation
	step   time.Duration
	ltPipe *logText
	ltFree *logText
}

// Churn applies one round of the changes a busy controller makes between
// two snapshots: appends to console logs, new builds (with nextBuildNumber
// and permalinks updated), deleted old builds, edited configs, a chmod, and
// now and then a file replaced by a symlink. The same home and options give
// the same result.
func Churn(dir string, opt ChurnOptions) (ChurnStats, error) {
	if !(opt.Fraction > 0 && opt.Fraction <= 1) {
		return ChurnStats{}, fmt.Errorf("churn %s: fraction %v out of range; use a value in (0, 1], e.g. 0.01", dir, opt.Fraction)
	}
	inv, err := takeInventory(dir)
	if err != nil {
		return ChurnStats{}, fmt.Errorf("churn %s: %w", dir, err)
	}
	if len(inv.jobs) == 0 {
		return ChurnStats{}, fmt.Errorf("churn %s: no jobs found (no jobs/**/nextBuildNumber); generate a home first", dir)
	}
	round := opt.Seed % 1_000_000
	if round < 0 {
		round = -round
	}
	budget := max(1, int(opt.Fraction*float64(inv.entries)+0.5))
	r := newRNG(opt.Seed, "churn")
	c := &churn{
		root: dir, w: newWriter(dir), r: r, inv: inv, used: map[string]bool{},
		t:      epoch.Add(horizon + time.Duration(round)*time.Hour),
		step:   min(50*time.Millisecond, time.Hour/time.Duration(2*budget+2)),
		ltPipe: newLogText(newRNG(opt.Seed, "churn:pipeline-log"), "churn", true),
		ltFree: newLogText(newRNG(opt.Seed, "churn:log"), "churn", false),
	}
	c.stats.Entries = inv.entries
	if err := errors.Join(c.run(budget), c.settleDirs()); err != nil {
		return c.stats, fmt.Errorf("churn %s: %w", dir, err)
	}
	return c.stats, nil
}

// run applies operations until budget paths have changed.
func (c *churn) run(budget int) error {
	ops := []struct {
		weight float64
		do     func(left int) (int, error)
	}{
		{0.40, c.appendLog},
		{0.20, c.addBuild},
		{0.18, c.editConfig},
		{0.12, c.deleteBuild},
		{0.05, c.chmod},
		{0.05, c.toSymlink},
	}
	left := budget
	apply := func(op func(int) (int, error)) error {
		// Only operations that change something advance the clock, so a
		// round's mtimes stay within its hour.
		c.t = c.t.Add(c.step)
		n, err := op(left)
		if n == 0 {
			c.t = c.t.Add(-c.step)
		}
		left -= n
		c.stats.Touched += n
		return err
	}
	if budget >= 4 {
		// Every round re-modes one file: a change only mode and ctime show.
		if err := apply(c.chmod); err != nil {
			return err
		}
	}
	for tries := 0; left > 0 && tries < 50*budget+100; tries++ {
		v := c.r.Float64()
		i := 0
		for ; i < len(ops)-1 && v >= ops[i].weight; i++ {
			v -= ops[i].weight
		}
		if err := apply(ops[i].do); err != nil {
			return err
		}
	}
	c.stats.BytesWritten = c.w.bytes
	return nil
}

// now is the mtime for the current operation, with a nanosecond part.
func (c *churn) now() time.Time { return ns(c.r, c.t) }

// touch records rel as changed; it returns 1 the first time.
func (c *churn) touch(rel string) int {
	if c.used[rel] {
		return 0
	}
	c.used[rel] = true
	return 1
}

// pickUnused returns a random path from list not yet changed, or "".
func (c *churn) pickUnused(list []string) string {
	for range 8 {
		if len(list) == 0 {
			return ""
		}
		if p := list[c.r.IntN(len(list))]; !c.used[p] {
			return p
		}
	}
	return ""
}

func (c *churn) appendLog(int) (int, error) {
	rel := c.pickUnused(c.inv.logs)
	if rel == "" {
		return 0, nil
	}
	f, err := os.OpenFile(c.w.abs(rel), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	lt := c.ltFree
	if c.r.chance(0.5) {
		lt = c.ltPipe
	}
	t := c.now()
	n, err := lt.write(f, c.r.size(8*kib, 1.0, 200, 512*kib), t, "", "")
	c.w.bytes += n
	if err := errors.Join(err, f.Close()); err != nil {
		return 0, err
	}
	c.stats.LogsAppended++
	return c.touch(rel), os.Chtimes(c.w.abs(rel), t, t)
}

// fileCount is how many files and symlinks writeBuild creates for s.
func (s buildSpec) fileCount() int {
	n := 2 + len(s.artifacts) // log, build.xml
	if s.junit {
		n++
	}
	switch {
	case !s.pipeline:
		n++ // changelog.xml
	case s.commits > 0:
		n++ // changelog0.xml
	}
	if s.pipeline {
		n++ // log-index
		if s.completedStore {
			n++
		} else {
			n += s.flowNodes
		}
	}
	return n
}

// addBuild runs a new build of a random job: builds/N, then nextBuildNumber
// and permalinks (and legacy permalink symlinks) move forward.
func (c *churn) addBuild(left int) (int, error) {
	j := c.inv.jobs[c.r.IntN(len(c.inv.jobs))]
	next, err := c.readInt(j.rel + "/nextBuildNumber")
	if err != nil || c.exists(j.rel+"/builds/"+strconv.Itoa(next)) {
		return 0, nil // not a job we understand; leave it alone
	}
	cfg, _ := os.ReadFile(c.w.abs(j.rel + "/config.xml"))
	pipeline := strings.Contains(string(cfg), "<flow-definition")
	s := newBuildSpec(c.r, churnSizing, next, pipeline, c.now())
	s.duration = min(s.duration, c.step/2)
	allowed := max(left, 8)
	if s.fileCount()+2 > allowed {
		s.completedStore, s.junit, s.artifacts = true, false, nil
	}
	if s.fileCount()+2 > allowed {
		return 0, nil
	}
	lt := c.ltFree
	if pipeline {
		lt = c.ltPipe
	}
	if err := writeBuild(c.w, j.rel, s, c.r, lt); err != nil {
		return 0, err
	}
	n, err := c.touchTree(j.rel + "/builds/" + strconv.Itoa(next))
	if err != nil {
		return n, err
	}
	j.builds = append(j.builds, next)
	if err := c.w.replaceAtomic(j.rel+"/nextBuildNumber", 0o644, c.now(), strconv.Itoa(next+1)+"\n", c.r); err != nil {
		return n, err
	}
	n += c.touch(j.rel + "/nextBuildNumber")
	m, err := c.updatePermalinks(j.rel, s)
	c.stats.BuildsAdded++
	return n + m, err
}

// updatePermalinks rewrites builds/permalinks for a finished build s and
// repoints the legacy builds/<permalink> symlinks where a job has them.
func (c *churn) updatePermalinks(job string, s buildSpec) (int, error) {
	rel := job + "/builds/permalinks"
	links := map[string]int{}
	if data, err := os.ReadFile(c.w.abs(rel)); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				if n, err := strconv.Atoi(v); err == nil && n >= 0 {
					links[k] = n
				}
			}
		}
	}
	n := 0
	for _, name := range permalinkNames {
		if !permalinkMatches(name, s.result) {
			continue
		}
		links[name] = s.number
		link := job + "/builds/" + name
		if fi, err := os.Lstat(c.w.abs(link)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if err := os.Remove(c.w.abs(link)); err != nil {
				return n, err
			}
			if err := c.w.symlink(link, strconv.Itoa(s.number), c.now()); err != nil {
				return n, err
			}
			n += c.touch(link)
		}
	}
	if err := c.w.replaceAtomic(rel, 0o644, c.now(), formatPermalinks(links), c.r); err != nil {
		return n, err
	}
	return n + c.touch(rel), nil
}

// deleteBuild removes a job's oldest build, as a build discarder does.
func (c *churn) deleteBuild(left int) (int, error) {
	j := c.inv.jobs[c.r.IntN(len(c.inv.jobs))]
	if len(j.builds) < 3 {
		return 0, nil
	}
	dir := j.rel + "/builds/" + strconv.Itoa(j.builds[0])
	var paths []string
	err := filepath.WalkDir(c.w.abs(dir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, c.rel(p))
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if len(paths) > max(left, 8) || slices.ContainsFunc(paths, func(p string) bool { return c.used[p] }) {
		return 0, nil
	}
	if err := os.RemoveAll(c.w.abs(dir)); err != nil {
		return 0, err
	}
	j.builds = j.builds[1:]
	c.w.dirty[path.Dir(dir)] = true
	n := 0
	for _, p := range paths {
		n += c.touch(p)
	}
	c.stats.BuildsDeleted++
	return n, nil
}

var (
	descRE     = regexp.MustCompile(`<description>[^<]*</description>`)
	disabledRE = regexp.MustCompile(`<disabled>(true|false)</disabled>`)
)

// editConfig changes a job, folder or node config.xml through a temp file
// and rename, as Jenkins saves it.
func (c *churn) editConfig(int) (int, error) {
	rel := c.pickUnused(c.inv.configs)
	if rel == "" {
		return 0, nil
	}
	data, err := os.ReadFile(c.w.abs(rel))
	if err != nil {
		return 0, err
	}
	s := string(data)
	if m := disabledRE.FindString(s); m != "" && c.r.chance(0.3) {
		s = strings.Replace(s, m, map[bool]string{true: "<disabled>false</disabled>", false: "<disabled>true</disabled>"}[m == "<disabled>true</disabled>"], 1)
	} else if loc := descRE.FindStringIndex(s); loc != nil {
		s = s[:loc[0]] + "<description>" + esc(expand("{msg} (edited by {pkg}-admin)", c.r, "")) + "</description>" + s[loc[1]:]
	} else {
		s += "\n<!-- " + c.r.hex(16) + " -->"
	}
	if err := c.w.replaceAtomic(rel, 0o644, c.now(), s, c.r); err != nil {
		return 0, err
	}
	c.stats.ConfigsEdited++
	return c.touch(rel), nil
}

// chmod flips a file between 0644 and 0600 (or makes it executable); the
// mtime stays, only the mode and ctime change.
func (c *churn) chmod(int) (int, error) {
	rel := c.pickUnused(c.inv.plain)
	if rel == "" || c.r.chance(0.5) {
		rel = c.pickUnused(c.inv.configs)
	}
	if rel == "" {
		return 0, nil
	}
	fi, err := os.Lstat(c.w.abs(rel))
	if err != nil {
		return 0, err
	}
	mode := fs.FileMode(0o600)
	switch fi.Mode().Perm() {
	case 0o600:
		mode = 0o644
	case 0o644:
		if c.r.chance(0.3) {
			mode = 0o755
		}
	}
	if err := os.Chmod(c.w.abs(rel), mode); err != nil {
		return 0, err
	}
	c.stats.Chmods++
	return c.touch(rel), nil
}

// toSymlink replaces an archived artifact by a relative symlink to a
// sibling (or to a missing file), changing the entry's type.
func (c *churn) toSymlink(int) (int, error) {
	rel := c.pickUnused(c.inv.plain)
	if rel == "" {
		return 0, nil
	}
	target := "missing-" + c.r.alnum(6) + ".jar"
	if sibs, err := os.ReadDir(c.w.abs(path.Dir(rel))); err == nil {
		for _, s := range sibs {
			if s.Type().IsRegular() && s.Name() != path.Base(rel) {
				target = s.Name()
				break
			}
		}
	}
	if err := os.Remove(c.w.abs(rel)); err != nil {
		return 0, err
	}
	if err := c.w.symlink(rel, target, c.now()); err != nil {
		return 0, err
	}
	c.stats.Symlinked++
	return c.touch(rel), nil
}

// touchTree records every file and symlink below dir as changed.
func (c *churn) touchTree(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(c.w.abs(dir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n += c.touch(c.rel(p))
		}
		return err
	})
	return n, err
}

func (c *churn) rel(p string) string {
	r, _ := filepath.Rel(c.root, p)
	return filepath.ToSlash(r)
}

func (c *churn) exists(rel string) bool {
	_, err := os.Lstat(c.w.abs(rel))
	return err == nil
}

func (c *churn) readInt(rel string) (int, error) {
	data, err := os.ReadFile(c.w.abs(rel))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// settleDirs gives every directory whose entries changed this round's
// closing time, so directory mtimes are reproducible too.
func (c *churn) settleDirs() error {
	dirs := make([]string, 0, len(c.w.dirty))
	for d := range c.w.dirty {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	end := c.t.Add(c.step)
	for _, d := range dirs {
		t := end.Add(time.Duration(hashString(d) % uint64(time.Millisecond)))
		if err := os.Chtimes(c.w.abs(d), t, t); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// inventory is what churn may pick from, in walk (sorted) order.
type inventory struct {
	entries int
	jobs    []*churnJob
	logs    []string // builds/N/log
	configs []string // item and node config.xml
	plain   []string // archived artifacts
}

type churnJob struct {
	rel    string
	builds []int // ascending
}

var buildDirRE = regexp.MustCompile(`^(.+)/builds/([0-9]+)$`)

// takeInventory walks the home once. Workspaces are counted but never
// picked: a backup ignores them, so changes there would not be seen.
func takeInventory(root string) (*inventory, error) {
	inv := &inventory{}
	jobs := map[string]*churnJob{}
	job := func(rel string) *churnJob {
		if jobs[rel] == nil {
			jobs[rel] = &churnJob{rel: rel}
		}
		return jobs[rel]
	}
	isJob := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		rel := filepath.ToSlash(r)
		if d.IsDir() {
			if m := buildDirRE.FindStringSubmatch(rel); m != nil {
				n, _ := strconv.Atoi(m[2])
				job(m[1]).builds = append(job(m[1]).builds, n)
			}
			return nil
		}
		inv.entries++
		if !d.Type().IsRegular() || !(strings.HasPrefix(rel, "jobs/") || strings.HasPrefix(rel, "nodes/")) || strings.Contains(rel, "/workspace") {
			return nil
		}
		switch {
		case d.Name() == "nextBuildNumber":
			isJob[path.Dir(rel)] = true
		case d.Name() == "log" && buildDirRE.MatchString(path.Dir(rel)):
			inv.logs = append(inv.logs, rel)
		case d.Name() == "config.xml":
			inv.configs = append(inv.configs, rel)
		case strings.Contains(rel, "/archive/"):
			inv.plain = append(inv.plain, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for rel := range isJob {
		j := job(rel)
		slices.Sort(j.builds)
		inv.jobs = append(inv.jobs, j)
	}
	slices.SortFunc(inv.jobs, func(a, b *churnJob) int { return strings.Compare(a.rel, b.rel) })
	return inv, nil
}
