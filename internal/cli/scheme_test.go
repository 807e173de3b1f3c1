package cli

import (
	"strings"
	"testing"
)

// A store URL whose scheme this binary does not open (a typo, or a
// backend a build tag left out) is a mistake in the flags: exit 2, the URL
// named, nothing done. It exited 1, as an unexplained failure, before.
func TestUnknownSchemeIsAUsageError(t *testing.T) {
	home := t.TempDir()
	for _, argv := range [][]string{
		{"homesnap", "restore", "--home", home, "--store", "ftp://bucket/jenkins"},
		{"homesnap", "snapshot", "--once", "--home", home, "--store", "ftp://bucket/jenkins"},
		{"homesnap", "list", "--store", "ftp://bucket/jenkins"},
	} {
		r := homesnapRun(argv[0], argv[1:]...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, `unknown scheme`) || !strings.Contains(r.stderr, "ftp://bucket/jenkins") {
			t.Errorf("%v: exit %d, want %d naming the URL and its scheme\n%s", argv[1:], r.code, ExitUsage, r.stderr)
		}
		if !isEmpty(t, home) {
			t.Fatalf("%v changed the home", argv[1:])
		}
	}
}
