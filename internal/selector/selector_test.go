package selector

import "testing"

func TestJenkinsPreset(t *testing.T) {
	s, err := New(Spec{Preset: "jenkins"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{
		"nodes":                      true,
		"nodes/agent-1/config.xml":   true,
		"secrets":                    true,
		"secrets/master.key":         true,
		"jobs/a/config.xml":          true,
		"jobs/F/jobs/b/builds/1/log": true,
		"jobs/MB/branches/feature-x.abc/config.xml": true,
		"identity.key.enc":                          true,
		"secret.key":                                true,
		"secret.key.not-so-secret":                  true,
		"jobs/a/workspace":                          false,
		"jobs/a/workspace/src/x.c":                  false,
		"jobs/F/jobs/b/workspace@tmp/lock":          false,
		"jobs/a/workspace@2":                        false,
		"jobs/a/config.xml-atomic123tmp":            false,
		"nodes/n/config.xml-atomic9tmp":             false,
		"plugins/git.jpi":                           false,
		"war/index.html":                            false,
		"workspace/a":                               false,
		"config.xml":                                false,
		"jobsx/a":                                   false,
	}
	for p, want := range cases {
		if got := s.Selected(p); got != want {
			t.Errorf("Selected(%q) = %v, want %v", p, got, want)
		}
	}
	if s.Enter("plugins") || s.Enter("jobs/a/workspace") || !s.Enter("jobs/a") {
		t.Error("Enter prunes wrongly")
	}
}

func TestIncludeExcludeGlobs(t *testing.T) {
	s, err := New(Spec{Preset: "jenkins", Include: []string{"users/*/config.xml", "**/*.groovy"}, Exclude: []string{"jobs/**/builds/*/archive"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{
		"users/admin/config.xml":         true,
		"users/admin/apiTokenStats.xml":  false,
		"init.groovy":                    true,
		"a/b/c/init.groovy":              true,
		"jobs/x/builds/3/archive/t.jar":  false,
		"jobs/x/builds/3/log":            true,
		"jobs/F/jobs/y/builds/1/archive": false,
	}
	for p, want := range cases {
		if got := s.Selected(p); got != want {
			t.Errorf("Selected(%q) = %v, want %v", p, got, want)
		}
	}
	if !s.Enter("users") || !s.Enter("users/admin") || !s.Enter("anything") {
		t.Error("Enter must descend towards includes")
	}
}

// SelectedIn must agree with Selected along any walk.
func TestSelectedInAgreesWithSelected(t *testing.T) {
	s, _ := New(Spec{Preset: "none", Include: []string{"a/*/c", "d"}, Exclude: []string{"d/x"}})
	paths := []string{"a", "a/b", "a/b/c", "a/b/c/e", "d", "d/x", "d/y", "d/y/z"}
	for _, p := range paths {
		parent := ""
		if i := len(p) - 1; i > 0 {
			for j := len(p) - 1; j >= 0; j-- {
				if p[j] == '/' {
					parent = p[:j]
					break
				}
			}
		}
		ps := parent != "" && s.Selected(parent)
		if got, want := s.SelectedIn(ps, p), s.Selected(p); got != want {
			t.Errorf("%s: SelectedIn=%v Selected=%v", p, got, want)
		}
	}
}

func TestBadPatterns(t *testing.T) {
	for _, spec := range []Spec{{Preset: "nope"}, {Include: []string{"a/../b"}}, {Exclude: []string{"[z-a"}}} {
		if _, err := New(spec); err == nil {
			t.Errorf("New(%+v) accepted", spec)
		}
	}
}

// mustNew is New for a spec the test knows to be valid.
func mustNew(t *testing.T, spec Spec) *Selector {
	t.Helper()
	s, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIntersectSelectsWhatEverySelectorSelects(t *testing.T) {
	s := Intersect(mustNew(t, Spec{Preset: "jenkins"}), mustNew(t, Spec{Preset: "all"}), mustNew(t, Spec{Preset: "none", Include: []string{"jobs/a", "plugins"}}))
	for p, want := range map[string]bool{
		"jobs/a/config.xml": true, "jobs/a": true, "jobs/b/config.xml": false, "jobs": false,
		"plugins/git.jpi": false, "jobs/a/workspace/x": false, "nodes/n": false,
	} {
		if got := s.Selected(p); got != want {
			t.Errorf("Selected(%q) = %v, want %v", p, got, want)
		}
	}
	// jobs is not selected by the intersection, but jobs/a is: SelectedIn
	// must not rely on the parent.
	if !s.SelectedIn(false, "jobs/a") || s.SelectedIn(false, "jobs/b") || !s.SelectedIn(true, "jobs/a/x") {
		t.Error("SelectedIn disagrees with Selected")
	}
	if !s.Enter("jobs") || s.Enter("plugins") || s.Enter("nodes") || s.Enter("jobs/a/workspace") {
		t.Error("Enter wrong for an intersection")
	}
}

func TestControllerPreset(t *testing.T) {
	s, err := New(Spec{Preset: "controller"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{
		"config.xml":                      true,
		"credentials.xml":                 true,
		"queue.xml":                       true,
		"users/admin_1/config.xml":        true,
		"hudson.plugins.git.GitTool.xml":  true,
		"fingerprints/ab/cd/x.xml":        true,
		"userContent/readme.txt":          true,
		"nodes/a/config.xml":              true,
		"secrets/master.key":              true,
		"identity.key.enc":                true,
		"jobs/a/builds/1/log":             true,
		"plugins/git.jpi":                 false,
		"plugins/git/WEB-INF/lib/git.jar": false,
		"war/index.html":                  false,
		"caches/git-abc/objects/1":        false,
		"logs/tasks/x.log":                false,
		"jenkins.log":                     false,
		"workspace/a/x":                   false,
		"jobs/a/workspace/x":              false,
		"jobs/a/workspace@tmp":            false,
		"updates/default.json":            false,
		"tools/maven/bin/mvn":             false,
		"jobs/a/config.xml-atomic123tmp":  false,
	}
	for p, want := range cases {
		if got := s.Selected(p); got != want {
			t.Errorf("Selected(%q) = %v, want %v", p, got, want)
		}
	}
}

// Same lets a restore ask one selector instead of two for every path; it
// must never say so of selectors that could disagree.
func TestSameOnlyForEqualSpecs(t *testing.T) {
	mk := func(spec Spec) *Selector { return mustNew(t, spec) }
	jenkins := mk(Spec{})
	cases := []struct {
		name string
		o    *Selector
		want bool
	}{
		{"the default preset spelled out", mk(Spec{Preset: "jenkins"}), true},
		{"another preset", mk(Spec{Preset: "controller"}), false},
		{"an extra include", mk(Spec{Include: []string{"plugins/*.jpi"}}), false},
		{"an extra exclude", mk(Spec{Exclude: []string{"jobs/x"}}), false},
		{"an intersection with itself", Intersect(jenkins, jenkins), false},
	}
	for _, c := range cases {
		if got := jenkins.Same(c.o); got != c.want {
			t.Errorf("%s: Same = %v, want %v", c.name, got, c.want)
		}
		if got := c.o.Same(jenkins); got != c.want {
			t.Errorf("%s, asked the other way: Same = %v, want %v", c.name, got, c.want)
		}
	}
}
