// Package testenv is the one rule for what a test needs from outside the
// Go toolchain and this repository (an object-storage server, a container
// runtime, a tool such as helm) and for tests that take long.
//
// Under `go test -short` (the fast tier) such tests are skipped, each
// saying what it needs or how to run it. Without -short, a test that does
// not find what it needs is skipped too, so that `go test ./...` passes on
// a machine without the servers, unless HOMESNAP_TEST_SERVERS=1 says they
// should be there: the test command (scripts/test.sh) sets it and never
// passes -short, so there a missing server or tool fails the test instead
// of silently losing it.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ServersEnv is set to 1 by the test command once the test servers run and
// the tools are installed.
const ServersEnv = "HOMESNAP_TEST_SERVERS"

// Needs skips t under -short: it needs what (a server, a container
// runtime, a tool), which the fast tier does without.
func Needs(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: skipped under -short (scripts/test.sh runs it)", what)
	}
}

// Missing ends t for want of something it needs, which the message says:
// a failure where the test command runs it, a skip elsewhere.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(ServersEnv) == "1" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (%s=1 turns this skip into a failure)", append(args, ServersEnv)...)
}

// Tool returns the path of the program name, which t needs: skipped under
// -short, and missing (see Missing) where it is not installed.
func Tool(t testing.TB, name string) string {
	t.Helper()
	Needs(t, name)
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s not found: scripts/install-test-deps.sh installs it", name)
	}
	return p
}

// Long skips t under -short: it needs nothing outside, but takes long
// (why says at what). The message names the command that runs it.
func Long(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s: skipped under -short; run it with %s", why, Command(t))
	}
}

// Command is the go test command that runs t's top-level test alone,
// from the module's root.
func Command(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return "go test -run '^" + name + "$' " + packageDir()
}

// packageDir is the test's package directory relative to the module's
// root ("./internal/e2e"), or "." when it cannot tell: go test runs a
// package's tests in its directory.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for root := wd; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		up := filepath.Dir(root)
		if up == root {
			return "."
		}
		root = up
	}
}
