package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTriggerToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const tok = "0123456789abcdef0123"
	for _, c := range []struct {
		name      string
		sidecar   Sidecar
		want, bad string // the token, or what the error says
	}{
		{name: "none: the endpoint is off"},
		{name: "a Secret's file, final newline dropped", sidecar: Sidecar{TokenFile: file("ok", tok+"\n")}, want: tok},
		{name: "the variable", sidecar: Sidecar{Token: " " + tok + " "}, want: tok},
		{name: "both", sidecar: Sidecar{TokenFile: file("both", tok), Token: tok}, bad: "set twice"},
		{name: "too short", sidecar: Sidecar{Token: "hunter2"}, bad: "at least 16"},
		{name: "two lines", sidecar: Sidecar{TokenFile: file("lines", tok+"\n"+tok)}, bad: "one line"},
		{name: "empty file", sidecar: Sidecar{TokenFile: file("empty", "\n")}, bad: "at least 16"},
		{name: "missing file", sidecar: Sidecar{TokenFile: filepath.Join(dir, "absent")}, bad: "absent"},
		{name: "not a token file", sidecar: Sidecar{TokenFile: file("big", strings.Repeat("x", 5<<10))}, bad: "over 4 KiB"},
	} {
		got, err := c.sidecar.token()
		switch {
		case c.bad != "":
			var u usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%s: %v, want a usage error saying %q", c.name, err, c.bad)
			}
			if err != nil && strings.Contains(err.Error(), tok) {
				t.Errorf("%s: the error shows the token: %v", c.name, err)
			}
		case err != nil || string(got) != c.want:
			t.Errorf("%s: %q %v, want %q", c.name, got, err, c.want)
		}
	}
}

// The token's variable has no flag (flags show in ps) and --help names it.
func TestTriggerTokenHasNoFlag(t *testing.T) {
	var cfg snapshotConfig
	if _, err := load("snapshot", "", &cfg, []string{"--trigger-token", "x"}, io.Discard); err == nil {
		t.Error("--trigger-token accepted: a token on the command line shows in ps")
	}
	var help strings.Builder
	load("snapshot", "", &cfg, []string{"--help"}, &help)
	for _, want := range []string{"--trigger-token-file", "HOMESNAP_TRIGGER_TOKEN]", "--trigger-min-interval", "--listen-max-connections", "--keep-on-demand"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %s", want)
		}
	}
}

func TestListenerSettingsAreValidated(t *testing.T) {
	for _, args := range [][]string{
		{"--listen-max-connections", "0"},
		{"--trigger-min-interval", "-1s"},
		{"--keep-on-demand", "-1"},
	} {
		var cfg snapshotConfig
		if _, err := load("snapshot", "", &cfg, args, io.Discard); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var ue usageError
		if err := cfg.validate(); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
