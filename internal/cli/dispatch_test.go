package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/snaptest"
)

// homesnapRun runs `homesnap ARGS` in this process, as the binary would.
type ran struct {
	code           int
	stdout, stderr string
}

func homesnapRun(argv0 string, args ...string) ran {
	var out, errs strings.Builder
	code := homesnap(append([]string{argv0}, args...), &out, &errs)
	return ran{code, out.String(), errs.String()}
}

// storeWithSnapshot returns a local store holding one snapshot of a
// Jenkins home, and that home.
func storeWithSnapshot(t *testing.T) (store, home, id string) {
	t.Helper()
	home, store = snaptest.NewHome(t), t.TempDir()
	r := homesnapRun("homesnap", "snapshot", "--once", "--home", home, "--store", store, "--log-level", "warn")
	if r.code != 0 {
		t.Fatalf("snapshot --once: exit %d\n%s", r.code, r.stderr)
	}
	return store, home, strings.TrimSpace(r.stdout)
}

func isEmpty(t *testing.T, dir string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries) == 0
}

// A variable that selected a command in earlier releases (issue 30: a
// ConfigMap shared with the verify job turned the init container into a
// check that restored nothing and exited 0) is refused by every command,
// naming the command to run, and nothing is done.
func TestModeVariablesAreRefused(t *testing.T) {
	store, _, _ := storeWithSnapshot(t)
	for _, m := range modeVariables {
		t.Run(m.env, func(t *testing.T) {
			t.Setenv(m.env, "true")
			home := t.TempDir()
			r := homesnapRun("homesnap", "restore", "--home", home, "--store", store)
			if r.code != ExitUsage {
				t.Errorf("restore with %s=true: exit %d, want %d\nstdout: %s\nstderr: %s", m.env, r.code, ExitUsage, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, m.env) || !strings.Contains(r.stderr, "`"+m.command+"`") {
				t.Errorf("the error does not name %s and `%s`:\n%s", m.env, m.command, r.stderr)
			}
			if !isEmpty(t, home) {
				t.Error("the home was changed")
			}
			// Every command, under its old name too.
			for _, argv := range [][]string{{"homesnap", "snapshot", "--once", "--home", home, "--store", store}, {"prune", "--store", store}, {"homesnap", "list", "--store", store}} {
				if r := homesnapRun(argv[0], argv[1:]...); r.code != ExitUsage || !strings.Contains(r.stderr, m.env) {
					t.Errorf("%v with %s=true: exit %d, want %d naming it\n%s", argv, m.env, r.code, ExitUsage, r.stderr)
				}
			}
		})
	}
	t.Run("empty", func(t *testing.T) { // an empty variable is unset, as everywhere
		t.Setenv("HOMESNAP_LIST", "")
		home := t.TempDir()
		if r := homesnapRun("restore", "--home", home, "--store", store); r.code != 0 || isEmpty(t, home) {
			t.Errorf("restore with HOMESNAP_LIST empty: exit %d\n%s", r.code, r.stderr)
		}
	})
}

// list, verify and check-agents are commands, with the flags they took
// under restore; restore's old flags still work, with a warning naming the
// command.
func TestInspectingCommands(t *testing.T) {
	store, home, id := storeWithSnapshot(t)

	r := homesnapRun("homesnap", "list", "--store", store, "--output", "json")
	var listed []struct {
		ID   string `json:"id"`
		Head bool   `json:"head"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); r.code != 0 || err != nil || len(listed) != 1 || listed[0].ID != id || !listed[0].Head {
		t.Errorf("list --output json: exit %d, %v, %+v, want the head %s\n%s", r.code, err, listed, id, r.stderr)
	}

	for _, args := range [][]string{{"--structure"}, {"--snapshot", id}, {"--at", "2999-01-01T00:00:00Z"}} {
		r := homesnapRun("homesnap", append([]string{"verify", "--store", store}, args...)...)
		if r.code != 0 || r.stdout != "ok\t"+id+"\n" {
			t.Errorf("verify %v: exit %d, %q, want ok %s\n%s", args, r.code, r.stdout, id, r.stderr)
		}
	}

	r = homesnapRun("homesnap", "check-agents", "--home", home, "--store", store, "--snapshot", "head", "--compare", "home", "--output", "json")
	var report struct {
		Checked    string `json:"checked"`
		Continuity bool   `json:"continuity"`
	}
	// The test home's agents do not all get back in (exit 1), but the
	// report is the snapshot's, compared with the home.
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || report.Checked != "snapshot "+id || (r.code == 0) != report.Continuity || r.code > 1 || !strings.Contains(r.stdout, `"compared_with": "home `) {
		t.Errorf("check-agents: exit %d, %v, %+v\n%s\n%s", r.code, err, report, r.stdout, r.stderr)
	}

	// A restore flag a command does not take is a usage error.
	if r := homesnapRun("homesnap", "list", "--store", store, "--force"); r.code != ExitUsage {
		t.Errorf("list --force: exit %d, want %d", r.code, ExitUsage)
	}

	for flag, command := range map[string]string{"--list": "homesnap list", "--verify-structure": "homesnap verify --structure"} {
		r := homesnapRun("restore", "--store", store, flag, "--log-format", "json")
		if r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stderr, "restore "+flag+" is deprecated: run `"+command+"`") {
			t.Errorf("restore %s: exit %d\nstdout: %s\nstderr: %s", flag, r.code, r.stdout, r.stderr)
		}
	}
}

func TestDispatch(t *testing.T) {
	r := homesnapRun("homesnap", "--help")
	for _, c := range commands {
		if !regexp.MustCompile(`(?m)^  ` + c.name + ` +\S`).MatchString(r.stdout) {
			t.Errorf("homesnap --help does not list %s:\n%s", c.name, r.stdout)
		}
	}
	if r.code != 0 {
		t.Errorf("homesnap --help: exit %d", r.code)
	}
	r = homesnapRun("homesnap", "restroe")
	if r.code != ExitUsage || !strings.Contains(r.stderr, `unknown command "restroe"`) || !strings.Contains(r.stderr, "restore, snapshot, prune, list") {
		t.Errorf("an unknown command: exit %d\n%s", r.code, r.stderr)
	}
	if r := homesnapRun("homesnap"); r.code != ExitUsage || !strings.Contains(r.stderr, "Commands:") {
		t.Errorf("no command: exit %d\n%s", r.code, r.stderr)
	}
	// Through a link, by its name.
	for argv0, name := range map[string]string{"/usr/local/bin/restore": "restore", "homesnap-restore": "restore", "snapshot": "snapshot", "/bin/homesnap-snapshot": "snapshot", "prune": "prune"} {
		if r := homesnapRun(argv0, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, name+" ") {
			t.Errorf("%s --version: exit %d, %q", argv0, r.code, r.stdout)
		}
		if r := homesnapRun(argv0, "--help"); !strings.HasPrefix(r.stderr, "Usage: homesnap "+name+" [flags]") {
			t.Errorf("%s --help says:\n%s", argv0, r.stderr)
		}
	}
	if r := homesnapRun("homesnap", "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "homesnap ") {
		t.Errorf("homesnap version: exit %d, %q", r.code, r.stdout)
	}
	if r := homesnapRun("homesnap", "help", "verify"); r.code != 0 || !strings.Contains(r.stdout, "--structure") {
		t.Errorf("homesnap help verify: exit %d\n%s", r.code, r.stdout)
	}
	// A command that takes arguments names them.
	for name, synopsis := range map[string]string{"diff": "A [B] [flags]", "ls": "[SNAPSHOT] [flags]", "list": "[flags]"} {
		if r := homesnapRun("homesnap", "help", name); r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: homesnap "+name+" "+synopsis+"\n") || !strings.Contains(r.stdout, "\nExit status:\n") {
			t.Errorf("homesnap help %s: exit %d, want usage %q\n%s", name, r.code, synopsis, r.stdout)
		}
	}
}

// Every command's --help ends with the exit statuses it can return, as
// the one table in exit.go words them.
func TestHelpEndsWithExitStatuses(t *testing.T) {
	for _, c := range commands {
		var text string
		if c.config != nil {
			r := homesnapRun("homesnap", c.name, "--help")
			text = r.stderr
		} else {
			text = homesnapRun("homesnap", "help", c.name).stdout
		}
		_, exits, ok := strings.Cut(text, "\nExit status:\n")
		if !ok {
			t.Errorf("%s --help has no exit statuses:\n%s", c.name, text)
			continue
		}
		var codes []int
		for _, s := range exitStatuses {
			line := regexp.MustCompile(`(?m)^  ` + strconv.Itoa(s.code) + ` +` + regexp.QuoteMeta(s.what) + `$`)
			if line.MatchString(exits) {
				codes = append(codes, s.code)
			}
		}
		if !slices.Equal(codes, c.exits) || strings.Count(strings.TrimSpace(exits), "\n")+1 != len(c.exits) {
			t.Errorf("%s --help lists statuses %v, want %v, and nothing after:\n%s", c.name, codes, c.exits, exits)
		}
	}
	// What each command can and cannot return.
	if restore := lookup("restore"); !slices.Contains(restore.exits, ExitRefused) {
		t.Error("restore --help does not list exit status 3 (refused)")
	}
	if prune := lookup("prune"); slices.Contains(prune.exits, ExitRefused) || slices.Contains(prune.exits, ExitNoSnapshot) {
		t.Error("prune --help lists restore's statuses 3 or 4")
	}
}

// The completion scripts offer every command and every flag of each, as
// --help lists them, and parse.
func TestCompletion(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  --([a-z0-9-]+)`)
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := homesnapRun("homesnap", "completion", shell)
		if r.code != 0 || r.stdout == "" {
			t.Fatalf("completion %s: exit %d\n%s", shell, r.code, r.stderr)
		}
		for _, c := range commands {
			if !strings.Contains(r.stdout, c.name) {
				t.Errorf("completion %s does not offer %s", shell, c.name)
			}
			if c.config == nil {
				continue
			}
			help := homesnapRun("homesnap", c.name, "--help").stderr
			flags := flagLine.FindAllStringSubmatch(help, -1)
			if len(flags) < 5 {
				t.Fatalf("%s --help lists %d flags", c.name, len(flags))
			}
			for _, f := range flags {
				word := "--" + f[1]
				if shell == "fish" {
					word = "-l " + f[1]
				}
				if !scriptOffers(r.stdout, c.name, word) {
					t.Errorf("completion %s does not offer %s to %s", shell, word, c.name)
				}
			}
		}
		// Each shell parses its script without running it (-n), where
		// it is installed; bash always is.
		if sh, err := exec.LookPath(shell); err == nil {
			script := filepath.Join(t.TempDir(), "homesnap."+shell)
			if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(sh, "-n", script).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		} else if shell == "bash" {
			t.Error("bash not found")
		}
	}
	if r := homesnapRun("homesnap", "completion", "tcsh"); r.code != ExitUsage {
		t.Errorf("completion tcsh: exit %d, want %d", r.code, ExitUsage)
	}
}

// scriptOffers reports whether a script's lines for command offer word.
func scriptOffers(script, command, word string) bool {
	for line := range strings.SplitSeq(script, "\n") {
		if (strings.Contains(line, "\t"+command+") ") || strings.Contains(line, "__fish_seen_subcommand_from "+command+"'")) &&
			regexp.MustCompile(`(^|[\s'"])`+regexp.QuoteMeta(word)+`($|[\s:'"])`).MatchString(line) {
			return true
		}
	}
	return false
}

// ls lists a snapshot's files from its manifest: every path of the home
// the snapshot selected, with its size, and nothing is restored.
func TestLs(t *testing.T) {
	store, home, id := storeWithSnapshot(t)
	r := homesnapRun("homesnap", "ls", "--store", store)
	if r.code != 0 {
		t.Fatalf("ls: exit %d\n%s", r.code, r.stderr)
	}
	listed := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			t.Fatalf("ls line %q: want type+mode, owner, size, time, path", line)
		}
		listed[f[4]] = f[0][:1] + " " + f[2]
	}
	for p, a := range snaptest.Selected(t, home) {
		want := a.Type + " " + strconv.FormatInt(a.Size, 10)
		if a.Type != "f" {
			want = a.Type + " 0"
		}
		if p != "." && listed[p] != want {
			t.Errorf("ls shows %s as %q, want %q", p, listed[p], want)
		}
	}
	if len(listed) < 5 {
		t.Errorf("ls listed %d paths", len(listed))
	}
	// The snapshot named as an argument, or as --snapshot; one that does
	// not exist is exit 4.
	if r2 := homesnapRun("homesnap", "ls", id, "--store", store); r2.code != 0 || r2.stdout != r.stdout {
		t.Errorf("ls %s: exit %d, a listing other than the head's", id, r2.code)
	}
	if r := homesnapRun("homesnap", "ls", "20000101T000000.000Z-000000", "--store", store); r.code != ExitNoSnapshot {
		t.Errorf("ls of a snapshot that does not exist: exit %d, want %d\n%s", r.code, ExitNoSnapshot, r.stderr)
	}
	if r := homesnapRun("homesnap", "ls", id, "--snapshot", id, "--store", store); r.code != ExitUsage {
		t.Errorf("ls ID --snapshot ID: exit %d, want %d", r.code, ExitUsage)
	}
}

// The soft limit keeps a snapshot's room beside what the sidecar holds for
// good, and GOMEMLIMIT still wins.
func TestMakeRoomKeepsASnapshotsRoomBesideTheJournal(t *testing.T) {
	before := debug.SetMemoryLimit(memoryLimit)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	t.Setenv("GOMEMLIMIT", "")
	if got := makeRoom(10 << 20); got != 0 || debug.SetMemoryLimit(-1) != memoryLimit {
		t.Fatalf("10 MiB held: raised to %d, limit %d; want the limit left at %d", got, debug.SetMemoryLimit(-1), memoryLimit)
	}
	held := int64(3_000_000 * 50) // ten million files' journal
	if got, want := makeRoom(held), held+snapshotRoom; got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("%d held: raised to %d, limit %d; want %d", held, got, debug.SetMemoryLimit(-1), want)
	}
	debug.SetMemoryLimit(memoryLimit)
	t.Setenv("GOMEMLIMIT", "1GiB")
	if got := makeRoom(held); got != 0 || debug.SetMemoryLimit(-1) != memoryLimit {
		t.Fatalf("with GOMEMLIMIT set: raised to %d; want it left alone", got)
	}
}
