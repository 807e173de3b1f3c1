package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"github.com/homesnap/homesnap/internal/crypt"
	"github.com/homesnap/homesnap/internal/store/storetest"
	"github.com/homesnap/homesnap/internal/testenv"
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
	keyText, _ := os.ReadFile(key)
	secret := strings.TrimSpace(strings.Split(string(keyText), "\n")[1])
	// Every log line of every run below is checked for the key.
	run := func(t *testing.T, name string, env []string, args ...string) result {
		t.Helper()
		r := run(t, name, env, args...)
		if strings.Contains(r.stdout+r.stderr, secret) || strings.Contains(r.stderr, "AGE-SECRET-KEY") {
			t.Fatalf("%s %v printed the age key:\n%s", name, args, r.stderr)
		}
		return r
	}
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
	if list := ok(t, run(t, "homesnap", env, "list")); !strings.Contains(list, id1) || !strings.Contains(list, id2+" (head)") {
		t.Fatalf("--list without an identity:\n%s", list)
	}

	// Restores: the newest and the first, byte-identical.
	target := t.TempDir()
	ok(t, run(t, "restore", env, "--home", target, "--age-identity-file", key))
	same(t, "restored home", want2, wholeTree(t, target))
	first := t.TempDir()
	ok(t, run(t, "restore", append(env, "HOMESNAP_AGE_IDENTITY_FILE="+key), "--home", first, "--snapshot", id1))
	same(t, "first snapshot", want1, wholeTree(t, first))
	viaVariable := t.TempDir() // the key's content in a variable (a Secret mapped to env)
	ok(t, run(t, "restore", append(env, "HOMESNAP_AGE_IDENTITY="+string(keyText)), "--home", viaVariable))
	same(t, "restore with HOMESNAP_AGE_IDENTITY", want2, wholeTree(t, viaVariable))

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
		same(t, "home after a refused restore", before, wholeTree(t, target))
		if m, _ := filepath.Glob(filepath.Join(target, ".homesnap-restore-*")); len(m) > 0 {
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

// TestEncryptedOnObjectStore runs the encrypted story on an S3 server:
// multipart uploads of age files, ranged reads mapped to chunks.
func TestEncryptedOnObjectStore(t *testing.T) {
	storeURL, env := backends[0].setup(t, storetest.Prefix(t))
	env = append(env, "HOMESNAP_STORE="+storeURL)
	key, _, fp := ageKeys(t)
	home := buildHome(t, "jobs/test/builds/1/archive/big.bin", 13<<20)
	env = append(env, "HOMESNAP_AGE_IDENTITY_FILE="+key)
	id1 := ok(t, run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m"))
	want1 := selectedTree(t, home)
	testhome.Change(t, home)
	ok(t, run(t, "snapshot", env, "--once", "--home", home, "--timeout", "2m"))
	want2 := selectedTree(t, home)
	target := t.TempDir()
	ok(t, run(t, "restore", env, "--home", target, "--timeout", "2m"))
	same(t, "restore of the head", want2, wholeTree(t, target))
	first := t.TempDir()
	ok(t, run(t, "restore", env, "--home", first, "--snapshot", id1, "--timeout", "2m"))
	same(t, "restore of the first snapshot", want1, wholeTree(t, first))
	other, _, _ := ageKeys(t)
	r := run(t, "restore", append(env, "HOMESNAP_AGE_IDENTITY_FILE="+other), "--home", target)
	if r.code != 1 || !strings.Contains(r.stderr, fp) {
		t.Fatalf("wrong identity: exit %d, %s", r.code, r.stderr)
	}
	same(t, "home after a refused restore", want2, wholeTree(t, target))
}

// TestMigrateAndReencrypt: a plain store refuses an encrypted snapshot
// until --age-migrate; --age-reencrypt then moves every snapshot to a new
// key, after which the old key opens none of them.
func TestMigrateAndReencrypt(t *testing.T) {
	testenv.Long(t, "migrates and re-encrypts a store through the binaries")
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOMESNAP_STORE=" + storeDir, "HOMESNAP_HOME=" + home}
	plain := ok(t, run(t, "snapshot", env, "--once"))
	oldKey, _, _ := ageKeys(t)
	testhome.Change(t, home)
	if r := run(t, "snapshot", env, "--once", "--age-identity-file", oldKey); r.code != 1 || !strings.Contains(r.stderr, "--age-migrate") {
		t.Fatalf("encrypted onto plain: exit %d, %s", r.code, r.stderr)
	}
	enc := ok(t, run(t, "snapshot", env, "--once", "--age-identity-file", oldKey, "--age-migrate"))
	want := selectedTree(t, home)

	newKey, newRecipients, newFP := ageKeys(t)
	both := filepath.Join(t.TempDir(), "both.txt")
	a, _ := os.ReadFile(oldKey)
	b, _ := os.ReadFile(newKey)
	os.WriteFile(both, append(a, b...), 0o600)
	if r := run(t, "snapshot", env, "--age-reencrypt", "--age-identity-file", both); r.code != 2 {
		t.Fatalf("--age-reencrypt without new recipients: exit %d, %s", r.code, r.stderr)
	}
	out := ok(t, run(t, "snapshot", env, "--age-reencrypt", "--age-identity-file", both, "--age-recipients-file", newRecipients))
	if out != "re-encrypted 2 objects" {
		t.Fatalf("--age-reencrypt printed %q", out)
	}
	target := t.TempDir()
	ok(t, run(t, "restore", env, "--home", target, "--snapshot", enc, "--age-identity-file", newKey))
	same(t, "re-encrypted snapshot", want, wholeTree(t, target))
	if r := run(t, "restore", env, "--home", t.TempDir(), "--age-identity-file", oldKey); r.code != 1 || !strings.Contains(r.stderr, newFP) {
		t.Fatalf("old key after re-encryption: exit %d, %s", r.code, r.stderr)
	}
	// The plain snapshot from before the migration is left as it was: a
	// bucket writer could have planted it, so it restores only when the
	// admin says so (with a warning).
	r := run(t, "restore", env, "--home", t.TempDir(), "--snapshot", plain, "--age-identity-file", newKey)
	if r.code != 13 || !strings.Contains(r.stderr, "not encrypted") || !strings.Contains(r.stderr, "--allow-unauthenticated") {
		t.Fatalf("plain snapshot after migration: exit %d, %s", r.code, r.stderr)
	}
	r = run(t, "restore", env, "--home", t.TempDir(), "--snapshot", plain, "--age-identity-file", newKey, "--allow-unauthenticated")
	if r.code != 0 || !strings.Contains(r.stderr, "not encrypted") {
		t.Fatalf("plain snapshot after migration, allowed: exit %d, %s", r.code, r.stderr)
	}
	// The next snapshot with the new key is incremental (its parent is
	// recorded as encrypted to it).
	testhome.Change(t, home)
	r = run(t, "snapshot", env, "--once", "--age-identity-file", newKey)
	ok(t, r)
	var committed struct {
		Entries    int64 `json:"entries"`
		NewEntries int64 `json:"new_entries"`
	}
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, "snapshot committed") {
			json.Unmarshal([]byte(line), &committed)
		}
	}
	if committed.Entries == 0 || committed.NewEntries*2 >= committed.Entries {
		t.Fatalf("snapshot after re-encryption wrote %d of %d entries: not incremental\n%s", committed.NewEntries, committed.Entries, r.stderr)
	}
}
