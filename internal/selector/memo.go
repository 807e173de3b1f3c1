package selector

import "strings"

// Memo answers Selected for paths that come in walk order, each directory
// before what lies below it (a manifest, a sorted walk). It remembers the
// answers for the directories above the current path, so each path costs
// matching its own components once instead of every ancestor again: the
// difference between a selector that is free and one that is a sixth of a
// million-file restore.
type Memo struct {
	s     *Selector
	subs  []*Memo // an intersection's selectors
	stack []memoDir
}

// memoDir is what coveredBy would say about a path: whether an include or
// an exclude pattern matches it or one of its ancestors.
type memoDir struct {
	path               string
	included, excluded bool
}

// Memo returns a fresh memo for one ordered pass over paths.
func (s *Selector) Memo() *Memo {
	m := &Memo{s: s}
	for _, o := range s.all {
		m.subs = append(m.subs, o.Memo())
	}
	return m
}

// Selected is s.Selected(rel). Paths out of order are answered correctly,
// only more slowly.
func (m *Memo) Selected(rel string) bool {
	if m.subs != nil {
		ok := true
		for _, sub := range m.subs {
			ok = sub.Selected(rel) && ok // every sub sees every path
		}
		return ok
	}
	parent := ""
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		parent = rel[:i]
	}
	for len(m.stack) > 0 && m.stack[len(m.stack)-1].path != parent {
		m.stack = m.stack[:len(m.stack)-1]
	}
	comps := strings.Split(rel, "/")
	d := memoDir{path: rel}
	switch {
	case parent == "":
		d.included, d.excluded = anyMatch(m.s.include, comps), anyMatch(m.s.exclude, comps)
	case len(m.stack) > 0:
		top := m.stack[len(m.stack)-1]
		d.included = top.included || anyMatch(m.s.include, comps)
		d.excluded = top.excluded || anyMatch(m.s.exclude, comps)
	default: // the parent was not seen: work it out in full
		d.included, d.excluded = coveredBy(m.s.include, comps), coveredBy(m.s.exclude, comps)
	}
	m.stack = append(m.stack, d)
	return d.included && !d.excluded
}
