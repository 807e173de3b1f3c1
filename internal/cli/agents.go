package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/agents"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/store"
)

// AgentConfig holds restore's settings for the agent-continuity check and
// for a master.key kept out of the store.
type AgentConfig struct {
	CheckAgents            bool   `ignored:"true" flag:"check-agents" desc:"deprecated: run homesnap check-agents (this flag stops working in the next release; HOMESNAP_CHECK_AGENTS is refused)"`
	Compare                string `envconfig:"HOMESNAP_COMPARE" flag:"compare" desc:"check-agents: the state agents know now (home, head or a snapshot ID), compared node by node with the checked one"`
	ShowSecrets            bool   `envconfig:"HOMESNAP_SHOW_SECRETS" flag:"show-secrets" desc:"check-agents prints every inbound agent's full JENKINS_SECRET (a credential; otherwise a fingerprint)"`
	RequireAgentContinuity bool   `envconfig:"HOMESNAP_REQUIRE_AGENT_CONTINUITY" flag:"require-agent-continuity" desc:"fail the restore, before anything is moved into place, when Jenkins would regenerate keys or an agent could not get back in"`
	MasterKeyFile          string `envconfig:"HOMESNAP_MASTER_KEY_FILE" flag:"master-key-file" desc:"secrets/master.key kept out of the store (a mounted Secret): it must unwrap the snapshot's keys, and is installed into the home after the restore"`
}

// masterKey reads --master-key-file, if one is set.
func (c *AgentConfig) masterKey() ([]byte, error) {
	if c.MasterKeyFile == "" {
		return nil, nil
	}
	return agents.ReadMasterKeyFile(c.MasterKeyFile)
}

// checkAgents is restore --check-agents: it opens what the check needs
// (the home, when "home" is checked or compared; st is nil without
// --store), runs it and prints the report. Exit status 1 when continuity
// breaks.
func checkAgents(ctx context.Context, cfg *restoreConfig, st store.Store, stdout io.Writer, log zerolog.Logger) error {
	key, err := cfg.masterKey()
	if err != nil {
		return err
	}
	subject := agents.Home
	if cfg.Snapshot != "" {
		subject = cfg.Snapshot
	}
	var home *homefs.Home
	for _, ref := range []string{subject, cfg.Compare} {
		switch {
		case ref == "":
		case ref == agents.Home && home == nil:
			if cfg.Home == "" {
				return usageError{errors.New("no home given: set --home, HOMESNAP_HOME or JENKINS_HOME")}
			}
			if home, err = openHome(cfg.Home, false, false); err != nil {
				log.Error().Err(err).Msg("cannot check agent continuity")
				return err
			}
			defer home.Close()
		case ref != agents.Home && st == nil:
			return usageError{fmt.Errorf("checking snapshot %q needs --store", ref)}
		}
	}
	rep, err := agents.Check(ctx, home, st, subject, cfg.Compare, key)
	if err != nil {
		log.Error().Err(err).Msg("cannot check agent continuity")
		return err
	}
	if cfg.ShowSecrets {
		rep.State.RevealSecrets()
	}
	if cfg.json() {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "checked:     %s\n", rep.Checked)
		rep.State.WriteText(stdout)
		if rep.Comparison != nil {
			fmt.Fprintf(stdout, "\ncompared with %s (the state agents know now):\n", rep.Before)
			rep.Comparison.WriteText(stdout)
		}
	}
	if !rep.Continuity {
		return agents.ErrContinuity
	}
	return nil
}
