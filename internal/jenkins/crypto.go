package jenkins

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// magic ends every payload the ConfidentialStore encrypts; Jenkins checks
// it to tell a key it can read from one written under another master.key.
var magic = []byte("::::MAGIC::::")

// Errors of unwrapping a secrets/ file. Jenkins treats both the same way:
// it silently generates a new key and overwrites the file.
var (
	ErrBadPadding = errors.New("does not decrypt under this master.key (bad padding)")
	ErrNoMagic    = errors.New("does not decrypt under this master.key (no MAGIC marker)")
)

// StoreKey derives the AES-128 key of the ConfidentialStore from the
// contents of secrets/master.key: the first 16 bytes of the SHA-256 of the
// file's text, trimmed the way Java's String.trim does. The hex text is
// hashed as it is, never decoded.
func StoreKey(masterKey []byte) []byte {
	sum := sha256.Sum256(javaTrim(masterKey))
	return sum[:16]
}

// javaTrim drops bytes up to and including ' ' at both ends.
func javaTrim(b []byte) []byte {
	for len(b) > 0 && b[0] <= ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] <= ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// Unwrap decrypts a secrets/<key> file with the store key and returns its
// payload; it fails exactly when Jenkins would throw the file away.
func Unwrap(storeKey, blob []byte) ([]byte, error) {
	plain, err := decryptECB(storeKey, blob)
	if err != nil {
		return nil, err
	}
	payload, ok := bytes.CutSuffix(plain, magic)
	if !ok {
		return nil, ErrNoMagic
	}
	return payload, nil
}

// Wrap is the inverse of Unwrap: the bytes Jenkins writes for a payload.
func Wrap(storeKey, payload []byte) []byte {
	return encryptECB(storeKey, append(append([]byte{}, payload...), magic...))
}

// AgentSecret is the JENKINS_SECRET an inbound agent named node presents:
// HMAC-SHA256 keyed with the payload of
// secrets/jenkins.slaves.JnlpSlaveAgentProtocol.secret, in lowercase hex.
func AgentSecret(jnlpKey []byte, node string) string {
	m := hmac.New(sha256.New, jnlpKey)
	m.Write([]byte(node))
	return hex.EncodeToString(m.Sum(nil))
}

// SecretFingerprint names an agent secret without revealing it: enough to
// tell two secrets apart in a report, useless to an attacker.
func SecretFingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// Identity is the controller's instance identity as agents see it.
type Identity struct {
	// PublicKey is the Base64 of the public key's SubjectPublicKeyInfo DER:
	// the X-Instance-Identity header.
	PublicKey string `json:"public_key"`
	// Fingerprint is the MD5 of that DER as colon-separated hex: the
	// "Identity:" line an agent logs when it connects.
	Fingerprint string `json:"fingerprint"`
}

// DecryptIdentity reads identity.key.enc with the payload of
// secrets/org.jenkinsci.main.modules.instance_identity.InstanceIdentity.KEY
// and returns the public half of the RSA key it holds.
func DecryptIdentity(identityKey, enc []byte) (*Identity, error) {
	if len(identityKey) < 16 {
		return nil, fmt.Errorf("the identity key is %d bytes, want at least 16", len(identityKey))
	}
	plain, err := decryptECB(identityKey[:16], enc)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(plain)
	if block == nil {
		return nil, errors.New("decrypts to something that is not a PEM key")
	}
	var der []byte
	switch block.Type {
	case "RSA PRIVATE KEY": // older Jenkins: PKCS#1
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PKCS#1 key: %w", err)
		}
		der, err = x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			return nil, err
		}
	case "PRIVATE KEY": // newer Jenkins: PKCS#8
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PKCS#8 key: %w", err)
		}
		pub, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("PKCS#8 key of type %T has no public half", k)
		}
		der, err = x509.MarshalPKIXPublicKey(pub.Public())
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("decrypts to a PEM block of type %q, not a private key", block.Type)
	}
	return IdentityOf(der), nil
}

// IdentityOf describes a public key given as SubjectPublicKeyInfo DER.
func IdentityOf(der []byte) *Identity {
	sum := md5.Sum(der)
	hexSum := hex.EncodeToString(sum[:])
	parts := make([]string, 0, len(sum))
	for i := 0; i < len(hexSum); i += 2 {
		parts = append(parts, hexSum[i:i+2])
	}
	return &Identity{PublicKey: base64.StdEncoding.EncodeToString(der), Fingerprint: strings.Join(parts, ":")}
}

// decryptECB is AES/ECB/PKCS5Padding, the "AES" cipher of the JDK.
func decryptECB(key, data []byte) ([]byte, error) {
	c, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	bs := c.BlockSize()
	if len(data) == 0 || len(data)%bs != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of AES blocks", ErrBadPadding, len(data))
	}
	out := make([]byte, len(data))
	for i := 0; i < len(data); i += bs {
		c.Decrypt(out[i:i+bs], data[i:i+bs])
	}
	pad := int(out[len(out)-1])
	if pad == 0 || pad > bs {
		return nil, ErrBadPadding
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, ErrBadPadding
		}
	}
	return out[:len(out)-pad], nil
}

func encryptECB(key, plain []byte) []byte {
	c, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // keys come from StoreKey or a 16-byte slice
	}
	bs := c.BlockSize()
	pad := bs - len(plain)%bs
	data := append(append([]byte{}, plain...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, len(data))
	for i := 0; i < len(data); i += bs {
		c.Encrypt(out[i:i+bs], data[i:i+bs])
	}
	return out
}

// EncryptIdentity is the inverse of DecryptIdentity, for tests and
// generated homes: identity.key.enc for a PEM-encoded private key.
func EncryptIdentity(identityKey, pemKey []byte) []byte {
	return encryptECB(identityKey[:16], pemKey)
}
