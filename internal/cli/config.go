// Package cli turns environment variables and flags into the engine's
// options for the snapshot and restore commands, and sets up logging.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// Common holds the settings all three commands share. Each field is an
// environment variable (its envconfig tag) and a flag (--<flag tag>); the
// flag wins. Tags carry the full variable name: envconfig would otherwise
// fall back to the unprefixed name, and $HOME is not the Jenkins home.
type Common struct {
	Home      string        `envconfig:"HOMESNAP_HOME" flag:"home" desc:"Jenkins home to snapshot or restore into (default $JENKINS_HOME)"`
	Store     string        `envconfig:"HOMESNAP_STORE" flag:"store" desc:"store URL: a directory, file:///path, s3://, minio://, gs://, azblob://"`
	Jobs      int           `envconfig:"HOMESNAP_JOBS" flag:"jobs" desc:"parallel workers (0: automatic)"`
	Timeout   time.Duration `envconfig:"HOMESNAP_TIMEOUT" flag:"timeout" desc:"give up on a restore or a --once snapshot after this long (0: never)"`
	LogLevel  string        `envconfig:"HOMESNAP_LOG_LEVEL" default:"info" flag:"log-level" desc:"debug, info, warn or error"`
	LogFormat string        `envconfig:"HOMESNAP_LOG_FORMAT" default:"auto" flag:"log-format" desc:"json, console, or auto (console on a terminal)"`
}

// errHelp is returned after --help was printed.
var errHelp = flag.ErrHelp

// load fills cfg from the environment, then from args. about is the
// command's one-paragraph description for --help.
func load(name, about string, cfg any, args []string, stderr io.Writer) ([]string, error) {
	// A variable set to "" (common in Kubernetes manifests) means unset;
	// envconfig would try to parse it.
	for _, kv := range os.Environ() {
		if name, val, _ := strings.Cut(kv, "="); val == "" && strings.HasPrefix(name, "HOMESNAP_") {
			os.Unsetenv(name)
		}
	}
	if err := envconfig.Process("", cfg); err != nil {
		return nil, usageError{fmt.Errorf("environment: %w", err)}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var help []string
	bind(fs, reflect.ValueOf(cfg).Elem(), &help)
	// A mistake gets the one line that names it, not the whole help.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "Usage: %s [flags]\n\n%s\n\nFlags (each also set by its environment variable; a flag wins):\n", name, about)
			for _, h := range help {
				fmt.Fprintln(stderr, h)
			}
			return nil, errHelp
		}
		return nil, usageError{fmt.Errorf("%w (see %s --help)", err, name)}
	}
	if c := findCommon(cfg); c != nil && c.Home == "" {
		c.Home = os.Getenv("JENKINS_HOME")
	}
	return fs.Args(), nil
}

// usageError marks a mistake on the command line (exit status 2).
type usageError struct{ error }

func findCommon(cfg any) *Common {
	v := reflect.ValueOf(cfg).Elem()
	for i := 0; i < v.NumField(); i++ {
		if c, ok := v.Field(i).Addr().Interface().(*Common); ok {
			return c
		}
	}
	return nil
}

// bind registers a flag for every field tagged `flag`, recursing into
// embedded structs, with the environment's value as the default.
func bind(fs *flag.FlagSet, v reflect.Value, help *[]string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			bind(fs, fv, help)
			continue
		}
		name := f.Tag.Get("flag")
		if name == "" {
			// A variable without a flag (a key's content: flags show in ps).
			if env, desc := f.Tag.Get("envconfig"), f.Tag.Get("desc"); env != "" && desc != "" {
				*help = append(*help, fmt.Sprintf("  (variable only)\n        %s [%s]", desc, env))
			}
			continue
		}
		fs.Var(&value{v: fv}, name, f.Tag.Get("desc"))
		env := f.Tag.Get("envconfig")
		arg := " " + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		switch fv.Kind() {
		case reflect.Bool:
			arg = ""
		case reflect.Slice:
			arg += " (repeatable)"
		}
		def := ""
		if d := f.Tag.Get("default"); d != "" {
			def = ", default " + d
		}
		*help = append(*help, fmt.Sprintf("  --%s%s\n        %s [%s%s]", name, arg, f.Tag.Get("desc"), env, def))
	}
}

// value adapts a struct field to flag.Value.
type value struct {
	v   reflect.Value
	set bool // a list given by flags replaces the environment's
}

func (x *value) String() string {
	if !x.v.IsValid() {
		return ""
	}
	return fmt.Sprint(x.v.Interface())
}

func (x *value) IsBoolFlag() bool { return x.v.Kind() == reflect.Bool }

func (x *value) Set(s string) error {
	defer func() { x.set = true }()
	switch x.v.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		x.v.SetInt(int64(d))
		return nil
	}
	switch x.v.Kind() {
	case reflect.String:
		x.v.SetString(s)
	case reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		x.v.SetInt(int64(n))
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil {
			return err
		}
		x.v.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		x.v.SetBool(b)
	case reflect.Slice:
		if !x.set {
			x.v.Set(reflect.Zero(x.v.Type()))
		}
		x.v.Set(reflect.Append(x.v, reflect.ValueOf(s)))
	default:
		return fmt.Errorf("unsupported flag type %s", x.v.Type())
	}
	return nil
}
