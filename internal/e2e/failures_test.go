package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// causeLines returns the lines of stderr that report an error: a JSON log
// line at level error, or a plain line (the error Main prints).
func causeLines(stderr string) []string {
	var lines []string
	for _, line := range strings.Split(stderr, "\n") {
		var rec struct{ Level, Message, Error string }
		switch {
		case strings.TrimSpace(line) == "":
		case json.Unmarshal([]byte(line), &rec) == nil:
			if rec.Level == "error" || rec.Level == "fatal" {
				lines = append(lines, rec.Message+": "+rec.Error)
			}
		default:
			lines = append(lines, line)
		}
	}
	return lines
}

// TestEveryFailureSaysWhy runs every command over bad inputs: missing,
// malformed, empty, unreadable and wrong key files, bad store URLs of
// every scheme, an unreadable home, bad flag and variable values. Each
// must exit non-zero with one line naming the cause, and print no key.
func TestEveryFailureSaysWhy(t *testing.T) {
	testenv.Long(t, "runs the binaries through every failure")
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a command as uid 1000 over an unreadable home")
	}
	c := canaries{}
	base, err := os.MkdirTemp("", "homesnap-fail-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	p := func(name string) string { return filepath.Join(base, name) }
	write := func(name, content string, mode os.FileMode) string {
		if err := os.WriteFile(p(name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p(name)
	}
	home, plain, enc := p("home"), p("plain"), p("encrypted")
	for _, d := range []string{plain, enc, p("a-directory")} {
		os.Mkdir(d, 0o755)
	}
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	id, _ := age.GenerateX25519Identity()
	other, _ := age.GenerateX25519Identity()
	identity := write("identity.txt", id.String()+"\n", 0o600)
	wrongIdentity := write("wrong-identity.txt", other.String()+"\n", 0o600)
	recipients := write("recipients.txt", id.Recipient().String()+"\n", 0o644)
	ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", plain))
	ok(t, run(t, "snapshot", nil, "--once", "--home", home, "--store", enc, "--age-identity-file", identity, "--age-recipients-file", recipients))
	// The plain store is readable to uid 1000, so that its home is what fails.
	filepath.WalkDir(plain, func(path string, d os.DirEntry, err error) error {
		if err == nil {
			os.Chmod(path, map[bool]os.FileMode{true: 0o755, false: 0o644}[d.IsDir()])
		}
		return err
	})

	// A key that looks like age's but is not one, with a credential in it.
	badKey := "AGE-SECRET-KEY-1" + c.new("a malformed identity") + "\n"
	malformedIdentity := write("malformed-identity.txt", badKey, 0o600)
	malformedRecipients := write("malformed-recipients.txt", "age1"+strings.ToLower(c.new("a malformed recipient"))+"\n", 0o644)
	secretAsRecipient := write("secret-as-recipient.txt", "AGE-SECRET-KEY-1"+c.new("a secret key in the recipients file")+"\n", 0o644)
	shortToken := c.new("a short trigger token")[:12]
	c[shortToken] = "a short trigger token"
	garbage := write("garbage.txt", c.new("a key file of garbage")+"\n", 0o600)
	empty := write("empty.txt", "", 0o600)
	missing, dir := p("no-such-file"), p("a-directory")
	// A home only root can enter, for a command run as uid 1000.
	closed := p("closed-home")
	os.Mkdir(closed, 0o700)
	os.WriteFile(filepath.Join(closed, "config.xml"), []byte("<hudson/>"), 0o600)
	closedStore := p("open-store")
	os.Mkdir(closedStore, 0o777)
	os.Chmod(closedStore, 0o777)

	type tc struct {
		name, bin string
		args      []string
		env       []string
		want      string // the cause, as the line names it
		uid       int    // run as this user (0: as root)
	}
	st := func(s string) []string { return []string{"--store", s} }
	h := []string{"--home", home}
	cat := func(parts ...[]string) []string {
		var a []string
		for _, x := range parts {
			a = append(a, x...)
		}
		return a
	}
	cases := []tc{
		// restore: the age identity, in every bad way.
		{"restore, identity file missing", "restore", cat(h, st(enc), []string{"--target", p("t1"), "--age-identity-file", missing}), nil, missing, 0},
		{"restore, identity file malformed", "restore", cat(h, st(enc), []string{"--target", p("t2"), "--age-identity-file", malformedIdentity}), nil, malformedIdentity, 0},
		{"restore, identity file of garbage", "restore", cat(h, st(enc), []string{"--target", p("t3"), "--age-identity-file", garbage}), nil, garbage, 0},
		{"restore, identity file empty", "restore", cat(h, st(enc), []string{"--target", p("t4"), "--age-identity-file", empty}), nil, empty, 0},
		{"restore, identity file a directory", "restore", cat(h, st(enc), []string{"--target", p("t5"), "--age-identity-file", dir}), nil, dir, 0},
		{"restore, wrong identity", "restore", cat(h, st(enc), []string{"--target", p("t6"), "--age-identity-file", wrongIdentity}), nil, "identit", 0},
		{"restore, no identity for an encrypted store", "restore", cat(h, st(enc), []string{"--target", p("t7")}), nil, "identit", 0},
		{"restore, identity variable malformed", "restore", cat(h, st(enc), []string{"--target", p("t8")}), []string{"HOMESNAP_AGE_IDENTITY=" + badKey}, "HOMESNAP_AGE_IDENTITY", 0},
		{"restore, identity variable and file", "restore", cat(h, st(enc), []string{"--target", p("t9"), "--age-identity-file", identity}), []string{"HOMESNAP_AGE_IDENTITY=" + id.String()}, "HOMESNAP_AGE_IDENTITY", 0},
		{"restore, a key where the file goes", "restore", cat(h, st(enc), []string{"--target", p("t10"), "--age-identity-file", strings.TrimSpace(badKey)}), nil, "HOMESNAP_AGE_IDENTITY_FILE", 0},
		// restore: the master key file.
		{"restore, master key file missing", "restore", cat(st(plain), []string{"--target", p("t11"), "--master-key-file", missing}), nil, missing, 0},
		{"restore, master key file empty", "restore", cat(st(plain), []string{"--target", p("t12"), "--master-key-file", empty}), nil, "master", 0},
		{"restore, master key file a directory", "restore", cat(st(plain), []string{"--target", p("t13"), "--master-key-file", dir}), nil, "master", 0},
		{"restore, master key of garbage", "restore", cat(st(plain), []string{"--target", p("t14"), "--master-key-file", garbage}), nil, "master", 0},
		// restore: the home and the store.
		{"restore, home unreadable", "restore", cat(st(plain), []string{"--home", closed}), nil, closed, 1000},
		{"restore, store missing", "restore", cat(h, st(missing)), nil, missing, 0},
		{"restore, store a file", "restore", cat(h, st(empty)), nil, empty, 0},
		// restore: flags and variables.
		{"restore, --timeout", "restore", cat(h, st(plain), []string{"--timeout", "soon"}), nil, "timeout", 0},
		{"restore, --chown", "restore", cat(h, st(plain), []string{"--chown", "jenkins"}), nil, "chown", 0},
		{"restore, --at", "restore", cat(h, st(plain), []string{"--at", "yesterday"}), nil, "--at", 0},
		{"restore, --jobs", "restore", cat(h, st(plain), []string{"--jobs", "-1"}), nil, "jobs", 0},
		{"restore, --output", "restore", cat(st(plain), []string{"--list", "--output", "xml"}), nil, "output", 0},
		{"restore, unknown flag", "restore", []string{"--frobnicate"}, nil, "frobnicate", 0},
		{"restore, an argument", "restore", cat(h, st(plain), []string{"now"}), nil, "now", 0},
		{"restore, HOMESNAP_TIMEOUT", "restore", cat(h, st(plain)), []string{"HOMESNAP_TIMEOUT=soon"}, "HOMESNAP_TIMEOUT", 0},
		{"restore, HOMESNAP_DEADLINE (old name)", "restore", cat(h, st(plain)), []string{"HOMESNAP_DEADLINE=soon"}, "HOMESNAP_DEADLINE", 0},
		{"restore, HOMESNAP_JOBS", "restore", cat(h, st(plain)), []string{"HOMESNAP_JOBS=many"}, "HOMESNAP_JOBS", 0},
		{"restore, HOMESNAP_LOG_LEVEL", "restore", cat(h, st(plain)), []string{"HOMESNAP_LOG_LEVEL=loud"}, "log level", 0},
		{"restore, HOMESNAP_LOG_FORMAT", "restore", cat(h, st(plain)), []string{"HOMESNAP_LOG_FORMAT=xml"}, "log format", 0},
		{"restore, errors hidden by the log level", "restore", cat(h, st(missing), []string{"--log-level", "fatal"}), nil, missing, 0},
		{"restore, errors hidden, bad identity", "restore", cat(h, st(enc), []string{"--target", p("t15"), "--age-identity-file", garbage}), []string{"HOMESNAP_LOG_LEVEL=disabled"}, garbage, 0},

		// snapshot
		{"snapshot, a secret key in the recipients file", "snapshot", cat(h, st(enc), []string{"--once", "--age-identity-file", identity, "--age-recipients-file", secretAsRecipient}), nil, secretAsRecipient, 0},
		{"snapshot, recipients file missing", "snapshot", cat(h, st(enc), []string{"--once", "--age-identity-file", identity, "--age-recipients-file", missing}), nil, missing, 0},
		{"snapshot, recipients file malformed", "snapshot", cat(h, st(enc), []string{"--once", "--age-identity-file", identity, "--age-recipients-file", malformedRecipients}), nil, malformedRecipients, 0},
		{"snapshot, recipients file empty", "snapshot", cat(h, st(enc), []string{"--once", "--age-identity-file", identity, "--age-recipients-file", empty}), nil, empty, 0},
		{"snapshot, recipients file a directory", "snapshot", cat(h, st(enc), []string{"--once", "--age-identity-file", identity, "--age-recipients-file", dir}), nil, dir, 0},
		{"snapshot, recipients variable malformed", "snapshot", cat(h, st(enc), []string{"--once", "--age-identity-file", identity}), []string{"HOMESNAP_AGE_RECIPIENTS=" + c.new("a malformed recipients variable")}, "HOMESNAP_AGE_RECIPIENTS", 0},
		{"snapshot, identity file malformed", "snapshot", cat(h, st(enc), []string{"--once", "--age-identity-file", malformedIdentity}), nil, malformedIdentity, 0},
		{"snapshot, wrong identity", "snapshot", cat(h, st(enc), []string{"--once", "--age-identity-file", wrongIdentity}), nil, "identit", 0},
		{"snapshot, no key for an encrypted store", "snapshot", cat(h, st(enc), []string{"--once"}), nil, "encrypt", 0},
		{"snapshot, home unreadable", "snapshot", cat(st(closedStore), []string{"--once", "--home", closed}), nil, closed, 1000},
		{"snapshot, home missing", "snapshot", cat(st(plain), []string{"--once", "--home", missing}), nil, missing, 0},
		{"snapshot, no store", "snapshot", cat(h, []string{"--once"}), nil, "HOMESNAP_STORE", 0},
		{"snapshot, --level", "snapshot", cat(h, st(plain), []string{"--once", "--level", "max"}), nil, "level", 0},
		{"snapshot, --interval", "snapshot", cat(h, st(plain), []string{"--interval", "0s"}), nil, "interval", 0},
		{"snapshot, --preset", "snapshot", cat(h, st(plain), []string{"--once", "--preset", "everything"}), nil, "everything", 0},
		{"snapshot, --keep-last", "snapshot", cat(h, st(plain), []string{"--once", "--keep-last", "-1"}), nil, "--keep-last", 0},
		{"snapshot, HOMESNAP_INTERVAL", "snapshot", cat(h, st(plain), []string{"--once"}), []string{"HOMESNAP_INTERVAL=hourly"}, "HOMESNAP_INTERVAL", 0},
		{"snapshot, HOMESNAP_ONCE", "snapshot", cat(h, st(plain)), []string{"HOMESNAP_ONCE=sometimes"}, "HOMESNAP_ONCE", 0},

		// prune
		{"prune, identity file malformed", "prune", cat(st(enc), []string{"--keep-last", "1", "--age-identity-file", malformedIdentity}), nil, malformedIdentity, 0},
		{"prune, store missing", "prune", cat(st(missing), []string{"--keep-last", "1"}), nil, missing, 0},
		{"prune, no store", "prune", []string{"--keep-last", "1"}, nil, "HOMESNAP_STORE", 0},
		{"prune, --keep-last", "prune", cat(st(plain), []string{"--keep-last", "-2"}), nil, "--keep-last", 0},
		{"prune, HOMESNAP_KEEP_ON_DEMAND", "prune", cat(st(plain), []string{"--keep-last", "1"}), []string{"HOMESNAP_KEEP_ON_DEMAND=-1"}, "HOMESNAP_KEEP_ON_DEMAND", 0},
		{"snapshot, --trigger-token-file missing", "snapshot", cat(h, st(plain), []string{"--listen", "127.0.0.1:0", "--trigger-token-file", missing}), nil, missing, 0},
		{"snapshot, trigger token too short", "snapshot", cat(h, st(plain), []string{"--listen", "127.0.0.1:0"}), []string{"HOMESNAP_TRIGGER_TOKEN=" + shortToken}, "HOMESNAP_TRIGGER_TOKEN", 0},
		{"prune, --prune-delay", "prune", cat(st(plain), []string{"--prune-delay", "0s"}), nil, "prune-delay", 0},
		{"prune, HOMESNAP_KEEP_DAILY", "prune", cat(st(plain)), []string{"HOMESNAP_KEEP_DAILY=seven"}, "HOMESNAP_KEEP_DAILY", 0},
	}
	// A malformed URL of every scheme, for every command.
	for _, scheme := range []string{"file", "s3", "minio", "gs", "azblob"} {
		bad := scheme + "://" + c.new(scheme+" URL user") + ":" + c.new(scheme+" URL password") + "/x@bucket/p"
		for _, bin := range []string{"restore", "snapshot", "prune"} {
			args := cat(h, st(bad))
			if bin == "snapshot" {
				args = append(args, "--once")
			}
			cases = append(cases, tc{bin + ", malformed " + scheme + ":// URL", bin, args, nil, scheme + "://", 0})
		}
	}

	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			cmd := command(k.bin, k.env, k.args...)
			if k.uid != 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(k.uid), Gid: uint32(k.uid)}}
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			ee, failed := err.(*exec.ExitError)
			if err != nil && !failed {
				t.Fatal(err)
			}
			out := stdout.String() + stderr.String()
			c.leaked(t, k.name, out)
			if !failed {
				t.Fatalf("exit 0, want a failure:\n%s", tail(out, 2000))
			}
			lines := causeLines(stderr.String())
			named := false
			for _, l := range lines {
				named = named || strings.Contains(l, k.want)
			}
			switch {
			case len(lines) == 0:
				t.Errorf("exit %d and no line says why:\n%s", ee.ExitCode(), tail(out, 2000))
			case !named:
				t.Errorf("exit %d, and no line names %q:\n%s", ee.ExitCode(), k.want, strings.Join(lines, "\n"))
			case len(lines) > 1:
				t.Errorf("exit %d: %d lines where one that names the cause will do:\n%s", ee.ExitCode(), len(lines), tail(strings.Join(lines, "\n"), 2000))
			default:
				t.Logf("exit %d, %d line(s): %s", ee.ExitCode(), len(lines), strings.Join(lines, " | "))
			}
		})
	}
}
