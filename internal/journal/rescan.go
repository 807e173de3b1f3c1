//go:build linux

package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// Rescan calls fn, in walk order, with the entries a full walk of home's
// selection would report now. base is what the walk (or the previous
// Rescan) reported at the start of the interval ch covers, in walk order.
// Only the paths ch names are statted and only the trees it names walked;
// every other entry of base is passed on as it is (hash and archive range
// included), except entries marked Changed (read while they changed),
// which are reported as they are now. A span of base (archive.Span) where
// nothing changed is passed over whole: fn is not called for its entries,
// which stay as they are, and the taker reads the span's sums from base.
// ch must name no inodes (see Changes.ResolveInodes).
func Rescan(ctx context.Context, home *homefs.Home, sel *selector.Selector, base Base, ch *Changes, skipped scan.Skipped, fn func(*archive.Entry) error) error {
	if !home.Exists() {
		return errors.New("rescan: no home")
	}
	if len(ch.Inodes) > 0 {
		return errors.New("rescan: the changes name hard-linked inodes, which Changes.ResolveInodes turns into paths")
	}
	root := home.Dir
	items := ch.sorted()
	defer prefetch(ctx, root, items)()

	r := &rescan{ctx: ctx, home: home, root: root, sel: sel, skipped: skipped, paths: ch.Paths, tree: "\x00",
		out: emitter{root: root, sel: sel, fn: fn}}
	defer func() {
		if r.trees != nil {
			r.trees.Close()
		}
	}()
	fast := len(items) == 0 // the base is a walk's result already: passed straight on
	var last string
	for {
		sp, err := base.Span()
		if err != nil {
			return err
		}
		if sp != nil {
			if len(items) > 0 && archive.ComparePaths(items[0], sp.First) < 0 { // the base has none of these
				if err := r.redo(items[0], nil); err != nil {
					return err
				}
				items = items[1:]
				continue // the taker may have read on into the span meanwhile
			}
			if r.passes(sp, items, fast) {
				if err := base.SkipSpan(); err != nil {
					return err
				}
				if !fast {
					r.out.passed(sp)
				}
				last = sp.Last
				continue
			}
		}
		pe, err := base.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if last != "" && archive.ComparePaths(last, pe.Path) >= 0 {
			return fmt.Errorf("the base of the rescan is out of order at %s", pe.Path)
		}
		last = pe.Path
		replaced := false
		for len(items) > 0 && archive.ComparePaths(items[0], pe.Path) <= 0 {
			var old *archive.Entry
			if items[0] == pe.Path {
				old, replaced = pe, true
			}
			if err := r.redo(items[0], old); err != nil {
				return err
			}
			items = items[1:]
		}
		if replaced || below(pe.Path, r.tree) {
			continue
		}
		if pe.Changed { // read while it changed: the snapshot must read it again, as the walk finds it now
			if fast {
				r.out.reported(pe.Path)
				fast = false
			}
			if err := r.redo(pe.Path, pe); err != nil {
				return err
			}
			continue
		}
		put := r.out.put
		if fast {
			put = fn
		}
		if err := put(pe); err != nil {
			return err
		}
	}
	for _, d := range items {
		if err := r.redo(d, nil); err != nil {
			return err
		}
	}
	return nil
}

// passes reports whether the base's span sp can be passed over whole:
// nothing in it changed (items are the changes still ahead), it is not in
// a tree walked afresh, no directory waits to be reported above it, and
// it does not end in implied directories, which are reported only if a
// selected path still follows.
func (r *rescan) passes(sp *archive.Span, items []string, fast bool) bool {
	if sp.Changed || sp.LastImplied || len(items) > 0 && archive.ComparePaths(items[0], sp.Last) <= 0 || below(sp.First, r.tree) {
		return false
	}
	return fast || r.out.idle(sp.First)
}

// redo reports the changed path rel afresh (old is what the base has for
// it), and everything below it when it is a directory that appeared, went
// or is another one now.
func (r *rescan) redo(rel string, old *archive.Entry) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if below(rel, r.tree) {
		return nil
	}
	ne, err := r.stat(rel)
	if err != nil {
		return err
	}
	whole := r.paths[rel] || (isDir(old) || isDir(ne)) && !(isDir(old) && isDir(ne) && old.Inode == ne.Inode)
	if whole {
		r.tree = rel // what the base has below it is left out
	}
	if ne == nil {
		return nil
	}
	walkBelow, selected := whole && isDir(ne), !ne.Implied // read before put hands ne on
	if err := r.out.put(ne); err != nil {
		return err
	}
	if walkBelow {
		if r.trees == nil {
			if r.trees, err = scan.OpenSubtrees(r.ctx, r.home, r.sel, r.skipped); err != nil {
				return err
			}
		}
		return r.trees.Below(rel, selected, r.out.put)
	}
	return nil
}

type rescan struct {
	ctx     context.Context
	home    *homefs.Home
	root    homefs.Dir
	sel     *selector.Selector
	skipped scan.Skipped
	trees   *scan.Subtrees  // opened for the first tree walked afresh
	paths   map[string]bool // the changed paths, and whether their trees changed
	tree    string          // the last path whose tree is walked afresh
	out     emitter
}

// stat returns rel's entry as the walk would report it now, or nil when
// the walk would not report it.
func (r *rescan) stat(rel string) (*archive.Entry, error) {
	if rel == "" || scan.Reserved(rel) {
		return nil, nil
	}
	if i := strings.LastIndexByte(rel, '/'); i >= 0 && !r.sel.Enter(rel[:i]) {
		return nil, nil // the walk never gets there
	}
	var st unix.Stat_t
	e, err := scan.Lstat(r.root, rel, &st)
	if e == nil || err != nil {
		return nil, err
	}
	if !r.sel.Selected(rel) {
		if e.Type != archive.TypeDir || !r.sel.Enter(rel) {
			return nil, nil
		}
		e.Implied = true
	}
	return e, nil
}

func isDir(e *archive.Entry) bool { return e != nil && e.Type == archive.TypeDir }

// emitter reports entries as the walk does: an implied directory just
// before its first selected descendant, and not at all without one.
type emitter struct {
	root    homefs.Dir
	sel     *selector.Selector
	fn      func(*archive.Entry) error
	open    []string         // reported directories above the current path
	pending []*archive.Entry // implied directories above it, not reported yet
}

func (m *emitter) put(e *archive.Entry) error {
	for len(m.open) > 0 && !below(e.Path, m.open[len(m.open)-1]) {
		m.open = m.open[:len(m.open)-1]
	}
	for len(m.pending) > 0 && !below(e.Path, m.pending[len(m.pending)-1].Path) {
		m.pending = m.pending[:len(m.pending)-1]
	}
	if e.Implied {
		m.pending = append(m.pending, e)
		return nil
	}
	if err := m.ancestors(e.Path); err != nil {
		return err
	}
	// An entry passed to fn is the taker's: a snapshot's worker may
	// rewrite it (a file's fresh stat) while this goes on.
	for _, p := range m.pending {
		path := p.Path
		if err := m.fn(p); err != nil {
			return err
		}
		m.open = append(m.open, path)
	}
	m.pending = m.pending[:0]
	path, dir := e.Path, e.Type == archive.TypeDir
	if err := m.fn(e); err != nil {
		return err
	}
	if dir {
		m.open = append(m.open, path)
	}
	return nil
}

// idle reports whether no implied directory waits to be reported above
// rel, forgetting those rel is not below (as put would).
func (m *emitter) idle(rel string) bool {
	for len(m.pending) > 0 && !below(rel, m.pending[len(m.pending)-1].Path) {
		m.pending = m.pending[:len(m.pending)-1]
	}
	return len(m.pending) == 0
}

// passed tells the emitter that the base's span sp was passed over: the
// directories open are those above its last entry, and that entry when it
// is a directory (the base reported each before what lies below it).
func (m *emitter) passed(sp *archive.Span) {
	m.open = m.open[:0]
	m.reported(sp.Last)
	if sp.LastDir {
		m.open = append(m.open, sp.Last)
	}
}

// reported tells the emitter that everything above rel was reported.
func (m *emitter) reported(rel string) {
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			m.open = append(m.open, rel[:i])
		}
	}
}

// ancestors adds to pending the directories above rel that nothing has
// reported: implied directories that led to nothing selected before (so
// the base lacks them) and did not change themselves.
func (m *emitter) ancestors(rel string) error {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 || len(m.open) > 0 && m.open[len(m.open)-1] == rel[:i] {
		return nil // a reported parent had its own ancestors reported
	}
	have := func(a string) bool {
		for _, p := range m.pending {
			if p.Path == a {
				return true
			}
		}
		return slices.Contains(m.open, a)
	}
	added := false
	for start := 0; ; {
		k := strings.IndexByte(rel[start:], '/')
		if k < 0 {
			break
		}
		a := rel[:start+k]
		start += k + 1
		if have(a) {
			continue
		}
		var st unix.Stat_t
		e, err := scan.Lstat(m.root, a, &st)
		if err != nil {
			return err
		}
		if e == nil || e.Type != archive.TypeDir {
			continue // changed since: its own change is in the next interval
		}
		e.Implied = !m.sel.Selected(a)
		m.pending = append(m.pending, e)
		added = true
	}
	if added { // all are above rel: shallower first
		slices.SortStableFunc(m.pending, func(a, b *archive.Entry) int { return len(a.Path) - len(b.Path) })
	}
	return nil
}
