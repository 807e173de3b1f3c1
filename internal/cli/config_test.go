package cli

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
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
