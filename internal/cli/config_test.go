package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFlagsWinOverTheEnvironment(t *testing.T) {
	t.Setenv("HOME", "/root") // envconfig must not fall back to unprefixed names
	t.Setenv("JENKINS_HOME", "/var/jenkins_home")
	t.Setenv("HOMESNAP_STORE", "/from/env")
	t.Setenv("HOMESNAP_INCLUDE", "users,init.groovy")
	t.Setenv("HOMESNAP_ONCE", "true")
	var cfg snapshotConfig
	if _, err := load("snapshot", "", &cfg, []string{"--store", "/from/flag", "--include", "userContent"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if cfg.Home != "/var/jenkins_home" {
		t.Errorf("home %q, want $JENKINS_HOME", cfg.Home)
	}
	if cfg.Store != "/from/flag" {
		t.Errorf("store %q, want the flag's", cfg.Store)
	}
	if !slices.Equal(cfg.Include, []string{"userContent"}) {
		t.Errorf("include %q, want the flag's list replacing the environment's", cfg.Include)
	}
	if !cfg.Once || cfg.Preset != "jenkins" || cfg.Level != "fastest" {
		t.Errorf("environment and defaults not applied: %+v", cfg)
	}
	t.Setenv("HOMESNAP_HOME", "/explicit")
	cfg = snapshotConfig{}
	if _, err := load("snapshot", "", &cfg, nil, io.Discard); err != nil || cfg.Home != "/explicit" {
		t.Errorf("HOMESNAP_HOME: %q %v", cfg.Home, err)
	}
}

func TestBadSettingsAreUsageErrors(t *testing.T) {
	var ue usageError
	t.Setenv("HOMESNAP_JOBS", "many")
	var cfg restoreConfig
	if _, err := load("restore", "", &cfg, nil, io.Discard); !errors.As(err, &ue) {
		t.Errorf("bad HOMESNAP_JOBS: %v, want a usage error", err)
	}
	t.Setenv("HOMESNAP_JOBS", "")
	if _, err := load("restore", "", &cfg, []string{"--nope"}, io.Discard); !errors.As(err, &ue) {
		t.Errorf("unknown flag: %v, want a usage error", err)
	}
	if _, err := load("restore", "", &cfg, []string{"--help"}, io.Discard); !errors.Is(err, errHelp) {
		t.Errorf("--help: %v", err)
	}
}

// The sidecar's and prune's settings added with retention, the lease and
// consolidation refuse values they cannot use, naming the setting.
func TestSidecarSettingsAreValidated(t *testing.T) {
	for _, args := range [][]string{
		{"--keep-daily", "-1"},
		{"--prune-delay", "0s"},
		{"--lease-ttl", "0s"},
		{"--consolidate-max-archives", "-1"},
		{"--final-wait-quiet", "-1s"},
	} {
		var cfg snapshotConfig
		if _, err := load("snapshot", "", &cfg, args, io.Discard); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var ue usageError
		if err := cfg.validate(); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		} else if name := args[0][2:]; !strings.Contains(err.Error(), name) && name != "keep-daily" {
			t.Errorf("%v: %q does not name the setting", args, err)
		}
	}
	var cfg snapshotConfig
	load("snapshot", "", &cfg, nil, io.Discard)
	if err := cfg.validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}

// commandConfigs holds every command's configuration, by its name: the
// commands table's, for the commands that take flags.
func commandConfigs() map[string]func() any {
	m := map[string]func() any{}
	for _, c := range commands {
		if c.config != nil {
			m[c.name] = c.config
		}
	}
	return m
}

// sharedSelection are the restore's flags that read the snapshot's
// variables, so that one ConfigMap gives both containers one selection (see
// RestoreSelection): the only flags whose variable is not their name.
var sharedSelection = map[string]string{"select-include": "HOMESNAP_INCLUDE", "select-exclude": "HOMESNAP_EXCLUDE"}

// A newcomer guesses a flag's variable from its name, in every command.
func TestEveryFlagHasItsOwnVariable(t *testing.T) {
	mains, _ := filepath.Glob("../../cmd/*/main.go")
	for _, m := range mains {
		src, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, rest, ok := strings.Cut(string(src), "cli.Main(\""); ok {
			if name, _, _ := strings.Cut(rest, "\""); commandConfigs()[name] == nil {
				t.Errorf("%s runs command %q, which this test does not check", m, name)
			}
		}
	}
	for name, cfg := range commandConfigs() {
		_, _, settings := flagSet(name, cfg())
		timeouts := 0
		for _, s := range settings {
			want := "HOMESNAP_" + strings.ToUpper(strings.ReplaceAll(s.flag, "-", "_"))
			if slices.ContainsFunc(modeVariables, func(m struct{ env, flag, command string }) bool { return m.flag == s.flag }) {
				want = "" // restore's deprecated mode flags: their variables are refused
			}
			if shared, ok := sharedSelection[s.flag]; ok && name == "restore" {
				want = shared
			}
			if s.env != want {
				t.Errorf("%s --%s reads %s, want %s", name, s.flag, s.env, want)
			}
			if s.env != "" && s.oldEnv == s.env || s.oldFlag == s.flag || (s.oldEnv != "" && !strings.HasPrefix(s.oldEnv, "HOMESNAP_")) {
				t.Errorf("%s --%s: old names %q/%q", name, s.flag, s.oldFlag, s.oldEnv)
			}
			if s.flag == "timeout" {
				timeouts++
			}
			if s.flag == "deadline" {
				t.Errorf("%s has --deadline: its timeout flag is --timeout", name)
			}
		}
		if timeouts != 1 {
			t.Errorf("%s has %d --timeout flags, want 1", name, timeouts)
		}
	}
}

// The names renamed for issue 22 keep working for a release, each with one
// warning naming the new one; the new name wins when both are set.
func TestOldNamesStillWork(t *testing.T) {
	for _, env := range []string{"HOMESNAP_FORCE", "HOMESNAP_ONLY", "HOMESNAP_TIMEOUT", "HOMESNAP_PROGRESS", "HOMESNAP_DRY_RUN", "HOMESNAP_SKIP"} {
		t.Setenv(env, "")
	}
	t.Setenv("HOMESNAP_RESTORE_FORCE", "true")
	t.Setenv("HOMESNAP_RESTORE_INCLUDE", "jobs/a/**,jobs/b/**")
	t.Setenv("HOMESNAP_RESTORE_PROGRESS", "log")
	t.Setenv("HOMESNAP_DEADLINE", "3s")
	t.Setenv("HOMESNAP_TIMEOUT", "5s")
	t.Setenv("HOMESNAP_DRY_RUN", "true")
	t.Setenv("HOMESNAP_RESTORE_DRY_RUN", "true")
	var cfg restoreConfig
	if _, err := load("restore", "", &cfg, []string{"--exclude", "jobs/a/builds/**"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !cfg.Force || !slices.Equal(cfg.Only, []string{"jobs/a/**", "jobs/b/**"}) || !slices.Equal(cfg.Skip, []string{"jobs/a/builds/**"}) || cfg.Progress != "log" || !cfg.DryRun {
		t.Errorf("old names not applied: %+v", cfg)
	}
	if cfg.Timeout != 5*time.Second {
		t.Errorf("timeout %v, want HOMESNAP_TIMEOUT's 5s over HOMESNAP_DEADLINE's", cfg.Timeout)
	}
	notes := strings.Join(cfg.deprecated, "\n")
	for _, want := range []string{
		"HOMESNAP_RESTORE_FORCE is deprecated: set HOMESNAP_FORCE",
		"HOMESNAP_RESTORE_INCLUDE is deprecated: set HOMESNAP_ONLY",
		"HOMESNAP_RESTORE_PROGRESS is deprecated: set HOMESNAP_PROGRESS",
		"HOMESNAP_DEADLINE and HOMESNAP_TIMEOUT are both set and differ: HOMESNAP_TIMEOUT is used",
		"HOMESNAP_RESTORE_DRY_RUN is deprecated and set as well as HOMESNAP_DRY_RUN",
		"--exclude is deprecated: use --skip",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("no warning %q in:\n%s", want, notes)
		}
	}
	if len(cfg.deprecated) != 6 {
		t.Errorf("%d warnings, want one per old name:\n%s", len(cfg.deprecated), notes)
	}

	// A flag given under both names is a mistake.
	var ue usageError
	cfg = restoreConfig{}
	if _, err := load("restore", "", &cfg, []string{"--include", "a", "--only", "b"}, io.Discard); !errors.As(err, &ue) || !strings.Contains(err.Error(), "give --only only") {
		t.Errorf("--include with --only: %v, want a usage error", err)
	}
	// A bad value under the old name names it.
	t.Setenv("HOMESNAP_TIMEOUT", "")
	t.Setenv("HOMESNAP_DEADLINE", "soon")
	if _, err := load("restore", "", &cfg, nil, io.Discard); !errors.As(err, &ue) || !strings.Contains(err.Error(), "HOMESNAP_DEADLINE") {
		t.Errorf("HOMESNAP_DEADLINE=soon: %v, want a usage error naming it", err)
	}
}

// restore --timeout bounds a restore by default, but a --verify of a whole
// store only when it is given.
func TestRestoreTimeoutIsGivenOrDefault(t *testing.T) {
	t.Setenv("HOMESNAP_TIMEOUT", "")
	t.Setenv("HOMESNAP_DEADLINE", "")
	for _, c := range []struct {
		args  []string
		want  time.Duration
		given bool
	}{
		{nil, 10 * time.Minute, false},
		{[]string{"--timeout", "0"}, 0, true},
		{[]string{"--deadline", "1h"}, time.Hour, true},
	} {
		var cfg restoreConfig
		if _, err := load("restore", "", &cfg, c.args, io.Discard); err != nil {
			t.Fatal(err)
		}
		if cfg.Timeout != c.want || cfg.given["timeout"] != c.given {
			t.Errorf("%v: timeout %v given %v, want %v %v", c.args, cfg.Timeout, cfg.given["timeout"], c.want, c.given)
		}
	}
}

// --help lists --version, and each renamed flag's old names.
func TestHelpListsVersionAndOldNames(t *testing.T) {
	for name, cfg := range commandConfigs() {
		var out strings.Builder
		if _, err := load(name, "", cfg(), []string{"--help"}, &out); !errors.Is(err, errHelp) {
			t.Fatalf("%s --help: %v", name, err)
		}
		if !strings.Contains(out.String(), "\n  --version\n") {
			t.Errorf("%s --help does not list --version:\n%s", name, out.String())
		}
		if name == "restore" && !strings.Contains(out.String(), "[HOMESNAP_ONLY; deprecated: --include, HOMESNAP_RESTORE_INCLUDE]") {
			t.Errorf("restore --help does not name --only's old names:\n%s", out.String())
		}
	}
}

// The warnings are logged once, when the command starts.
func TestDeprecationIsLoggedOnce(t *testing.T) {
	t.Setenv("HOMESNAP_FORCE", "")
	t.Setenv("HOMESNAP_RESTORE_FORCE", "true")
	var out strings.Builder
	var cfg restoreConfig
	if _, err := configure("restore", "", &cfg, &cfg.Common, []string{"--log-format", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "HOMESNAP_RESTORE_FORCE is deprecated: set HOMESNAP_FORCE"); n != 1 || !strings.Contains(out.String(), `"level":"warn"`) {
		t.Errorf("%d warnings, want 1:\n%s", n, out.String())
	}
}

// Retention durations read the same from a flag and from a variable, and a
// duration that could mean minutes or months is refused both ways.
func TestRetentionDurations(t *testing.T) {
	t.Setenv("HOMESNAP_KEEP_WITHIN_DAILY", "90d")
	var cfg pruneConfig
	if _, err := load("prune", "", &cfg, []string{"--keep-within", "2w"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	p := cfg.policy()
	if p.Within != 14*24*time.Hour || p.WithinDaily != 90*24*time.Hour {
		t.Fatalf("policy %+v: want within 2w (flag), within-daily 90d (variable)", p)
	}
	if got := p.String(); !strings.Contains(got, "within 2w, within-daily 90d") {
		t.Errorf("policy reads %q", got)
	}
	cfg = pruneConfig{}
	_, err := load("prune", "", &cfg, []string{"--keep-within", "6m"}, io.Discard)
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "keep-within") || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("--keep-within 6m: %v; want a usage error naming the flag and why", err)
	}
	t.Setenv("HOMESNAP_KEEP_WITHIN_DAILY", "6m")
	cfg = pruneConfig{}
	if _, err := load("prune", "", &cfg, nil, io.Discard); !errors.As(err, &u) || !strings.Contains(err.Error(), "HOMESNAP_KEEP_WITHIN_DAILY") {
		t.Errorf("HOMESNAP_KEEP_WITHIN_DAILY=6m: %v; want a usage error naming the variable", err)
	}
}
