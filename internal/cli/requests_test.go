package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testenv"
)

// request is one call a command made to its store.
type request struct {
	op, key        string
	offset, length int64
	// round counts the round trips the request waited for: 1 + the
	// highest round among those answered before it was sent. Requests
	// sent together share a round; one sent after another's answer
	// starts the next.
	round int
}

func (r request) String() string {
	s := fmt.Sprintf("%d %s %s", r.round, r.op, r.key)
	if r.op == "get" && (r.offset != 0 || r.length >= 0) {
		s += fmt.Sprintf("[%d:+%d]", r.offset, r.length)
	}
	return s
}

// recorder is a store that records every request in the order sent, and
// answers each after hold, as a distant store would, so that requests sent
// together are in flight together. A Get is answered when its body starts:
// reading the body is the bandwidth's, not the latency's.
type recorder struct {
	store.Store
	hold     time.Duration
	mu       sync.Mutex
	log      []request
	answered int // the highest round answered so far
}

// begin records a request, waits hold and returns the function that
// records its answer.
func (r *recorder) begin(op, key string, offset, length int64) func() {
	r.mu.Lock()
	round := r.answered + 1
	r.log = append(r.log, request{op: op, key: key, offset: offset, length: length, round: round})
	r.mu.Unlock()
	time.Sleep(r.hold)
	return func() {
		r.mu.Lock()
		r.answered = max(r.answered, round)
		r.mu.Unlock()
	}
}

func (r *recorder) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.log...)
}

func (r *recorder) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	defer r.begin("get", key, offset, length)()
	return r.Store.Get(ctx, key, offset, length)
}

func (r *recorder) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	defer r.begin("load", key, 0, -1)()
	return r.Store.Load(ctx, key)
}

func (r *recorder) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	defer r.begin("list", prefix, 0, -1)()
	return r.Store.List(ctx, prefix, fn)
}

func (r *recorder) Put(ctx context.Context, key string, rd io.Reader) error {
	defer r.begin("put", key, 0, -1)()
	return r.Store.Put(ctx, key, rd)
}

func (r *recorder) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	defer r.begin("swap", key, 0, -1)()
	return r.Store.Swap(ctx, key, data, old)
}

func (r *recorder) Delete(ctx context.Context, keys ...string) error {
	defer r.begin("delete", strings.Join(keys, ","), 0, -1)()
	return r.Store.Delete(ctx, keys...)
}

// recorded holds the recorder each recorded:///dir URL opened (a file
// store in dir beneath it), so that a test reads what a command asked.
var recorded = struct {
	sync.Mutex
	stores map[string]*recorder
}{stores: map[string]*recorder{}}

func init() {
	store.Register("recorded", func(_ context.Context, u *url.URL) (store.Store, error) {
		inner, err := file.Open(u.Path)
		if err != nil {
			return nil, err
		}
		// Long enough that requests sent together are all sent before
		// the first is answered, even on a loaded machine.
		r := &recorder{Store: inner, hold: 100 * time.Millisecond}
		recorded.Lock()
		recorded.stores[u.Path] = r
		recorded.Unlock()
		return r, nil
	})
}

func recorderOf(t *testing.T, dir string) *recorder {
	recorded.Lock()
	defer recorded.Unlock()
	r := recorded.stores[dir]
	if r == nil {
		t.Fatalf("no store was opened at recorded://%s", dir)
	}
	return r
}

// A restore of the head through a store's latency asks for each object
// once and sends what does not depend on an answer together: the marker
// and the head first, then the head's record (authenticated: with the
// listing of newer records and the encryption's look at the manifest),
// then every layer of the chain the record names. Each round trip before
// the first archive byte is time the fetch cannot overlap with anything.
func TestRestoreAsksForEachObjectOnce(t *testing.T) {
	testenv.Long(t, "runs restores through a store with 100 ms of latency")
	ctx := context.Background()
	keys := t.TempDir()
	authKey := filepath.Join(keys, "auth.key")
	identity := filepath.Join(keys, "age.key")
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	if os.WriteFile(authKey, []byte(strings.Repeat("5e", 32)), 0o600) != nil ||
		os.WriteFile(identity, []byte(id.String()+"\n"), 0o600) != nil {
		t.Fatal("cannot write the key files")
	}
	for _, tc := range []struct {
		name string
		keys []string
		// rounds is how many round trips the restore waits for before
		// it reads the first archive byte.
		rounds int
	}{
		{"plain", nil, 3}, // marker+head; the record; the manifest's layers
		{"authenticated", []string{"--auth-key-file", authKey}, 4}, // marker+head; the record with the rollback check; the layers' tags; the layers
		{"encrypted", []string{"--age-identity-file", identity}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, dir := snaptest.NewHome(t), t.TempDir()
			run := func(cmd func(context.Context, []string, io.Writer, io.Writer) error, args ...string) {
				t.Helper()
				var out, errs strings.Builder
				if err := cmd(ctx, append(append(args, "--log-level", "warn"), tc.keys...), &out, &errs); err != nil {
					t.Fatalf("%v: %v\n%s", args, err, errs.String())
				}
			}
			run(Snapshot, "--once", "--home", home, "--store", dir)
			snaptest.Write(t, home, "jobs/added/config.xml", "<new/>") // the head is a delta on a full manifest
			run(Snapshot, "--once", "--home", home, "--store", dir)
			target := t.TempDir()
			run(Restore, "--home", target, "--store", "recorded://"+dir)
			snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.Selected(t, target))

			reqs := recorderOf(t, dir).requests()
			var trace strings.Builder
			for _, r := range reqs {
				fmt.Fprintln(&trace, r)
			}
			seen := map[string]bool{}
			first := 0 // the round of the first archive read
			for _, r := range reqs {
				ask := fmt.Sprintf("%s %s %d %d", r.op, r.key, r.offset, r.length)
				if seen[ask] {
					t.Errorf("asked twice: %s", r)
				}
				seen[ask] = true
				if first == 0 && r.op == "get" && strings.HasPrefix(r.key, "archives/") {
					first = r.round
				}
			}
			for _, key := range []string{repo.MarkerKey, repo.HeadKey} {
				if !seen["load "+key+" 0 -1"] {
					t.Errorf("%s was not read", key)
				}
			}
			if first == 0 {
				t.Fatal("no archive was read")
			}
			if got := first - 1; got > tc.rounds {
				t.Errorf("the first archive read waited for %d round trips, want at most %d", got, tc.rounds)
			}
			if t.Failed() {
				t.Logf("requests (round, op, key):\n%s", trace.String())
			}
		})
	}
}

// flipper serves, after the head has been loaded after times, the old
// head instead: a bucket writer putting back an authenticated head of
// its history while a restore runs.
type flipper struct {
	store.Store
	after int
	old   []byte
	mu    sync.Mutex
	loads int
}

func (f *flipper) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	if key == repo.HeadKey {
		f.mu.Lock()
		f.loads++
		flipped := f.loads > f.after
		f.mu.Unlock()
		if flipped {
			return f.old, "old", nil
		}
	}
	return f.Store.Load(ctx, key)
}

// flipped holds what each flipped:///dir URL serves.
var flipped = struct {
	sync.Mutex
	stores map[string]*flipper
}{stores: map[string]*flipper{}}

func init() {
	store.Register("flipped", func(_ context.Context, u *url.URL) (store.Store, error) {
		inner, err := file.Open(u.Path)
		if err != nil {
			return nil, err
		}
		flipped.Lock()
		defer flipped.Unlock()
		f := flipped.stores[u.Path]
		if f == nil {
			return nil, fmt.Errorf("flipped://%s was not set up", u.Path)
		}
		f.Store = inner
		return f, nil
	})
}

// The head a restore checked against rollback is the head it restores:
// a head put back while the restore runs (an older one, authenticated,
// which the check would refuse) is never read after the check.
func TestRestoreRestoresTheHeadItChecked(t *testing.T) {
	ctx := context.Background()
	authKey := filepath.Join(t.TempDir(), "auth.key")
	if err := os.WriteFile(authKey, []byte(strings.Repeat("5e", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	home, dir := snaptest.NewHome(t), t.TempDir()
	run := func(cmd func(context.Context, []string, io.Writer, io.Writer) error, args ...string) (string, error) {
		var out, errs strings.Builder
		err := cmd(ctx, append(args, "--log-level", "warn", "--auth-key-file", authKey), &out, &errs)
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, errs.String())
		}
		return strings.TrimSpace(out.String()), err
	}
	var ids []string
	for i := range 3 {
		snaptest.Write(t, home, fmt.Sprintf("jobs/j%d/config.xml", i), "<job/>")
		id, err := run(Snapshot, "--once", "--home", home, "--store", dir)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if i == 0 {
			old, err := os.ReadFile(filepath.Join(dir, repo.HeadKey))
			if err != nil {
				t.Fatal(err)
			}
			flipped.Lock()
			flipped.stores[dir] = &flipper{old: old}
			flipped.Unlock()
		}
	}
	for after := 1; after <= 4; after++ {
		flipped.Lock()
		f := flipped.stores[dir]
		f.after, f.loads = after, 0
		flipped.Unlock()
		out, err := run(Restore, "--home", t.TempDir(), "--store", "flipped://"+dir)
		switch {
		case err != nil && !errors.Is(err, auth.ErrRollback):
			t.Errorf("head put back after %d reads: %v", after, err)
		case err == nil && out != "restore\t"+ids[2]:
			t.Errorf("head put back after %d reads: the restore said %q, want it to restore the head it checked, %s (or refuse)", after, out, ids[2])
		}
	}
}
