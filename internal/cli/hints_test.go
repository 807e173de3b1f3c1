package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/snapshot"
)

// TestFlagHints: an error below the CLI that names a condition reaches the
// user with the flag that addresses it, once, however it was wrapped; its
// exit status is unchanged, and other errors pass as they are.
func TestFlagHints(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"no home", homemark.ErrNoHome, "set --home, HOMESNAP_HOME or JENKINS_HOME"},
		{"empty home", wrap(snapshot.ErrEmpty), "pass --force if this is intended"},
		{"shrunk home", wrap(snapshot.ErrShrunk), "pass --allow-shrink"},
		{"import onto head", wrap(snapshot.ErrHeadExists), "pass --import-onto-head"},
		{"empty store", &restore.EmptyStoreError{Store: "file:///s"}, "take one with `snapshot --once`, or pass --allow-empty for a first boot"},
		{"not an operator backup", wrap(fmt.Errorf("%w x (%w)", snapshot.ErrBadImport, snapshot.ErrNotOperatorBackup)), "take `snapshot --once --home DIR`"},
		{"restore removes most", wrap(&restore.RemoveMostError{Snapshot: "s", Removed: 3, Present: 4}), "check --store and --snapshot, or pass --force"},
		{"diverged home", reported{wrap(&restore.DivergedError{Reason: "x"})}, "with --target, or pass --force"},
		{"damaged home", wrap(homemark.ErrDamaged), "restore with --force"},
		{"missing manifest", wrap(fmt.Errorf("x: %w", repo.ErrMissingManifest)), "from `homesnap list` whose manifests are all present"},
		{"none at time", &repo.NoneAtError{Store: "file:///s"}, "see `homesnap list`"},
		{"bad snapshot ID", repo.CheckID("nonsense"), "see `homesnap list`"},
		{"bad head", wrap(repo.ErrBadHead), "--snapshot ID from `homesnap list`"},
		{"wrong store", wrap(repo.ErrWrongStore), "check --store"},
		{"no age identity", wrap(&crypt.NoIdentityError{Object: "archives/x.tar.zst.age"}), "--age-identity-file or HOMESNAP_AGE_IDENTITY_FILE"},
		{"no own identity", wrap(crypt.ErrNoOwnIdentity), "--age-identity-file or HOMESNAP_AGE_IDENTITY_FILE"},
		{"mixed store, encrypting", &crypt.MixedError{Store: "s", Encrypting: true}, "to encrypt from now on, pass --age-migrate once"},
		{"mixed store, plain", &crypt.MixedError{Store: "s"}, "--age-recipients-file / HOMESNAP_AGE_RECIPIENTS_FILE"},
		{"reencrypt keys", wrap(crypt.ErrReencryptKeys), "--age-recipients-file"},
		{"not encrypted", wrap(crypt.ErrNotEncrypted), "take a snapshot with --age-migrate"},
	} {
		t.Run(c.name, func(t *testing.T) {
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
		})
	}
	var logged bytes.Buffer
	log, err := newLogger(&Common{LogLevel: "info", LogFormat: "json"}, &logged)
	if err != nil {
		t.Fatal(err)
	}
	log.Error().Err(wrap(snapshot.ErrShrunk)).Msg("snapshot failed")
	if !strings.Contains(logged.String(), "pass --allow-shrink") {
		t.Errorf("the logged error has no hint: %s", logged.String())
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
