package e2e

// Helpers shared by the backend and fault tests: store URLs and
// credentials for the test servers, a binary running in the background,
// toxiproxy control, and tree arithmetic.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
	_ "github.com/homesnap/homesnap/internal/store/all"
	"github.com/homesnap/homesnap/internal/store/azure"
	"github.com/homesnap/homesnap/internal/store/storetest"
	"github.com/homesnap/homesnap/internal/testhome"
)

var testBucket, s3Access, s3Secret = storetest.Bucket, storetest.AccessKey, storetest.SecretKey

// s3Env is the environment a binary needs for the S3 test servers: static
// keys, a region, and no detour through an instance metadata service.
func s3Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s3Access,
		"AWS_SECRET_ACCESS_KEY=" + s3Secret,
		"AWS_SESSION_TOKEN=",
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// s3URL names prefix in the test bucket of the S3 server at endpoint
// (http://host:port); extra is appended to the query ("&max_attempts=20").
func s3URL(endpoint, prefix, extra string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=us-east-1&path_style=true%s",
		testBucket, prefix, url.QueryEscape(endpoint), extra)
}

// hostOf returns the host:port of an http:// endpoint.
func hostOf(t *testing.T, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("endpoint %q names no host:port", endpoint)
	}
	return u.Host
}

// removeStoreAtEnd deletes every object under a store when the test ends,
// so that repeated runs do not fill the (partly in-memory) test servers.
// open opens the store from the test process.
func removeStoreAtEnd(t *testing.T, open func(ctx context.Context) (store.Store, error)) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := open(ctx)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer s.Close()
		var keys []string
		if err := s.List(ctx, "", func(o store.Object) error { keys = append(keys, o.Key); return nil }); err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		if err := s.Delete(ctx, keys...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// removeS3AtEnd removes prefix from the S3 server at endpoint when the test
// ends (through minio-go, with the keys in the URL: the test process's
// environment is left alone).
func removeS3AtEnd(t *testing.T, endpoint, prefix string) {
	raw := fmt.Sprintf("minio://%s:%s@%s/%s/%s?secure=false", url.QueryEscape(s3Access), url.QueryEscape(s3Secret), hostOf(t, endpoint), testBucket, prefix)
	removeStoreAtEnd(t, func(ctx context.Context) (store.Store, error) { return store.Open(ctx, raw) })
}

// removeAzureAtEnd removes prefix from the Azurite container.
func removeAzureAtEnd(t *testing.T, conn, prefix string) {
	u := &url.URL{Scheme: "azblob", Host: testBucket, Path: "/" + prefix}
	getenv := func(name string) string {
		if name == "AZURE_STORAGE_CONNECTION_STRING" {
			return conn
		}
		return ""
	}
	removeStoreAtEnd(t, func(ctx context.Context) (store.Store, error) { return azure.Open(ctx, u, getenv) })
}

// command builds the exec.Cmd that run would: the environment without
// HOMESNAP_* and JENKINS_HOME, plus env.
func command(name string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOMESNAP_") && !strings.HasPrefix(kv, "JENKINS_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// proc is a binary running in the background.
type proc struct {
	name  string
	cmd   *exec.Cmd
	out   bytes.Buffer
	errb  syncBuffer
	start time.Time
	done  chan struct{}
	res   result
	took  time.Duration
}

// begin starts a binary in the background; it is killed if the test ends
// before it does.
func begin(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: command(name, env, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.took = time.Since(p.start)
		p.res = result{code: 0, stdout: strings.TrimSpace(p.out.String()), stderr: p.errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			p.res.code = ee.ExitCode()
		} else if err != nil {
			p.res.code = -1
			p.res.stderr += "\n" + err.Error()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits for the binary to exit, at most limit: a binary still running
// then fails the test (and is killed).
func (p *proc) wait(t *testing.T, limit time.Duration) (result, time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit - time.Since(p.start)):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s still running after %v (killed); stderr:\n%s", p.name, limit, tail(p.res.stderr, 3000))
	}
	return p.res, p.took
}

// timed runs a binary to completion and returns how long it took; it fails
// the test if the binary outlives limit.
func timed(t *testing.T, limit time.Duration, name string, env []string, args ...string) (result, time.Duration) {
	t.Helper()
	return begin(t, name, env, args...).wait(t, limit)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// listing is the parsed output of restore --list.
type listing struct {
	ids  []string
	head string
}

func (l listing) has(id string) bool {
	for _, x := range l.ids {
		if x == id {
			return true
		}
	}
	return false
}

func parseList(t *testing.T, out string) listing {
	t.Helper()
	var recs []struct {
		ID   string `json:"id"`
		Head bool   `json:"head"`
	}
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("--list --output json: %v\n%s", err, out)
	}
	var l listing
	for _, r := range recs {
		if r.Head {
			if l.head != "" {
				t.Fatalf("--list marks two heads:\n%s", out)
			}
			l.head = r.ID
		}
		l.ids = append(l.ids, r.ID)
	}
	return l
}

// list runs restore --list --output json against storeURL.
func list(t *testing.T, storeURL string, env []string) listing {
	t.Helper()
	return parseList(t, ok(t, run(t, "homesnap", env, "list", "--store", storeURL, "--output", "json")))
}

// afterRestore is what a home that held before must hold once a snapshot
// of want (its selected paths) was restored into it: its unselected paths
// untouched, its selected paths exactly the snapshot's.
func afterRestore(before, want testhome.Tree) testhome.Tree {
	sel, _ := selector.New(selector.Spec{Preset: "jenkins"})
	out := testhome.Tree{}
	for p, a := range before {
		if !sel.Selected(p) {
			out[p] = a
		}
	}
	for p, a := range want {
		out[p] = a
	}
	return out
}

// noLeftovers fails if a restore left its staging area (or anything else
// but the home's mark and displaced paths) in the home.
func noLeftovers(t *testing.T, home string) {
	t.Helper()
	all, _ := filepath.Glob(filepath.Join(home, ".homesnap-*"))
	var left []string
	for _, p := range all {
		if !kept(filepath.Base(p)) {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		t.Errorf("left behind in the home: %v", left)
	}
}

// writeRandom writes n incompressible bytes to rel under home.
func writeRandom(t *testing.T, home, rel string, n int) {
	t.Helper()
	p := filepath.Join(home, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, int64(n)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// buildHome makes a testhome.Build home in a fresh directory, with extra
// incompressible bytes at rel when n > 0.
func buildHome(t *testing.T, rel string, n int) string {
	t.Helper()
	home := t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		writeRandom(t, home, rel, n)
	}
	return home
}

// cloneHome copies a home with every attribute (GNU cp -a: modes, owners
// as root, nanosecond mtimes of files, directories and symlinks), which is
// much faster than building another, and checks the copy is exact.
func cloneHome(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	same(t, "copy of "+src, wholeTree(t, src), wholeTree(t, dst))
	return dst
}

// The toxiproxy API, for what storetest.Proxy does not do: taking a proxy
// away while a binary talks through it.

type toxiProxy struct {
	Name    string `json:"name"`
	Listen  string `json:"listen"`
	Enabled bool   `json:"enabled"`
}

func toxiAPI() string { return cmp.Or(os.Getenv("HOMESNAP_TEST_TOXIPROXY"), "http://127.0.0.1:8474") }

// proxyAt finds the proxy listening on addr (as storetest.Proxy returned it).
func proxyAt(addr string) (string, error) {
	resp, err := http.Get(toxiAPI() + "/proxies")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var all map[string]toxiProxy
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return "", fmt.Errorf("toxiproxy: list proxies: %w", err)
	}
	for name, p := range all {
		if p.Listen == addr {
			return name, nil
		}
	}
	return "", fmt.Errorf("toxiproxy: no proxy listens on %s", addr)
}

// cutProxy disables the proxy at addr: its listener closes and every
// connection through it is dropped, as if the server had gone away.
func cutProxy(addr string) error {
	name, err := proxyAt(addr)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]any{"enabled": false})
	resp, err := http.Post(toxiAPI()+"/proxies/"+url.PathEscape(name), "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var p toxiProxy
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("toxiproxy: disable %s: %s", name, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || p.Enabled {
		return fmt.Errorf("toxiproxy: %s still enabled (%v)", name, err)
	}
	return nil
}
