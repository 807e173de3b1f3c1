package cli

import (
	"filippo.io/age"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/snaptest"
)

// diffResult is diff's documented JSON object: diffHead and its changes.
type diffResult struct {
	diffHead
	Changes []diffChange `json:"changes"`
	Error   string       `json:"error"`
}

// diff compares two snapshots from their manifests, and a snapshot with
// the home, one line per path that differs, in walk order.
func TestDiff(t *testing.T) {
	home, store := snaptest.NewHome(t), t.TempDir()
	homesnap := func(args ...string) ran {
		return homesnapRun("homesnap", append(args, "--store", store, "--log-level", "error")...)
	}
	snap := func() string {
		t.Helper()
		r := homesnap("snapshot", "--once", "--home", home)
		if r.code != 0 {
			t.Fatalf("snapshot --once: exit %d\n%s", r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	gone := "jobs/déploiement-生产/config.xml"
	if _, ok := snaptest.Selected(t, home)[gone]; !ok {
		t.Fatalf("the fixture's %s is not selected", gone)
	}
	first := snap()
	snaptest.Write(t, home, "jobs/added/config.xml", "<added/>")
	snaptest.Write(t, home, "jobs/test/config.xml", "<project><description>a longer one</description></project>\n")
	if err := os.Remove(filepath.Join(home, gone)); err != nil {
		t.Fatal(err)
	}
	second := snap()

	want := "+ jobs/added\n+ jobs/added/config.xml\n- " + gone + "\nM jobs/test/config.xml (size, mtime, content)\n"
	r := homesnap("diff", first, second)
	if r.code != 0 || r.stdout != want {
		t.Errorf("diff %s %s: exit %d\n%s\nwant:\n%s\n%s", first, second, r.code, r.stdout, want, r.stderr)
	}
	// The same snapshots by other names, the flags anywhere; the other
	// way round, what was added is removed.
	for _, args := range [][]string{{"diff", first, "head"}, {"diff", "--output", "text", first, "2999-01-01T00:00:00Z"}} {
		if r := homesnap(args...); r.code != 0 || r.stdout != want {
			t.Errorf("%v: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := homesnap("diff", second, first); r.code != 0 || !strings.HasPrefix(r.stdout, "- jobs/added\n- jobs/added/config.xml\n+ "+gone+"\n") {
		t.Errorf("diff %s %s: exit %d\n%s", second, first, r.code, r.stdout)
	}

	var j diffResult
	decode(t, homesnap("diff", first, second, "--output", "json"), &j)
	var paths []string
	for _, c := range j.Changes {
		paths = append(paths, c.Change+" "+c.Path)
	}
	if j.Old.Snapshot != first || j.New.Snapshot != second || j.Old.Time == nil || j.New.Home != "" || j.Error != "" ||
		!slices.Equal(paths, []string{"added jobs/added", "added jobs/added/config.xml", "removed " + gone, "modified jobs/test/config.xml"}) {
		t.Errorf("diff --output json: %+v, changes %v", j, paths)
	} else if m := j.Changes[3]; !slices.Equal(m.What, []string{"size", "mtime", "content"}) || m.Old.SHA256 == m.New.SHA256 || m.New.Size != int64(len("<project><description>a longer one</description></project>\n")) || j.Changes[0].New.Type != "d" || j.Changes[2].Old == nil {
		t.Errorf("the changes in JSON: %+v", j.Changes)
	}

	// A snapshot against the home: nothing since it was taken, then what
	// changed, walked without following a symlink out of the home.
	if r := homesnap("diff", "head", "--home", home); r.code != 0 || r.stdout != "" {
		t.Errorf("diff head --home of the home just snapshotted: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	outside := t.TempDir()
	snaptest.Write(t, outside, "config.xml", "<outside/>")
	if err := os.Symlink(outside, filepath.Join(home, "jobs/evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(home, "jobs/test/config.xml"), 0o600); err != nil {
		t.Fatal(err)
	}
	snaptest.Write(t, home, "jobs/new/config.xml", "<new/>")
	if err := os.Remove(filepath.Join(home, "jobs/added/config.xml")); err != nil {
		t.Fatal(err)
	}
	r = homesnap("diff", second, "--home", home)
	want = "- jobs/added/config.xml\n+ jobs/evil\n+ jobs/new\n+ jobs/new/config.xml\nM jobs/test/config.xml (mode)\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("diff %s --home: exit %d\n%s\nwant:\n%s\n%s", second, r.code, r.stdout, want, r.stderr)
	}
	j = diffResult{}
	decode(t, homesnap("diff", second, "--home", home, "--output", "json"), &j)
	if j.New.Home != home || j.New.Snapshot != "" || len(j.Changes) != 5 || j.Changes[1].New.Type != "l" || j.Changes[1].New.Link != outside {
		t.Errorf("diff --home --output json: %+v", j)
	}

	// Mistakes: exit 4 naming a snapshot the store does not have, 2 for
	// what is not a snapshot or a missing home; stdout stays empty.
	bad := "20000101T000000.000Z-000000"
	t.Setenv("JENKINS_HOME", "")
	for _, c := range []struct {
		args  []string
		code  int
		names string
	}{
		{[]string{first, bad}, ExitNoSnapshot, bad}, {[]string{bad, "--home", home}, ExitNoSnapshot, bad},
		{[]string{"yesterday", first}, ExitUsage, "yesterday"}, {nil, ExitUsage, "one or two snapshots"},
		{[]string{first, second, "head"}, ExitUsage, "one or two snapshots"}, {[]string{first}, ExitUsage, "--home"},
	} {
		r := homesnap(append(append([]string{"diff"}, c.args...), "--output", "json")...)
		if r.code != c.code || r.stdout != "" || !strings.Contains(r.stderr, c.names) {
			t.Errorf("diff %v: exit %d, want %d naming %s; stdout %q\n%s", c.args, r.code, c.code, c.names, r.stdout, r.stderr)
		}
	}

	// Two snapshots are compared from their manifests: without a single
	// archive in the store, the diff is the same.
	archives := 0
	filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "archives") {
			archives++
			return os.Remove(p)
		}
		return err
	})
	if r := homesnap("diff", first, second); archives == 0 || r.code != 0 || !strings.HasPrefix(r.stdout, "+ jobs/added\n") {
		t.Errorf("diff with the %d archives removed: exit %d\n%s\n%s", archives, r.code, r.stdout, r.stderr)
	}
}

// diff reads an encrypted or authenticated store as ls does: the same
// refusal, with the same exit status, without the key or on a forged
// manifest, and the same reading with the key.
func TestDiffReadsAsLsDoes(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keys := t.TempDir()
	identity, authKey := filepath.Join(keys, "age.key"), filepath.Join(keys, "auth.key")
	if os.WriteFile(identity, []byte(id.String()+"\n"), 0o600) != nil || os.WriteFile(authKey, []byte(strings.Repeat("5a", 32)), 0o600) != nil {
		t.Fatal("cannot write the keys")
	}
	for _, key := range [][]string{{"--age-identity-file", identity}, {"--auth-key-file", authKey}} {
		t.Run(key[0], func(t *testing.T) {
			home, store := snaptest.NewHome(t), t.TempDir()
			homesnap := func(args ...string) ran {
				return homesnapRun("homesnap", append(args, "--store", store, "--log-level", "error")...)
			}
			var ids []string
			for range 2 {
				r := homesnap(append([]string{"snapshot", "--once", "--home", home}, key...)...)
				if r.code != 0 {
					t.Fatalf("snapshot: exit %d\n%s", r.code, r.stderr)
				}
				ids = append(ids, strings.TrimSpace(r.stdout))
				snaptest.Write(t, home, "jobs/added/config.xml", "<added/>")
			}
			if r := homesnap(append([]string{"diff", ids[0], ids[1]}, key...)...); r.code != 0 || r.stdout != "+ jobs/added\n+ jobs/added/config.xml\n" {
				t.Errorf("diff with %s: exit %d\n%s\n%s", key[0], r.code, r.stdout, r.stderr)
			}
			ls, diff := homesnap("ls", ids[1]), homesnap("diff", ids[0], ids[1])
			if ls.code == 0 || diff.code != ls.code || diff.stdout != "" {
				t.Errorf("without %s: ls exits %d, diff %d\n%s", key[0], ls.code, diff.code, diff.stderr)
			}
			// A manifest changed in the store is refused by both.
			var manifest string
			filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.Contains(p, ids[1]+".json.zst") {
					manifest = p
				}
				return err
			})
			data, err := os.ReadFile(manifest)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 1
			if err := os.WriteFile(manifest, data, 0o600); err != nil {
				t.Fatal(err)
			}
			ls, diff = homesnap(append([]string{"ls", ids[1]}, key...)...), homesnap(append([]string{"diff", ids[0], ids[1]}, key...)...)
			if ls.code == 0 || diff.code != ls.code || diff.stdout != "" {
				t.Errorf("a changed manifest, with %s: ls exits %d, diff %d\n%s", key[0], ls.code, diff.code, diff.stderr)
			}
		})
	}
}

// What cannot name a snapshot is a mistake on the command line, exit 2
// naming it, before the store is read; not a damaged store (ls said
// "corrupt store", exit 6, on main).
func TestSnapshotNamesAreChecked(t *testing.T) {
	store, _, _ := storeWithSnapshot(t)
	home := t.TempDir()
	for _, args := range [][]string{{"ls", "nope"}, {"verify", "--snapshot", "nope"}, {"restore", "--home", home, "--snapshot", "../../etc"}, {"diff", "nope", "head"}} {
		r := homesnapRun("homesnap", append(args, "--store", store)...)
		name := args[1]
		if len(args) > 2 {
			name = args[len(args)-1]
		}
		if args[0] == "diff" {
			name = "nope"
		}
		if r.code != ExitUsage || !strings.Contains(r.stderr, `"`+name+`"`) || !strings.Contains(r.stderr, "homesnap list") || r.stdout != "" {
			t.Errorf("%v: exit %d, want %d naming %q\n%s", args, r.code, ExitUsage, name, r.stderr)
		}
	}
	if !isEmpty(t, home) {
		t.Error("the home was changed")
	}
}
