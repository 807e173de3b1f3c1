// Command genhome writes a realistic, deterministic Jenkins home for tests
// and benchmarks, or applies one round of churn to an existing one.
//
//	genhome -preset small -seed 1 DIR    # generate
//	genhome -churn 0.01 -seed 2 DIR      # change 1 % of DIR's files (round 2)
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/homesnap/homesnap/internal/gen"
)

func main() {
	preset := flag.String("preset", "small", "home size: "+strings.Join(gen.PresetNames(), ", "))
	seed := flag.Int64("seed", 1, "random seed; with -churn, the round number")
	churn := flag.Float64("churn", 0, "if > 0, churn this fraction of an existing home's files instead of generating")
	workers := flag.Int("workers", 0, "parallel writers (0 = GOMAXPROCS)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: genhome [-preset NAME] [-seed N] DIR\n       genhome -churn FRACTION -seed ROUND DIR\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *preset, *seed, *churn, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "genhome:", err)
		os.Exit(1)
	}
}

func run(dir, preset string, seed int64, churn float64, workers int) error {
	start := time.Now()
	if churn > 0 {
		st, err := gen.Churn(dir, gen.ChurnOptions{Fraction: churn, Seed: seed})
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s in %v\n", dir, st, time.Since(start).Round(time.Millisecond))
		return nil
	}
	st, err := gen.Generate(dir, gen.Options{Preset: preset, Seed: seed, Workers: workers})
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s in %v\n", dir, st, time.Since(start).Round(time.Millisecond))
	return nil
}
