package cli

import (
	"errors"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/snapshot"
)

// flagHints are what the user can do, in flags, about the conditions the
// packages below report without naming flags: the one place that does,
// as exitCode is for exit statuses. The first match is added.
var flagHints = []struct {
	is   func(error) bool
	hint string
}{
	{is(homemark.ErrNoHome), "set --home, HOMESNAP_HOME or JENKINS_HOME"},
	{is(snapshot.ErrEmpty), "pass --force if this is intended"},
	{is(snapshot.ErrShrunk), "if the shrink is intended, pass --allow-shrink"},
	{is(snapshot.ErrHeadExists), "or pass --import-onto-head to add it on top (the current head stays in the history as its parent)"},
	{as[*restore.EmptyStoreError], "or pass --allow-empty for a first boot"},
	{is(restore.ErrWouldRemoveMost), "check --store and --snapshot, or pass --force to restore anyway"},
	{is(restore.ErrDiverged), "take a snapshot of the home first, restore into another directory with --target, or pass --force to restore anyway"},
	{is(homemark.ErrDamaged), "then restore with --force if the home's data may be replaced"},
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func as[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// hinted is an error with the flag hint the CLI added.
type hinted struct {
	error
	hint string
}

func (h *hinted) Error() string { return h.error.Error() + "; " + h.hint }
func (h *hinted) Unwrap() error { return h.error }

// withHint adds to err the flag hint of its condition, once.
func withHint(err error) error {
	var h *hinted
	if err == nil || errors.As(err, &h) {
		return err
	}
	for _, f := range flagHints {
		if f.is(err) {
			return &hinted{err, f.hint}
		}
	}
	return err
}
