package restore

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testhome"
)

func jenkinsAllows(tb testing.TB) func(string) bool {
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		tb.Fatal(err)
	}
	return func(rel string) bool { return sel.Selected(rel) || sel.Enter(rel) }
}

// TestCommitLogParserRefusesWhatACommitNeverWrites: a commit log is acted on
// only if every line is one a commit writes, on a path a manifest could
// hold and the selection reaches.
func TestCommitLogParserRefusesWhatACommitNeverWrites(t *testing.T) {
	allowed := jenkinsAllows(t)
	good := "homesnap-journal 1 \".homesnap-displaced-x-1\"\n" +
		"D \"jobs/a\"\nI \"jobs/a\"\nM \"jobs\" 1000 1000 493 1 2\n"
	j, err := parseCommitLog([]byte(good), allowed)
	if err != nil {
		t.Fatal(err)
	}
	want := &parsedLog{displaced: ".homesnap-displaced-x-1", steps: []logStep{
		{kind: 'D', rel: "jobs/a"}, {kind: 'I', rel: "jobs/a"},
		{kind: 'M', rel: "jobs", uid: 1000, gid: 1000, mode: 0o755, atime: 1, mtime: 2},
	}}
	if !reflect.DeepEqual(j, want) {
		t.Fatalf("parsed %+v, want %+v", j, want)
	}
	// Killed between creating the commit log and writing its header: no step ran.
	if j, err := parseCommitLog(nil, allowed); err != nil || len(j.steps) != 0 || j.displaced != "" {
		t.Errorf("empty journal: %v, %+v", err, j)
	}
	// The kill cut the last line short: that step never ran.
	if j, err := parseCommitLog([]byte(good+`M "jobs/b" 10`), allowed); err != nil || len(j.steps) != 3 {
		t.Errorf("cut last line: %v, %+v", err, j)
	}
	for name, journal := range map[string]string{
		"no header":                "D \"jobs/a\"\n",
		"other version":            "homesnap-journal 2 -\n",
		"displaced outside":        "homesnap-journal 1 \"../../etc\"\n",
		"displaced not ours":       "homesnap-journal 1 \"jobs\"\n",
		"displaced nested":         "homesnap-journal 1 \".homesnap-displaced-x/../../etc\"\n",
		"absolute":                 "homesnap-journal 1 -\nM \"/etc/shadow\" 0 0 511 0 0\n",
		"dot-dot":                  "homesnap-journal 1 -\nD \"jobs/../../etc\"\n",
		"dot":                      "homesnap-journal 1 -\nI \"./jobs\"\n",
		"reserved":                 "homesnap-journal 1 -\nI \".homesnap-home.json\"\n",
		"unselected":               "homesnap-journal 1 -\nM \"workspace/sh\" 0 0 3565 0 0\n",
		"unknown step":             "homesnap-journal 1 -\nX \"jobs/a\"\n",
		"unquoted":                 "homesnap-journal 1 -\nD jobs/a\n",
		"mode beyond special bits": "homesnap-journal 1 -\nM \"jobs\" 0 0 65535 0 0\n",
		"negative owner":           "homesnap-journal 1 -\nM \"jobs\" -1 0 493 0 0\n",
		"owner too large":          "homesnap-journal 1 -\nM \"jobs\" 4294967295 0 493 0 0\n",
		"missing fields":           "homesnap-journal 1 -\nM \"jobs\" 0 0\n",
		"extra after path":         "homesnap-journal 1 -\nD \"jobs\" 0\n",
		"garbage mid-file":         "homesnap-journal 1 -\nD \"jobs\"\n\x00\x01\nD \"nodes\"\n",
		"NUL in path":              "homesnap-journal 1 -\nD \"jobs/\\x00\"\n",
	} {
		if j, err := parseCommitLog([]byte(journal), allowed); err == nil {
			t.Errorf("%s: accepted: %+v", name, j)
		}
	}
}

// FuzzJournalParse: whatever the bytes, the parser never panics, and what
// it accepts is only safe steps, which the writer's format gives back
// unchanged.
func FuzzJournalParse(f *testing.F) {
	f.Add([]byte("homesnap-journal 1 -\nD \"jobs/a\"\nI \"jobs/a\"\nM \"jobs\" 1000 1000 493 1 2\n"))
	f.Add([]byte("homesnap-journal 1 \".homesnap-displaced-x-1\"\nM \"nodes/n/config.xml\" 0 0 3565 -1 9223372036854775807\nD \"secr"))
	f.Add([]byte("homesnap-journal 1 -\nM \"../x\" 0 0 2559 0 0\n"))
	f.Add([]byte("homesnap-journal 1 -\nI \"jobs/\\u00e9\\\"q\"\n"))
	allowed := jenkinsAllows(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := parseCommitLog(data, allowed)
		if err != nil {
			return
		}
		if j.displaced != "" && !validStateName(j.displaced, displacedPrefix) {
			t.Fatalf("accepted displaced directory %q", j.displaced)
		}
		var b strings.Builder
		b.WriteString("homesnap-journal 1 -\n")
		for _, s := range j.steps {
			if err := checkStatePath(s.rel, allowed); err != nil {
				t.Fatalf("accepted %q: %v", s.rel, err)
			}
			if s.mode > 0o7777 || s.uid < 0 || s.uid > fetch.MaxUID || s.gid < 0 || s.gid > fetch.MaxUID {
				t.Fatalf("accepted %+v", s)
			}
			b.WriteString(s.String() + "\n")
		}
		again, err := parseCommitLog([]byte(b.String()), allowed)
		if err != nil || !reflect.DeepEqual(again.steps, j.steps) {
			t.Fatalf("written back, %+v parses as %+v (%v)", j.steps, again, err)
		}
	})
}

// plantStage writes a staging directory with journal into home, owned by
// uid with mode 0700, as a killed restore (or a home writer) leaves it.
func plantStage(t *testing.T, home, name, journal string, uid int) string {
	t.Helper()
	dir := filepath.Join(home, name)
	for _, d := range []string{dir, dir + "/tree"} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	p := dir + "/journal"
	if err := os.WriteFile(p, []byte(journal), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mode(t *testing.T, p string) (uint32, uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777, st.Uid
}

// quarantined returns the one quarantine directory in home.
func quarantined(t *testing.T, home string) string {
	t.Helper()
	q, _ := filepath.Glob(filepath.Join(home, quarantinePrefix+"*"))
	if len(q) != 1 {
		t.Fatalf("quarantine directories: %v, want one", q)
	}
	return q[0]
}

// TestForeignRestoreStateIsSetAside: staging directories this restore did
// not make (another uid's, accessible to others, a symlink, a commit log that
// is a symlink or not a commit's) are renamed to a quarantine directory,
// whole, and never replayed.
func TestForeignRestoreStateIsSetAside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to plant state owned by another uid")
	}
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	evil := "homesnap-journal 1 -\nM \"" + secret + "\" 1000 1000 2559 0 0\n"
	for name, plant := range map[string]func(home string){
		"another uid's": func(home string) { plantStage(t, home, stagePrefix+"x", evil, 1000) },
		"world-writable": func(home string) {
			os.Chmod(plantStage(t, home, stagePrefix+"x", "homesnap-journal 1 -\nD \"jobs\"\n", 0), 0o777)
		},
		"a symlink": func(home string) {
			plantStage(t, outside, "stage", "homesnap-journal 1 -\nD \"jobs\"\n", 0)
			os.Symlink(filepath.Join(outside, "stage"), filepath.Join(home, stagePrefix+"x"))
		},
		"journal a symlink": func(home string) {
			dir := plantStage(t, home, stagePrefix+"x", "", 0)
			os.Remove(dir + "/journal")
			os.Symlink(secret, dir+"/journal")
		},
		"journal not a commit's": func(home string) { plantStage(t, home, stagePrefix+"x", evil, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
				t.Fatal(err)
			}
			home := t.TempDir()
			snaptest.Write(t, home, "jobs/a/config.xml", "<a/>")
			plant(home)
			if err := RecoverInterrupted(testhome.Open(t, home), zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			if m, uid := mode(t, secret); m != 0o600 || uid != 0 {
				t.Errorf("outside file is %04o uid %d", m, uid)
			}
			if _, err := os.Lstat(filepath.Join(home, stagePrefix+"x")); err == nil {
				t.Error("still in place")
			}
			if q := quarantined(t, home); name == "another uid's" {
				if got, err := os.ReadFile(q + "/journal"); string(got) != evil {
					t.Errorf("the quarantined journal holds %q (%v)", got, err)
				}
			}
			if _, err := os.Stat(filepath.Join(home, "jobs/a/config.xml")); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestOwnCommitLogActsOnlyBeneathTheHome: a commit log that passes as the
// restore's own (as it does when the restore runs as the home writer's
// uid) still cannot follow a symlink, replace a path or set setuid.
func TestOwnCommitLogActsOnlyBeneathTheHome(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	snaptest.Write(t, home, "jobs/a/run.sh", "#!/bin/sh\n")
	if err := os.Symlink(outside, filepath.Join(home, "jobs/link")); err != nil {
		t.Fatal(err)
	}
	uid := os.Geteuid()

	// Setuid and setgid are dropped from the mode a commit log restores.
	plantStage(t, home, stagePrefix+"a", "homesnap-journal 1 -\nM \"jobs/a/run.sh\" 0 0 3565 0 0\n", uid)
	if err := RecoverInterrupted(testhome.Open(t, home), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if m, _ := mode(t, filepath.Join(home, "jobs/a/run.sh")); m != 0o755 {
		t.Errorf("run.sh has mode %04o, want 0755", m)
	}
	snaptest.AssertNoStaging(t, home)

	// Through a symlink: refused, nothing outside changes, nothing removed.
	stage := plantStage(t, home, stagePrefix+"b", "homesnap-journal 1 -\nM \"jobs/link/secret\" 0 0 511 0 0\n", uid)
	err := RecoverInterrupted(testhome.Open(t, home), zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "jobs/link/secret") {
		t.Errorf("a step through a symlink: %v", err)
	}
	if m, _ := mode(t, secret); m != 0o600 {
		t.Errorf("outside file is %04o", m)
	}
	if _, err := os.Stat(stage + "/journal"); err != nil {
		t.Errorf("the journal was removed: %v", err)
	}
	os.RemoveAll(stage)

	// A step on a symlink itself gives it its times, and its target no mode.
	plantStage(t, home, stagePrefix+"d", "homesnap-journal 1 -\nM \"jobs/link\" 0 0 511 0 0\n", uid)
	if err := RecoverInterrupted(testhome.Open(t, home), zerolog.Nop()); err != nil {
		t.Errorf("a step on a symlink: %v", err)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() == 0o777 {
		t.Errorf("the link's target: %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Lstat(filepath.Join(home, "jobs/link")); err != nil || !fi.ModTime().Equal(time.Unix(0, 0)) {
		t.Errorf("the link's own times were not set: %v", err)
	}
	snaptest.AssertNoStaging(t, home)

	// A displaced path never replaces what the home holds.
	disp := displacedPrefix + "x-1"
	snaptest.Write(t, home, disp+"/jobs/a/run.sh", "planted")
	stage = plantStage(t, home, stagePrefix+"c", "homesnap-journal 1 \""+disp+"\"\nD \"jobs/a/run.sh\"\n", uid)
	if err := RecoverInterrupted(testhome.Open(t, home), zerolog.Nop()); err == nil {
		t.Error("a displaced path replaced a home path without a word")
	}
	if got, _ := os.ReadFile(filepath.Join(home, "jobs/a/run.sh")); string(got) != "#!/bin/sh\n" {
		t.Errorf("run.sh now holds %q", got)
	}
	if _, err := os.Stat(stage + "/journal"); err != nil {
		t.Errorf("the journal was removed: %v", err)
	}
}
