package gen

import (
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/homesnap/homesnap/internal/jenkins"
)

// writeSecrets writes secrets/ as Jenkins does: master.key is 256 hex
// characters without newline; ConfidentialKey files are AES blobs wrapped
// under it with the MAGIC marker (272 bytes for 256-byte payloads, 48 or
// 32 for short ones), so the agent check finds every key readable.
func (g *generator) writeSecrets(w *writer) error {
	r := newRNG(g.seed, "secrets")
	t := ns(r, epoch.Add(time.Hour))
	if err := w.mkdir("secrets"); err != nil {
		return err
	}
	keys := g.keys()
	if err := w.file("secrets/master.key", 0o644, t, keys.master); err != nil {
		return err
	}
	blobs := []struct {
		name string
		size int64
	}{
		{"hudson.util.Secret", 272},
		{"org.jenkinsci.main.modules.instance_identity.InstanceIdentity.KEY", 272},
		{"com.cloudbees.plugins.credentials.SecretBytes.KEY", 272},
		{"jenkins.slaves.JnlpSlaveAgentProtocol.secret", 48},
		{"jenkins.security.ApiTokenProperty.seed", 48},
		{"hudson.console.ConsoleNote.MAC", 48},
		{"jenkins.model.Jenkins.crumbSalt", 32},
		{"org.jenkinsci.plugins.workflow.log.ConsoleAnnotators.consoleAnnotator", 48},
	}
	for _, b := range blobs {
		data := keys.wrapped(b.size, r)
		if b.name == "org.jenkinsci.main.modules.instance_identity.InstanceIdentity.KEY" {
			data = string(jenkins.Wrap(keys.storeKey, keys.identityKey))
		}
		if err := w.file("secrets/"+b.name, 0o644, ns(r, t.Add(time.Minute)), data); err != nil {
			return err
		}
	}
	files := []struct {
		name string
		mode fs.FileMode
		data string
	}{
		{"initialAdminPassword", 0o600, r.hex(32) + "\n"},
		{"slave-to-master-security-kill-switch", 0o644, "false"},
		{"filepath-filters.d/30-default.conf", 0o644, filepathFilters},
		{"whitelisted-callables.d/default.conf", 0o644, callables},
	}
	for _, f := range files {
		if err := w.file("secrets/"+f.name, f.mode, ns(r, t.Add(2*time.Minute)), f.data); err != nil {
			return err
		}
	}
	return nil
}

// Agent-to-controller file access rules, in the format of Jenkins' default
// filepath filter (written here from its documented syntax).
const filepathFilters = `# Rules for agent-to-controller file access. Jenkins reads every *.conf file
# in this directory; later files may override earlier ones.
# Syntax: allow|deny OPERATIONS PATH-REGEX

# Build records: agents may write logs and test reports of their own build.
allow read,stat <BUILDDIR>/.+
allow write,mkdirs,create,stat <BUILDDIR>/(checkpoints|junitResult\.xml|timestamper|workflow/.+\.xml)($|/.*)

# Archived artifacts and user content are fair game for reads.
allow read,stat <BUILDDIR>/archive($|/.*)
allow read,stat <JENKINS_HOME>/userContent($|/.*)

# Nothing else in JENKINS_HOME, and never the secrets.
deny all <JENKINS_HOME>/secrets($|/.*)
deny all <JENKINS_HOME>/.+
`

const callables = `# Callables agents may invoke on the controller; one class name per line.
hudson.scm.SubversionWorkspaceSelector$1
hudson.plugins.git.GitSCM$BuildChooserContextImpl$1
jenkins.plugins.git.GitSCMFileSystem$BuilderImpl$HeadNameResult
org.jenkinsci.plugins.workflow.steps.TimeoutStepExecution$ResetTimer
`

// writeRoot writes the top-level files of JENKINS_HOME.
func (g *generator) writeRoot(w *writer) error {
	r := newRNG(g.seed, "root")
	t0 := epoch.Add(30 * time.Minute)
	late := epoch.Add(horizon - 2*time.Hour)
	if err := w.file("identity.key.enc", 0o600, ns(r, t0), g.keys().identity(newRNG(g.seed, "identity"))); err != nil {
		return err
	}
	files := []textFile{
		{"secret.key", r.hex(64), ns(r, t0)},
		{"secret.key.not-so-secret", "", ns(r, t0)},
		{".lastStarted", "", ns(r, late)},
		{"config.xml", rootConfigXML(r, g.plan.agents), ns(r, late.Add(-30*24*time.Hour))},
		{"credentials.xml", credentialsXML(r), ns(r, late.Add(-20*24*time.Hour))},
		{"hudson.model.UpdateCenter.xml", updateCenterXML, ns(r, t0)},
		{"queue.xml", queueXML(r), ns(r, late)},
		{"nodeMonitors.xml", nodeMonitorsXML, ns(r, t0)},
		{"jenkins.telemetry.Correlator.xml", correlatorXML(r), ns(r, t0)},
		{"jenkins.model.JenkinsLocationConfiguration.xml", locationXML, ns(r, t0)},
		{"hudson.plugins.git.GitTool.xml", gitToolXML, ns(r, t0)},
		{"jenkins.install.InstallUtil.lastExecVersion", "2.479.3", ns(r, late)},
		{"jenkins.install.UpgradeWizard.state", "2.479.3", ns(r, t0)},
		{"userContent/readme.txt", "Files in this directory will be served under your http://yourjenkins/userContent/\n", ns(r, t0)},
		{"updates/hudson.tasks.Maven.MavenInstaller", "{\"list\":[{\"id\":\"3.9.9\",\"name\":\"3.9.9\",\"url\":\"https://repo.maven.apache.org/maven2/org/apache/maven/apache-maven/3.9.9/apache-maven-3.9.9-bin.zip\"}]}", ns(r, late)},
		{"updates/default.json", updateJSON(r, g.p.Plugins), ns(r, late)},
	}
	for _, f := range files {
		if err := w.file(f.name, 0o644, f.t, f.data); err != nil {
			return err
		}
	}
	// An absolute, dangling symlink: restore must recreate it, not follow it.
	if err := w.symlink("userContent/docs", "/opt/jenkins-docs", ns(r, t0)); err != nil {
		return err
	}
	if err := w.mkdir("init.groovy.d"); err != nil {
		return err
	}
	if err := g.writeUsers(w, r); err != nil {
		return err
	}
	return g.writeNodes(w)
}

func updateJSON(r *rng, plugins int) string {
	var b strings.Builder
	b.WriteString("{\"connectionCheckUrl\":\"https://www.google.com/\",\"id\":\"default\",\"plugins\":{")
	for i := range max(3, plugins*4) {
		if i > 0 {
			b.WriteByte(',')
		}
		name := pluginName(i)
		b.WriteString("\"" + name + "\":{\"name\":\"" + name + "\",\"version\":\"" + placeholder("ver", r, "") + "\",\"sha256\":\"" + r.b64(32) + "\",\"url\":\"https://updates.jenkins.io/download/plugins/" + name + "/latest/" + name + ".hpi\"}")
	}
	b.WriteString("}}")
	return b.String()
}

func (g *generator) writeUsers(w *writer, r *rng) error {
	users := []string{"admin", "alice", "bob", "ci-bot", "zoë"}
	var m strings.Builder
	m.WriteString(xmlHead + "<hudson.model.UserIdMapper>\n  <version>1</version>\n  <idToDirectoryNameMap class=\"concurrent-hash-map\">\n")
	for _, u := range users {
		dir := strings.ReplaceAll(u, "ë", "_") + "_" + strconv.FormatUint(r.Uint64()%1e18, 10)
		m.WriteString("    <entry>\n      <string>" + u + "</string>\n      <string>" + dir + "</string>\n    </entry>\n")
		cfg := xmlHead + "<user>\n  <version>10</version>\n  <id>" + u + "</id>\n  <fullName>" + u + "</fullName>\n  <properties>\n    <jenkins.security.ApiTokenProperty>\n      <tokenStore>\n        <tokenList>\n          <jenkins.security.apitoken.ApiTokenStore_-HashedToken>\n            <uuid>" + r.uuid() + "</uuid>\n            <name>ci</name>\n            <value>\n              <version>11</version>\n              <hash>" + r.hex(64) + "</hash>\n            </value>\n          </jenkins.security.apitoken.ApiTokenStore_-HashedToken>\n        </tokenList>\n      </tokenStore>\n    </jenkins.security.ApiTokenProperty>\n    <hudson.security.HudsonPrivateSecurityRealm_-Details>\n      <passwordHash>#jbcrypt:$2a$10$" + r.b64(40)[:53] + "</passwordHash>\n    </hudson.security.HudsonPrivateSecurityRealm_-Details>\n  </properties>\n</user>"
		if err := w.file("users/"+dir+"/config.xml", 0o644, ns(r, epoch.Add(time.Duration(r.Int64N(int64(horizon))))), cfg); err != nil {
			return err
		}
	}
	m.WriteString("  </idToDirectoryNameMap>\n</hudson.model.UserIdMapper>")
	return w.file("users/users.xml", 0o644, ns(r, epoch.Add(time.Hour)), m.String())
}

// writeNodes writes nodes/<name>/config.xml for every agent.
func (g *generator) writeNodes(w *writer) error {
	for _, a := range g.plan.agents {
		r := newRNG(g.seed, "node:"+a.name)
		t := ns(r, epoch.Add(time.Duration(r.Int64N(int64(horizon)))))
		if err := w.file("nodes/"+a.name+"/config.xml", 0o644, t, nodeXML(a, r)); err != nil {
			return err
		}
	}
	return nil
}
