package selector

import (
	"slices"
	"strings"
	"testing"
)

// walkOrder sorts paths as a manifest does: a directory, then everything
// below it, then its next sibling.
func walkOrder(paths []string) []string {
	out := slices.Clone(paths)
	slices.SortFunc(out, func(a, b string) int {
		return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
	})
	return out
}

// TestMemoAgreesWithSelected: the memo must give Selected's answer for every
// path, in walk order (fast) and in any other order (slow path).
func TestMemoAgreesWithSelected(t *testing.T) {
	var paths []string
	for _, top := range []string{"jobs", "nodes", "secrets", "plugins", "users", "a", "d", "workspace"} {
		paths = append(paths, top)
		for _, job := range []string{"app", "lib", "team", "team-x"} {
			paths = append(paths, top+"/"+job, top+"/"+job+"/config.xml", top+"/"+job+"/workspace", top+"/"+job+"/workspace/out.o",
				top+"/"+job+"/builds", top+"/"+job+"/builds/7", top+"/"+job+"/builds/7/log", top+"/"+job+"/builds/7/archive/x.jar",
				top+"/"+job+"/jobs/sub", top+"/"+job+"/jobs/sub/builds/1/log", top+"/"+job+"/jobs/sub/workspace/y")
		}
	}
	paths = append(paths, "a/b", "a/b/c", "a/b/c/e", "d/x", "d/x/deep", "d/y", "d/y/z", "identity.key.enc", "config.xml", "queue.xml")
	mustNew := func(spec Spec) *Selector {
		s, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sels := map[string]*Selector{
		"jenkins":                         mustNew(Spec{Preset: "jenkins"}),
		"controller":                      mustNew(Spec{Preset: "controller"}),
		"globs":                           mustNew(Spec{Preset: "none", Include: []string{"a/*/c", "d", "**/builds"}, Exclude: []string{"d/x", "**/workspace"}}),
		"excluded parent, included child": mustNew(Spec{Preset: "none", Include: []string{"**/log"}, Exclude: []string{"jobs/app"}}),
		"intersection": Intersect(mustNew(Spec{Preset: "jenkins"}),
			mustNew(Spec{Preset: "none", Include: []string{"jobs/team*", "nodes"}, Exclude: []string{"jobs/*/builds/7/log"}})),
	}
	orders := map[string][]string{"walk": walkOrder(paths), "byte": slices.Sorted(slices.Values(paths)), "given": paths}
	for name, s := range sels {
		for order, ps := range orders {
			m, selected := s.Memo(), 0
			for _, p := range ps {
				got, want := m.Selected(p), s.Selected(p)
				if got != want {
					t.Errorf("%s, %s order: Memo.Selected(%q) = %v, Selected = %v", name, order, p, got, want)
				}
				if want {
					selected++
				}
			}
			if selected == 0 || selected == len(ps) {
				t.Errorf("%s: selects %d of %d paths: the case tells nothing", name, selected, len(ps))
			}
		}
	}
}
