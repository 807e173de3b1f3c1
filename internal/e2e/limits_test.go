package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/store/storetest"
)

// TestAbsurdSettingsAreRefused: values that used to hang, exhaust memory,
// panic or silently mean something else are refused up front with a
// message naming the setting (exit 2, no stack trace).
func TestAbsurdSettingsAreRefused(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	base := []string{"--home", home, "--store", storeDir}
	cases := []struct {
		name, bin string
		env, args []string
		want      string
	}{
		{"jobs 100000", "snapshot", []string{"HOMESNAP_JOBS=100000"}, []string{"--once"}, "HOMESNAP_JOBS 100000"},
		{"jobs -1", "snapshot", nil, []string{"--once", "--jobs", "-1"}, "--jobs"},
		{"restore jobs", "restore", []string{"HOMESNAP_JOBS=5000"}, nil, "at most"},
		{"timeout -1s", "snapshot", []string{"HOMESNAP_TIMEOUT=-1s"}, []string{"--once"}, "HOMESNAP_TIMEOUT -1s"},
		{"restore timeout", "restore", nil, []string{"--timeout", "-5m"}, "--timeout"},
		{"interval 0", "snapshot", nil, []string{"--interval", "0"}, "--interval"},
		{"interval -5s", "snapshot", nil, []string{"--interval", "-5s"}, "--interval"},
		{"HOMESNAP_INTERVAL=0", "snapshot", []string{"HOMESNAP_INTERVAL=0"}, nil, "HOMESNAP_INTERVAL 0s"},
		{"final timeout 0", "snapshot", []string{"HOMESNAP_FINAL_TIMEOUT=0s"}, nil, "HOMESNAP_FINAL_TIMEOUT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := timed(t, time.Minute, c.bin, c.env, append(base, c.args...)...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2 (a usage mistake)\n%s", r.code, tail(r.stderr, 2000))
			}
			if !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "goroutine ") {
				t.Errorf("stderr does not name %q plainly:\n%s", c.want, tail(r.stderr, 2000))
			}
		})
	}
	if r := run(t, "homesnap", nil, append([]string{"list"}, base...)...); r.code != 0 {
		t.Errorf("a refused setting left the store unusable: %s", r.stderr)
	}
}

// TestSIGTERMStopsASlowSnapshot: a snapshot with the most workers allowed,
// uploading through a store capped at 256 KiB/s, stops soon after SIGTERM
// (--once: the run is abandoned; sidecar: the final snapshot gets its
// --final-timeout and no more), and the store's head stays restorable.
func TestSIGTERMStopsASlowSnapshot(t *testing.T) {
	rate := map[string]int{"rate": 256}
	r := newRig(t, "s3", "&part_size=5MiB",
		storetest.Toxic{Type: "bandwidth", Stream: "upstream", Toxicity: 1, Attributes: rate})
	home := buildHome(t, "jobs/test/builds/1/archive/big.bin", 16<<20)
	for _, c := range []struct {
		name  string
		args  []string
		limit time.Duration // from SIGTERM to exit
	}{
		{"once", []string{"--once"}, 10 * time.Second},
		{"sidecar", []string{"--interval", "1h", "--final-timeout", "2s"}, 12 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append([]string{"HOMESNAP_JOBS=64"}, r.env...)
			p := begin(t, "snapshot", env, append([]string{"--home", home, "--store", r.flaky, "--log-format", "json"}, c.args...)...)
			// SIGTERM once the archive's upload is under way (16 MiB at
			// 256 KiB/s takes a minute).
			if !poll(time.Minute, func() bool { return !p.running() || r.multipartUploads(t) > 0 }) || !p.running() {
				p.cmd.Process.Kill()
				res, _ := p.wait(t, time.Since(p.start)+hangLimit)
				t.Fatalf("the snapshot ended, or its upload never showed, before SIGTERM (exit %d):\n%s", res.code, tail(res.stderr, 3000))
			}
			signalled := time.Now()
			p.cmd.Process.Signal(syscall.SIGTERM)
			res, _ := p.wait(t, time.Since(p.start)+hangLimit)
			if took := time.Since(signalled); took > c.limit {
				t.Errorf("exited %v after SIGTERM, want within %v", took.Round(time.Millisecond), c.limit)
			}
			if res.code == 0 {
				t.Errorf("exit 0: the interrupted snapshot reported success\n%s", tail(res.stderr, 2000))
			}
		})
	}
}

// TestFileStoreOptionsAreRefused: like the object stores, a local store URL
// with an option is refused rather than silently ignored.
func TestFileStoreOptionsAreRefused(t *testing.T) {
	home, storeDir := buildHome(t, "", 0), t.TempDir()
	for _, bin := range []string{"snapshot", "restore"} {
		args := []string{"--home", home, "--store", "file://" + storeDir + "?foo=bar"}
		if bin == "snapshot" {
			args = append(args, "--once")
		}
		r := run(t, bin, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "unknown option foo") || strings.Contains(r.stderr, "bar") {
			t.Errorf("%s with file://...?foo=bar: exit %d, want a failure naming the option, not its value:\n%s", bin, r.code, r.stderr)
		}
	}
	if entries, _ := os.ReadDir(storeDir); len(entries) > 0 {
		t.Errorf("the refused store was written to: %v", entries)
	}
}
