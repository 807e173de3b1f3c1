package gen

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"math/big"

	"github.com/homesnap/homesnap/internal/jenkins"
)

// homeKeys are a generated home's keys in Jenkins' real formats, so that a
// generated controller passes the agent check: a master.key, and the
// payload of the instance-identity key that identity.key.enc is encrypted
// with. They derive from the seed alone, so the units writing secrets/
// and identity.key.enc agree without sharing state.
type homeKeys struct {
	master      string
	storeKey    []byte
	identityKey []byte
}

func (g *generator) keys() homeKeys {
	r := newRNG(g.seed, "keys")
	k := homeKeys{master: r.hex(256), identityKey: make([]byte, 256)}
	r.fill(k.identityKey)
	k.storeKey = jenkins.StoreKey([]byte(k.master))
	return k
}

// wrapped is a ConfidentialStore key file of size bytes (a multiple of 16):
// a random payload 16 bytes shorter, which is how Jenkins' sizes come out.
func (k homeKeys) wrapped(size int64, r *rng) string {
	payload := make([]byte, size-16)
	r.fill(payload)
	return string(jenkins.Wrap(k.storeKey, payload))
}

// identity is identity.key.enc: an RSA key in PKCS#1 PEM, as older
// Jenkins wrote it, encrypted with the identity key. crypto/rsa ignores
// the caller's randomness, so the key is built from seeded primes.
func (k homeKeys) identity(r *rng) string {
	key := seededRSA(r)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return string(jenkins.EncryptIdentity(k.identityKey, pemKey))
}

func seededRSA(r *rng) *rsa.PrivateKey {
	e := big.NewInt(65537)
	one := big.NewInt(1)
	for {
		p, q := seededPrime(r, 1024), seededPrime(r, 1024)
		n := new(big.Int).Mul(p, q)
		if p.Cmp(q) == 0 || n.BitLen() != 2048 {
			continue
		}
		phi := new(big.Int).Mul(new(big.Int).Sub(p, one), new(big.Int).Sub(q, one))
		d := new(big.Int).ModInverse(e, phi)
		if d == nil {
			continue
		}
		key := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: 65537}, D: d, Primes: []*big.Int{p, q}}
		key.Precompute()
		if key.Validate() == nil {
			return key
		}
	}
}

func seededPrime(r *rng, bits int) *big.Int {
	b := make([]byte, bits/8)
	for {
		r.fill(b)
		b[0] |= 0xc0 // two top bits: the product has all its bits
		b[len(b)-1] |= 1
		p := new(big.Int).SetBytes(b)
		if p.ProbablyPrime(20) {
			return p
		}
	}
}
