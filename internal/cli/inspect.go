package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// The commands that inspect a store or a home and change nothing: list,
// verify and check-agents. Each was a restore flag, and runs restore's
// code with restore's settings; it takes only the flags (and reads only
// the variables) that mean something to it.

// RestoreSettings is restore's configuration under an exported name: the
// inspecting commands embed it, and envconfig and the flags reach only
// exported fields.
type RestoreSettings = restoreConfig

// keyFlags are the settings that read an authenticated or encrypted store.
var keyFlags = []string{"age-identity-file", "HOMESNAP_AGE_IDENTITY", "auth-key-file", "HOMESNAP_AUTH_KEY", "allow-unauthenticated"}

type listConfig struct{ RestoreSettings }

func (listConfig) takes() []string { return append([]string{"output", "timeout"}, keyFlags...) }

const listAbout = `Lists the snapshots the store's head reaches, oldest first, the head
marked: ID, time, files, size, new bytes, archives and manifests needed,
parent (--output json: every field of each snapshot's record). In an
authenticated store, a snapshot whose record does not verify is marked
unverified. Nothing is changed.`

// List is the list command.
func List(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg listConfig
	log, err := configure("list", listAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	cfg.List = true
	return restoreOrInspect(ctx, &cfg.RestoreSettings, log, stdout, stderr)
}

type verifyConfig struct {
	RestoreSettings
	Structure bool `envconfig:"HOMESNAP_STRUCTURE" flag:"structure" desc:"the cheap check, for frequent runs: read the manifests and check that every archive they need exists with a plausible size, without downloading archives"`
}

func (verifyConfig) takes() []string {
	return append([]string{"snapshot", "at", "timeout", "progress", "structure", "output"}, keyFlags...)
}

const verifyAbout = `Checks the store: reads every object the chosen snapshots need (--snapshot
or --at; by default every snapshot the head reaches), checks every hash,
and names each missing or corrupt object (exit 6). Prints "ok<TAB>ID" or
"damaged<TAB>ID" per snapshot. --timeout bounds it only when given. The
home is not touched.`

// Verify is the verify command.
func Verify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg verifyConfig
	log, err := configure("verify", verifyAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	cfg.Verify, cfg.VerifyStructure = !cfg.Structure, cfg.Structure
	return restoreOrInspect(ctx, &cfg.RestoreSettings, log, stdout, stderr)
}

type checkAgentsConfig struct{ RestoreSettings }

func (checkAgentsConfig) takes() []string {
	return append([]string{"snapshot", "at", "compare", "show-secrets", "master-key-file", "output", "timeout"}, keyFlags...)
}

const checkAgentsAbout = `Reports whether the agents will reconnect: for the home (--home), or for a
snapshot in the store (--snapshot ID or head, or --at TIME) without
restoring it, each agent's kind, the secret or key it needs and whether
Jenkins can read it; --compare compares with the state the agents know
now. Exits 1 when continuity would break. Nothing is changed.`

// CheckAgents is the check-agents command.
func CheckAgents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg checkAgentsConfig
	log, err := configure("check-agents", checkAgentsAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	cfg.CheckAgents = true
	return restoreOrInspect(ctx, &cfg.RestoreSettings, log, stdout, stderr)
}

type lsConfig struct{ RestoreSettings }

func (lsConfig) takes() []string {
	return append([]string{"snapshot", "at", "timeout", "output"}, keyFlags...)
}

func (lsConfig) synopsis() string { return "[SNAPSHOT] [flags]" }

const lsAbout = `Lists the files of a snapshot from its manifest, without restoring it:
homesnap ls [SNAPSHOT] (an ID or head; or --snapshot, or --at TIME; by
default the head). One line per path: type and mode, owner (UID:GID),
size, modification time (UTC) and path, a link's target after "->"
(--output json: one object, its entries streamed). Nothing is changed.`

// Ls is the ls command.
func Ls(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ids, args := positional("ls", &lsConfig{}, args)
	var cfg lsConfig
	log, err := configure("ls", lsAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	if len(ids) > 1 {
		return usageError{fmt.Errorf("ls takes one snapshot, got %s (see homesnap ls --help)", strings.Join(ids, " "))}
	}
	if len(ids) == 1 {
		id := ids[0]
		if cfg.Snapshot != "" || cfg.At != "" {
			return usageError{errors.New("ls SNAPSHOT names the snapshot: give --snapshot or --at instead, not both")}
		}
		if err := checkSnapshotName(id, "ls SNAPSHOT"); err != nil {
			return err
		}
		cfg.Snapshot = id
	}
	cfg.ls = true
	return restoreOrInspect(ctx, &cfg.RestoreSettings, log, stdout, stderr)
}

// listFiles prints the entries of snapshot id's manifest as it streams
// them: a home of millions of files is never held in memory.
func listFiles(ctx context.Context, st store.Store, id string, asJSON bool, stdout io.Writer) error {
	id, pr, err := openSnapshot(ctx, st, id)
	if err != nil {
		return err
	}
	defer pr.Close()
	if asJSON {
		return writeJSONStream(stdout, lsHead{id, snapshotTime(id)}, "entries", func(yield func(*fileJSON, error) bool) {
			for e, err := range pr.All(ctx) {
				if !yield(newFileJSON(e), err) {
					return
				}
			}
		})
	}
	w := bufio.NewWriter(stdout)
	for e, err := range pr.All(ctx) {
		if err != nil {
			return err
		}
		link := ""
		if e.Link != "" {
			link = " -> " + e.Link
		}
		fmt.Fprintf(w, "%s%s %d:%d %d %s %s%s\n", e.Type, e.Mode.Perm(), e.UID, e.GID, e.Size,
			time.Unix(0, e.MTime).UTC().Format(time.RFC3339), e.Path, link)
	}
	return w.Flush()
}

// openSnapshot opens snapshot id's manifest (the head's for "") as a
// checked stream of every entry, through st, the stack restoreStack
// built for it: the one way ls and diff read a snapshot.
func openSnapshot(ctx context.Context, st store.Store, id string) (string, *fetch.Plan, error) {
	if id == "" { // the head
		head, _, err := repo.LoadHead(ctx, st)
		if err != nil {
			return "", nil, err
		}
		if head == nil {
			return "", nil, fmt.Errorf("%w in %s yet", repo.ErrNoSnapshot, st)
		}
		id = head.Snapshot
	}
	everything, err := selector.New(selector.Spec{Preset: "all"})
	if err != nil {
		return "", nil, err
	}
	pr, err := fetch.OpenPlan(ctx, st, id, everything, nil, nil)
	return id, pr, err
}
