package e2e

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/testhome"
)

// ageKeys writes an identity file and a recipients file in age's formats.
func ageKeys(t *testing.T) (identityFile, recipientsFile, fingerprint string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	identityFile = filepath.Join(dir, "key.txt")
	recipientsFile = filepath.Join(dir, "recipients.txt")
	os.WriteFile(identityFile, []byte("# test key\n"+id.String()+"\n"), 0o600)
	os.WriteFile(recipientsFile, []byte(id.Recipient().String()+"\n"), 0o644)
	return identityFile, recipientsFile, crypt.Fingerprint(id.Recipient().String())
}

// storedObjects lists the manifests and archives of a store directory.
func storedObjects(t *testing.T, storeDir string) []string {
	t.Helper()
	var objs []string
	for _, dir := range []string{"snapshots", "archives"} {
		entries, _ := os.ReadDir(filepath.Join(storeDir, dir))
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".json") {
				continue // a snapshot's record: IDs, times and totals, kept plain for listing and pruning
			}
			objs = append(objs, filepath.Join(storeDir, dir, e.Name()))
		}
	}
	return objs
}

// TestEncryptedSnapshotRestore is the user's story with age: snapshots
// encrypted to a recipients file, restores with the identity file, and a
// wrong or missing identity refused with the home untouched.
func TestEncryptedSnapshotRestore(t *testing.T) {
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	key, recipients, fp := ageKeys(t)
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_LOG_FORMAT=json"}
	id1 := ok(t, run(t, "snapshot", env, "--once", "--home", home, "--age-recipients-file", recipients, "--age-identity-file", key))
	want1 := selectedTree(t, home)
	testhome.Change(t, home)
	want2 := selectedTree(t, home)
	// The identity alone, through the environment, also sets the recipients.
	id2 := ok(t, run(t, "snapshot", append(env, "HOMESNAP_AGE_IDENTITY_FILE="+key), "--once", "--home", home))

	objs := storedObjects(t, storeDir)
	if len(objs) != 4 {
		t.Fatalf("stored objects %v, want a manifest and an archive per snapshot", objs)
	}
	for _, o := range objs {
		data, _ := os.ReadFile(o)
		if !strings.HasSuffix(o, ".age") || !bytes.HasPrefix(data, []byte("age-encryption.org/v1\n")) {
			t.Fatalf("%s is not an age file", o)
		}
	}
	head, _ := os.ReadFile(filepath.Join(storeDir, "head.json"))
	marker, _ := os.ReadFile(filepath.Join(storeDir, "homesnap.json"))
	if !strings.Contains(string(head), fp) || !strings.Contains(string(marker), `"encryption":"age"`) {
		t.Fatalf("head %s / marker %s do not record the recipient %s", head, marker, fp)
	}
	if list := ok(t, run(t, "restore", env, "--list")); !strings.Contains(list, id1) || !strings.Contains(list, id2+" (head)") {
		t.Fatalf("--list without an identity:\n%s", list)
	}

	// Restores: the newest and the first, byte-identical.
	target := t.TempDir()
	ok(t, run(t, "restore", env, "--home", target, "--age-identity-file", key))
	same(t, "restored home", want2, wholeTree(t, target))
	first := t.TempDir()
	ok(t, run(t, "restore", append(env, "HOMESNAP_AGE_IDENTITY_FILE="+key), "--home", first, "--snapshot", id1))
	same(t, "first snapshot", want1, wholeTree(t, first))

	// Wrong or missing identity: exit 1 at once, the message names the
	// recipient needed, never a key, and the home is as it was.
	other, _, otherFP := ageKeys(t)
	testhome.Change(t, target) // the home has moved on since; it must stay so
	before := wholeTree(t, target)
	for _, args := range [][]string{{"--age-identity-file", other}, nil} {
		r := run(t, "restore", env, append([]string{"--home", target}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, fp) || !strings.Contains(r.stderr, "--age-identity-file") {
			t.Fatalf("restore %v: exit %d, stderr %s", args, r.code, r.stderr)
		}
		if args != nil && !strings.Contains(r.stderr, otherFP) {
			t.Errorf("the message does not say which identity was given: %s", r.stderr)
		}
		if strings.Contains(r.stderr, "AGE-SECRET-KEY") {
			t.Fatalf("a key in the log: %s", r.stderr)
		}
		same(t, "home after a refused restore", before, wholeTree(t, target))
		if _, err := os.Stat(filepath.Join(target, ".homesnap-restore-"+id2)); err == nil {
			t.Fatal("a refused restore left a staging directory")
		}
	}

	// A plain snapshot onto the encrypted store is refused.
	if r := run(t, "snapshot", env, "--once", "--home", home, "--force"); r.code != 1 || !strings.Contains(r.stderr, "never mixes") {
		t.Fatalf("plain snapshot onto an encrypted store: exit %d, %s", r.code, r.stderr)
	}
	// A key on the command line is not a file: a usage error that does not echo it.
	if r := run(t, "restore", env, "--home", target, "--age-identity-file", "AGE-SECRET-KEY-1XYZ"); r.code != 2 {
		t.Fatalf("identity given as a flag value: exit %d, %s", r.code, r.stderr)
	}

	// Stock tools: age -d | zstd -d | tar -x gives the first snapshot's files.
	extracted := t.TempDir()
	archive := filepath.Join(storeDir, "archives", id1+".tar.zst.age")
	if _, err := exec.LookPath("age"); err == nil {
		cmd := exec.Command("bash", "-o", "pipefail", "-c", `age -d -i "$1" "$2" | zstd -d | tar -x -C "$3"`, "-", key, archive, extracted)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("age -d | zstd -d | tar -x: %v\n%s", err, out)
		}
	} else {
		t.Log("age is not installed: decrypting with the library")
		untarDecrypted(t, key, archive, extracted)
	}
	got := wholeTree(t, extracted)
	files := 0
	for p, a := range want1 {
		if a.Type != "f" {
			continue
		}
		files++
		if g, ok := got[p]; !ok || g.Sum != a.Sum || g.Size != a.Size {
			t.Fatalf("%s from the stock tools differs from the home", p)
		}
	}
	if files == 0 {
		t.Fatal("no files compared")
	}
}

// untarDecrypted is `age -d | zstd -d | tar -x` in Go, for hosts without age.
func untarDecrypted(t *testing.T, keyFile, archive, dir string) {
	t.Helper()
	kf, _ := os.Open(keyFile)
	ids, err := age.ParseIdentities(kf)
	kf.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	plain, err := age.Decrypt(f, ids...)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zstd.NewReader(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(p), 0o755)
			data, _ := io.ReadAll(tr)
			os.WriteFile(p, data, 0o644)
		}
	}
}
