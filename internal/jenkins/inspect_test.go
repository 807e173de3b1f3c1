package jenkins_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/jenkins/jenkinstest"
)

// genHome is a generated home (inbound, SSH and pod agents) with keys in
// Jenkins' real formats, plus a WebSocket agent.
func genHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if _, err := gen.Generate(home, gen.Options{Preset: "tiny", Seed: 7}); err != nil {
		t.Fatal(err)
	}
	if err := jenkinstest.WriteKeys(home); err != nil {
		t.Fatal(err)
	}
	if err := jenkinstest.InboundNode(home, "ws-agent", true); err != nil {
		t.Fatal(err)
	}
	return home
}

func inspect(t *testing.T, home string) *jenkins.State {
	t.Helper()
	s, err := jenkins.Inspect(os.DirFS(home), jenkins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGeneratedHomeKeepsContinuity(t *testing.T) {
	home := genHome(t)
	s := inspect(t, home)
	if s.Breaks() || len(s.Problems) != 0 {
		t.Fatalf("problems: %v", s.Problems)
	}
	kinds := map[jenkins.Kind]int{}
	for _, n := range s.Nodes {
		kinds[n.Kind]++
		if n.Kind.UsesSecret() != (n.SecretFingerprint != "") || n.Kind.UsesSecret() != (len(n.Secret()) == 64) {
			t.Errorf("node %s (%s): fingerprint %q, secret of %d chars", n.Name, n.Kind, n.SecretFingerprint, len(n.Secret()))
		}
	}
	for _, k := range []jenkins.Kind{jenkins.KindInbound, jenkins.KindWebSocket, jenkins.KindSSH, jenkins.KindKubernetes} {
		if kinds[k] == 0 {
			t.Errorf("no %s node among %v", k, kinds)
		}
	}
	if s.Identity == nil {
		t.Fatal("no identity")
	}
	c := jenkins.Compare(s, inspect(t, home))
	if c.Breaks || c.Identity != "same" {
		t.Fatalf("a home compared with itself: %+v", c)
	}
	for _, n := range c.Nodes {
		if n.Verdict != jenkins.SameSecret && n.Verdict != jenkins.NoSecret {
			t.Errorf("%s: %s", n.Name, n.Verdict)
		}
	}
}

// Each state that makes Jenkins regenerate keys or lose a node is detected
// and named, both by Inspect and by Compare against the good state.
func TestRegeneratingStatesAreNamed(t *testing.T) {
	cases := []struct {
		name      string
		damage    func(t *testing.T, home string)
		path      string // a problem names it
		verdict   jenkins.Verdict
		identity  string
		inspected bool // Inspect alone sees it (a lost node needs a comparison)
	}{
		{"master.key deleted", func(t *testing.T, home string) {
			os.Remove(filepath.Join(home, jenkins.MasterKeyPath))
		}, jenkins.MasterKeyPath, jenkins.SecretChanges, "changes", true},
		{"master.key replaced", func(t *testing.T, home string) {
			os.WriteFile(filepath.Join(home, jenkins.MasterKeyPath), []byte(strings.Repeat("ab", 128)), 0o644)
		}, jenkins.AgentKeyPath, jenkins.SecretChanges, "changes", true},
		{"agent key regenerated", func(t *testing.T, home string) {
			master, _ := os.ReadFile(filepath.Join(home, jenkins.MasterKeyPath))
			if err := jenkinstest.WrapKey(home, jenkins.StoreKey(master), jenkins.AgentKeyPath, 32); err != nil {
				t.Fatal(err)
			}
		}, "", jenkins.SecretChanges, "same", false},
		{"agent key deleted", func(t *testing.T, home string) {
			os.Remove(filepath.Join(home, jenkins.AgentKeyPath))
		}, jenkins.AgentKeyPath, jenkins.SecretChanges, "same", true},
		{"node removed", func(t *testing.T, home string) {
			os.RemoveAll(filepath.Join(home, "nodes", "ws-agent"))
		}, "", jenkins.Removed, "same", false},
		{"identity replaced", func(t *testing.T, home string) {
			if err := jenkinstest.WriteIdentity(home); err != nil {
				t.Fatal(err)
			}
		}, "", jenkins.SameSecret, "changes", false},
		{"identity deleted", func(t *testing.T, home string) {
			os.Remove(filepath.Join(home, jenkins.IdentityPath))
		}, jenkins.IdentityPath, jenkins.SameSecret, "changes", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := genHome(t)
			before := inspect(t, home)
			tc.damage(t, home)
			after := inspect(t, home)
			if after.Breaks() != tc.inspected {
				t.Errorf("Inspect breaks = %v, want %v: %v", after.Breaks(), tc.inspected, after.Problems)
			}
			if tc.path != "" && !names(after.Problems, tc.path) {
				t.Errorf("no problem names %s: %v", tc.path, after.Problems)
			}
			c := jenkins.Compare(before, after)
			if !c.Breaks || c.Identity != tc.identity {
				t.Errorf("comparison breaks=%v identity=%s, want true and %s", c.Breaks, c.Identity, tc.identity)
			}
			for _, n := range c.Nodes {
				if n.Name == "ws-agent" && n.Verdict != tc.verdict {
					t.Errorf("ws-agent: %s (%s), want %s", n.Verdict, n.Message, tc.verdict)
				}
			}
		})
	}
}

func names(ps []jenkins.Problem, p string) bool {
	for _, x := range ps {
		if x.Path == p && x.Breaks && x.Message != "" {
			return true
		}
	}
	return false
}

func TestSuppliedMasterKey(t *testing.T) {
	home := genHome(t)
	master, _ := os.ReadFile(filepath.Join(home, jenkins.MasterKeyPath))
	os.Remove(filepath.Join(home, jenkins.MasterKeyPath))
	s, err := jenkins.Inspect(os.DirFS(home), jenkins.Options{MasterKey: master})
	if err != nil || s.Breaks() || s.MasterKey != "supplied" {
		t.Fatalf("with the right key: %v, %v", err, s.Problems)
	}
	s, err = jenkins.Inspect(os.DirFS(home), jenkins.Options{MasterKey: []byte("0000")})
	if err != nil || !names(s.Problems, jenkins.MasterKeyPath) {
		t.Fatalf("with a wrong key: %v, %v", err, s.Problems)
	}
}

func TestParseNodeKinds(t *testing.T) {
	for xml, want := range map[string]jenkins.Kind{
		`<?xml version='1.1' encoding='UTF-8'?><slave><name>a</name><launcher class="hudson.slaves.JNLPLauncher"><webSocket>true</webSocket></launcher></slave>`: jenkins.KindWebSocket,
		`<slave><name>a</name><launcher class="hudson.slaves.JNLPLauncher"/></slave>`:                                                                            jenkins.KindInbound,
		`<slave><name>a</name><launcher class="hudson.plugins.sshslaves.SSHLauncher" plugin="ssh-slaves@1"><host>h</host></launcher></slave>`:                    jenkins.KindSSH,
		`<org.csanchez.jenkins.plugins.kubernetes.KubernetesSlave><name>p</name></org.csanchez.jenkins.plugins.kubernetes.KubernetesSlave>`:                      jenkins.KindKubernetes,
		`<slave><name>a</name><launcher class="hudson.slaves.CommandLauncher"><agentCommand>x</agentCommand></launcher></slave>`:                                 jenkins.KindCommand,
		`<slave><name>a</name><launcher class="com.example.CloudLauncher"/></slave>`:                                                                             jenkins.KindOther,
	} {
		n, err := jenkins.ParseNode([]byte(xml))
		if err != nil || n.Kind != want || n.Name == "" {
			t.Errorf("%s: %+v, %v; want %s", xml, n, err, want)
		}
	}
	if _, err := jenkins.ParseNode([]byte("<slave><name>")); err == nil {
		t.Error("a truncated config parsed")
	}
}

func TestNeeded(t *testing.T) {
	for rel, dir := range map[string]bool{
		"secrets": true, "nodes": true, "nodes/a": true, "secrets/master.key": false,
		"nodes/a/config.xml": false, "identity.key.enc": false,
	} {
		if !jenkins.Needed(rel, dir) {
			t.Errorf("%s not needed", rel)
		}
	}
	for rel, dir := range map[string]bool{
		"jobs": true, "nodes/a/other.xml": false, "secrets/filepath-filters.d": true, "nodes/a/b/config.xml": false, "config.xml": false,
	} {
		if jenkins.Needed(rel, dir) {
			t.Errorf("%s needed", rel)
		}
	}
}
