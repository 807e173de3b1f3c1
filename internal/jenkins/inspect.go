package jenkins

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Problem is a state of the home that makes Jenkins regenerate a key or
// lose a node, in words an administrator understands.
type Problem struct {
	Path string `json:"path"`
	// Breaks is set when an agent will not get back in as before (a new
	// secret, a new identity, a lost node) or stored credentials become
	// unreadable; unset for notes that change nothing.
	Breaks  bool   `json:"breaks"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// KeyFile is one ConfidentialStore key in secrets/.
type KeyFile struct {
	Path  string `json:"path"`
	OK    bool   `json:"ok"` // unwraps under master.key with the MAGIC marker
	Error string `json:"error,omitempty"`
}

// State is what a home tells about its agents and identity.
type State struct {
	// MasterKey is "present", "missing" or "supplied" (from a file outside
	// the home, see Options.MasterKey).
	MasterKey string    `json:"master_key"`
	Keys      []KeyFile `json:"keys"`
	// AgentKey is set when the key deriving agent secrets can be read.
	AgentKey bool      `json:"agent_key"`
	Identity *Identity `json:"identity,omitempty"` // nil: Jenkins will make a new one
	Nodes    []*Node   `json:"nodes"`
	Problems []Problem `json:"problems"`
}

// Breaks reports whether some problem breaks agent continuity.
func (s *State) Breaks() bool {
	for _, p := range s.Problems {
		if p.Breaks {
			return true
		}
	}
	return false
}

// KeysUnreadable reports whether some key in secrets/ does not unwrap
// under master.key: at its next start Jenkins replaces it.
func (s *State) KeysUnreadable() bool {
	for _, k := range s.Keys {
		if !k.OK {
			return true
		}
	}
	return false
}

// Node returns the node called name, or nil.
func (s *State) Node(name string) *Node {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Options adjusts Inspect.
type Options struct {
	// MasterKey replaces secrets/master.key: the contents of a key kept
	// out of the store and supplied by a mounted file.
	MasterKey []byte
}

// Inspect reads the home in fsys (its root is JENKINS_HOME) and computes
// what Jenkins will make of it at start: which keys it can read, every
// node's launcher and agent secret, the instance identity, and every
// problem. Missing or undecryptable files are problems, not errors; an
// error means fsys could not be read.
func Inspect(fsys fs.FS, o Options) (*State, error) {
	s := &State{MasterKey: "present", Nodes: []*Node{}, Keys: []KeyFile{}, Problems: []Problem{}}
	master := o.MasterKey
	if master != nil {
		s.MasterKey = "supplied"
	} else {
		data, err := readOptional(fsys, MasterKeyPath, MaxKeyFile)
		if errors.Is(err, ErrUnreadable) {
			s.note(MasterKeyPath, true, "%v: Jenkins cannot use it", err)
			data, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		if data == nil {
			s.MasterKey = "missing"
		}
		master = data
	}
	payloads, err := s.readKeys(fsys, master)
	if err != nil {
		return nil, err
	}
	nodes, problems, err := readNodes(fsys)
	if err != nil {
		return nil, err
	}
	if nodes != nil {
		s.Nodes = nodes
	}
	enc, err := readOptional(fsys, IdentityPath, MaxKeyFile)
	if errors.Is(err, ErrUnreadable) {
		s.note(IdentityPath, true, "%v: Jenkins generates a new instance identity at start", err)
		enc, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if master == nil && len(s.Keys) == 0 && enc == nil && len(nodes) == 0 {
		s.note(SecretsDir, false, "no master.key, no keys, no identity and no nodes: a controller that has not started yet; Jenkins creates its keys at first start")
		return s, nil
	}
	s.checkMaster(master)
	s.checkAgentKey(payloads[AgentKeyPath])
	s.checkIdentity(payloads[IdentityKeyPath], enc)
	s.Problems = append(s.Problems, problems...)
	return s, nil
}

func (s *State) note(p string, breaks bool, format string, args ...any) {
	s.Problems = append(s.Problems, Problem{Path: p, Breaks: breaks, Message: fmt.Sprintf(format, args...)})
}

// readKeys unwraps every ConfidentialStore key of secrets/ and returns the
// payloads of those that unwrap.
func (s *State) readKeys(fsys fs.FS, master []byte) (map[string][]byte, error) {
	entries, err := fs.ReadDir(fsys, SecretsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var storeKey []byte
	if master != nil {
		storeKey = StoreKey(master)
	}
	payloads := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsKeyFile(e.Name()) {
			continue
		}
		p := path.Join(SecretsDir, e.Name())
		blob, err := readBounded(fsys, p, MaxKeyFile)
		if errors.Is(err, fs.ErrNotExist) { // gone since the listing
			continue
		}
		if err != nil && !errors.Is(err, ErrUnreadable) {
			return nil, err
		}
		k := KeyFile{Path: p}
		switch {
		case err != nil:
			k.Error = err.Error()
		case storeKey == nil:
			k.Error = "cannot be decrypted: master.key is missing"
		default:
			payload, err := Unwrap(storeKey, blob)
			if err != nil {
				k.Error = err.Error()
			} else {
				k.OK = true
				payloads[p] = payload
			}
		}
		s.Keys = append(s.Keys, k)
	}
	return payloads, nil
}

// consequence says what Jenkins loses when it replaces a key.
func consequence(p string) string {
	switch p {
	case AgentKeyPath:
		return "every inbound, WebSocket and pod agent gets a new JENKINS_SECRET, and agents still using the old one fail with \"Authorization failure\""
	case IdentityKeyPath:
		return "the controller gets a new instance identity (identity.key.enc can no longer be read)"
	case SecretKeyPath:
		return "every password and credential stored encrypted in the XML files can no longer be decrypted"
	}
	return "whatever Jenkins or a plugin protected with it is lost"
}

func (s *State) checkMaster(master []byte) {
	if master == nil {
		if len(s.Keys) > 0 {
			s.note(MasterKeyPath, true, "is missing: Jenkins will create a new one at start, cannot read any of the %d keys in secrets/ and replaces each of them with a new one: "+
				"every inbound agent gets a new JENKINS_SECRET (\"Authorization failure\"), the instance identity changes, and stored credentials can no longer be decrypted", len(s.Keys))
		}
		return
	}
	var bad []string
	for _, k := range s.Keys {
		if !k.OK {
			bad = append(bad, k.Path)
			s.note(k.Path, true, "%s: Jenkins will silently replace it with a new key at start, so %s", k.Error, consequence(k.Path))
		}
	}
	if len(bad) > 0 {
		which := "this master.key"
		if s.MasterKey == "supplied" {
			which = "the supplied master key"
		}
		s.note(MasterKeyPath, true, "%s does not unwrap %d of the %d keys in secrets/ (the MAGIC check fails): it is not the key that encrypted them", which, len(bad), len(s.Keys))
	}
}

func (s *State) checkAgentKey(payload []byte) {
	var inbound []string
	for _, n := range s.Nodes {
		if n.Kind.UsesSecret() {
			inbound = append(inbound, n.Name)
		}
	}
	if payload == nil {
		if !s.hasKey(AgentKeyPath) {
			if len(inbound) > 0 {
				s.note(AgentKeyPath, true, "is missing: Jenkins creates a new agent key the first time it needs one, so the JENKINS_SECRET of all %d inbound, WebSocket and pod agents (%s) changes and running agents fail with \"Authorization failure\"",
					len(inbound), strings.Join(inbound, ", "))
			} else {
				s.note(AgentKeyPath, false, "is missing, and no node needs it yet: Jenkins creates it when the first inbound agent's secret is needed")
			}
		}
		return
	}
	s.AgentKey = true
	for _, n := range s.Nodes {
		if n.Kind.UsesSecret() {
			n.secret = AgentSecret(payload, n.Name)
			n.SecretFingerprint = SecretFingerprint(n.secret)
		}
	}
}

func (s *State) hasKey(p string) bool {
	for _, k := range s.Keys {
		if k.Path == p {
			return true
		}
	}
	return false
}

func (s *State) checkIdentity(key, enc []byte) {
	const pinned = "agents that pin the controller's identity (started with -instanceIdentity, or checking the \"Identity:\" fingerprint) refuse the new one"
	switch {
	case enc == nil:
		s.note(IdentityPath, true, "is missing: Jenkins generates a new instance identity at start; %s", pinned)
	case key == nil && !s.hasKey(IdentityKeyPath):
		s.note(IdentityKeyPath, true, "is missing, so identity.key.enc cannot be decrypted: Jenkins generates a new instance identity at start; %s", pinned)
	case key == nil:
		// The key's own problem is reported already.
	default:
		id, err := DecryptIdentity(key, enc)
		if err != nil {
			s.note(IdentityPath, true, "cannot be decrypted with the identity key (%v): Jenkins generates a new instance identity at start; %s", err, pinned)
			return
		}
		s.Identity = id
	}
}

// readOptional reads a file, returning nil without error when it is absent.
func readOptional(fsys fs.FS, p string, limit int64) ([]byte, error) {
	data, err := readBounded(fsys, p, limit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err == nil && data == nil {
		data = []byte{} // present but empty
	}
	return data, err
}
