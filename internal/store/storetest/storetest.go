// Package storetest is the conformance suite every store backend passes,
// the faults every backend must survive (run as one table against every
// backend on its real server by this package's TestFaults), and the rule for
// finding the test servers.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/backend"
)

// Run runs the conformance suite. newStore returns a store for one subtest;
// stores may share their backing bucket (every subtest works under its own
// random key prefix, and deletes its keys when done). Each is tested as
// store.Open returns it: wrapped by store.Checked.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s store.Store, k keys)
	}{
		{"PutGet", testPutGet},
		{"Large", testLarge},
		{"Ranges", testRanges},
		{"Missing", testMissing},
		{"Replace", testReplace},
		{"List", testList},
		{"ManyKeys", testManyKeys},
		{"Swap", testSwap},
		{"ConcurrentSwap", testConcurrentSwap},
		{"CompareAndSwap", testCompareAndSwap},
		{"CancelPut", testCancelPut},
		{"OddKeys", testOddKeys},
		{"InvalidKeys", testInvalidKeys},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := store.Checked(newStore(t))
			k := keys("t-" + randomHex(6) + "/")
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var all []string
				if err := s.List(ctx, string(k), func(o store.Object) error { all = append(all, o.Key); return nil }); err != nil {
					t.Errorf("cleanup: %v", err)
				}
				if err := s.Delete(ctx, all...); err != nil {
					t.Errorf("cleanup: %v", err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, s, k)
		})
	}
}

// keys is a subtest's key prefix; k.of("a") is the key "a" under it.
type keys string

func (k keys) of(name string) string { return string(k) + name }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func put(t *testing.T, s store.Store, key, data string) {
	t.Helper()
	if err := s.Put(ctxFor(t), key, strings.NewReader(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, s store.Store, key string, off, n int64) string {
	t.Helper()
	rc, err := s.Get(ctxFor(t), key, off, n)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): %v", key, off, n, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): reading: %v", key, off, n, err)
	}
	return string(b)
}

func list(t *testing.T, s store.Store, prefix string) []store.Object {
	t.Helper()
	var objs []store.Object
	if err := s.List(ctxFor(t), prefix, func(o store.Object) error { objs = append(objs, o); return nil }); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return objs
}

func listKeys(t *testing.T, s store.Store, prefix string) []string {
	t.Helper()
	var ks []string
	for _, o := range list(t, s, prefix) {
		ks = append(ks, o.Key)
	}
	return ks
}

// wantErr checks that err wraps kind and is a *store.Error naming op, the
// store and key.
func wantErr(t *testing.T, s store.Store, err error, kind error, op, key string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s %q: got error %v, want one wrapping %q", op, key, err, kind)
	}
	var se *store.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s %q: error %v is a %T, want a *store.Error", op, key, err, err)
	}
	if se.Op != op || se.Key != key || se.Store != s.String() {
		t.Errorf("error names op %q store %q key %q, want %q %q %q", se.Op, se.Store, se.Key, op, s.String(), key)
	}
}

func testPutGet(t *testing.T, s store.Store, k keys) {
	put(t, s, k.of("a.txt"), "hello")
	put(t, s, k.of("dir/sub/empty"), "")
	if got := get(t, s, k.of("a.txt"), 0, -1); got != "hello" {
		t.Errorf("Get = %q, want hello", got)
	}
	if got := get(t, s, k.of("dir/sub/empty"), 0, -1); got != "" {
		t.Errorf("Get(empty) = %q, want empty", got)
	}
	objs := list(t, s, string(k))
	if len(objs) != 2 || objs[0].Key != k.of("a.txt") || objs[0].Size != 5 || objs[1].Size != 0 {
		t.Fatalf("List = %+v, want a.txt (5 bytes) and dir/sub/empty (0 bytes)", objs)
	}
	if d := time.Since(objs[0].Modified); d < -time.Hour || d > time.Hour {
		t.Errorf("List: Modified = %v, want about now", objs[0].Modified)
	}
}

// stream is n pseudo-random bytes behind a reader that hides its length, as
// a compressor's output does.
func stream(seed uint64, n int64) io.Reader {
	src := mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	return io.MultiReader(io.LimitReader(src, n/2), io.LimitReader(src, n-n/2))
}

func hashOf(t *testing.T, r io.Reader) string {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func testLarge(t *testing.T, s store.Store, k keys) {
	const size int64 = 20<<20 + 12345 // several parts of every backend's part size
	ctx := ctxFor(t)
	key := k.of("large")
	if err := s.Put(ctx, key, stream(1, size)); err != nil {
		t.Fatalf("Put(20 MiB): %v", err)
	}
	rc, err := s.Get(ctx, key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := hashOf(t, rc)
	rc.Close()
	if want := hashOf(t, stream(1, size)); got != want {
		t.Fatalf("Get(20 MiB) returned different bytes")
	}
	if objs := list(t, s, key); len(objs) != 1 || objs[0].Size != size {
		t.Fatalf("List = %+v, want one object of %d bytes", objs, size)
	}
	// Ranges across the part boundaries of the usual part sizes.
	all, _ := io.ReadAll(stream(1, size))
	for _, r := range [][2]int64{{5<<20 - 7, 20}, {8<<20 - 1, 2}, {16<<20 - 100, 1 << 20}, {size - 10, -1}, {size - 10, 100}} {
		end := size
		if r[1] >= 0 {
			end = min(r[0]+r[1], size)
		}
		if got := get(t, s, key, r[0], r[1]); got != string(all[r[0]:end]) {
			t.Errorf("Get(large, %d, %d): wrong bytes (%d of %d)", r[0], r[1], len(got), end-r[0])
		}
	}
}

func testRanges(t *testing.T, s store.Store, k keys) {
	key := k.of("digits")
	put(t, s, key, "0123456789")
	for _, c := range []struct {
		off, n int64
		want   string
	}{
		{0, -1, "0123456789"}, {0, 10, "0123456789"}, {3, 4, "3456"}, {3, -1, "3456789"},
		{9, 5, "9"}, {0, 0, ""}, {5, 0, ""}, {10, -1, ""}, {10, 3, ""}, {0, 1, "0"},
	} {
		if got := get(t, s, key, c.off, c.n); got != c.want {
			t.Errorf("Get(%d, %d) = %q, want %q", c.off, c.n, got, c.want)
		}
	}
	// A reader may read again after the end (a decoder checking that
	// nothing follows): the body keeps answering io.EOF.
	for _, c := range [][2]int64{{0, -1}, {3, 4}} {
		body, err := s.Get(ctxFor(t), key, c[0], c[1])
		if err != nil {
			t.Fatalf("Get(%d, %d): %v", c[0], c[1], err)
		}
		io.ReadAll(body)
		if n, err := body.Read(make([]byte, 8)); n != 0 || err != io.EOF {
			t.Errorf("Get(%d, %d): a read after the end gave %d bytes, %v; want 0, EOF", c[0], c[1], n, err)
		}
		body.Close()
	}
	put(t, s, k.of("empty"), "")
	if got := get(t, s, k.of("empty"), 0, -1); got != "" {
		t.Errorf("Get(empty) = %q", got)
	}
	if got := get(t, s, k.of("empty"), 0, 0); got != "" {
		t.Errorf("Get(empty, 0, 0) = %q", got)
	}
}

func testMissing(t *testing.T, s store.Store, k keys) {
	ctx := ctxFor(t)
	key := k.of("nope/missing")
	for _, r := range [][2]int64{{0, -1}, {5, 10}, {0, 0}} {
		rc, err := s.Get(ctx, key, r[0], r[1])
		if err == nil {
			// Some SDKs report a missing object on the first read.
			_, err = io.ReadAll(rc)
			rc.Close()
		}
		wantErr(t, s, err, store.ErrNotExist, "get", key)
	}
	_, _, err := s.Load(ctx, key)
	wantErr(t, s, err, store.ErrNotExist, "load", key)
	if !strings.Contains(err.Error(), key) {
		t.Errorf("message %q does not name the key", err)
	}
	if err := s.Delete(ctx, key, k.of("also/missing")); err != nil {
		t.Errorf("Delete(absent keys) = %v, want nil", err)
	}
	if objs := list(t, s, string(k)); len(objs) != 0 {
		t.Errorf("List(empty prefix) = %+v", objs)
	}
}

func testReplace(t *testing.T, s store.Store, k keys) {
	key := k.of("r")
	put(t, s, key, "a longer first version")
	put(t, s, key, "second")
	if got := get(t, s, key, 0, -1); got != "second" {
		t.Errorf("after replace Get = %q, want second", got)
	}
	if objs := list(t, s, key); len(objs) != 1 || objs[0].Size != 6 {
		t.Errorf("List = %+v, want one 6-byte object", objs)
	}
}

func testList(t *testing.T, s store.Store, k keys) {
	// '-' < '/' < '0': a store that lists directory by directory gets
	// this order wrong. (No key is also a "directory" of another: the
	// file store cannot hold both a/b and a/b/c.)
	names := []string{"a-b", "a/b", "a/c/d", "a0", "ab", "b/c/d", "b/c/e", "z"}
	for i, n := range slices.Backward(names) {
		put(t, s, k.of(n), strings.Repeat("x", i))
	}
	var want []string
	for _, n := range names {
		want = append(want, k.of(n))
	}
	if got := listKeys(t, s, string(k)); !slices.Equal(got, want) {
		t.Errorf("List(all) =\n%q, want\n%q", got, want)
	}
	for prefix, wantN := range map[string][]string{
		"a/": {"a/b", "a/c/d"}, "a": {"a-b", "a/b", "a/c/d", "a0", "ab"},
		"b/c/": {"b/c/d", "b/c/e"}, "b/c/d": {"b/c/d"}, "q": nil,
	} {
		var want []string
		for _, n := range wantN {
			want = append(want, k.of(n))
		}
		if got := listKeys(t, s, k.of(prefix)); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	stop := errors.New("stop")
	n := 0
	err := s.List(ctxFor(t), string(k), func(store.Object) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("List whose fn fails: called %d times, returned %v; want 1 and the fn's error", n, err)
	}
}

// manyKeys is more than one page of every backend's List and more than one
// batch of every batched Delete.
const manyKeys = 1005

func testManyKeys(t *testing.T, s store.Store, k keys) {
	ctx := ctxFor(t)
	var want []string
	for i := range manyKeys {
		want = append(want, k.of(fmt.Sprintf("many/%05d", i)))
	}
	if err := backend.Parallel(ctx, 16, want, func(ctx context.Context, key string) error {
		return s.Put(ctx, key, strings.NewReader(key))
	}); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, s, k.of("many/")); !slices.Equal(got, want) {
		t.Fatalf("List: got %d keys, want %d in order", len(got), len(want))
	}
	if got := listKeys(t, s, k.of("many/0010")); len(got) != 10 {
		t.Errorf("List(many/0010) = %d keys, want 10", len(got))
	}
	if err := s.Delete(ctx, append(want, k.of("many/absent"))...); err != nil {
		t.Fatalf("Delete(%d keys): %v", len(want)+1, err)
	}
	if got := listKeys(t, s, k.of("many/")); len(got) != 0 {
		t.Fatalf("after Delete List = %d keys", len(got))
	}
	if err := s.Delete(ctx); err != nil {
		t.Errorf("Delete() = %v", err)
	}
}

func testSwap(t *testing.T, s store.Store, k keys) {
	ctx := ctxFor(t)
	key := k.of("head")
	if _, _, err := s.Load(ctx, key); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("Load(absent) = %v, want ErrNotExist", err)
	}
	v1, err := s.Swap(ctx, key, []byte("one"), "")
	if err != nil || v1 == "" {
		t.Fatalf("create: %q, %v", v1, err)
	}
	_, err = s.Swap(ctx, key, []byte("again"), "")
	wantErr(t, s, err, store.ErrPrecondition, "swap", key)
	data, v, err := s.Load(ctx, key)
	if err != nil || string(data) != "one" || v != v1 {
		t.Fatalf("Load = %q, %q, %v; want one, %q", data, v, err, v1)
	}
	v2, err := s.Swap(ctx, key, []byte("two"), v1)
	if err != nil || v2 == "" || v2 == v1 {
		t.Fatalf("Swap(v1) = %q, %v; want a new version", v2, err)
	}
	if _, err := s.Swap(ctx, key, []byte("stale"), v1); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("Swap(stale version) = %v, want ErrPrecondition", err)
	}
	if data, v, err := s.Load(ctx, key); err != nil || string(data) != "two" || v != v2 {
		t.Fatalf("Load = %q, %q, %v; want two, %q", data, v, err, v2)
	}
	// Put bumps the version too: a Swap based on the old one must fail.
	put(t, s, key, "put")
	if _, err := s.Swap(ctx, key, []byte("x"), v2); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("Swap after Put = %v, want ErrPrecondition", err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Swap(ctx, key, []byte("x"), v2); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("Swap(deleted object) = %v, want ErrPrecondition", err)
	}
	if _, err := s.Swap(ctx, k.of("other"), []byte("x"), v2); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("Swap(absent object, some version) = %v, want ErrPrecondition", err)
	}
	if _, err := s.Swap(ctx, key, []byte("recreated"), ""); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

// testConcurrentSwap races writers on one version: the conditional write is
// homesnap's single-writer fence, so exactly one may win.
func testConcurrentSwap(t *testing.T, s store.Store, k keys) {
	const writers = 8
	ctx := ctxFor(t)
	race := func(key string, old store.Version) string {
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				// Data unique to each race: with content-hash versions a
				// rewrite of the same bytes would not change the version.
				_, errs[i] = s.Swap(ctx, key, []byte(fmt.Sprintf("writer %d on %q", i, old)), old)
			})
		}
		wg.Wait()
		winner := ""
		for i, err := range errs {
			switch {
			case err == nil && winner != "":
				t.Errorf("both %s and writer %d won the race on %q", winner, i, old)
			case err == nil:
				winner = fmt.Sprintf("writer %d on %q", i, old)
			case !errors.Is(err, store.ErrPrecondition):
				t.Errorf("writer %d: %v, want ErrPrecondition", i, err)
			}
		}
		if winner == "" {
			t.Fatalf("no writer won the race on %q", old)
		}
		data, _, err := s.Load(ctx, key)
		if err != nil || string(data) != winner {
			t.Fatalf("after the race Load = %q, %v; want %q", data, err, winner)
		}
		return winner
	}
	key := k.of("head")
	race(key, "") // conditional create
	_, v, err := s.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	race(key, v)
}

func testCompareAndSwap(t *testing.T, s store.Store, k keys) {
	ctx := ctxFor(t)
	key := k.of("head")
	v1, err := store.CompareAndSwap(ctx, s, key, []byte("snap-1"), "")
	if err != nil {
		t.Fatal(err)
	}
	// A retried create whose first attempt was applied reports 412; the
	// content is ours, so it succeeded.
	if v, err := store.CompareAndSwap(ctx, s, key, []byte("snap-1"), ""); err != nil || v != v1 {
		t.Fatalf("repeated create = %q, %v; want %q, nil", v, err, v1)
	}
	if _, err := store.CompareAndSwap(ctx, s, key, []byte("snap-other"), ""); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("create over another writer's head = %v, want ErrPrecondition", err)
	}
	v2, err := store.CompareAndSwap(ctx, s, key, []byte("snap-2"), v1)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := store.CompareAndSwap(ctx, s, key, []byte("snap-2"), v1); err != nil || v != v2 {
		t.Fatalf("repeated swap = %q, %v; want %q, nil", v, err, v2)
	}
	if _, err := store.CompareAndSwap(ctx, s, key, []byte("snap-3"), v1); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("stale swap = %v, want ErrPrecondition", err)
	}
}

// cancelReader cancels its context after `after` bytes and keeps producing
// data, like a snapshot whose daemon got SIGTERM mid-upload.
type cancelReader struct {
	r      io.Reader
	n      int64
	after  int64
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	if c.n >= c.after {
		c.cancel()
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func testCancelPut(t *testing.T, s store.Store, k keys) {
	for _, after := range []int64{1 << 20, 21 << 20} { // in the first part; after some parts are up
		key := k.of(fmt.Sprintf("cancelled-%d", after))
		ctx, cancel := context.WithCancel(ctxFor(t))
		err := s.Put(ctx, key, &cancelReader{r: stream(2, 64<<20), after: after, cancel: cancel})
		cancel()
		if err == nil {
			t.Fatalf("Put cancelled after %d bytes returned nil", after)
		}
		rc, err := s.Get(ctxFor(t), key, 0, -1)
		if err == nil {
			n, _ := io.Copy(io.Discard, rc)
			rc.Close()
			t.Fatalf("Put cancelled after %d bytes left a visible object of %d bytes", after, n)
		}
		if !errors.Is(err, store.ErrNotExist) {
			t.Fatalf("Get after cancelled Put: %v", err)
		}
	}
	if got := listKeys(t, s, string(k)); len(got) != 0 {
		t.Fatalf("List after cancelled Puts = %q", got)
	}
}

func testOddKeys(t *testing.T, s store.Store, k keys) {
	ctx := ctxFor(t)
	names := []string{
		"dir with space/file name.txt",
		"ünïcödé/日本語 ✓.xml",
		"jobs/a+b/builds/1/log",
		"pct%20and&amp=eq;semi,comma@at(paren)'q'",
		"trailing space /x",
	}
	var want []string
	for _, n := range names {
		want = append(want, k.of(n))
		put(t, s, k.of(n), n)
		if got := get(t, s, k.of(n), 0, -1); got != n {
			t.Errorf("Get(%q) = %q", n, got)
		}
	}
	slices.Sort(want)
	if got := listKeys(t, s, string(k)); !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	key := k.of("ünïcödé/héad ✓")
	v, err := s.Swap(ctx, key, []byte("1"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Swap(ctx, key, []byte("2"), v); err != nil {
		t.Fatal(err)
	}
	if data, _, err := s.Load(ctx, key); err != nil || string(data) != "2" {
		t.Fatalf("Load = %q, %v", data, err)
	}
	if err := s.Delete(ctx, append(want, key)...); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, s, string(k)); len(got) != 0 {
		t.Errorf("after Delete List = %q", got)
	}
}

func testInvalidKeys(t *testing.T, s store.Store, k keys) {
	ctx := ctxFor(t)
	for _, key := range []string{"", "/abs", "../up", k.of("a//b"), k.of("a/./b"), k.of("dir/")} {
		if err := s.Put(ctx, key, bytes.NewReader(nil)); err == nil {
			t.Errorf("Put(%q) succeeded, want an invalid-key error", key)
		}
	}
}
