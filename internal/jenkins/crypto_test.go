package jenkins

import (
	"archive/zip"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"testing"
)

// Known answers from Jenkins' own test resources (testdata/jenkins/README.md).

func readFixture(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile("../../testdata/jenkins/" + rel)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestStoreKeyAndSecretKeyKnownAnswers(t *testing.T) {
	master := readFixture(t, "secret-compat/secrets/master.key")
	storeKey := StoreKey(master)
	if got := hex.EncodeToString(storeKey); got != "74ff2dcc6fc7fa3b224a03f98fbeff53" {
		t.Fatalf("store key = %s, want 74ff2dcc6fc7fa3b224a03f98fbeff53", got)
	}
	payload, err := Unwrap(storeKey, readFixture(t, "secret-compat/secrets/hudson.util.Secret"))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(payload[:16]); got != "6446d71271081b79e2c84e0efc8ccd5a" {
		t.Fatalf("hudson.util.Secret key = %s, want 6446d71271081b79e2c84e0efc8ccd5a", got)
	}
	// A legacy (pre-SEC-304) Secret value is the same construction keyed
	// with the hudson.util.Secret key.
	legacy, _ := base64.StdEncoding.DecodeString("z/Dd3qrHdQ6/C5lR7uEafM/jD3nQDrGprw3XsfZ/0vo=")
	plain, err := Unwrap(payload[:16], legacy)
	if err != nil || string(plain) != "theSecret" {
		t.Fatalf("legacy secret = %q, %v; want theSecret", plain, err)
	}
}

func TestStoreKeyTrimsLikeJava(t *testing.T) {
	master := readFixture(t, "secret-compat/secrets/master.key")
	padded := append(append([]byte(" \t\r\n"), master...), "\n\x00 "...)
	if hex.EncodeToString(StoreKey(padded)) != hex.EncodeToString(StoreKey(master)) {
		t.Fatal("surrounding whitespace and control bytes changed the store key")
	}
}

func TestUnwrapRefusesAnotherMasterKey(t *testing.T) {
	blob := readFixture(t, "secret-compat/secrets/hudson.util.Secret")
	other := StoreKey(readFixture(t, "instance-identity/secrets/master.key"))
	if _, err := Unwrap(other, blob); !errors.Is(err, ErrBadPadding) && !errors.Is(err, ErrNoMagic) {
		t.Fatalf("unwrap under another master.key: err = %v, want bad padding or no MAGIC", err)
	}
	// Padding that happens to be valid still fails the MAGIC check.
	key := StoreKey([]byte("k"))
	if _, err := Unwrap(key, encryptECB(key, []byte("payload without marker"))); !errors.Is(err, ErrNoMagic) {
		t.Fatalf("err = %v, want ErrNoMagic", err)
	}
	if _, err := Unwrap(key, blob[:17]); !errors.Is(err, ErrBadPadding) {
		t.Fatalf("truncated blob: err = %v, want ErrBadPadding", err)
	}
}

func TestWrapRoundTrip(t *testing.T) {
	key := StoreKey([]byte("0123abcd"))
	payload := []byte("a payload of some length that spans blocks")
	blob := Wrap(key, payload)
	if len(blob)%16 != 0 {
		t.Fatalf("blob length %d", len(blob))
	}
	got, err := Unwrap(key, blob)
	if err != nil || string(got) != string(payload) {
		t.Fatalf("round trip = %q, %v", got, err)
	}
}

func TestIdentityKnownAnswer(t *testing.T) {
	master := readFixture(t, "instance-identity/secrets/master.key")
	key, err := Unwrap(StoreKey(master), readFixture(t, "instance-identity/secrets/org.jenkinsci.main.modules.instance_identity.InstanceIdentity.KEY"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := DecryptIdentity(key, readFixture(t, "instance-identity/identity.key.enc"))
	if err != nil {
		t.Fatal(err)
	}
	if id.Fingerprint != "ba:45:b6:c5:66:67:22:5f:8a:de:b0:de:a2:0e:12:2a" {
		t.Fatalf("fingerprint = %s", id.Fingerprint)
	}
	der, err := base64.StdEncoding.DecodeString(id.PublicKey)
	if err != nil || IdentityOf(der).Fingerprint != id.Fingerprint {
		t.Fatalf("X-Instance-Identity %q does not decode to the same key (%v)", id.PublicKey, err)
	}
	if _, err := DecryptIdentity(make([]byte, 32), readFixture(t, "instance-identity/identity.key.enc")); err == nil {
		t.Fatal("identity decrypted with a wrong key")
	}
}

func TestAgentSecret(t *testing.T) {
	// HMAC-SHA256 test case 2 of RFC 4231: key "Jefe".
	got := AgentSecret([]byte("Jefe"), "what do ya want for nothing?")
	if got != "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" {
		t.Fatalf("agent secret = %s", got)
	}
	if fp := SecretFingerprint(got); len(fp) != len("sha256:")+12 || fp == SecretFingerprint(got+"x") {
		t.Fatalf("fingerprint %q", fp)
	}
}

// The 2015 home of QueueTest: a complete secrets/ and identity from a real
// Jenkins of that time, read straight from the zip.
func TestInspectReal2015Home(t *testing.T) {
	z, err := zip.OpenReader("../../testdata/jenkins/zips/hudson__model__QueueTest__recover_from_legacy_list.zip")
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	s, err := Inspect(z, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.MasterKey != "present" || len(s.Keys) == 0 {
		t.Fatalf("master key %s, %d keys", s.MasterKey, len(s.Keys))
	}
	for _, k := range s.Keys {
		if !k.OK {
			t.Errorf("%s does not unwrap: %s", k.Path, k.Error)
		}
	}
	if s.Identity == nil || len(s.Identity.Fingerprint) != 47 {
		t.Fatalf("identity = %+v, problems %v", s.Identity, s.Problems)
	}
	if s.Breaks() {
		t.Fatalf("a whole home breaks continuity: %v", s.Problems)
	}
	// It has no agent key and no nodes: a note, not a break.
	if len(s.Problems) != 1 || s.Problems[0].Path != AgentKeyPath {
		t.Fatalf("problems = %v", s.Problems)
	}
}

func TestInspectInstanceIdentityZip(t *testing.T) {
	z, err := zip.OpenReader("../../testdata/jenkins/zips/instance-identity__reread.zip")
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	s, err := Inspect(z, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Identity == nil || s.Identity.Fingerprint != "ba:45:b6:c5:66:67:22:5f:8a:de:b0:de:a2:0e:12:2a" {
		t.Fatalf("identity = %+v, problems %v", s.Identity, s.Problems)
	}
}
