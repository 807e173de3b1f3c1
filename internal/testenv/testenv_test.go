package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fakeT records how a helper ended a test: skipped or failed, and why.
type fakeT struct {
	testing.TB
	name            string
	skipped, failed string
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return f.name }

func (f *fakeT) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// call runs fn as a test named "TestFake/row" and returns how it ended.
func call(fn func(t testing.TB)) *fakeT {
	f := &fakeT{name: "TestFake/row"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

// Where the test command runs, a missing server or tool fails the test;
// elsewhere it is skipped, saying how to turn the skip into a failure.
func TestMissingFailsOnlyUnderTheTestCommand(t *testing.T) {
	t.Run("test command", func(t *testing.T) {
		t.Setenv(ServersEnv, "1")
		f := call(func(t testing.TB) { Missing(t, "versitygw is not reachable at %s", "127.0.0.1:7070") })
		if f.failed != "versitygw is not reachable at 127.0.0.1:7070" || f.skipped != "" {
			t.Errorf("failed %q, skipped %q; want a failure naming the server", f.failed, f.skipped)
		}
	})
	t.Run("elsewhere", func(t *testing.T) {
		t.Setenv(ServersEnv, "")
		f := call(func(t testing.TB) { Missing(t, "versitygw is not reachable at %s", "127.0.0.1:7070") })
		if f.failed != "" || !strings.Contains(f.skipped, "versitygw is not reachable at 127.0.0.1:7070") || !strings.Contains(f.skipped, ServersEnv+"=1") {
			t.Errorf("failed %q, skipped %q; want a skip naming the server and %s=1", f.failed, f.skipped, ServersEnv)
		}
	})
}

// A tool that is not installed: skipped under -short whatever the machine
// has, otherwise missing (a failure under the test command).
func TestToolNotInstalled(t *testing.T) {
	t.Setenv(ServersEnv, "1")
	f := call(func(t testing.TB) { Tool(t, "homesnap-no-such-tool") })
	if testing.Short() {
		if f.failed != "" || !strings.Contains(f.skipped, "needs homesnap-no-such-tool") || !strings.Contains(f.skipped, "-short") {
			t.Errorf("under -short: failed %q, skipped %q; want a skip naming the tool", f.failed, f.skipped)
		}
		return
	}
	if f.skipped != "" || !strings.Contains(f.failed, "homesnap-no-such-tool not found") || !strings.Contains(f.failed, "install-test-deps.sh") {
		t.Errorf("failed %q, skipped %q; want a failure naming the tool and its installer", f.failed, f.skipped)
	}
}

// A long test is skipped under -short with the command that runs it.
func TestLongNamesItsCommand(t *testing.T) {
	f := call(func(t testing.TB) { Long(t, "kills a snapshot at each of its steps") })
	want := "kills a snapshot at each of its steps: skipped under -short; run it with go test -run '^TestFake$' ./internal/testenv"
	if testing.Short() && f.skipped != want || !testing.Short() && f.skipped != "" || f.failed != "" {
		t.Errorf("-short %v: skipped %q, failed %q; want a skip only under -short, saying %q", testing.Short(), f.skipped, f.failed, want)
	}
}
