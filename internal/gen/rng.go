package gen

import (
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// rng bundles a PCG source for decisions with a ChaCha8 stream for bulk
// bytes. Every unit of work (a job, the plugins dir, a churn round) gets its
// own rng derived from the seed and a label, so output does not depend on
// which goroutine ran first.
type rng struct {
	*rand.Rand
	bulk *rand.ChaCha8
}

// mix is the splitmix64 finalizer: it spreads nearby inputs (seed 1, 2, …)
// over the whole 64-bit space.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// newRNG returns the generator for label under seed.
func newRNG(seed int64, label string) *rng {
	a := mix(uint64(seed) ^ mix(hashString(label)))
	b := mix(a ^ 0x6a09e667f3bcc908)
	var key [32]byte
	for i := range 4 {
		binary.LittleEndian.PutUint64(key[i*8:], mix(b+uint64(i)))
	}
	return &rng{Rand: rand.New(rand.NewPCG(a, b)), bulk: rand.NewChaCha8(key)}
}

// between returns a uniform int in [lo, hi].
func (r *rng) between(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + r.IntN(hi-lo+1)
}

func (r *rng) chance(p float64) bool { return r.Float64() < p }

func (r *rng) pick(list []string) string { return list[r.IntN(len(list))] }

// logNormal draws a heavy-tailed size with the given median; sigma controls
// the tail (1.0 → p99 ≈ 10× median, 1.5 → ≈ 33×).
func (r *rng) logNormal(median float64, sigma float64) float64 {
	return median * math.Exp(sigma*r.NormFloat64())
}

// size draws a log-normal size clamped to [lo, hi].
func (r *rng) size(median int64, sigma float64, lo, hi int64) int64 {
	v := int64(r.logNormal(float64(median), sigma))
	return max(lo, min(hi, v))
}

// fill writes random (incompressible) bytes into b.
func (r *rng) fill(b []byte) { r.bulk.Read(b) }

const hexDigits = "0123456789abcdef"

func (r *rng) hex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = hexDigits[r.IntN(16)]
	}
	return string(b)
}

const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"

func (r *rng) alnum(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[r.IntN(len(alnum))]
	}
	return string(b)
}

// b64 returns the standard base64 encoding of n random bytes.
func (r *rng) b64(n int) string {
	b := make([]byte, n)
	r.fill(b)
	return base64.StdEncoding.EncodeToString(b)
}

func (r *rng) uuid() string {
	h := r.hex(32)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}
