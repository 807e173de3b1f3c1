package jenkins

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Kind is how an agent connects to the controller.
type Kind string

const (
	// KindInbound: the agent dials the controller's TCP agent port
	// (JNLPLauncher) and presents its name and JENKINS_SECRET.
	KindInbound Kind = "inbound"
	// KindWebSocket: the same, over WebSocket on the HTTP port.
	KindWebSocket Kind = "websocket"
	// KindKubernetes: a pod agent of the Kubernetes plugin; the pod
	// connects inbound with a JENKINS_SECRET the plugin put in its env.
	KindKubernetes Kind = "kubernetes"
	// KindSSH: the controller connects to the agent; no agent secret.
	KindSSH Kind = "ssh"
	// KindCommand: the controller runs a command that starts the agent.
	KindCommand Kind = "command"
	// KindOther: another launcher (a cloud plugin's); see Node.Launcher.
	KindOther Kind = "other"
)

// Real class names in nodes/<name>/config.xml.
const (
	jnlpLauncher       = "hudson.slaves.JNLPLauncher"
	kubernetesLauncher = "org.csanchez.jenkins.plugins.kubernetes.KubernetesLauncher"
	kubernetesSlave    = "org.csanchez.jenkins.plugins.kubernetes.KubernetesSlave"
	sshLauncher        = "hudson.plugins.sshslaves.SSHLauncher"
	commandLauncher    = "hudson.slaves.CommandLauncher"
)

// UsesSecret reports whether agents of this kind authenticate with a
// JENKINS_SECRET derived from the agent key.
func (k Kind) UsesSecret() bool {
	return k == KindInbound || k == KindWebSocket || k == KindKubernetes
}

// Node is one agent definition of nodes/.
type Node struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"`      // nodes/<dir>/config.xml
	Class    string `json:"class"`    // the config's root element, e.g. "slave"
	Launcher string `json:"launcher"` // the launcher's class
	Kind     Kind   `json:"kind"`
	// SecretFingerprint names the JENKINS_SECRET Jenkins will expect (see
	// SecretFingerprint); empty when the kind uses none or the agent key
	// cannot be read.
	SecretFingerprint string `json:"secret_fingerprint,omitempty"`
	// Revealed is the full JENKINS_SECRET, set only by State.RevealSecrets.
	Revealed string `json:"secret,omitempty"`
	secret   string
}

// Secret is the full JENKINS_SECRET: a credential, shown only on request.
func (n *Node) Secret() string { return n.secret }

// ParseNode reads a node's config.xml. Jenkins writes XML 1.1 headers,
// which encoding/xml refuses, so the declaration is skipped.
func ParseNode(data []byte) (*Node, error) {
	if bytes.HasPrefix(data, []byte("<?xml")) {
		if i := bytes.Index(data, []byte("?>")); i >= 0 {
			data = data[i+2:]
		}
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = false // XStream output may carry entities encoding/xml does not know
	n := &Node{}
	var stack []string
	var launcherWebSocket bool
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, t.Name.Local)
			switch {
			case len(stack) == 1:
				n.Class = t.Name.Local
			case len(stack) == 2 && t.Name.Local == "launcher":
				n.Launcher = attr(t, "class")
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			text := strings.TrimSpace(string(t))
			switch {
			case slices.Equal(stack, []string{n.Class, "name"}):
				n.Name = text
			case len(stack) == 3 && stack[1] == "launcher" && stack[2] == "webSocket":
				launcherWebSocket = text == "true"
			}
		}
	}
	if n.Class == "" {
		return nil, errors.New("no XML root element")
	}
	n.Kind = kindOf(n.Class, n.Launcher, launcherWebSocket)
	return n, nil
}

func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func kindOf(class, launcher string, webSocket bool) Kind {
	switch {
	case class == kubernetesSlave || launcher == kubernetesLauncher:
		return KindKubernetes
	case launcher == jnlpLauncher && webSocket:
		return KindWebSocket
	case launcher == jnlpLauncher:
		return KindInbound
	case launcher == sshLauncher:
		return KindSSH
	case launcher == commandLauncher:
		return KindCommand
	}
	return KindOther
}

// readNodes lists nodes/*/config.xml. A directory without a config.xml is
// not a node for Jenkins (it skips it); a config Jenkins cannot parse is a
// problem (it skips that node too); a failed read is an error.
func readNodes(fsys fs.FS) ([]*Node, []Problem, error) {
	dirs, err := fs.ReadDir(fsys, NodesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var nodes []*Node
	var problems []Problem
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		p := path.Join(NodesDir, d.Name(), "config.xml")
		data, err := readBounded(fsys, p, MaxConfigXML)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			problems = append(problems, Problem{Path: p, Breaks: true, Message: fmt.Sprintf(
				"cannot be read (%v): Jenkins will not load node %q, and its agent will fail with \"Unknown client name\"", err, d.Name())})
			continue
		}
		n, err := ParseNode(data)
		if err != nil {
			problems = append(problems, Problem{Path: p, Breaks: true, Message: fmt.Sprintf(
				"cannot be parsed (%v): Jenkins will skip node %q, and its agent will fail with \"Unknown client name\"", err, d.Name())})
			continue
		}
		n.Dir = d.Name()
		if n.Name == "" {
			n.Name = d.Name()
		}
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, problems, nil
}
