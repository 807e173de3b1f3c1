package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/homesnap/homesnap/internal/store/storetest"
	"github.com/homesnap/homesnap/internal/testhome"
)

// The fault tests run the binaries against versitygw through a toxiproxy
// proxy. Each run is bounded by --timeout; a run that fails must exit
// within its deadline plus exitSlack (cleanup, process exit), never hang.
const exitSlack = 3 * time.Second

// hangLimit is when a run is killed as hung: well past any deadline, so
// that a slow exit is measured and reported as such.
const hangLimit = 90 * time.Second

// rig is one store on versitygw, reachable straight (for setting up and
// checking) and through a toxic proxy (for the runs under test).
type rig struct {
	endpoint string // versitygw, http://host:port
	prefix   string
	direct   string // store URL straight to versitygw
	flaky    string // store URL through the proxy
	name     string // the flaky store as messages name it
	proxy    string // the proxy's host:port
	env      []string
}

// newRig puts a proxy with toxics in front of versitygw, used through
// scheme (s3 or minio). query is added to the proxied URL (part sizes,
// retries: by default generous, so that a run fails on its deadline rather
// than on a retry budget).
func newRig(t *testing.T, scheme, query string, toxics ...storetest.Toxic) *rig {
	t.Helper()
	ep := storetest.Server(t, "versitygw", "HOMESNAP_TEST_S3_ENDPOINT")
	prefix := storetest.Prefix(t)
	removeS3AtEnd(t, ep, prefix)
	t.Cleanup(func() { abortUploads(t, ep, prefix) })
	addr := storetest.Proxy(t, hostOf(t, ep), toxics...)
	if !strings.Contains(query, "max_attempts=") {
		query += "&max_attempts=20"
	}
	r := &rig{endpoint: ep, prefix: prefix, direct: s3URL(ep, prefix, ""), proxy: addr, env: s3Env()}
	switch scheme {
	case "s3":
		r.flaky, r.name = s3URL("http://"+addr, prefix, query), "s3://"+testBucket+"/"+prefix
	case "minio":
		r.name = "minio://" + addr + "/" + testBucket + "/" + prefix
		r.flaky = r.name + "?secure=false" + query
	default:
		t.Fatalf("scheme %q", scheme)
	}
	return r
}

// snapshot runs snapshot --once of home into storeURL with a deadline.
func (r *rig) snapshot(t *testing.T, storeURL, home string, deadline time.Duration) (result, time.Duration) {
	t.Helper()
	return timed(t, deadline+hangLimit, "snapshot", r.env, "--once", "--home", home, "--store", storeURL, "--timeout", deadline.String())
}

// restore runs restore into home from storeURL with a deadline. The homes
// hold data of no snapshot of the store (no mark): --force restores over it.
func (r *rig) restore(t *testing.T, storeURL, home string, deadline time.Duration, args ...string) (result, time.Duration) {
	t.Helper()
	return timed(t, deadline+hangLimit, "restore", r.env, append([]string{"--home", home, "--store", storeURL, "--timeout", deadline.String(), "--force"}, args...)...)
}

// checkRestorable restores id straight from the store into an empty
// directory and compares it with want.
func (r *rig) checkRestorable(t *testing.T, id string, want testhome.Tree) {
	t.Helper()
	target := t.TempDir()
	ok(t, run(t, "restore", r.env, "--home", target, "--store", r.direct, "--snapshot", id, "--timeout", "1m"))
	same(t, "restore of "+id, want, wholeTree(t, target))
}

// failedClearly checks a failed run: non-zero exit within the deadline, a
// one-line error naming the store and each of want.
func (r *rig) failedClearly(t *testing.T, what string, res result, took, deadline time.Duration, want ...string) {
	t.Helper()
	if res.code == 0 {
		t.Fatalf("%s succeeded, want a failure", what)
	}
	if took > deadline+exitSlack {
		t.Errorf("%s failed after %v, beyond its %v deadline", what, took.Round(time.Millisecond), deadline)
	}
	msg := errorLine(res.stderr)
	t.Logf("%s: exit %d after %v: %s", what, res.code, took.Round(time.Millisecond), msg)
	if msg == "" {
		t.Errorf("%s: no error logged:\n%s", what, tail(res.stderr, 3000))
	}
	for _, w := range append([]string{r.name}, want...) {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: error does not mention %q:\n%s", what, w, msg)
		}
	}
	// No fault here damages the store: every archive stays whole, as the
	// restores that follow show. Calling it corrupt sends the operator
	// after the wrong problem.
	if strings.Contains(msg, "corrupt") {
		t.Errorf("%s: the error blames a corrupt archive for a network failure (the store is intact):\n%s", what, msg)
	}
}

// errorLine is the message and error of the last error logged (JSON
// lines, as the binaries log off a terminal).
func errorLine(stderr string) string {
	var last string
	for _, line := range strings.Split(stderr, "\n") {
		var rec struct {
			Level, Message, Error string
			Store                 string `json:"store"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "error" {
			last = rec.Message + ": " + rec.Error + " (store " + rec.Store + ")"
		}
	}
	return last
}

// churn edits a home between the rounds of a test: a new build with a log
// of incompressible bytes, the previous round's build removed, a config
// rewritten.
func churn(t *testing.T, home string, round int) {
	t.Helper()
	p := func(rel string) string { return filepath.Join(home, filepath.FromSlash(rel)) }
	if round == 1 {
		testhome.Change(t, home)
		return
	}
	writeRandom(t, home, fmt.Sprintf("jobs/churn/builds/%d/log", round), 1<<20+round)
	if err := os.RemoveAll(p(fmt.Sprintf("jobs/churn/builds/%d", round-1))); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("<project><description>round %d</description></project>\n", round)
	if err := os.WriteFile(p("jobs/test/config.xml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// roundTrip is the user's story through the proxy, where every run must
// succeed: snapshot, change, snapshot, then restore the head into a home
// that holds other content and the first snapshot into an empty one.
func roundTrip(t *testing.T, r *rig, home string, deadline time.Duration) {
	res, took := r.snapshot(t, r.flaky, home, deadline)
	id1 := ok(t, res)
	t.Logf("first snapshot through the proxy: %v", took.Round(time.Millisecond))
	want1 := selectedTree(t, home)
	testhome.Change(t, home)
	res, took = r.snapshot(t, r.flaky, home, deadline)
	id2 := ok(t, res)
	t.Logf("second snapshot through the proxy: %v", took.Round(time.Millisecond))
	want2 := selectedTree(t, home)

	if l := list(t, r.flaky, r.env); l.head != id2 || !l.has(id1) || len(l.ids) != 2 {
		t.Fatalf("--list = %v, head %q; want %s and %s, head %s", l.ids, l.head, id1, id2, id2)
	}

	target := buildHome(t, "", 0) // a home with content: the snapshot's before the change
	before := wholeTree(t, target)
	res, took = r.restore(t, r.flaky, target, deadline)
	ok(t, res)
	t.Logf("restore of the head through the proxy: %v", took.Round(time.Millisecond))
	same(t, "restore of the head over a home", afterRestore(before, want2), wholeTree(t, target))
	noLeftovers(t, target)

	empty := t.TempDir()
	res, took = r.restore(t, r.flaky, empty, deadline, "--snapshot", id1)
	ok(t, res)
	t.Logf("restore of the first snapshot through the proxy: %v", took.Round(time.Millisecond))
	same(t, "restore of the first snapshot", want1, wholeTree(t, empty))
}

// TestFaultLatency: 100 ms each way on every connection.
func TestFaultLatency(t *testing.T) {
	t.Parallel()
	lat := map[string]int{"latency": 100}
	r := newRig(t, "s3", "",
		storetest.Toxic{Type: "latency", Stream: "upstream", Toxicity: 1, Attributes: lat},
		storetest.Toxic{Type: "latency", Stream: "downstream", Toxicity: 1, Attributes: lat})
	roundTrip(t, r, buildHome(t, "", 0), 30*time.Second)
}

// TestFaultBandwidth: every connection capped at 2 MiB/s each way; the
// first snapshot's archive (~6 MiB, mostly incompressible) takes seconds.
func TestFaultBandwidth(t *testing.T) {
	t.Parallel()
	const rateKB = 2048
	rate := map[string]int{"rate": rateKB}
	r := newRig(t, "s3", "&part_size=5MiB&upload_concurrency=1",
		storetest.Toxic{Type: "bandwidth", Stream: "upstream", Toxicity: 1, Attributes: rate},
		storetest.Toxic{Type: "bandwidth", Stream: "downstream", Toxicity: 1, Attributes: rate})
	home := buildHome(t, "jobs/test/builds/1/archive/extra.bin", 2<<20)
	// The cap must show: with one part in flight, the archive cannot go
	// faster than the rate.
	start := time.Now()
	roundTrip(t, r, home, 40*time.Second)
	if took, floor := time.Since(start), time.Duration(6<<20/(rateKB<<10))*time.Second; took < floor {
		t.Errorf("the round trip took %v, less than the %v the bandwidth cap allows: is the proxy in the way?", took, floor)
	}
}

// TestFaultResets: a share of the connections break. Every run either
// succeeds with a verified result, or fails clearly within its deadline
// leaving the store's head and the target home as they were.
func TestFaultResets(t *testing.T) {
	resetSent := storetest.Toxic{Type: "reset_peer", Stream: "upstream", Toxicity: 0.3, Attributes: map[string]int{"timeout": 0}}
	for _, c := range []struct {
		name, query string
		toxic       storetest.Toxic
	}{
		// 30 % of connections reset as soon as the request is sent
		// (it never reaches the server); retries hide it.
		{"reset_peer", "", resetSent},
		// The same with almost no retries: many runs fail, and each
		// failure must leave the head and the home alone.
		{"reset_peer_2_attempts", "&max_attempts=2", resetSent},
		// 30 % reset as soon as the server answers: the request was
		// applied, the client never learns it (retried Complete, Swap).
		{"reset_answer", "", storetest.Toxic{Type: "reset_peer", Stream: "downstream", Toxicity: 0.3, Attributes: map[string]int{"timeout": 0}}},
		// 30 % cut after 100 bytes of answer, mid-header or mid-body.
		{"cut_answers", "", storetest.CutAnswers},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			flakyRounds(t, newRig(t, "s3", "&part_size=5MiB"+c.query, c.toxic), 3, 20*time.Second)
		})
	}
}

// flakyRounds changes a home and snapshots it through the proxy, then
// restores the head through the proxy into a home with content, rounds
// times. A successful snapshot must be the head and restore exactly; a
// failed one must leave the previous head, still restorable. A successful
// restore must leave the home's unselected paths and the snapshot's
// selected ones; a failed one the home exactly as it was.
func flakyRounds(t *testing.T, r *rig, rounds int, deadline time.Duration) {
	home := buildHome(t, "jobs/test/builds/1/archive/big.bin", 11<<20) // several upload parts
	template := cloneHome(t, home)                                     // for the restore targets
	var head string
	var headTree testhome.Tree
	runs, failures := 0, 0
	for round := range rounds {
		if round > 0 {
			churn(t, home, round)
		}
		res, took := r.snapshot(t, r.flaky, home, deadline)
		runs++
		tree := selectedTree(t, home)
		l := list(t, r.direct, r.env)
		if res.code == 0 {
			t.Logf("round %d: snapshot %s in %v", round, res.stdout, took.Round(time.Millisecond))
			if l.head != res.stdout {
				t.Fatalf("round %d: snapshot %s succeeded but the head is %q", round, res.stdout, l.head)
			}
			r.checkRestorable(t, res.stdout, tree)
			head, headTree = res.stdout, tree
		} else {
			failures++
			r.failedClearly(t, fmt.Sprintf("round %d: snapshot", round), res, took, deadline)
			if l.head != head {
				t.Fatalf("round %d: a failed snapshot moved the head from %q to %q", round, head, l.head)
			}
			if head != "" {
				r.checkRestorable(t, head, headTree)
			} else {
				// Nothing to restore yet: take this round's snapshot
				// straight, so that the restore half still runs.
				head, headTree = ok(t, run(t, "snapshot", r.env, "--once", "--home", home, "--store", r.direct)), tree
				t.Logf("round %d: snapshot %s taken straight", round, head)
			}
		}

		target := cloneHome(t, template)
		if round%2 == 1 {
			testhome.Change(t, target)
		}
		before := wholeTree(t, target)
		res, took = r.restore(t, r.flaky, target, deadline)
		runs++
		if res.code == 0 {
			t.Logf("round %d: restore in %v", round, took.Round(time.Millisecond))
			same(t, fmt.Sprintf("round %d: restore of %s over a home", round, head), afterRestore(before, headTree), wholeTree(t, target))
		} else {
			failures++
			r.failedClearly(t, fmt.Sprintf("round %d: restore", round), res, took, deadline)
			same(t, fmt.Sprintf("round %d: home after a failed restore", round), before, wholeTree(t, target))
		}
		noLeftovers(t, target)
	}
	t.Logf("%d of %d runs failed (clearly, leaving store and home intact)", failures, runs)
}

// s3Client talks to versitygw directly, for what the store interface
// does not show: multipart uploads in progress.
func s3Client(endpoint string) *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s3Access, s3Secret, ""),
	})
}

// multipartUploads counts the multipart uploads in progress under the
// rig's prefix.
func (r *rig) multipartUploads(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := s3Client(r.endpoint).ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(testBucket), Prefix: aws.String(r.prefix + "/")})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	return len(out.Uploads)
}

// abortUploads aborts the multipart uploads a run could not abort itself
// (its store had gone away), so that their parts do not pile up.
func abortUploads(t *testing.T, endpoint, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s3Client(endpoint)
	out, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(testBucket), Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, u := range out.Uploads {
		if _, err := c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String(testBucket), Key: u.Key, UploadId: u.UploadId}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// poll calls cond every 20 ms until it holds or limit passes.
func poll(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// TestFaultServerGoneMidUpload takes the store away while a snapshot
// uploads 64 MiB: the snapshot fails within its deadline naming what it
// was writing, and the previous snapshot stays the head, whole. Both S3
// clients abort their multipart upload on failure, so both are run.
func TestFaultServerGoneMidUpload(t *testing.T) {
	for _, scheme := range []string{"s3", "minio"} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			// 1 MiB/s per connection: the archive takes many seconds.
			r := newRig(t, scheme, "&part_size=5MiB",
				storetest.Toxic{Type: "bandwidth", Stream: "upstream", Toxicity: 1, Attributes: map[string]int{"rate": 1024}})
			home := buildHome(t, "", 0)
			id1 := ok(t, run(t, "snapshot", r.env, "--once", "--home", home, "--store", r.direct))
			want1 := selectedTree(t, home)
			writeRandom(t, home, "jobs/test/builds/2/archive/huge.bin", 64<<20)

			const deadline = 8 * time.Second
			p := begin(t, "snapshot", r.env, "--once", "--home", home, "--store", r.flaky, "--timeout", deadline.String())
			if !poll(deadline, func() bool { return !p.running() || r.multipartUploads(t) > 0 }) || !p.running() {
				res, _ := p.wait(t, deadline+exitSlack)
				t.Fatalf("the archive upload never showed (exit %d):\n%s", res.code, tail(res.stderr, 3000))
			}
			time.Sleep(300 * time.Millisecond) // parts on the wire: the cut lands mid-upload, on purpose
			if err := cutProxy(r.proxy); err != nil {
				t.Fatal(err)
			}
			cut := time.Since(p.start)
			res, took := p.wait(t, deadline+hangLimit)
			t.Logf("proxy cut %v into the snapshot", cut.Round(time.Millisecond))
			r.failedClearly(t, "snapshot", res, took, deadline, "archives/")

			l := list(t, r.direct, r.env)
			if l.head != id1 || len(l.ids) != 1 {
				t.Fatalf("after the failed snapshot: --list = %v, head %q; want only %s, the head", l.ids, l.head, id1)
			}
			r.checkRestorable(t, id1, want1)
		})
	}
}

// TestFaultServerGoneMidRestore takes the store away while a restore
// fetches a large archive into a home that holds an older state: the
// restore fails within its deadline, and the home is exactly as before.
func TestFaultServerGoneMidRestore(t *testing.T) {
	t.Parallel()
	// 1 MiB/s per connection: the large file takes many seconds to fetch.
	r := newRig(t, "s3", "",
		storetest.Toxic{Type: "bandwidth", Stream: "downstream", Toxicity: 1, Attributes: map[string]int{"rate": 1024}})
	const big = "jobs/test/builds/1/archive/huge.bin"
	src := buildHome(t, big, 40<<20)
	testhome.Change(t, src)
	id := ok(t, run(t, "snapshot", r.env, "--once", "--home", src, "--store", r.direct))
	want := selectedTree(t, src)

	target := buildHome(t, "", 0) // the state before the change, without the big file
	before := wholeTree(t, target)
	const deadline = 8 * time.Second
	p := begin(t, "restore", r.env, "--home", target, "--store", r.flaky, "--timeout", deadline.String(), "--force")
	staged := filepath.Join(target, ".homesnap-restore-"+id+"-*", "tree", filepath.FromSlash(big)) // a random token ends the name
	if !poll(deadline, func() bool {
		m, _ := filepath.Glob(staged)
		fi, err := os.Stat(strings.Join(m, ""))
		return !p.running() || (len(m) == 1 && err == nil && fi.Size() > 0)
	}) || !p.running() {
		res, _ := p.wait(t, deadline+exitSlack)
		t.Fatalf("%s never filled (exit %d):\n%s", staged, res.code, tail(res.stderr, 3000))
	}
	time.Sleep(300 * time.Millisecond) // bytes on the wire: the cut lands mid-transfer, on purpose
	if err := cutProxy(r.proxy); err != nil {
		t.Fatal(err)
	}
	cut := time.Since(p.start)
	res, took := p.wait(t, deadline+hangLimit)
	t.Logf("proxy cut %v into the restore", cut.Round(time.Millisecond))
	r.failedClearly(t, "restore", res, took, deadline, "archives/"+id+".tar.zst")
	same(t, "home after the failed restore", before, wholeTree(t, target))
	noLeftovers(t, target)

	// The home is fine for the next attempt, once the store is back.
	ok(t, run(t, "restore", r.env, "--home", target, "--store", r.direct, "--timeout", "1m", "--force"))
	same(t, "restore after the outage", afterRestore(before, want), wholeTree(t, target))
	noLeftovers(t, target)
}
