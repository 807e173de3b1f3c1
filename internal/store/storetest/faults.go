package storetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/homesnap/homesnap/internal/store"
)

// CutAnswers makes 30% of the connections through a Proxy close after 100
// bytes of answer: the request was applied, the client never learns it.
var CutAnswers = Toxic{Type: "limit_data", Stream: "downstream", Toxicity: 0.3, Attributes: map[string]int{"bytes": 100}}

// LostAnswers checks that writes through flaky, a store behind a Proxy
// with CutAnswers, still succeed: the SDK retries, and a retried
// conditional write that was applied (412) is resolved by
// store.CompareAndSwap. direct is the same store without the proxy, for
// checking the results.
func LostAnswers(t *testing.T, flaky, direct store.Store) {
	ctx := t.Context()
	k := "lost-" + randomHex(6) + "/"
	big := make([]byte, 23<<20)
	rand.Read(big)
	var keys []string
	for i := range 3 {
		key := fmt.Sprintf("%sbig-%d", k, i)
		keys = append(keys, key)
		if err := flaky.Put(ctx, key, io.MultiReader(bytes.NewReader(big))); err != nil {
			t.Fatalf("Put %s: %v", key, err)
		}
		rc, err := direct.Get(ctx, key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, big) {
			t.Fatalf("%s: read back %d different bytes", key, len(got))
		}
	}

	var v store.Version
	head, resolved := k+"head", 0
	const swaps = 30
	for i := range swaps {
		data := []byte(fmt.Sprintf("snapshot %d of %s", i, k))
		nv, err := flaky.Swap(ctx, head, data, v)
		if errors.Is(err, store.ErrPrecondition) {
			resolved++
			nv, err = store.CompareAndSwap(ctx, flaky, head, data, v)
		}
		if err != nil {
			t.Fatalf("swap %d: %v", i, err)
		}
		v = nv
	}
	t.Logf("%d of %d swaps answered 412 although applied, and were resolved", resolved, swaps)
	data, dv, err := direct.Load(ctx, head)
	if err != nil || dv != v || string(data) != fmt.Sprintf("snapshot %d of %s", swaps-1, k) {
		t.Fatalf("Load = %q, %q, %v; want the last snapshot at %q", data, dv, err, v)
	}
	if err := flaky.Delete(ctx, append(keys, head)...); err != nil {
		t.Fatal(err)
	}
}

// CutEvery closes every connection through a Proxy after n bytes of answer.
func CutEvery(n int) Toxic {
	return Toxic{Type: "limit_data", Stream: "downstream", Toxicity: 1, Attributes: map[string]int{"bytes": n}}
}

// ResumedReads checks that reads through flaky, a store behind a Proxy
// with CutEvery(3 MiB), resume where the connection broke, and that a
// resumed read fails rather than mix in the bytes of a newer version.
func ResumedReads(t *testing.T, flaky, direct store.Store) {
	ctx := t.Context()
	key := "resume-" + randomHex(6)
	data := make([]byte, 10<<20)
	rand.Read(data)
	if err := direct.Put(ctx, key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	defer direct.Delete(ctx, key)
	for _, r := range [][2]int64{{0, -1}, {1 << 20, 8 << 20}, {5 << 20, -1}} {
		rc, err := flaky.Get(ctx, key, r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		want := data[r[0]:]
		if r[1] >= 0 {
			want = want[:r[1]]
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get(%d, %d) through cut connections: %d bytes, %v; want the %d bytes written", r[0], r[1], len(got), err, len(want))
		}
	}

	rc, err := flaky.Get(ctx, key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	if err := direct.Put(ctx, key, bytes.NewReader(bytes.Repeat([]byte("new"), 4<<20))); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rc)
	if err == nil {
		t.Fatalf("read resumed across a replaced object: got %d more bytes, want an error", len(rest))
	}
	t.Logf("resuming a replaced object: %v", err)
}
