package jenkins

import (
	"fmt"
	"slices"
	"strings"
)

// Verdict says what one agent will meet after the change from one state
// to another.
type Verdict string

const (
	// SameSecret: the node exists in both states and Jenkins expects the
	// same JENKINS_SECRET: the agent gets back in.
	SameSecret Verdict = "same-secret"
	// SecretChanges: the agent's secret differs ("Authorization failure").
	SecretChanges Verdict = "secret-changes"
	// NoSecret: the node exists in both and its launcher uses no secret
	// (SSH, command): the controller connects to it as before.
	NoSecret Verdict = "kept"
	// Removed: the node is gone ("Unknown client name").
	Removed Verdict = "removed"
	// Added: the node exists only in the second state.
	Added Verdict = "added"
	// Unknown: the first state's secret cannot be computed (no agent key).
	Unknown Verdict = "unknown"
)

// NodeComparison is one node's fate.
type NodeComparison struct {
	Name    string  `json:"name"`
	Kind    Kind    `json:"kind"`
	Verdict Verdict `json:"verdict"`
	Breaks  bool    `json:"breaks"`
	Message string  `json:"message"`
	Before  string  `json:"before_secret_fingerprint,omitempty"`
	After   string  `json:"after_secret_fingerprint,omitempty"`
}

// Comparison is what changes for agents from one state to another.
type Comparison struct {
	Nodes []NodeComparison `json:"nodes"`
	// Identity is "same", "changes" or "unknown" (the first state has none).
	Identity       string `json:"identity"`
	IdentityBefore string `json:"identity_before,omitempty"`
	IdentityAfter  string `json:"identity_after,omitempty"`
	Breaks         bool   `json:"breaks"`
	// KeysChanged: an agent secret or the identity changes, as when a
	// controller started without its keys and Jenkins made new ones.
	// Nodes added or removed by an administrator do not count.
	KeysChanged bool `json:"keys_changed"`
}

// Compare says node by node whether each agent that could connect in
// before will authenticate with the same secret in after, and whether they
// see the same controller identity.
func Compare(before, after *State) *Comparison {
	c := &Comparison{Nodes: []NodeComparison{}}
	names := map[string]bool{}
	for _, n := range before.Nodes {
		names[n.Name] = true
	}
	for _, n := range after.Nodes {
		names[n.Name] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for _, name := range sorted {
		c.Nodes = append(c.Nodes, compareNode(name, before.Node(name), after.Node(name)))
	}
	switch {
	case before.Identity == nil:
		c.Identity = "unknown"
	case after.Identity == nil:
		c.Identity = "changes"
	case before.Identity.PublicKey == after.Identity.PublicKey:
		c.Identity = "same"
	default:
		c.Identity = "changes"
	}
	if before.Identity != nil {
		c.IdentityBefore = before.Identity.Fingerprint
	}
	if after.Identity != nil {
		c.IdentityAfter = after.Identity.Fingerprint
	}
	c.Breaks = c.Identity == "changes"
	c.KeysChanged = c.Identity == "changes"
	for _, n := range c.Nodes {
		c.Breaks = c.Breaks || n.Breaks
		c.KeysChanged = c.KeysChanged || n.Verdict == SecretChanges
	}
	return c
}

func compareNode(name string, b, a *Node) NodeComparison {
	nc := NodeComparison{Name: name}
	switch {
	case a == nil:
		nc.Kind, nc.Verdict, nc.Breaks = b.Kind, Removed, true
		nc.Before = b.SecretFingerprint
		nc.Message = "the node is gone: its agent fails with \"Unknown client name\""
		if b.Kind == KindKubernetes {
			nc.Message += " (a pod agent: the Kubernetes plugin reaps its pod and provisions new ones)"
		}
		return nc
	case b == nil:
		nc.Kind, nc.Verdict = a.Kind, Added
		nc.After = a.SecretFingerprint
		nc.Message = "a new node: no agent used it before"
		return nc
	}
	nc.Kind, nc.Before, nc.After = a.Kind, b.SecretFingerprint, a.SecretFingerprint
	var notes []string
	if a.Kind != b.Kind {
		notes = append(notes, fmt.Sprintf("its launcher changes from %s to %s", b.Kind, a.Kind))
	}
	switch {
	case !a.Kind.UsesSecret():
		nc.Verdict = NoSecret
		notes = append(notes, "it uses no agent secret; the controller connects to it as before")
	case !b.Kind.UsesSecret():
		nc.Verdict = Added
		notes = append(notes, "it did not use an agent secret before")
	case a.secret == "":
		nc.Verdict, nc.Breaks = SecretChanges, true
		notes = append(notes, "the agent key cannot be read, so Jenkins will make a new one: the agent fails with \"Authorization failure\"")
	case b.secret == "":
		nc.Verdict = Unknown
		notes = append(notes, "the first state has no readable agent key, so its secret is unknown")
	case a.secret == b.secret:
		nc.Verdict = SameSecret
		notes = append(notes, "it authenticates with the same secret")
	default:
		nc.Verdict, nc.Breaks = SecretChanges, true
		notes = append(notes, "its JENKINS_SECRET changes: the agent fails with \"Authorization failure\" until it gets the new one")
	}
	nc.Message = strings.Join(notes, "; ")
	return nc
}
