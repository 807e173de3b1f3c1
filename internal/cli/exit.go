package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/store"
)

// Exit statuses. Every outcome that leaves the home usable is 0 (restored,
// nothing to do, skipped as newer, first boot with --allow-empty), so that
// an init container lets the controller start; the other codes tell
// failures apart for scripts and alerts (docs/runbooks.md: "Exit status").
const (
	ExitOK         = 0
	ExitFailure    = 1 // anything not listed below
	ExitUsage      = 2 // a mistake in flags or variables
	ExitRefused    = 3 // restore refused: the home holds data the store does not (--force)
	ExitNoSnapshot = 4 // the store has no snapshot (or none at --at, or not the --snapshot named) and --allow-empty was not given
	ExitStore      = 5 // the store is unreachable, denies access, timed out, or is not a usable homesnap store
	ExitCorrupt    = 6 // a snapshot in the store is damaged: missing or corrupt objects

	// Authentication refusals (internal/auth), each overridden by
	// --allow-unauthenticated.
	ExitUnauthenticated = 10 // an object carries no tag of the keys given, or the store is authenticated and no key was given
	ExitForged          = 11 // an object's tag does not match: forged or damaged
	ExitRollback        = 12 // the head is older than a snapshot the store proves was committed after it
	ExitPlaintext       = 13 // a plain snapshot in an age-encrypted store
)

// exitStatuses says what each status means, for --help and the runbook
// (docs/runbooks.md: "Exit status" says the same, at length).
var exitStatuses = []struct {
	code int
	what string
}{
	{ExitOK, "success; for restore, every outcome that leaves the home usable (restored, nothing to do, first boot with --allow-empty)"},
	{ExitFailure, "a failure not listed here; for check-agents, agents would not reconnect"},
	{ExitUsage, "a mistake in flags, arguments or variables; nothing was done"},
	{ExitRefused, "refused: the home holds data the store does not (see --force)"},
	{ExitNoSnapshot, "no such snapshot: the store has none (see --allow-empty), none at --at, or not the --snapshot named"},
	{ExitStore, "the store is unreachable, denies access, timed out, or is not a homesnap store"},
	{ExitCorrupt, "a snapshot in the store is damaged: missing or corrupt objects"},
	{ExitUnauthenticated, "an object is not authenticated by the keys given (see --allow-unauthenticated)"},
	{ExitForged, "an object's authentication tag does not match: forged or damaged"},
	{ExitRollback, "the head is older than a snapshot the store proves was committed after it"},
	{ExitPlaintext, "a plain snapshot in an age-encrypted store"},
}

// writeExits ends a command's --help with the statuses it can exit with.
func writeExits(w io.Writer, name string) {
	c := lookup(name)
	if c == nil {
		return
	}
	fmt.Fprintln(w, "\nExit status:")
	for _, s := range exitStatuses {
		if slices.Contains(c.exits, s.code) {
			fmt.Fprintf(w, "  %-3d %s\n", s.code, s.what)
		}
	}
}

// exitCode maps an error to its exit status: the one place that does.
func exitCode(err error) int {
	var ue usageError
	var se *store.Error
	var scheme *store.SchemeError // a URL no backend of this binary opens: nothing was done
	switch {
	case err == nil, errors.Is(err, errHelp):
		return ExitOK
	case errors.As(err, &ue), errors.As(err, &scheme):
		return ExitUsage
	case errors.Is(err, restore.ErrDiverged), errors.Is(err, restore.ErrWouldRemoveMost):
		return ExitRefused
	case errors.Is(err, repo.ErrNoSnapshot):
		return ExitNoSnapshot
	case errors.Is(err, auth.ErrForged):
		return ExitForged
	case errors.Is(err, auth.ErrUnauthenticated):
		return ExitUnauthenticated
	case errors.Is(err, auth.ErrRollback):
		return ExitRollback
	case errors.Is(err, crypt.ErrPlaintext):
		return ExitPlaintext
	case errors.Is(err, archive.ErrCorrupt):
		return ExitCorrupt
	case errors.As(err, &se), errors.Is(err, repo.ErrWrongStore), errors.Is(err, context.DeadlineExceeded):
		return ExitStore
	}
	return ExitFailure
}

// reported marks an error that was already logged with its context, so
// that Main does not report it twice.
type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// report prints an error that was not logged yet and returns its status:
// no command exits non-zero without saying why. An error marked reported
// is printed all the same when no error line was logged (a wrong mark, or
// a --log-level that hides errors).
func report(err error, stderr io.Writer) int {
	err = withHint(err)
	code := exitCode(err)
	var r reported
	if code != ExitOK && (!errors.As(err, &r) || loggedErrors.Load() == 0) {
		fmt.Fprintln(stderr, "error:", err)
	}
	return code
}
