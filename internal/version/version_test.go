package version

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestGetReportsTheLinkedValues(t *testing.T) {
	defer func(v, r string) { Version, Revision = v, r }(Version, Revision)
	Version, Revision = "1.2.3", "0123abc"
	if got, want := Get(), (Info{"1.2.3", "0123abc", runtime.Version()}); got != want {
		t.Errorf("Get() = %+v, want %+v", got, want)
	}
	var out bytes.Buffer
	Print(&out, "restore")
	if line := out.String(); !strings.HasPrefix(line, "restore 1.2.3 (revision 0123abc, "+runtime.Version()) || strings.Count(line, "\n") != 1 {
		t.Errorf("Print wrote %q", line)
	}
}

func TestGetWithoutLinkerFlagsStillNamesARevision(t *testing.T) {
	defer func(r string) { Revision = r }(Revision)
	Revision = ""
	if got := Get().Revision; got == "" {
		t.Error("empty revision: want the VCS stamp or \"unknown\"")
	}
}

func TestAsked(t *testing.T) {
	for args, want := range map[string]bool{
		"--version": true, "-version": true, "": false,
		"--version --store x": false, "--store --version": false, "--versions": false,
	} {
		if got := Asked(strings.Fields(args)); got != want {
			t.Errorf("Asked(%q) = %v, want %v", args, got, want)
		}
	}
}
