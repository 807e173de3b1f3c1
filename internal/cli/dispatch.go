package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"

	"github.com/homesnap/homesnap/internal/version"
)

// command is one `homesnap <command>`.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	config        func() any // a fresh configuration (nil: no flags); its flags, for completion
	exits         []int      // the statuses it can exit with, for --help
}

// commands is every command, in the order `homesnap --help` lists them:
// the one table the dispatcher, --help and the completion scripts read.
// Set in init: help and completion read it.
var commands []command

func init() {
	storeErrors := []int{ExitStore, ExitCorrupt, ExitUnauthenticated, ExitForged, ExitRollback}
	std := func(codes ...int) []int { // in exitStatuses' order
		all := append(append([]int{ExitOK, ExitFailure, ExitUsage}, codes...), storeErrors...)
		slices.Sort(all)
		return all
	}
	commands = []command{
		{"restore", "restore a snapshot into the home (init container, disaster recovery)", Restore,
			func() any { return &restoreConfig{} }, std(ExitRefused, ExitNoSnapshot, ExitPlaintext)},
		{"snapshot", "take snapshots of the home: one (--once), or as a sidecar", Snapshot,
			func() any { return &snapshotConfig{} }, std(ExitPlaintext)},
		{"prune", "apply a retention policy to the store", Prune,
			func() any { return &pruneConfig{} }, std()},
		{"list", "list the snapshots in the store", List,
			func() any { return &listConfig{} }, std()},
		{"verify", "check that the store's snapshots are whole (--structure: cheaply)", Verify,
			func() any { return &verifyConfig{} }, std(ExitNoSnapshot, ExitPlaintext)},
		{"check-agents", "report whether agents will reconnect: the home or a snapshot", CheckAgents,
			func() any { return &checkAgentsConfig{} }, std(ExitNoSnapshot, ExitPlaintext)},
		{"ls", "list a snapshot's files, without restoring it", Ls,
			func() any { return &lsConfig{} }, std(ExitNoSnapshot, ExitPlaintext)},
		{"diff", "show what differs between two snapshots, or a snapshot and the home", Diff,
			func() any { return &diffConfig{} }, std(ExitNoSnapshot, ExitPlaintext)},
		{"version", "print the version and build", versionCommand, nil, []int{ExitOK, ExitUsage}},
		{"help", "show the commands, or a command's flags (help COMMAND)", helpCommand, nil, []int{ExitOK, ExitUsage}},
		{"completion", "print a shell completion script: bash, zsh or fish", completionCommand, nil, []int{ExitOK, ExitUsage}},
	}
}

// lookup returns the command named name, or nil.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// applets are the names a link to homesnap runs a command under, so that
// pod specs written for the three binaries of earlier releases still work.
var applets = map[string]string{
	"restore": "restore", "homesnap-restore": "restore",
	"snapshot": "snapshot", "homesnap-snapshot": "snapshot",
	"prune": "prune", "homesnap-prune": "prune",
}

// Homesnap is the homesnap program: `homesnap COMMAND [flags]`, or the
// command its name says when it is invoked through a link (restore,
// homesnap-restore, snapshot, prune). It returns the exit status.
func Homesnap() int {
	return homesnap(os.Args, os.Stdout, os.Stderr)
}

func homesnap(argv []string, stdout, stderr io.Writer) int {
	if name, ok := applets[filepath.Base(argv[0])]; ok {
		return execute(lookup(name), argv[1:], stdout, stderr)
	}
	return dispatch(argv[1:], stdout, stderr)
}

// dispatch runs the command args name.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return ExitOK
	case "-version", "--version":
		args[0] = "version"
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "homesnap: unknown command %q; the commands are: %s (see homesnap --help)\n", args[0], strings.Join(names(), ", "))
		return ExitUsage
	}
	return execute(c, args[1:], stdout, stderr)
}

// Main runs the command name with the process's arguments, as the
// single-command programs (cmd/restore, cmd/snapshot, cmd/prune) do.
func Main(name string) int {
	return execute(lookup(name), os.Args[1:], os.Stdout, os.Stderr)
}

// memoryLimit is the soft heap limit unless GOMEMLIMIT sets one: a ceiling
// that keeps the sidecar small (BENCHMARKS.md: every phase's memory).
const memoryLimit = 80 << 20

// snapshotRoom is what a snapshot needs under the soft limit beside what
// the sidecar holds for good (the change journal): its buffers, encoders
// and manifests, and the collector's margin.
const snapshotRoom = 48 << 20

// makeRoom raises the soft limit to held + snapshotRoom when that is over
// it and GOMEMLIMIT does not set it: under a limit that what is held for
// good nearly fills, the runtime collects and returns memory without
// pause, also while the sidecar is idle (BENCHMARKS.md: five million
// files). It returns the new limit, or 0.
func makeRoom(held int64) int64 {
	limit := held + snapshotRoom
	if os.Getenv("GOMEMLIMIT") != "" || limit <= debug.SetMemoryLimit(-1) {
		return 0
	}
	debug.SetMemoryLimit(limit)
	return limit
}

// execute runs one command and returns its exit status (see exitCode).
func execute(c *command, args []string, stdout, stderr io.Writer) int {
	if c.config != nil && version.Asked(args) {
		version.Print(stdout, c.name)
		return ExitOK
	}
	if c.config == nil && len(args) == 1 && slices.Contains([]string{"-h", "-help", "--help"}, args[0]) {
		args = []string{c.name}
		c = lookup("help")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	if p := os.Getenv("HOMESNAP_CPUPROFILE"); p != "" { // for profiling runs
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	return report(c.run(ctx, args, stdout, stderr), stderr)
}

func names() []string {
	var n []string
	for _, c := range commands {
		n = append(n, c.name)
	}
	return n
}

// intro and notes are what `homesnap --help` and homesnap(1) say
// about the program as a whole.
const (
	intro = `homesnap keeps a Jenkins controller's home (agents, secrets, jobs) in a store
across pod restarts: restore runs as an init container, snapshot as a sidecar.`
	notes = `Every flag is also set by its HOMESNAP_* variable; no variable selects a
command. "homesnap COMMAND --help" lists a command's flags and exit statuses.
Through a link named restore, snapshot or prune (or homesnap-restore, ...),
homesnap runs that command.`
)

// usage is `homesnap --help`: the commands, one line each.
func usage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  homesnap COMMAND [flags]\n\nCommands:\n", intro)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\n%s\n", notes)
}

func versionCommand(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("version takes no arguments, got %q", args[0])}
	}
	version.Print(stdout, "homesnap")
	return nil
}

// helpCommand is `homesnap help [COMMAND]`: COMMAND --help, on stdout.
func helpCommand(ctx context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) == 0 {
		usage(stdout)
		return nil
	}
	c := lookup(args[0])
	if c == nil || len(args) > 1 {
		return usageError{fmt.Errorf("help %s: want one of %s", strings.Join(args, " "), strings.Join(names(), ", "))}
	}
	if c.config == nil {
		fmt.Fprintf(stdout, "Usage: homesnap %s\n\n%s.\n", c.name, c.summary)
		writeExits(stdout, c.name)
		return nil
	}
	return c.run(ctx, []string{"--help"}, stdout, stdout)
}

// modeVariables are the variables that made restore another command in
// earlier releases. Each is refused: set in a ConfigMap shared with a
// verify job, it would turn the init container into a listing or a check
// that restores nothing and exits 0, and Jenkins would start on an empty
// home. Their flags still work under restore, with a warning, for one
// release.
var modeVariables = []struct{ env, flag, command string }{
	{"HOMESNAP_LIST", "list", "homesnap list"},
	{"HOMESNAP_VERIFY", "verify", "homesnap verify"},
	{"HOMESNAP_VERIFY_STRUCTURE", "verify-structure", "homesnap verify --structure"},
	{"HOMESNAP_CHECK_AGENTS", "check-agents", "homesnap check-agents"},
}

// refuseModeVariables fails when a mode variable is set.
func refuseModeVariables() error {
	for _, m := range modeVariables {
		if os.Getenv(m.env) != "" {
			return usageError{fmt.Errorf("%s is set, and no variable selects a command any more: unset it, and run `%s` where it is wanted (nothing was done)", m.env, m.command)}
		}
	}
	return nil
}
