package fetch

import (
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/selector"
)

// A restore applies a file only if both the snapshot's selection and its
// own select it, whether the two are the same selection (then one memo
// answers for both) or not.
func TestFilterAppliesWhatBothSelectionsSelect(t *testing.T) {
	paths := []string{
		"config.xml", "credentials.xml", "secret.key", "identity.key.enc",
		"jobs/a/config.xml", "jobs/a/builds/1/build.xml", "jobs/a/builds/1/log", "jobs/a/workspace/x",
		"nodes/agent-1/config.xml", "secrets/master.key", "plugins/git.jpi", "users/admin/config.xml",
	}
	specs := map[string]selector.Spec{
		"jenkins":    {Preset: "jenkins"},
		"controller": {Preset: "controller"},
		"no logs":    {Preset: "jenkins", Exclude: []string{"**/log"}},
	}
	for sn, snapSpec := range specs {
		for ln, localSpec := range specs {
			local, err := selector.New(localSpec)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := selector.New(snapSpec)
			if err != nil {
				t.Fatal(err)
			}
			for _, partial := range [][]string{nil, {"jobs/a"}} {
				f, err := newFilter(local, partial, nil, snapSpec)
				if err != nil {
					t.Fatal(err)
				}
				lsel, err := LocalSelector(local, partial, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range paths {
					if !snap.Selected(p) {
						continue // such a manifest is refused
					}
					got, err := f.check(&archive.Entry{Path: p, Type: archive.TypeFile, Mode: 0o644})
					if err != nil {
						t.Fatalf("%s: %v", p, err)
					}
					if want := lsel.Selected(p); got != want {
						t.Errorf("snapshot %s, restore %s, partial %v: %s applied %v, want %v", sn, ln, partial, p, got, want)
					}
				}
			}
		}
	}
}
