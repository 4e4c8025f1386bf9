// Command bench is m0's benchmark harness: for each application it starts
// m0serve and its peers together, checks that each answers correctly, loads
// them in turn, round after round, with wrk (or with its own WebSocket load,
// or bench/holds for held SSE streams), stops them by their own PIDs, and
// writes what it measured as JSON, one file per suite, in
// bench/results/DATE/. From those files it renders docs/benchmarks.md and
// its SVG charts.
//
//	bench/run all                      # every suite; then the page
//	bench/run wsgi asgi --only granian # some suites, some servers or apps
//	bench/run --quick                  # one second each: is every answer right?
//	bench/run render [DIR]             # the page again, from DIR's JSON
//	bench/run list                     # suites, applications, servers
//
// The suites are data (suites.go). See bench/README.md and
// docs/benchmarks.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/m0serve/m0/bench/internal/procfs"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "wsload" {
		if err := wsloadMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func usage(fs *flag.FlagSet) func() {
	return func() {
		fmt.Fprintf(os.Stderr, `Usage: bench/run [all | SUITE...] [flags]
       bench/run render [DIR]
       bench/run list

Suites: %s (all: every one, then docs/benchmarks.md is rendered).

Flags:
`, strings.Join(suiteOrder(), ", "))
		fs.PrintDefaults()
	}
}

func run(args []string) error {
	repo, err := findRepo()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = usage(fs)
	var opt options
	var only string
	fs.BoolVar(&opt.quick, "quick", false, "one second per server at 64 connections (100 streams for fan-out): a smoke test of every answer, not a measurement; exits 1 when one is wrong")
	fs.DurationVar(&opt.duration, "duration", 5*time.Second, "measured load per server, concurrency and run")
	fs.DurationVar(&opt.warmup, "warmup", 2*time.Second, "load before the first measurement of each server (the fan-out suite publishes for 3 s before measuring, bench/holds's own warm-up)")
	fs.IntVar(&opt.rounds, "rounds", 5, "rounds per application and concurrency: each loads every server once, in turn; the median over them is reported (the workers suite loads one server at a time this many times in a row; the fan-out suite runs bench/holds once per figure)")
	var concs string
	fs.StringVar(&concs, "concurrency", "", "comma-separated concurrencies, in place of each suite's (not the fan-out suite's streams)")
	fs.StringVar(&opt.mojoVenv, "mojo-venv", filepath.Join(repo, "bench", ".venv-mojo"), "virtualenv of the Mojo m0serve (the default is made from bench/requirements-mojo.txt)")
	fs.DurationVar(&opt.timeout, "timeout", 5*time.Second, "a response later than this counts as a timeout")
	fs.StringVar(&only, "only", "", "comma-separated server keys and/or application names (bench/run list)")
	fs.StringVar(&opt.results, "results", filepath.Join(repo, "bench", "results"), "results root: the JSON goes to ROOT/DATE/SUITE.json")
	fs.StringVar(&opt.venv, "venv", filepath.Join(repo, "bench", ".venv"), "virtualenv of the Python peers (the default is made from bench/requirements.txt)")
	fs.StringVar(&opt.docs, "docs", filepath.Join(repo, "docs", "benchmarks.md"), "the page rendered after the run (\"\": none)")
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if only != "" {
		opt.only = strings.Split(only, ",")
		if err := checkOnly(opt.only); err != nil {
			return err
		}
	}
	for _, f := range strings.Split(concs, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return fmt.Errorf("--concurrency: %q is not a count of connections", f)
		}
		opt.concs = append(opt.concs, n)
	}
	if len(pos) > 0 && pos[0] == "list" {
		return list()
	}
	if len(pos) > 0 && pos[0] == "render" {
		dir := ""
		if len(pos) > 1 {
			dir = pos[1]
		} else if dir, err = latestResults(opt.results); err != nil {
			return err
		}
		return renderPage(dir, opt.docs, repo)
	}
	var ss []Suite
	if len(pos) == 0 || slices.Contains(pos, "all") {
		ss = suites()
	} else {
		for _, name := range pos {
			s, ok := suiteByName(name)
			if !ok {
				return fmt.Errorf("unknown suite %q (want all, %s, render or list)", name, strings.Join(suiteOrder(), ", "))
			}
			ss = append(ss, s)
		}
	}
	if opt.quick {
		opt.duration, opt.warmup, opt.rounds = time.Second, 0, 1
		if !flagSet(fs, "results") {
			tmp, err := os.MkdirTemp("", "m0bench-quick-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			opt.results = tmp
		}
		if !flagSet(fs, "docs") {
			opt.docs = filepath.Join(opt.results, "benchmarks.md")
		}
	}
	h := &harness{opt: opt, repo: repo, bench: filepath.Join(repo, "bench"), bin: filepath.Join(repo, "bench", ".bin")}
	h.date = time.Now().UTC().Format("2006-01-02")
	h.outDir = filepath.Join(opt.results, h.date)
	h.raw = filepath.Join(h.outDir, "raw")
	if err := os.MkdirAll(h.raw, 0o755); err != nil {
		return err
	}
	defer h.cleanup()
	stopOnSignal(h)
	if err := h.setup(ss); err != nil {
		return err
	}
	for _, s := range ss {
		h.logf("suite %s", s.Name)
		rep := h.runSuite(s)
		if len(rep.Runs) == 0 {
			h.logf("suite %s: nothing selected", s.Name)
			continue
		}
		if len(opt.only) > 0 {
			mergeInto(filepath.Join(h.outDir, s.Name+".json"), rep)
		}
		path, err := writeReport(h.outDir, rep)
		if err != nil {
			return err
		}
		h.logf("wrote %s", h.rel(path))
	}
	if opt.docs != "" {
		if err := renderPage(h.outDir, opt.docs, repo); err != nil {
			return err
		}
		h.logf("wrote %s", h.rel(opt.docs))
	}
	if len(h.failures) > 0 {
		return fmt.Errorf("%d wrong:\n  %s", len(h.failures), strings.Join(h.failures, "\n  "))
	}
	return nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// findRepo is the checkout: the directory above the working one holding
// bench/suites.go.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "bench", "suites.go")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no m0 checkout at or above %s", dir)
		}
	}
}

func checkOnly(names []string) error {
	known := map[string]bool{}
	for _, s := range suites() {
		for _, sv := range s.Servers {
			known[sv.Key] = true
		}
		for _, a := range s.Apps {
			known[a.Name] = true
		}
	}
	for _, n := range names {
		if !known[n] {
			return fmt.Errorf("--only: unknown name %q (bench/run list names them)", n)
		}
	}
	return nil
}

func list() error {
	for _, s := range suites() {
		fmt.Printf("%s (%s, %s): concurrency %v\n", s.Name, s.Title, s.Tool, s.Concurrency)
		for _, a := range s.Apps {
			fmt.Printf("  app    %-18s %s\n", a.Name, a.About)
		}
		for _, sv := range s.Servers {
			fmt.Printf("  server %-18s %s\n", sv.Key, sv.Label)
		}
	}
	return nil
}

// mergeInto keeps, from an earlier report of the same suite and day, the
// runs this one did not repeat (a run --only some servers adds to the day's
// results instead of replacing them).
func mergeInto(path string, rep *Report) {
	old, err := readReports(filepath.Dir(path))
	if err != nil {
		return
	}
	for _, o := range old {
		if o.Suite != rep.Suite {
			continue
		}
		type key struct {
			app, server string
			c           int
		}
		have := map[key]bool{}
		for _, r := range rep.Runs {
			have[key{r.App, r.Server, r.Concurrency}] = true
		}
		var runs []Run
		for _, r := range o.Runs {
			if !have[key{r.App, r.Server, r.Concurrency}] {
				runs = append(runs, r)
			}
		}
		rep.Runs = append(runs, rep.Runs...)
		// A per-round ratio stands while neither of its runs was repeated:
		// a new run is in other rounds.
		var ratios []Ratio
		for _, x := range o.Ratios {
			if !have[key{x.App, x.Server, x.Concurrency}] && !have[key{x.App, x.Versus, x.Concurrency}] {
				ratios = append(ratios, x)
			}
		}
		rep.Ratios = append(ratios, rep.Ratios...)
		seen := map[string]bool{}
		for _, s := range rep.Servers {
			seen[s.Key] = true
		}
		for _, s := range o.Servers {
			if !seen[s.Key] {
				rep.Servers = append(rep.Servers, s)
			}
		}
		seenApp := map[string]bool{}
		for _, a := range rep.Apps {
			seenApp[a.Name] = true
		}
		for _, a := range o.Apps {
			if !seenApp[a.Name] {
				rep.Apps = append(rep.Apps, a)
			}
		}
		for k, v := range o.Versions {
			if _, ok := rep.Versions[k]; !ok {
				rep.Versions[k] = v
			}
		}
		var labels []string
		for _, s := range rep.Servers {
			if have := slices.ContainsFunc(rep.Runs, func(r Run) bool { return r.Server == s.Key }); have {
				labels = append(labels, s.Label)
			}
		}
		var notes []string
		for _, n := range o.Notes {
			if !slices.ContainsFunc(labels, func(l string) bool { return strings.HasPrefix(n, l+" ") }) {
				notes = append(notes, n)
			}
		}
		if o.Commit != rep.Commit && len(runs) > 0 {
			notes = append(notes, fmt.Sprintf("The runs of this suite not repeated on %s are from commit %s, %s.", day(rep.Date), o.Commit, day(o.Date)))
		}
		rep.Notes = append(notes, rep.Notes...)
		var mem []Memory
		for _, m := range o.Memory {
			if !slices.ContainsFunc(rep.Memory, func(x Memory) bool { return x.App == m.App && x.Server == m.Server }) {
				mem = append(mem, m)
			}
		}
		rep.Memory = append(mem, rep.Memory...)
	}
}

// stopOnSignal makes SIGINT and SIGTERM stop the server being measured
// (in a session of its own) and every process the harness started in its
// own process group (the load tool, bench/holds and the servers it
// started), remove the run's temporary files, and exit.
func stopOnSignal(h *harness) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-ch
		h.warnf("%v: stopping", sig)
		stopRunning()
		self, group := strconv.Itoa(os.Getpid()), strconv.Itoa(syscall.Getpgrp())
		for _, pid := range procfs.Matching(func(f []string) bool { return f[2] == group }) { // field 5: pgrp
			if strconv.Itoa(pid) != self {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		h.cleanup()
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
}
