// Package cli is homesnap's commands (dispatch.go holds their table): it
// turns environment variables and flags into the engine's options, and
// sets up logging.
package cli

import (
	"encoding"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// Common holds the settings every command that takes flags shares. Each field is an
// environment variable (its envconfig tag) and a flag (--<flag tag>); the
// flag wins. The variable is the flag's name, upper case, with HOMESNAP_
// in front (TestEveryFlagHasItsOwnVariable). Tags carry the full variable
// name: envconfig would otherwise fall back to the unprefixed name, and
// $HOME is not the Jenkins home.
//
// A setting renamed keeps its old names for one release: the tags oldflag
// and oldenv name them, and using one logs a warning naming the new one.
type Common struct {
	Home      string `envconfig:"HOMESNAP_HOME" flag:"home" desc:"Jenkins home to snapshot or restore into (default $JENKINS_HOME)"`
	Store     string `envconfig:"HOMESNAP_STORE" flag:"store" desc:"store URL: a directory, file:///path, s3://, minio://, gs://, azblob://"`
	Jobs      int    `envconfig:"HOMESNAP_JOBS" flag:"jobs" desc:"parallel workers (0: automatic)"`
	LogLevel  string `envconfig:"HOMESNAP_LOG_LEVEL" default:"info" flag:"log-level" desc:"debug, info, warn or error"`
	LogFormat string `envconfig:"HOMESNAP_LOG_FORMAT" default:"auto" flag:"log-format" desc:"json, console, or auto (console on a terminal)"`

	deprecated []string        // old names in use, logged once the logger is up
	given      map[string]bool // flags set by the command line or the environment
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
	if err := refuseModeVariables(); err != nil {
		return nil, err
	}
	if err := envconfig.Process("", cfg); err != nil {
		return nil, usageError{fmt.Errorf("environment: %w", err)}
	}
	c := findCommon(cfg)
	c.deprecated, c.given = nil, map[string]bool{}
	fs, help, settings := flagSet(name, cfg)
	for _, s := range settings {
		if err := s.fromEnv(c); err != nil {
			return nil, err
		}
	}
	// A mistake gets the one line that names it, not the whole help.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			synopsis := "[flags]"
			if s, ok := cfg.(interface{ synopsis() string }); ok { // its arguments
				synopsis = s.synopsis()
			}
			writeHelp(stderr, commandHelp{name, synopsis, about, help})
			return nil, errHelp
		}
		return nil, usageError{fmt.Errorf("%w (see homesnap %s --help)", err, name)}
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	for _, s := range settings {
		if err := s.fromFlags(c, onCommandLine); err != nil {
			return nil, err
		}
	}
	if c.Home == "" {
		c.Home = os.Getenv("JENKINS_HOME")
	}
	return fs.Args(), nil
}

// flagSet binds the flags of cfg that the command name takes to a new flag
// set, and returns their help (--version last) and settings: the one
// definition --help, the man pages, the parser and the completion scripts
// share.
func flagSet(name string, cfg any) (*flag.FlagSet, []flagHelp, []setting) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var keep func(string) bool
	if s, ok := cfg.(interface{ takes() []string }); ok {
		takes := s.takes()
		keep = func(n string) bool { return slices.Contains(takes, n) }
	}
	var help []flagHelp
	var settings []setting
	bind(fs, reflect.ValueOf(cfg).Elem(), keep, &help, &settings)
	help = append(help, flagHelp{flag: "version", desc: "print the program's version and build, then exit (given alone)"})
	return fs, help, settings
}

// setting is one field with its flag and variable, and the old names it
// still answers to.
type setting struct {
	v               reflect.Value
	flag, env       string
	oldFlag, oldEnv string
}

// fromEnv records whether the variable is set and applies the old
// variable's value when the new one is not set (the new one wins).
func (s setting) fromEnv(c *Common) error {
	_, isSet := os.LookupEnv(s.env)
	c.given[s.flag] = c.given[s.flag] || isSet
	if s.oldEnv == "" {
		return nil
	}
	old, ok := os.LookupEnv(s.oldEnv)
	if !ok {
		return nil
	}
	c.given[s.flag] = true
	if isSet {
		if os.Getenv(s.env) != old {
			c.deprecated = append(c.deprecated, fmt.Sprintf("%s and %s are both set and differ: %s is used; %s is the old name of %s, remove it", s.oldEnv, s.env, s.env, s.oldEnv, s.env))
		} else {
			c.deprecated = append(c.deprecated, fmt.Sprintf("%s is deprecated and set as well as %s: remove it (it stops working in the next release)", s.oldEnv, s.env))
		}
		return nil
	}
	c.deprecated = append(c.deprecated, fmt.Sprintf("%s is deprecated: set %s instead (the old name stops working in the next release)", s.oldEnv, s.env))
	x := &value{v: s.v}
	parts := []string{old}
	if s.v.Kind() == reflect.Slice { // as envconfig splits a list
		parts = strings.Split(old, ",")
	}
	for _, p := range parts {
		if err := x.Set(p); err != nil {
			return usageError{fmt.Errorf("environment: %s=%q (the old name of %s): %w", s.oldEnv, old, s.env, err)}
		}
	}
	return nil
}

// fromFlags records whether the flag was given and refuses it given under
// both its names, which set one value.
func (s setting) fromFlags(c *Common, given map[string]bool) error {
	c.given[s.flag] = c.given[s.flag] || given[s.flag] || given[s.oldFlag]
	if s.oldFlag == "" || !given[s.oldFlag] {
		return nil
	}
	if given[s.flag] {
		return usageError{fmt.Errorf("--%s and --%s are one setting (--%s is its old name): give --%s only", s.flag, s.oldFlag, s.oldFlag, s.flag)}
	}
	c.deprecated = append(c.deprecated, fmt.Sprintf("--%s is deprecated: use --%s instead (the old name stops working in the next release)", s.oldFlag, s.flag))
	return nil
}

// usageError marks a mistake on the command line (exit status 2).
type usageError struct{ error }

// findCommon returns the Common of cfg, embedded at any depth (a command
// that takes some of restore's flags embeds restore's configuration).
func findCommon(cfg any) *Common {
	v := reflect.ValueOf(cfg).Elem()
	for i := 0; i < v.NumField(); i++ {
		if c, ok := v.Field(i).Addr().Interface().(*Common); ok {
			return c
		}
		if f := v.Type().Field(i); f.Anonymous && f.Type.Kind() == reflect.Struct {
			if c := findCommon(v.Field(i).Addr().Interface()); c != nil {
				return c
			}
		}
	}
	return nil
}

// bind registers a flag for every field tagged `flag` (and its old name),
// recursing into embedded structs, with the environment's value as the
// default. keep, if not nil, names the flags (and, for a setting without
// a flag, the variables) to register; Common's are always registered.
func bind(fs *flag.FlagSet, v reflect.Value, keep func(string) bool, help *[]flagHelp, settings *[]setting) {
	t := v.Type()
	if t == reflect.TypeFor[Common]() {
		keep = nil
	}
	for i := 0; i < t.NumField(); i++ {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			bind(fs, fv, keep, help, settings)
			continue
		}
		name := f.Tag.Get("flag")
		if name == "" {
			// A variable without a flag (a key's content: flags show in ps).
			if env, desc := f.Tag.Get("envconfig"), f.Tag.Get("desc"); env != "" && desc != "" && (keep == nil || keep(env)) {
				*help = append(*help, flagHelp{desc: desc, env: env})
			}
			continue
		}
		if keep != nil && !keep(name) {
			continue
		}
		val := &value{v: fv}
		fs.Var(val, name, f.Tag.Get("desc"))
		env := f.Tag.Get("envconfig")
		s := setting{v: fv, flag: name, env: env, oldFlag: f.Tag.Get("oldflag"), oldEnv: f.Tag.Get("oldenv")}
		*settings = append(*settings, s)
		var was []string
		if s.oldFlag != "" {
			fs.Var(val, s.oldFlag, "deprecated: --"+name) // one value: the same list, the same state
			was = append(was, "--"+s.oldFlag)
		}
		if s.oldEnv != "" {
			was = append(was, s.oldEnv)
		}
		arg := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		switch fv.Kind() {
		case reflect.Bool:
			arg = ""
		case reflect.Slice:
			arg += " (repeatable)"
		}
		// A deprecated mode flag has no variable: its variable is refused.
		*help = append(*help, flagHelp{flag: name, arg: arg, desc: f.Tag.Get("desc"), env: env, def: f.Tag.Get("default"), was: was})
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
	if u, ok := x.v.Addr().Interface().(encoding.TextUnmarshaler); ok { // a type that reads itself
		return u.UnmarshalText([]byte(s))
	}
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
