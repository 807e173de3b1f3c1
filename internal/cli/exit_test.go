package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/store"
)

// TestExitCodes: each kind of failure, however wrapped, gets its status.
func TestExitCodes(t *testing.T) {
	wrap := func(err error) error { return reported{fmt.Errorf("restore failed: %w", err)} }
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, ExitOK},
		{"help", errHelp, ExitOK},
		{"usage", usageError{errors.New("bad flag")}, ExitUsage},
		{"diverged", wrap(&restore.DivergedError{Reason: "x"}), ExitRefused},
		{"removes most", wrap(&restore.RemoveMostError{}), ExitRefused},
		{"no snapshot", wrap(fmt.Errorf("%w in store", repo.ErrNoSnapshot)), ExitNoSnapshot},
		{"corrupt", wrap(fmt.Errorf("%w archive x", archive.ErrCorrupt)), ExitCorrupt},
		{"store error", wrap(&store.Error{Op: "load", Store: "s3://b/p", Err: errors.New("access denied")}), ExitStore},
		{"wrong store", wrap(fmt.Errorf("%w: marker", repo.ErrWrongStore)), ExitStore},
		{"deadline", wrap(fmt.Errorf("gave up: %w", context.DeadlineExceeded)), ExitStore},
		{"other failure", wrap(errors.New("no space left on device")), ExitFailure},
		{"unauthenticated", wrap(&auth.Error{Object: "head.json", Err: auth.ErrUnauthenticated}), ExitUnauthenticated},
		{"no key", wrap(noKeyError{"s3://b/p", "x"}), ExitUnauthenticated},
		// A forged manifest read through the archive reader is also corrupt:
		// the authentication says more.
		{"forged manifest", wrap(fmt.Errorf("%w manifest: %w", archive.ErrCorrupt, &auth.Error{Object: "m", Err: auth.ErrForged})), ExitForged},
		{"rollback", wrap(&auth.RollbackError{Head: "a"}), ExitRollback},
		{"plaintext", wrap(fmt.Errorf("snapshot x %w", crypt.ErrPlaintext)), ExitPlaintext},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := exitCode(c.err); got != c.want {
				t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
			}
		})
	}
}

// TestReportSaysWhy: an error marked as already logged is still printed
// when no error line was logged (a wrong mark, or a log level that hides
// errors), and printed only once when one was.
func TestReportSaysWhy(t *testing.T) {
	// The count is the process's: commands other tests ran here logged
	// error lines.
	loggedErrors.Store(0)
	before := loggedErrors.Load()
	var out bytes.Buffer
	err := reported{usageError{errors.New("age identities key.txt: malformed")}}
	if code := report(err, &out); code != ExitUsage || !strings.Contains(out.String(), "age identities key.txt: malformed") {
		t.Errorf("nothing logged: exit %d, printed %q; want 2 and the cause", code, out.String())
	}
	c := &Common{LogLevel: "error", LogFormat: "json"}
	var logs bytes.Buffer
	log, lerr := newLogger(c, &logs)
	if lerr != nil {
		t.Fatal(lerr)
	}
	log.Warn().Msg("a warning is not the cause")
	if loggedErrors.Load() != before {
		t.Errorf("a warning counted as an error line")
	}
	log.Error().Err(err).Msg("restore failed")
	out.Reset()
	if code := report(err, &out); code != ExitUsage || out.Len() != 0 {
		t.Errorf("logged: exit %d, printed %q; want 2 and nothing more", code, out.String())
	}
}
