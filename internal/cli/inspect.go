package cli

import (
	"context"
	"io"
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
