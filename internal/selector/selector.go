// Package selector decides which paths of a home belong in a snapshot: a
// preset (such as "jenkins") plus include and exclude globs.
//
// Patterns are slash-separated and anchored at the home root. Within one
// path component, "*" matches any run of characters, "?" one character and
// "[...]" a class (see path.Match); a "**" component matches zero or more
// components. A pattern that matches a directory also covers everything
// below it, so "nodes" and "nodes/**" select the same paths.
package selector

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/homesnap/homesnap/internal/jenkins"
)

// Spec is the serialisable description of a selection; snapshots record it
// so that a restore knows which paths of the home the snapshot owns.
type Spec struct {
	Preset  string   `json:"preset"`
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// Presets maps a preset name to its include and exclude patterns. The
// Jenkins lists live with the rest of homesnap's Jenkins knowledge.
var Presets = map[string]Spec{
	// jenkins: what agents need to reconnect and jobs need to keep their
	// history (controllers configured as code).
	"jenkins": {Include: jenkins.AgentsPreset.Include, Exclude: jenkins.AgentsPreset.Exclude},
	// controller: the whole state of a controller configured by hand,
	// without what Jenkins rebuilds (plugins, war, caches, logs, ...).
	"controller": {Include: jenkins.ControllerPreset.Include, Exclude: jenkins.ControllerPreset.Exclude},
	// all selects the whole home (still honouring --exclude).
	"all": {Include: []string{"**"}},
	// none selects nothing by itself: only --include patterns.
	"none": {},
}

// Selector answers whether a path is selected. The zero value selects
// nothing.
type Selector struct {
	spec    Spec
	include []pattern
	exclude []pattern
	all     []*Selector // Intersect: a path must be selected by each
}

type pattern []string // components; "**" is a wildcard component

// New compiles spec, whose include and exclude patterns extend the preset's.
func New(spec Spec) (*Selector, error) {
	if spec.Preset == "" {
		spec.Preset = "jenkins"
	}
	preset, ok := Presets[spec.Preset]
	if !ok {
		return nil, fmt.Errorf("unknown selection preset %q (known: jenkins, controller, all, none)", spec.Preset)
	}
	s := &Selector{spec: spec}
	var err error
	if s.include, err = compile(append(append([]string{}, preset.Include...), spec.Include...)); err != nil {
		return nil, err
	}
	if s.exclude, err = compile(append(append([]string{}, preset.Exclude...), spec.Exclude...)); err != nil {
		return nil, err
	}
	return s, nil
}

// Spec returns what the selector was built from (for an intersection,
// the first selector's).
func (s *Selector) Spec() Spec { return s.spec }

// Same reports whether s and o select the same paths because they were
// built from equal specs (never said of an intersection).
func (s *Selector) Same(o *Selector) bool {
	return s.all == nil && o.all == nil && s.spec.Preset == o.spec.Preset &&
		slices.Equal(s.spec.Include, o.spec.Include) && slices.Equal(s.spec.Exclude, o.spec.Exclude)
}

// Intersect returns a selector that selects a path only when every one of
// sels selects it: a restore changes what both its own configuration and
// the snapshot select.
func Intersect(sels ...*Selector) *Selector {
	return &Selector{spec: sels[0].spec, all: sels}
}

func compile(globs []string) ([]pattern, error) {
	var out []pattern
	for _, g := range globs {
		g = strings.Trim(g, "/")
		if g == "" {
			continue
		}
		p := pattern(strings.Split(g, "/"))
		for _, c := range p {
			if c == ".." || c == "." {
				return nil, fmt.Errorf("pattern %q: %q components are not allowed", g, c)
			}
			if c != "**" {
				if _, err := path.Match(c, ""); err != nil {
					return nil, fmt.Errorf("pattern %q: %w", g, err)
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Selected reports whether rel (slash-separated, relative to the home) is
// in the selection: it or one of its ancestors matches an include, and none
// matches an exclude.
func (s *Selector) Selected(rel string) bool {
	if s.all != nil {
		for _, o := range s.all {
			if !o.Selected(rel) {
				return false
			}
		}
		return true
	}
	comps := strings.Split(rel, "/")
	return coveredBy(s.include, comps) && !coveredBy(s.exclude, comps)
}

// SelectedIn is Selected for a walk that already knows whether the parent
// directory is selected: only the last component needs matching, which keeps
// the per-file cost of a walk over millions of files small.
func (s *Selector) SelectedIn(parentSelected bool, rel string) bool {
	if s.all != nil {
		// A parent left out by one selector may still be selected by
		// another: without a selected parent, check each in full.
		for _, o := range s.all {
			if parentSelected && !o.SelectedIn(true, rel) || !parentSelected && !o.Selected(rel) {
				return false
			}
		}
		return true
	}
	comps := strings.Split(rel, "/")
	if !parentSelected && !anyMatch(s.include, comps) {
		return false
	}
	return !anyMatch(s.exclude, comps)
}

func anyMatch(pats []pattern, comps []string) bool {
	for _, p := range pats {
		if match(p, comps) {
			return true
		}
	}
	return false
}

// Enter reports whether the walk must descend into directory rel: it is
// selected, or an include pattern could still select something below it.
// An excluded directory is never entered.
func (s *Selector) Enter(rel string) bool {
	if rel == "" {
		return true
	}
	if s.all != nil {
		for _, o := range s.all {
			if !o.Enter(rel) {
				return false
			}
		}
		return true
	}
	comps := strings.Split(rel, "/")
	if coveredBy(s.exclude, comps) {
		return false
	}
	for _, p := range s.include {
		if matchPrefix(p, comps) {
			return true
		}
	}
	return false
}

// coveredBy reports whether some pattern matches comps or one of its
// ancestors.
func coveredBy(pats []pattern, comps []string) bool {
	for _, p := range pats {
		for n := 1; n <= len(comps); n++ {
			if match(p, comps[:n]) {
				return true
			}
		}
	}
	return false
}

// match reports whether the components match the pattern exactly. It runs
// for every path of a walk, so it avoids path.Match where it can: a
// pattern without "**" needs as many components as the path, and a
// component without glob characters is compared as a string.
func match(p pattern, comps []string) bool {
	if len(p) != len(comps) && !slices.Contains(p, "**") {
		return false
	}
	for len(p) > 0 {
		if p[0] == "**" {
			for i := 0; i <= len(comps); i++ {
				if match(p[1:], comps[i:]) {
					return true
				}
			}
			return false
		}
		if len(comps) == 0 {
			return false
		}
		if !matchComponent(p[0], comps[0]) {
			return false
		}
		p, comps = p[1:], comps[1:]
	}
	return len(comps) == 0
}

func matchComponent(pat, name string) bool {
	if !strings.ContainsAny(pat, `*?[\`) {
		return pat == name
	}
	ok, _ := path.Match(pat, name)
	return ok
}

// matchPrefix reports whether some path starting with comps can match p,
// or comps lies below a directory that p matches.
func matchPrefix(p pattern, comps []string) bool {
	for len(comps) > 0 {
		if len(p) == 0 {
			return true
		}
		if p[0] == "**" {
			return true
		}
		if !matchComponent(p[0], comps[0]) {
			return false
		}
		p, comps = p[1:], comps[1:]
	}
	return true
}
