package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/snapshot"
)

// TestFlagHints: an error below the CLI that names a condition reaches the
// user with the flag that addresses it, once, however it was wrapped; its
// exit status is unchanged, and other errors pass as they are.
func TestFlagHints(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	for _, c := range []struct {
		err  error
		want string
	}{
		{homemark.ErrNoHome, "set --home, HOMESNAP_HOME or JENKINS_HOME"},
		{wrap(snapshot.ErrEmpty), "pass --force if this is intended"},
		{wrap(snapshot.ErrShrunk), "pass --allow-shrink"},
		{wrap(snapshot.ErrHeadExists), "pass --import-onto-head"},
		{&restore.EmptyStoreError{Store: "file:///s"}, "pass --allow-empty for a first boot"},
		{wrap(&restore.RemoveMostError{Snapshot: "s", Removed: 3, Present: 4}), "check --store and --snapshot, or pass --force"},
		{reported{wrap(&restore.DivergedError{Reason: "x"})}, "with --target, or pass --force"},
		{wrap(homemark.ErrDamaged), "restore with --force"},
	} {
		before := exitCode(c.err)
		got := withHint(c.err)
		if !strings.HasSuffix(got.Error(), "; "+flagHintOf(t, got)) || !strings.Contains(got.Error(), c.want) {
			t.Errorf("%v: hinted as %q, want it to end with %q", c.err, got, c.want)
		}
		if again := withHint(wrap(got)); strings.Count(again.Error(), c.want) != 1 {
			t.Errorf("hinted twice: %q", again)
		}
		if !errors.Is(got, c.err) || exitCode(got) != before {
			t.Errorf("%v: the hint changed what the error is (exit %d, was %d)", c.err, exitCode(got), before)
		}
	}
	plain := errors.New("disk on fire")
	if got := withHint(plain); got != plain {
		t.Errorf("an error of no known condition became %q", got)
	}
}

func flagHintOf(t *testing.T, err error) string {
	t.Helper()
	var h *hinted
	if !errors.As(err, &h) {
		t.Fatalf("%q has no hint", err)
	}
	return h.hint
}
