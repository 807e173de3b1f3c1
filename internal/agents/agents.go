// Package agents is the agent-continuity check: whether the inbound and
// direct-connect agents of a Jenkins controller get back in after a
// restore, judged from the files Jenkins keys them by (internal/jenkins).
// It runs as its own job (restore --check-agents, on a home or a snapshot),
// inside a restore (before the commit, on the staged tree; a master key
// kept out of the store installed after it), and before every snapshot
// (GuardKeys: a home whose keys were regenerated never replaces a good
// head). It works on the home the command opened (homefs.Home) and on
// snapshots through internal/check; the CLI parses, wires and reports.
package agents

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/check"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// ErrContinuity means agents would not all get back in: a check's report
// (or log) has said why.
var ErrContinuity = errors.New("agent continuity would break")

// Home names the home as a subject of Check; "head" names the head
// snapshot, anything else a snapshot ID.
const Home = "home"

// Report is what Check found (the JSON form of restore --check-agents).
type Report struct {
	Checked    string              `json:"checked"` // "home PATH" or "snapshot ID"
	State      *jenkins.State      `json:"state"`
	Before     string              `json:"compared_with,omitempty"`
	Comparison *jenkins.Comparison `json:"comparison,omitempty"`
	Continuity bool                `json:"continuity"`
}

// Check inspects subject (Home, "head" or a snapshot ID) and, when
// compare is set, compares it node by node with compare, the state agents
// know now. home is needed when either is Home, st when either is a
// snapshot; masterKey (nil: the one in the home or snapshot) must unwrap
// the keys.
func Check(ctx context.Context, home *homefs.Home, st store.Store, subject, compare string, masterKey []byte) (*Report, error) {
	opts := jenkins.Options{MasterKey: masterKey}
	rep := &Report{}
	var err error
	if rep.State, rep.Checked, err = load(ctx, home, st, subject, opts); err != nil {
		return nil, err
	}
	rep.Continuity = !rep.State.Breaks()
	if compare != "" {
		var before *jenkins.State
		if before, rep.Before, err = load(ctx, home, st, compare, opts); err != nil {
			return nil, err
		}
		rep.Comparison = jenkins.Compare(before, rep.State)
		rep.Continuity = rep.Continuity && !rep.Comparison.Breaks
	}
	return rep, nil
}

// load inspects Home, "head" or a snapshot ID.
func load(ctx context.Context, home *homefs.Home, st store.Store, ref string, opts jenkins.Options) (*jenkins.State, string, error) {
	if ref == Home {
		if !home.Exists() {
			return nil, "", errors.New("agent check: no home opened")
		}
		s, err := jenkins.Inspect(homefs.FS(home.Dir), opts)
		if err != nil {
			return nil, "", fmt.Errorf("home %s: %w", home.Path, err)
		}
		return s, "home " + home.Path, nil
	}
	if st == nil {
		return nil, "", fmt.Errorf("agent check of snapshot %q: no store opened", ref)
	}
	id := ref
	if ref == "head" {
		id = ""
	}
	sfs, err := check.OpenSnapshotFS(ctx, st, id, jenkins.Needed)
	if err != nil {
		return nil, "", err
	}
	s, err := jenkins.Inspect(sfs, opts)
	if err != nil {
		return nil, "", fmt.Errorf("snapshot %s: %w", sfs.ID(), err)
	}
	return s, "snapshot " + sfs.ID(), nil
}

// logComparison logs every node that will not get back in as before, and
// the identity when it changes.
func logComparison(log zerolog.Logger, c *jenkins.Comparison, what string) {
	for _, n := range c.Nodes {
		if n.Breaks {
			log.Warn().Str("node", n.Name).Str("kind", string(n.Kind)).Str("verdict", string(n.Verdict)).
				Str("before", n.Before).Str("after", n.After).Msg(n.Message + " (" + what + ")")
		}
	}
	if c.Identity == "changes" {
		log.Warn().Str("before", c.IdentityBefore).Str("after", c.IdentityAfter).
			Msg("the controller's instance identity changes: agents that pin it refuse the controller (" + what + ")")
	}
}

// ownsMasterKey reports whether a snapshot's selection covers master.key
// (a restore then makes the home's equal to the snapshot's, even absent).
func ownsMasterKey(sfs *check.SnapshotFS) bool {
	sel, err := selector.New(selector.Spec(sfs.Header.Selection))
	return err != nil || sel.Selected(jenkins.MasterKeyPath)
}
