// Package gen generates realistic, deterministic Jenkins homes
// (JENKINS_HOME trees) for tests and benchmarks, and churns them the way a
// running controller does between two snapshots.
//
// The same Options always produce a byte-identical tree: names, contents,
// modes and nanosecond mtimes (symlink mtimes only on Linux). Every unit of
// work draws from its own random stream derived from the seed and the unit's
// path, so parallel generation does not change the result.
package gen

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options selects what Generate builds.
type Options struct {
	Preset  string  // built-in preset name (see PresetNames); "" means "tiny"
	Custom  *Preset // explicit counts; overrides Preset when set
	Seed    int64
	Workers int // parallel writers; 0 means GOMAXPROCS
}

// Stats counts what a tree holds (the root directory itself excluded).
type Stats struct {
	Files    int
	Dirs     int
	Symlinks int
	Bytes    int64 // sum of regular file sizes
}

func (s Stats) String() string {
	return fmt.Sprintf("%d files, %d dirs, %d symlinks, %.1f MiB", s.Files, s.Dirs, s.Symlinks, float64(s.Bytes)/mib)
}

type generator struct {
	p    Preset
	seed int64
	plan *plan
}

// unit is one independent piece of the tree, written by one goroutine.
type unit struct {
	name string
	cost int64
	run  func(*writer) error
}

// Generate writes a Jenkins home into dir, which must be absent or empty.
func Generate(dir string, opt Options) (Stats, error) {
	p, err := opt.preset()
	if err != nil {
		return Stats{}, err
	}
	if err := prepareDir(dir); err != nil {
		return Stats{}, err
	}
	g := &generator{p: p, seed: opt.Seed, plan: makePlan(p, opt.Seed)}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	writers, err := runUnits(dir, g.units(), workers)
	if err != nil {
		return Stats{}, fmt.Errorf("generate %s: %w", dir, err)
	}
	st, err := settleDirs(dir, writers, workers, opt.Seed)
	if err != nil {
		return Stats{}, fmt.Errorf("generate %s: %w", dir, err)
	}
	return st, nil
}

func (o Options) preset() (Preset, error) {
	if o.Custom != nil {
		return *o.Custom, o.Custom.validate()
	}
	if o.Preset == "" {
		return LookupPreset("tiny")
	}
	return LookupPreset(o.Preset)
}

func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("generate into %s: directory is not empty; pass a new or empty directory", dir)
	}
	return nil
}

func (g *generator) units() []unit {
	us := []unit{
		{"secrets", 1, g.writeSecrets},
		{"root", 1, g.writeRoot},
		{"plugins", int64(g.p.Plugins) * 2 * g.p.PluginMedian, g.writePlugins},
		{"war", int64(g.p.Plugins) * g.p.PluginMedian / 2, g.writeWar},
		{"logs", 1, g.writeLogsAndCaches},
		{"fingerprints", int64(g.p.Fingerprints) * kib, g.writeFingerprints},
		{"workspace", int64(g.p.WorkspaceFiles) * 4 * kib, g.writeRootWorkspace},
	}
	for _, f := range g.plan.folders {
		us = append(us, unit{f.rel, 1, func(w *writer) error { return g.writeFolder(w, f) }})
	}
	for _, j := range g.plan.jobs {
		us = append(us, unit{j.rel, j.estimate(), func(w *writer) error { return g.writeJob(w, j) }})
	}
	sortByCost(us)
	return us
}

// sortByCost puts the most expensive units first so the last one to finish
// is a small one.
func sortByCost(units []unit) {
	slices.SortStableFunc(units, func(a, b unit) int { return cmp.Compare(b.cost, a.cost) })
}

// runUnits runs units on workers goroutines, biggest first. It returns the
// writers (which know what they created) or the first errors.
func runUnits(root string, units []unit, workers int) ([]*writer, error) {
	next := make(chan unit)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	writers := make([]*writer, workers)
	for k := range workers {
		w := newWriter(root)
		writers[k] = w
		wg.Go(func() {
			for u := range next {
				if err := u.run(w); err != nil {
					mu.Lock()
					errs = errors.Join(errs, fmt.Errorf("%s: %w", u.name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, u := range units {
		mu.Lock()
		failed := errs != nil
		mu.Unlock()
		if failed {
			break
		}
		next <- u
	}
	close(next)
	wg.Wait()
	return writers, errs
}

// settleDirs gives every directory the newest mtime among its entries
// (empty ones a deterministic one), which is what a quiet home looks like
// and, unlike the wall clock, is reproducible. It works from what the
// writers recorded, so the tree is not walked again.
func settleDirs(root string, writers []*writer, workers int, seed int64) (Stats, error) {
	var st Stats
	times := map[string]time.Time{}
	for _, w := range writers {
		st.add(w.stats)
		st.Bytes += w.bytes
		for d, t := range w.times {
			if old, ok := times[d]; !ok || t.After(old) {
				times[d] = t
			}
		}
	}
	dirs := make([]string, 0, len(times))
	for d := range times {
		dirs = append(dirs, d)
	}
	// Deepest first, so a directory is final before it counts for its parent.
	depth := func(d string) int {
		if d == "." {
			return -1
		}
		return strings.Count(d, "/")
	}
	slices.SortFunc(dirs, func(a, b string) int {
		return cmp.Or(cmp.Compare(depth(b), depth(a)), strings.Compare(a, b))
	})
	for _, d := range dirs {
		if times[d].IsZero() {
			times[d] = epoch.Add(time.Duration(mix(hashString(d)^uint64(seed)) % uint64(horizon)))
		}
		if p := path.Dir(d); p != d {
			if t, ok := times[p]; !ok || times[d].After(t) {
				times[p] = times[d]
			}
		}
	}
	return st, parallel(dirs, workers, func(d string) error {
		return os.Chtimes(filepath.Join(root, filepath.FromSlash(d)), times[d], times[d])
	})
}

// parallel calls fn for every item on workers goroutines.
func parallel(items []string, workers int, fn func(string) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	for k := range workers {
		wg.Go(func() {
			for i := k; i < len(items); i += workers {
				if err := fn(items[i]); err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errs
}

func (s *Stats) add(o Stats) {
	s.Files += o.Files
	s.Dirs += o.Dirs
	s.Symlinks += o.Symlinks
	s.Bytes += o.Bytes
}
