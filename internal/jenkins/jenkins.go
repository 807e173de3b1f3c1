// Package jenkins holds homesnap's knowledge of Jenkins: which files of a
// home matter (the selection presets), their formats (node config.xml,
// ConfidentialStore keys, the instance identity) and the crypto that turns
// them into what agents see — their JENKINS_SECRET and the controller's
// identity. From that it tells, before Jenkins starts, whether every agent
// will get back in.
//
// Everything reads from an fs.FS, so the same check runs on a home on
// disk (through homefs, which follows no symlink), on a restore's staging
// tree, or on a snapshot in the store without restoring it. Reads are of
// regular files only and bounded (read.go).
package jenkins

import (
	"path"
	"strings"
)

// Files of a home that decide whether agents reconnect.
const (
	SecretsDir      = "secrets"
	NodesDir        = "nodes"
	MasterKeyPath   = "secrets/master.key"
	AgentKeyPath    = "secrets/jenkins.slaves.JnlpSlaveAgentProtocol.secret"
	IdentityKeyPath = "secrets/org.jenkinsci.main.modules.instance_identity.InstanceIdentity.KEY"
	SecretKeyPath   = "secrets/hudson.util.Secret"
	IdentityPath    = "identity.key.enc"
)

// plainSecretFiles are files in secrets/ that Jenkins keeps in clear text,
// not encrypted under master.key.
var plainSecretFiles = map[string]bool{
	"master.key":                           true,
	"initialAdminPassword":                 true,
	"slave-to-master-security-kill-switch": true,
}

// IsKeyFile reports whether a file directly in secrets/ is a
// ConfidentialStore key, encrypted under master.key.
func IsKeyFile(name string) bool { return !plainSecretFiles[name] }

// Needed reports whether the agent check reads rel (a slash-separated path
// relative to the home, a directory when dir is set). A snapshot reader
// uses it to index only these paths of a manifest.
func Needed(rel string, dir bool) bool {
	switch {
	case rel == SecretsDir || rel == NodesDir:
		return dir
	case rel == IdentityPath:
		return !dir
	}
	parent, name := path.Split(rel)
	parent = strings.TrimSuffix(parent, "/")
	switch {
	case parent == SecretsDir:
		return !dir
	case parent == NodesDir:
		return dir
	case name == "config.xml" && !dir:
		p, _ := path.Split(parent)
		return p == NodesDir+"/"
	}
	return false
}

// Selection is a preset's patterns, in the selector's glob syntax.
type Selection struct {
	Include, Exclude []string
}

// inFlight are Jenkins' atomic-write temp files (AtomicFileWriter).
const inFlight = "**/*-atomic*tmp"

// AgentsPreset is what an agent needs to reconnect and what a job needs to
// keep its history: node definitions, the secrets that derive agent
// secrets and the instance identity, and job configs and builds. It fits a
// controller configured as code, whose other settings come back from the
// configuration on every start.
var AgentsPreset = Selection{
	Include: []string{
		NodesDir, SecretsDir, "jobs",
		IdentityPath, "secret.key", "secret.key.not-so-secret",
	},
	Exclude: []string{"jobs/**/workspace", "jobs/**/workspace@*", inFlight},
}

// ControllerPreset is the whole state of a controller configured by hand:
// everything in AgentsPreset plus the root config.xml (clouds, security
// realm, agent port), credentials.xml, queue.xml, users/, plugin settings
// (*.xml at the root), fingerprints/, userContent/ and the rest. It leaves
// out what Jenkins rebuilds or what is not state: plugins and the unpacked
// war, caches, logs, workspaces, tool installations, update-center data
// and temp files.
var ControllerPreset = Selection{
	Include: []string{"**"},
	Exclude: []string{
		"plugins", "war", "cache", "caches", ".cache", "logs", "*.log",
		"workspace", "jobs/**/workspace", "jobs/**/workspace@*",
		"tools", "updates", "tmp", "temp",
		inFlight, "**/*.tmp",
	},
}
