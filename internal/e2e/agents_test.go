package e2e

import (
	"archive/zip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/jenkins/jenkinstest"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// agentHome is a generated home with keys in Jenkins' real formats and
// inbound, WebSocket, SSH and pod agents.
func agentHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if _, err := gen.Generate(home, gen.Options{Preset: "tiny", Seed: 11}); err != nil {
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

type agentReport struct {
	Checked string         `json:"checked"`
	State   *jenkins.State `json:"state"`
	Compare *struct {
		Nodes []struct {
			Name    string `json:"name"`
			Verdict string `json:"verdict"`
		} `json:"nodes"`
		Identity string `json:"identity"`
	} `json:"comparison"`
	Continuity bool `json:"continuity"`
}

func checkJSON(t *testing.T, r result) agentReport {
	t.Helper()
	var rep agentReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--output json: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return rep
}

// expectedSecret computes a node's JENKINS_SECRET from the home's files,
// the way the test knows it independently of the binaries.
func expectedSecret(t *testing.T, home, node string) string {
	t.Helper()
	master, _ := os.ReadFile(filepath.Join(home, jenkins.MasterKeyPath))
	blob, _ := os.ReadFile(filepath.Join(home, jenkins.AgentKeyPath))
	key, err := jenkins.Unwrap(jenkins.StoreKey(master), blob)
	if err != nil {
		t.Fatal(err)
	}
	return jenkins.AgentSecret(key, node)
}

func TestAgentsKeepTheirSecretsThroughSnapshotAndRestore(t *testing.T) {
	home, storeDir, target := agentHome(t), t.TempDir(), t.TempDir()
	ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))

	// The snapshot, checked in the store without restoring, against the home.
	r := run(t, "homesnap", nil, "check-agents", "--store", storeDir, "--snapshot", "head", "--compare", "home", "--home", home, "--output", "json")
	rep := checkJSON(t, r)
	if r.code != 0 || !rep.Continuity || rep.Compare == nil || rep.Compare.Identity != "same" {
		t.Fatalf("exit %d, report %+v\nstderr: %s", r.code, rep, r.stderr)
	}
	for _, n := range rep.Compare.Nodes {
		if n.Verdict != string(jenkins.SameSecret) && n.Verdict != string(jenkins.NoSecret) {
			t.Errorf("%s: %s", n.Name, n.Verdict)
		}
	}
	for _, n := range rep.State.Nodes {
		if n.Revealed != "" {
			t.Errorf("%s: the full secret is shown without --show-secrets", n.Name)
		}
	}
	if strings.Contains(r.stdout+r.stderr, expectedSecret(t, home, "ws-agent")) {
		t.Fatal("a secret appears in the output without --show-secrets")
	}

	// Restore, then the restored home against the snapshot.
	r = run(t, "restore", nil, "--home", target, "--store", storeDir, "--require-agent-continuity")
	ok(t, r)
	if !strings.Contains(r.stderr, "agents will reconnect") {
		t.Errorf("the restore logged no summary line:\n%s", r.stderr)
	}
	r = run(t, "homesnap", nil, "check-agents", "--home", target, "--store", storeDir, "--compare", "head")
	if out := ok(t, r); !strings.Contains(out, "agents will reconnect: all") || !strings.Contains(out, "identity: same") {
		t.Fatalf("text report:\n%s", out)
	}

	// --show-secrets prints exactly what Jenkins will expect.
	rep = checkJSON(t, run(t, "homesnap", nil, "check-agents", "--home", target, "--show-secrets", "--output", "json"))
	n := rep.State.Node("ws-agent")
	if n == nil || n.Kind != jenkins.KindWebSocket || n.Revealed != expectedSecret(t, home, "ws-agent") {
		t.Fatalf("ws-agent: %+v", n)
	}
}

// Each way of breaking continuity is detected and named, a snapshot of it
// is refused by default, and a restore of it fails before anything moves
// when continuity is required.
func TestBrokenContinuityIsRefused(t *testing.T) {
	testenv.Long(t, "runs the binaries through every break in continuity")
	cases := []struct {
		name   string
		damage func(t *testing.T, home string)
		names  string // the report says this
		admin  bool   // an administrator's change: the sidecar commits it
	}{
		{"master.key deleted", func(t *testing.T, home string) {
			os.Remove(filepath.Join(home, jenkins.MasterKeyPath))
		}, "master.key", false},
		{"agent key regenerated", func(t *testing.T, home string) {
			master, _ := os.ReadFile(filepath.Join(home, jenkins.MasterKeyPath))
			if err := jenkinstest.WrapKey(home, jenkins.StoreKey(master), jenkins.AgentKeyPath, 32); err != nil {
				t.Fatal(err)
			}
		}, "Authorization failure", false},
		{"node removed", func(t *testing.T, home string) {
			os.RemoveAll(filepath.Join(home, "nodes", "ws-agent"))
		}, "Unknown client name", true},
		{"identity replaced", func(t *testing.T, home string) {
			if err := jenkinstest.WriteIdentity(home); err != nil {
				t.Fatal(err)
			}
		}, "identity", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home, storeDir, live := agentHome(t), t.TempDir(), t.TempDir()
			good := ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))
			ok(t, run(t, "restore", nil, "--home", live, "--store", storeDir))
			tc.damage(t, home)

			// The check names it, comparing the damaged home with the head.
			r := run(t, "homesnap", nil, "check-agents", "--home", home, "--store", storeDir, "--compare", "head")
			if r.code != 1 || !strings.Contains(r.stdout, "BREAKS") || !strings.Contains(r.stdout, tc.names) {
				t.Fatalf("check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}

			if tc.admin {
				// A node removed is administration: the sidecar commits it.
				ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))
			} else {
				// Regenerated keys: the sidecar refuses to replace the
				// good head, loudly.
				r = run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir)
				if r.code != 1 || !strings.Contains(r.stderr, "head is kept") {
					t.Fatalf("snapshot of a regenerated home: exit %d\n%s", r.code, r.stderr)
				}
				if out := ok(t, run(t, "homesnap", nil, "list", "--store", storeDir, "--output", "json")); strings.Count(out, `"id"`) != 1 || !strings.Contains(out, good) {
					t.Fatalf("the head moved:\n%s", out)
				}
				// Told to, it commits.
				ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir, "--accept-key-change"))
			}
			// Two snapshots compared in the store, neither restored.
			r = run(t, "homesnap", nil, "check-agents", "--store", storeDir, "--snapshot", "head", "--compare", good, "--output", "json")
			if rep := checkJSON(t, r); r.code != 1 || rep.Continuity || rep.Compare == nil || !strings.Contains(r.stdout, `"breaks": true`) {
				t.Fatalf("two snapshots: exit %d\n%s", r.code, r.stdout)
			}
			// A restore onto the live home with continuity required fails
			// and changes nothing.
			before := wholeTree(t, live)
			r = run(t, "restore", nil, "--home", live, "--store", storeDir, "--require-agent-continuity")
			if r.code != 1 || !strings.Contains(r.stderr, "require-agent-continuity") {
				t.Fatalf("restore: exit %d\n%s", r.code, r.stderr)
			}
			if diff := testhome.Diff(before, wholeTree(t, live)); len(diff) > 0 {
				t.Fatalf("a refused restore changed the home:\n%s", strings.Join(diff, "\n"))
			}
			// Without the requirement it restores, and says why agents break.
			r = run(t, "restore", nil, "--home", live, "--store", storeDir)
			ok(t, r)
			if !strings.Contains(r.stderr, "BREAKS") {
				t.Errorf("no warning:\n%s", r.stderr)
			}
		})
	}
}

func TestMasterKeyOutOfTheStore(t *testing.T) {
	home, storeDir := agentHome(t), t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "master.key")
	master, _ := os.ReadFile(filepath.Join(home, jenkins.MasterKeyPath))
	os.WriteFile(keyFile, master, 0o400)
	ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir, "--exclude-master-key"))
	// Nothing in the store holds the key.
	filepath.Walk(storeDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), string(master)) {
				t.Errorf("%s holds master.key", p)
			}
		}
		return nil
	})

	// Without the key, a required continuity check fails: Jenkins would
	// make a new master.key.
	empty := t.TempDir()
	r := run(t, "restore", nil, "--home", empty, "--store", storeDir, "--require-agent-continuity")
	if r.code != 1 || !strings.Contains(r.stderr, "master.key") {
		t.Fatalf("restore without the key: exit %d\n%s", r.code, r.stderr)
	}

	// A wrong key is refused before anything is moved into place.
	wrong := filepath.Join(t.TempDir(), "wrong.key")
	os.WriteFile(wrong, []byte(strings.Repeat("0f", 128)), 0o400)
	target := t.TempDir()
	r = run(t, "restore", nil, "--home", target, "--store", storeDir, "--master-key-file", wrong)
	if r.code != 1 || !strings.Contains(r.stderr, "does not unwrap") {
		t.Fatalf("wrong key: exit %d\n%s", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Fatalf("a refused restore left %d entries in the home", len(entries))
	}
	if strings.Contains(r.stderr, strings.Repeat("0f", 8)) || strings.Contains(r.stderr, string(master[:16])) {
		t.Fatal("key material in the log")
	}

	// The right key (through the variable) is installed, mode 0600, and
	// the restored home keeps every agent.
	r = run(t, "restore", []string{"HOMESNAP_MASTER_KEY_FILE=" + keyFile}, "--home", target, "--store", storeDir, "--require-agent-continuity")
	ok(t, r)
	fi, err := os.Stat(filepath.Join(target, jenkins.MasterKeyPath))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("installed master.key: %v, %v", fi, err)
	}
	r = run(t, "homesnap", nil, "check-agents", "--home", target, "--store", storeDir, "--compare", "head", "--master-key-file", keyFile)
	ok(t, r)
	if got, _ := os.ReadFile(filepath.Join(target, jenkins.MasterKeyPath)); string(got) != string(master) {
		t.Fatal("the installed key differs from the file")
	}
}

// The real 2015 home, unzipped, checks clean through the binary.
func TestCheckAgentsReal2015Home(t *testing.T) {
	home := t.TempDir()
	z, err := zip.OpenReader("../../testdata/jenkins/zips/hudson__model__QueueTest__recover_from_legacy_list.zip")
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := os.CopyFS(home, z); err != nil {
		t.Fatal(err)
	}
	r := run(t, "homesnap", nil, "check-agents", "--home", home)
	out := ok(t, r)
	if !strings.Contains(out, "agents will reconnect") || !strings.Contains(out, "X-Instance-Identity: MIIB") {
		t.Fatalf("report:\n%s", out)
	}
}

// A controller whose first inbound node is new has no agent key yet
// (Jenkins creates it lazily): the sidecar commits that, it is not a key
// regenerated behind the agents' back.
func TestSnapshotAcceptsFirstInboundNodeBeforeItsKey(t *testing.T) {
	home, storeDir := agentHome(t), t.TempDir()
	os.RemoveAll(filepath.Join(home, "nodes"))
	os.Remove(filepath.Join(home, jenkins.AgentKeyPath))
	ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir))
	if err := jenkinstest.InboundNode(home, "first-agent", false); err != nil {
		t.Fatal(err)
	}
	r := run(t, "snapshot", nil, "--once", "--home", home, "--store", storeDir)
	ok(t, r)
	if strings.Contains(r.stderr, "snapshot refused") {
		t.Fatalf("refused:\n%s", r.stderr)
	}
}
