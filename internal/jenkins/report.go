package jenkins

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// RevealSecrets copies every node's full JENKINS_SECRET into the field
// that reports show. Only for an explicit request: it is a credential.
func (s *State) RevealSecrets() {
	for _, n := range s.Nodes {
		n.Revealed = n.secret
	}
}

// Summary is one line on continuity: what an operator reads first.
func (s *State) Summary() string {
	breaks := 0
	for _, p := range s.Problems {
		if p.Breaks {
			breaks++
		}
	}
	withSecret := 0
	for _, n := range s.Nodes {
		if n.Kind.UsesSecret() {
			withSecret++
		}
	}
	if breaks > 0 {
		return fmt.Sprintf("agent continuity BREAKS: %d problem(s) make Jenkins regenerate keys or lose nodes (%d nodes, %d with an agent secret)", breaks, len(s.Nodes), withSecret)
	}
	id := "no identity yet"
	if s.Identity != nil {
		id = "identity " + s.Identity.Fingerprint
	}
	return fmt.Sprintf("agents will reconnect: every key unwraps, %d nodes (%d with an agent secret), %s", len(s.Nodes), withSecret, id)
}

// WriteText prints a state for a terminal: keys, identity, every node, every
// problem and the summary line.
func (s *State) WriteText(w io.Writer) {
	ok := 0
	for _, k := range s.Keys {
		if k.OK {
			ok++
		}
	}
	fmt.Fprintf(w, "master.key:  %s; %d of %d keys in secrets/ unwrap\n", s.MasterKey, ok, len(s.Keys))
	if s.Identity != nil {
		fmt.Fprintf(w, "identity:    %s\n", s.Identity.Fingerprint)
		fmt.Fprintf(w, "X-Instance-Identity: %s\n", s.Identity.PublicKey)
	} else {
		fmt.Fprintln(w, "identity:    none readable (Jenkins will generate a new one)")
	}
	fmt.Fprintf(w, "nodes:       %d\n", len(s.Nodes))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range s.Nodes {
		secret := "-"
		switch {
		case n.Revealed != "":
			secret = "JENKINS_SECRET=" + n.Revealed
		case n.SecretFingerprint != "":
			secret = "secret " + n.SecretFingerprint
		case n.Kind.UsesSecret():
			secret = "secret unknown (no readable agent key)"
		}
		kind := string(n.Kind)
		if n.Kind == KindOther {
			kind += " (" + n.Launcher + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", n.Name, kind, secret)
	}
	tw.Flush()
	for _, p := range s.Problems {
		tag := "note  "
		if p.Breaks {
			tag = "BREAKS"
		}
		fmt.Fprintf(w, "%s %s\n", tag, p)
	}
	fmt.Fprintln(w, s.Summary())
}

// Summary is one line on a comparison.
func (c *Comparison) Summary() string {
	changed := 0
	for _, n := range c.Nodes {
		if n.Breaks {
			changed++
		}
	}
	if !c.Breaks {
		return fmt.Sprintf("agents will reconnect: all %d nodes keep their secret or need none, identity %s", len(c.Nodes), c.Identity)
	}
	return fmt.Sprintf("agent continuity BREAKS: %d of %d nodes will not get back in as before, identity %s", changed, len(c.Nodes), c.Identity)
}

// WriteText prints a comparison node by node.
func (c *Comparison) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range c.Nodes {
		tag := "ok"
		if n.Breaks {
			tag = "BREAKS"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", tag, n.Name, n.Kind, n.Verdict, n.Message)
	}
	tw.Flush()
	switch c.Identity {
	case "same":
		fmt.Fprintf(w, "identity: same (%s)\n", c.IdentityAfter)
	case "changes":
		after := c.IdentityAfter
		if after == "" {
			after = "a new one Jenkins will generate"
		}
		fmt.Fprintf(w, "identity: CHANGES from %s to %s: agents that pin it refuse the controller\n", c.IdentityBefore, after)
	default:
		fmt.Fprintln(w, "identity: unknown (the first state has no readable identity)")
	}
	fmt.Fprintln(w, c.Summary())
}
