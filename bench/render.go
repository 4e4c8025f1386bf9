package main

// docs/benchmarks.md and its charts, from the results' JSON.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// renderPage writes the page and its charts from the newest report of each
// suite under the results root (dir a dated directory: from it alone).
func renderPage(dir, docsPath, repo string) error {
	reps, err := readReports(dir)
	if err != nil {
		return err
	}
	if root := filepath.Dir(dir); !isDated(dir) {
		return fmt.Errorf("%s is not a dated results directory", dir)
	} else if others, err := newestPerSuite(root); err == nil {
		reps = mergeNewest(reps, others)
	}
	chartDir := filepath.Join(filepath.Dir(docsPath), "benchmarks")
	if err := os.MkdirAll(chartDir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(chartDir, "*.svg"))
	for _, f := range old {
		os.Remove(f)
	}
	rel := func(d string) string {
		if r, err := filepath.Rel(repo, d); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return d
	}
	// Why m0 loses where it does: written by hand, from the profiles, and
	// shown under the list the run computed (bench/losses.md).
	why, _ := os.ReadFile(filepath.Join(repo, "bench", "losses.md"))
	page, charts := render(reps, rel(filepath.Dir(dir)), string(why))
	for name, svg := range charts {
		if err := os.WriteFile(filepath.Join(chartDir, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(docsPath, []byte(page), 0o644)
}

// mergeNewest adds to reps the suites it lacks from others.
func mergeNewest(reps, others []*Report) []*Report {
	have := map[string]bool{}
	for _, r := range reps {
		have[r.Suite] = true
	}
	for _, o := range others {
		if !have[o.Suite] {
			reps = append(reps, o)
		}
	}
	order := suiteOrder()
	sort.SliceStable(reps, func(i, j int) bool {
		return slices.Index(order, reps[i].Suite) < slices.Index(order, reps[j].Suite)
	})
	return reps
}

// sortByData orders xs as names lists their names, those it lacks last.
func sortByData[T any](xs []T, names []string, name func(T) string) {
	at := func(x T) int {
		if i := slices.Index(names, name(x)); i >= 0 {
			return i
		}
		return len(names)
	}
	sort.SliceStable(xs, func(i, j int) bool { return at(xs[i]) < at(xs[j]) })
}

// A table is a suite's runs in the order of the suite's data.
type table struct {
	rep     *Report
	servers []ServerInfo
	apps    []AppInfo
	concs   []int
	runs    map[string]Run // app/server/c
}

func key(app, server string, c int) string { return app + "/" + server + "/" + strconv.Itoa(c) }

func newTable(rep *Report) *table {
	t := &table{rep: rep, runs: map[string]Run{}}
	t.servers = append(t.servers, rep.Servers...)
	t.apps = append(t.apps, rep.Apps...)
	if s, ok := suiteByName(rep.Suite); ok {
		var servers, apps []string
		for _, sv := range s.Servers {
			servers = append(servers, sv.Key)
		}
		for _, a := range s.Apps {
			apps = append(apps, a.Name)
		}
		sortByData(t.servers, servers, func(sv ServerInfo) string { return sv.Key })
		sortByData(t.apps, apps, func(a AppInfo) string { return a.Name })
	}
	for _, r := range rep.Runs {
		t.runs[key(r.App, r.Server, r.Concurrency)] = r
		if !slices.Contains(t.concs, r.Concurrency) {
			t.concs = append(t.concs, r.Concurrency)
		}
	}
	slices.Sort(t.concs)
	return t
}

func (t *table) server(k string) ServerInfo {
	for _, s := range t.servers {
		if s.Key == k {
			return s
		}
	}
	return ServerInfo{Key: k, Label: k}
}

func (t *table) label(k string) string { return t.server(k).Label }

// m0 is whether a row is m0's own (not a peer, not a baseline).
func (s ServerInfo) m0() bool { return !s.Peer && !s.Base && !s.InProcess }

// ok is a run with figures.
func ok(r Run, found bool) bool { return found && r.Failed == "" && r.RPS > 0 }

// clean is a run with figures and errors on at most 1% of its requests:
// wrk leaves timed-out requests out of its percentiles, so a run with many
// is no reference for latency or rate.
func clean(r Run, found bool) bool {
	return ok(r, found) && float64(r.Errors.Total()) <= 0.01*float64(r.Requests+r.Errors.Total())
}

// reference is what a row at (app, c) in group is compared to: the peer of
// the highest rate, or, where no peer serves the application, m0's own
// baseline; runs with errors are no reference.
func (t *table) reference(app string, c int, group string) (Run, ServerInfo, bool) {
	for _, want := range []func(ServerInfo) bool{
		func(s ServerInfo) bool { return s.Peer },
		func(s ServerInfo) bool { return s.Base },
	} {
		var b Run
		var bs ServerInfo
		found := false
		for _, s := range t.servers {
			r, have := t.runs[key(app, s.Key, c)]
			if !want(s) || s.Group != group || !clean(r, have) {
				continue
			}
			if !found || r.RPS > b.RPS {
				b, bs, found = r, s, true
			}
		}
		if found {
			return b, bs, true
		}
	}
	return Run{}, ServerInfo{}, false
}

// ratio is r's rate against ref's: the median of their per-round ratios
// when both were measured in the same interleaved rounds (perRound), else
// the ratio of their rates.
func ratio(r, ref Run) (v float64, perRound bool) {
	if m, _, ok := roundRatio(r, ref); ok {
		return m, true
	}
	return r.RPS / ref.RPS, false
}

// ratioText is a ratio as a suite's table prints it: in an interleaved
// suite, one that is not per round (a run merged from another day's) says
// so.
func (t *table) ratioText(r, ref Run) string {
	v, perRound := ratio(r, ref)
	if t.rep.Method.Rounds > 0 && !perRound {
		return fmt.Sprintf("%.2fx (of rates)", v)
	}
	return fmt.Sprintf("%.2fx", v)
}

// cpuText is a run's server CPU per request, in µs.
func cpuText(r Run) string {
	v := r.CPUPerRequest()
	switch {
	case v <= 0:
		return ""
	case v >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// lowestP99 is the peer (or, with none, the baseline) of the lowest p99 at
// (app, c) in group, among runs without errors.
func (t *table) lowestP99(app string, c int, group string) (Run, bool) {
	_, ref, found := t.reference(app, c, group)
	if !found {
		return Run{}, false
	}
	var b Run
	found = false
	for _, s := range t.servers {
		r, have := t.runs[key(app, s.Key, c)]
		if s.Peer != ref.Peer || s.Base != ref.Base || s.Group != group || !clean(r, have) {
			continue
		}
		if !found || r.P99ms < b.P99ms {
			b, found = r, true
		}
	}
	return b, found
}

func (t *table) unit() string {
	switch t.rep.Method.Tool {
	case "wsload":
		return "messages/s"
	case "holds":
		return "deliveries/s"
	}
	return "req/s"
}

// unitOne is what one of the unit is: request, message, delivery.
func (t *table) unitOne() string {
	switch t.rep.Method.Tool {
	case "wsload":
		return "message"
	case "holds":
		return "delivery"
	}
	return "request"
}

// count is c connections (or streams), singular for one.
func (t *table) count(c int) string {
	if c == 1 {
		return "1 " + strings.TrimSuffix(t.concName(), "s")
	}
	return strconv.Itoa(c) + " " + t.concName()
}

func (t *table) concName() string {
	if t.rep.Method.Tool == "holds" {
		return "streams"
	}
	return "connections"
}

func day(date string) string {
	if len(date) >= 10 {
		return date[:10]
	}
	return date
}

func render(reps []*Report, resultsDir, why string) (string, map[string]string) {
	charts := map[string]string{}
	var b strings.Builder
	first := reps[0]
	quick, inProcess := false, false
	days, commits := map[string]bool{}, map[string]bool{}
	for _, r := range reps {
		quick = quick || r.Quick
		days[day(r.Date)], commits[r.Commit] = true, true
		inProcess = inProcess || slices.ContainsFunc(r.Servers, func(s ServerInfo) bool { return s.InProcess })
	}
	b.WriteString("# Benchmarks\n\n")
	if quick {
		b.WriteString("**A smoke run (`bench/run --quick`): one second per server, to check every answer, not to measure. These figures mean nothing.**\n\n")
	}
	when := fmt.Sprintf("measured on %s at commit `%s`", day(first.Date), first.Commit)
	if len(days) > 1 || len(commits) > 1 {
		when = "measured suite by suite (each section says when and at which commit)"
	}
	link := "../" + resultsDir
	if filepath.IsAbs(resultsDir) {
		link = resultsDir
	}
	fmt.Fprintf(&b, "m0serve beside the servers a Python developer would otherwise run, one suite at a time, %s by `bench/run all`. Every figure below is in [%s](%s/) as JSON, one directory per day and one file per suite, with the exact command line of each server and the load tool's own output. This page is rendered from those files (`bench/run render`); nothing on it is typed by hand.\n\n",
		when, resultsDir, link)

	b.WriteString("## Method\n\n")
	m, mt := first.Machine, first.Method
	fmt.Fprintf(&b, "- **Machine**: %d CPUs (%s), %d GiB, Linux %s. It is a shared virtual machine: treat differences under about 10%% as noise. Before the first suite the CPUs were %s busy.\n", m.CPUs, orUnknown(m.Model), m.MemGiB, m.Kernel, orUnknown(m.BusyIdle))
	if mt.ServerCPU != "" {
		fmt.Fprintf(&b, "- **Pinning**: every server runs one worker process (beside an idle supervisor where it has one) pinned to CPU %s with `taskset`; the load tool runs pinned to CPU %s, so a server is measured on one core and the client never competes with it. The workers suite alone pins nothing: its servers use both CPUs and share them with wrk. A run where the load tool used 90%% or more of its core is named in its suite's notes: its rate may be the client's ceiling.\n", mt.ServerCPU, mt.ClientCPU)
	} else {
		b.WriteString("- **Pinning**: none; this machine has one CPU, which each server shares with the load tool.\n")
	}
	b.WriteString("- **Correctness first**: each server is started in a session of its own and polled until it answers the application's exact body (or a part of it that only a correct page has) and Content-Type (a static file: its exact bytes and length; a WebSocket: an echo); one that does not is reported as failed, never measured. It is stopped by its own PIDs (SIGINT, then SIGTERM and SIGKILL to its session). Rates count only the answers wrk did not count as non-2xx.\n")
	fmt.Fprintf(&b, "- **Load**: HTTP with wrk %s (`-t%d -cN --latency --timeout %s`; the workers suite `-t2`), after a %s warm-up at 64 connections, then %s at each concurrency in turn against the same process; WebSocket with the harness's own load (`bench/.bin/bench wsload`: each connection sends a 32-byte message and waits for its echo); held SSE streams with bench/holds. Concurrency 1 is the latency of one client, 64 a busy server, 1,024 the tail under many connections.\n",
		orUnknown(first.Versions["wrk"]), max(mt.Threads, 1), secondsArg(mt.TimeoutS), secondsArg(mt.WarmupS), secondsArg(mt.DurationS))
	rounds := 0
	var sequential []string
	for _, r := range reps {
		if r.Method.Rounds > 0 {
			rounds = max(rounds, r.Method.Rounds)
		} else {
			sequential = append(sequential, r.Title)
		}
	}
	switch {
	case rounds > 0:
		fmt.Fprintf(&b, "- **Interleaved rounds**: the speed of this machine drifts from minute to minute by more than many of the differences measured, so servers are not measured one after another. For each application, every server of the suite is started at once, each checked and warmed, then left idle until loaded; in each of %d rounds (per concurrency) the load tool loads every server in turn, the order rotating by one each round. A figure is the load of median rate over the rounds (its latencies are that load's; the tables give the lowest and highest rate beside it), and a ratio between two servers is the median of the ratios of their rates within each round (\"per round\"). Server CPU per request is the server's processes' user and system time over each load divided by the requests it answered, the median over the rounds. ", rounds)
		if len(sequential) > 0 {
			fmt.Fprintf(&b, "Measured one server at a time instead: %s (each section says how); a ratio of theirs is of the rates and says so.", strings.Join(sequential, ", "))
		}
		b.WriteString(" No run is discarded; a run whose CPUs were busy with other work just before it is named in its suite's notes.\n")
	case mt.Runs > 1:
		fmt.Fprintf(&b, "- **Runs**: each HTTP and WebSocket figure is the load of median rate among %d in a row against the same process (its latencies are that load's); the tables give the lowest and highest rate beside it. The SSE fan-out figures are one run each. No run is discarded; a run whose CPUs were busy with other work just before it is named in its suite's notes.\n", mt.Runs)
	default:
		b.WriteString("- **One run per figure**: no repetition, no averaging, no run discarded. A run whose CPUs were busy with other work just before it is named in its suite's notes.\n")
	}
	b.WriteString("- **Ratios**: \"vs best peer\" compares a row's rate with the highest rate of any peer on the same application at the same concurrency (in the workers suite, with the same number of workers), leaving out runs with errors on more than 1% of their requests. Where no peer serves the application (the Go handler, the mounts and the Go host suites), the reference is m0's own baseline instead: bare net/http, m0serve unmounted, bare fasthttp; the column then says \"vs baseline\".\n")
	if inProcess {
		b.WriteString("- **In-process**: in the WSGI suite, Flask and Django have one more row that is no server: bench/apps/inprocess.py, pinned like the servers, calls the application in a loop in one Python process for the load's duration, with the environ of wrk's request, reading each body and calling `close()`. It is loaded in the same rounds as the servers at every concurrency (a loop has none: its figure is the same at each), and its rate is the most any server could reach on the same core that minute; it has no latency, and no server is compared with it but in the targets.\n")
	}
	fmt.Fprintf(&b, "- **Memory per connection**: after the warm-up, %d connections are opened to the settled server, each with one request answered (a WebSocket: one echo), and held idle; the server's RSS (every process of its session) settled before and after, divided by the connections still open. A server that closes each connection after its answer, or when it has been idle for less than the settling time (2 s), holds none. For SSE, bench/holds does the same with the held streams.\n", holdConns)
	b.WriteString("- **Reproduce**: `bench/run all --rounds 3 --duration 3s` (about an hour, as for this page; the defaults, 5 rounds of 5 s, take about twice as long; it installs wrk and nginx with apt-get, the peers into bench/.venv from bench/requirements.txt and the Mojo m0serve into bench/.venv-mojo from bench/requirements-mojo.txt, builds m0serve and Centrifugo), or one suite, `bench/run wsgi --only granian,m0serve`. See [bench/README.md](../bench/README.md).\n\n")
	versions := map[string]string{}
	for _, r := range reps {
		for k, v := range r.Versions {
			versions[k] = v
		}
	}
	var names []string
	for k := range versions {
		names = append(names, k)
	}
	sort.Strings(names)
	b.WriteString("Versions:")
	for i, k := range names {
		sep := ","
		if i == len(names)-1 {
			sep = "."
		}
		fmt.Fprintf(&b, " %s %s%s", k, versions[k], sep)
	}
	b.WriteString("\n\n")

	b.WriteString("## Summary\n\n")
	b.WriteString("Each of m0's rows against its reference (the best peer; where no peer serves the application, m0's own baseline), on each application at each concurrency.\n\n")
	// The ratio per round has a column only where some suite was measured
	// in rounds; results of earlier harnesses have none.
	if rounds > 0 {
		b.WriteString("| suite | application | concurrency | m0 | rate | reference | its rate | ratio per round | ratio of rates | m0 p99 ms | its p99 ms | m0 CPU µs/req | its CPU µs/req |\n|---|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	} else {
		b.WriteString("| suite | application | concurrency | m0 | rate | reference | its rate | ratio | m0 p99 ms | its p99 ms | m0 CPU µs/req | its CPU µs/req |\n|---|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	}
	var losses, targets []string
	for _, rep := range reps {
		t := newTable(rep)
		for _, a := range t.apps {
			for _, c := range t.concs {
				for _, s := range t.servers {
					r, have := t.runs[key(a.Name, s.Key, c)]
					if !s.m0() || !have {
						continue
					}
					rate, perRound, ofRates, p99, cpu := "failed", "", "", "", ""
					if ok(r, true) {
						rate, p99, cpu = num(r.RPS), ms2(r.P99ms), cpuText(r)
					}
					ref, refS, found := t.reference(a.Name, c, s.Group)
					peer, prate, pp99, pcpu := "", "", "", ""
					if found {
						peer, prate, pp99, pcpu = refS.Label, num(ref.RPS), ms2(ref.P99ms), cpuText(ref)
						if refS.Base {
							peer += " (baseline)"
						}
						if ok(r, true) {
							ofRates = fmt.Sprintf("%.2fx", r.RPS/ref.RPS)
							if v, isRound := ratio(r, ref); isRound {
								perRound = fmt.Sprintf("**%.2fx**", v)
							} else {
								ofRates = "**" + ofRates + "**"
							}
						}
					}
					ratios := perRound + " | " + ofRates
					if rounds == 0 {
						ratios = ofRates
					}
					fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rep.Title, a.Name, c, s.Label, rate, peer, prate, ratios, p99, pp99, cpu, pcpu)
				}
			}
		}
		losses = append(losses, t.losses()...)
		targets = append(targets, t.targets()...)
	}
	if len(targets) > 0 {
		b.WriteString("\n## Targets\n\n")
		b.WriteString("What m0 set out to reach, per core, against the same run's figures.\n\n")
		b.WriteString("| suite | application | target | measured | |\n|---|---|---|---|---|\n")
		for _, t := range targets {
			b.WriteString(t + "\n")
		}
	}
	b.WriteString("\n## Where m0 loses\n\n")
	if len(losses) == 0 {
		b.WriteString("Nowhere in this run: every m0 row has the highest rate and the lowest p99 of its application and concurrency.\n\n")
	} else {
		b.WriteString("Every row of m0's below its reference's rate or above the lowest p99 among the references, failed, or with errors, as measured:\n\n")
		for _, l := range losses {
			fmt.Fprintf(&b, "- %s\n", l)
		}
		b.WriteString("\n")
		if why = strings.TrimSpace(why); why != "" {
			b.WriteString(why + "\n\n")
		}
	}

	var mem []group
	for _, rep := range reps {
		t := newTable(rep)
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", rep.Title, rep.About)
		if len(days) > 1 || len(commits) > 1 {
			fmt.Fprintf(&b, "Measured on %s at commit `%s` ([%s.json](%s/%s/%s.json)). ", day(rep.Date), rep.Commit, rep.Suite, link, day(rep.Date), rep.Suite)
		}
		if rep.Method.ServerCPU == "" {
			b.WriteString("Nothing pinned. ")
		}
		fmt.Fprintf(&b, "%s\n\n", rep.Method.Description)
		for _, a := range t.apps {
			name := rep.Suite + "-" + a.Name
			charts[name+".svg"] = t.rateChart(a)
			charts[name+"-latency.svg"] = t.latencyChart(a)
			fmt.Fprintf(&b, "### %s: %s\n\n", rep.Title, a.About)
			fmt.Fprintf(&b, "![%s %s throughput](benchmarks/%s.svg)\n\n", rep.Title, a.Name, name)
			fmt.Fprintf(&b, "![%s %s latency](benchmarks/%s-latency.svg)\n\n", rep.Title, a.Name, name)
			t.writeTable(&b, a)
		}
		if g := t.memoryGroups(); len(g) > 0 {
			mem = append(mem, g...)
		}
		t.writeCommands(&b)
		if notes := compactNotes(rep.Notes); len(notes) > 0 {
			b.WriteString("Notes:\n\n")
			for _, n := range notes {
				fmt.Fprintf(&b, "- %s\n", n)
			}
			b.WriteString("\n")
		}
	}
	if len(mem) > 0 {
		charts["memory.svg"] = barChart("Memory per idle connection (KiB, lower is better)",
			"RSS growth over idle connections held on a settled server, divided by them", mem, true, false)
		b.WriteString("## Memory per connection\n\n")
		b.WriteString("What one more idle connection costs each server, measured as the method says: idle keep-alive connections (HTTP), open WebSockets, held SSE streams. A figure under about 1 KiB is within the noise of the allocator's own growth.\n\n")
		b.WriteString("![Memory per connection](benchmarks/memory.svg)\n\n")
		b.WriteString("| suite | application | server | connections | open | RSS idle MiB | RSS held MiB | KiB per connection |\n|---|---|---|---:|---:|---:|---:|---:|\n")
		for _, rep := range reps {
			t := newTable(rep)
			for _, a := range t.apps {
				for _, s := range t.servers {
					for _, mm := range rep.Memory {
						if mm.App != a.Name || mm.Server != s.Key {
							continue
						}
						per := mdEscape(mm.Note)
						if mm.Open == 0 && strings.HasPrefix(mm.Note, heldNone[:len("holds no idle connection")]) {
							per = heldNone
						}
						if mm.PerConnKiB != nil {
							per = fmt.Sprintf("%.2f", *mm.PerConnKiB)
							if mm.Note != "" {
								per += " (" + mdEscape(mm.Note) + ")"
							}
						}
						fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %.1f | %.1f | %s |\n", rep.Title, a.Name, s.Label, mm.Conns, mm.Open,
							float64(mm.RSSIdleKiB)/1024, float64(mm.RSSHeldKiB)/1024, per)
					}
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String(), charts
}

var percent = regexp.MustCompile(`\b(\d+)%`)

// compactNotes says once what several runs of one figure noted, with the
// range of their percentages and how many runs noted it.
func compactNotes(notes []string) []string {
	type seen struct {
		first  string
		lo, hi int
		count  int
	}
	groups := map[string]*seen{}
	var order []string
	for _, n := range notes {
		k := percent.ReplaceAllString(n, "N%")
		g, ok := groups[k]
		if !ok {
			g = &seen{first: n, lo: math.MaxInt, hi: -1}
			groups[k] = g
			order = append(order, k)
		}
		g.count++
		if m := percent.FindStringSubmatch(n); m != nil && strings.Count(n, "%") == 1 {
			v, _ := strconv.Atoi(m[1])
			g.lo, g.hi = min(g.lo, v), max(g.hi, v)
		}
	}
	var out []string
	for _, k := range order {
		g := groups[k]
		switch {
		case g.count == 1:
			out = append(out, g.first)
		case g.hi >= 0:
			span := strconv.Itoa(g.lo) + "%"
			if g.hi != g.lo {
				span = fmt.Sprintf("%d-%d%%", g.lo, g.hi)
			}
			out = append(out, fmt.Sprintf("%s (%d runs)", strings.Replace(k, "N%", span, 1), g.count))
		default:
			out = append(out, fmt.Sprintf("%s (%d runs)", g.first, g.count))
		}
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// losses names every m0 row below its reference's rate or above the
// lowest p99 among the references, failed, or with errors.
func (t *table) losses() []string {
	var out []string
	for _, a := range t.apps {
		for _, c := range t.concs {
			for _, s := range t.servers {
				r, have := t.runs[key(a.Name, s.Key, c)]
				if !s.m0() || !have {
					continue
				}
				where := fmt.Sprintf("%s, %s at %s, %s", t.rep.Title, a.Name, t.count(c), s.Label)
				if !ok(r, true) {
					out = append(out, fmt.Sprintf("%s: failed (%s).", where, orUnknown(r.Failed)))
					continue
				}
				ref, refS, found := t.reference(a.Name, c, s.Group)
				what := "its best peer"
				if refS.Base {
					what = "its baseline"
				}
				if v, perRound := ratio(r, ref); found && v < 1 {
					how := ""
					if perRound {
						how = " per round"
					}
					out = append(out, fmt.Sprintf("%s: %s %s, %.2fx %s%s, %s (%s).", where, num(r.RPS), t.unit(), v, what, how, refS.Label, num(ref.RPS)))
				}
				if lr, lok := t.lowestP99(a.Name, c, s.Group); lok && r.P99ms > lr.P99ms {
					out = append(out, fmt.Sprintf("%s: p99 %s ms, %s's %s ms.", where, ms2(r.P99ms), t.label(lr.Server), ms2(lr.P99ms)))
				}
				switch {
				case t.rep.Method.Tool == "holds" && r.Errors.Total() > 0:
					out = append(out, fmt.Sprintf("%s: %s frames not published on schedule (the server behind), %d streams ended.", where, num(float64(r.Errors.Write)), r.Errors.Read))
				case r.Errors.Total() > 0:
					out = append(out, fmt.Sprintf("%s: errors: %s.", where, r.Errors.String()))
				}
				if r.Lost > 0 {
					out = append(out, fmt.Sprintf("%s: %d deliveries lost.", where, r.Lost))
				}
			}
		}
	}
	return out
}

func (t *table) writeTable(b *strings.Builder, a AppInfo) {
	holds := t.rep.Method.Tool == "holds"
	vs := "vs best peer"
	for _, c := range t.concs {
		for _, s := range t.servers {
			if _, refS, found := t.reference(a.Name, c, s.Group); found && refS.Base {
				vs = "vs baseline"
			}
		}
	}
	if t.rep.Method.Rounds > 0 {
		vs += " (per round)"
	}
	fmt.Fprintf(b, "| %s | server | %s | %s | p50 ms | p90 ms | p99 ms | max ms | errors | server CPU µs per %s | RSS peak MiB |\n",
		t.concName(), t.unit(), vs, t.unitOne())
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	for _, c := range t.concs {
		for _, s := range t.servers {
			r, have := t.runs[key(a.Name, s.Key, c)]
			if !have {
				continue
			}
			label := s.Label
			if s.m0() {
				label = "**" + label + "**"
			}
			if !ok(r, true) {
				fmt.Fprintf(b, "| %d | %s | failed: %s | | | | | | | | |\n", c, label, mdEscape(orUnknown(r.Failed)))
				continue
			}
			vsRef := ""
			if ref, _, found := t.reference(a.Name, c, s.Group); found && !s.InProcess {
				vsRef = t.ratioText(r, ref)
			}
			errs := r.Errors.String()
			if holds {
				errs = fmt.Sprintf("lost %d", r.Lost)
				if r.Errors.Write > 0 {
					errs += fmt.Sprintf(", not published (server behind) %d", r.Errors.Write)
				}
				if r.Errors.Read > 0 {
					errs += fmt.Sprintf(", streams ended %d", r.Errors.Read)
				}
			}
			p90 := ms2(r.P90ms)
			if r.P90ms == 0 {
				p90 = ""
			}
			rate := num(r.RPS)
			if len(r.Rates) > 1 {
				rate += fmt.Sprintf(" (%s-%s)", num(slices.Min(r.Rates)), num(slices.Max(r.Rates)))
			}
			p50, p99, most := ms2(r.P50ms), ms2(r.P99ms), ms2(r.Maxms)
			if s.InProcess { // a loop: no request waits on another
				p50, p99, most, errs = "", "", "", ""
			}
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f |\n", c, label, rate, vsRef,
				p50, p90, p99, most, errs, cpuText(r), float64(r.RSSPeakKB)/1024)
		}
	}
	b.WriteString("\n")
}

func (t *table) writeCommands(b *strings.Builder) {
	b.WriteString("Command lines (the first application's; `$PORT` is the run's own, `$TMP` its temporary directory):\n\n")
	for _, s := range t.servers {
		for _, a := range t.apps {
			var cmd string
			for _, c := range t.concs {
				if r, have := t.runs[key(a.Name, s.Key, c)]; have && r.Command != "" {
					cmd = r.Command
					break
				}
			}
			if cmd != "" {
				fmt.Fprintf(b, "- %s: `%s`\n", s.Label, cmd)
				break
			}
		}
	}
	b.WriteString("\n")
}

func (t *table) rateChart(a AppInfo) string {
	return t.chart(a, fmt.Sprintf("%s, %s: %s (higher is better)", t.rep.Title, a.Name, t.unit()),
		"bars scaled within each concurrency; m0 in orange", false, func(r Run, br *bar) {
			br.value, br.text = r.RPS, num(r.RPS)
			if r.Errors.Total() > 0 {
				br.text += " (errors)"
			}
		})
}

func (t *table) latencyChart(a AppInfo) string {
	return t.chart(a, fmt.Sprintf("%s, %s: latency (lower is better)", t.rep.Title, a.Name),
		"dark: p50; whole bar: p99; log scale", true, func(r Run, br *bar) {
			br.value, br.low = r.P99ms, r.P50ms
			br.text = fmt.Sprintf("p50 %s / p99 %s ms", ms2(r.P50ms), ms2(r.P99ms))
		})
}

// chart is one bar per server in one group per concurrency, fill setting
// each bar from its run. An in-process row is left out: it has no latency,
// and its rate, the same at every concurrency, would dwarf the servers'
// where they wait on one client.
func (t *table) chart(a AppInfo, title, subtitle string, logScale bool, fill func(Run, *bar)) string {
	var gs []group
	for _, c := range t.concs {
		g := group{title: t.count(c)}
		for _, s := range t.servers {
			r, have := t.runs[key(a.Name, s.Key, c)]
			if !have || s.InProcess {
				continue
			}
			br := bar{label: s.Label, m0: !s.Peer}
			if ok(r, true) {
				fill(r, &br)
			} else {
				br.fail = "failed"
			}
			g.bars = append(g.bars, br)
		}
		gs = append(gs, g)
	}
	return barChart(title, subtitle, gs, !logScale, logScale)
}

// memoryGroups are the suite's memory per connection, one group per
// application.
func (t *table) memoryGroups() []group {
	var gs []group
	for _, a := range t.apps {
		var g group
		for _, s := range t.servers {
			for _, m := range t.rep.Memory {
				if m.App != a.Name || m.Server != s.Key || m.PerConnKiB == nil {
					continue
				}
				g.title = fmt.Sprintf("%s, %s, %d %s", t.rep.Title, a.Name, m.Conns, t.concName())
				g.bars = append(g.bars, bar{label: s.Label, value: math.Max(*m.PerConnKiB, 0), text: fmt.Sprintf("%.2f KiB", *m.PerConnKiB), m0: s.m0()})
			}
		}
		if len(g.bars) > 0 {
			gs = append(gs, g)
		}
	}
	return gs
}

// num is a rate with thousands separators.
func num(v float64) string {
	n := int64(math.Round(v))
	s := strconv.FormatInt(n, 10)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// ms2 is milliseconds with two decimals under 100, whole above.
func ms2(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// targets are the suite's target rows: | suite | app | target | measured | verdict (why) |.
func (t *table) targets() []string {
	var out []string
	tgs := t.rep.Targets
	if s, found := suiteByName(t.rep.Suite); found && len(tgs) == 0 {
		tgs = s.Targets
	}
	for _, tg := range tgs {
		r, have := t.runs[key(tg.App, tg.Server, tg.Concurrency)]
		at := " at " + t.count(tg.Concurrency)
		// "best": the peer of the highest rate in this run (or, with none,
		// the baseline), as the tables compare.
		versus, versusLabel := tg.Versus, t.label(tg.Versus)
		if versus == "best" {
			versus, versusLabel = "", "the best peer"
			if _, s, found := t.reference(tg.App, tg.Concurrency, ""); found {
				versus, versusLabel = s.Key, "the best peer ("+s.Label+")"
			}
		}
		v, vhave := t.runs[key(tg.App, versus, tg.Concurrency)]
		var target, measured, verdict string
		switch {
		case tg.Metric == "bridge_us":
			target = fmt.Sprintf("%s's cost over %s at most %s's over %s%s (1/rate differences)",
				t.label(tg.Server), t.label(tg.Base), versusLabel, t.label(tg.VersusBase), at)
			b, bhave := t.runs[key("go", tg.Base, tg.Concurrency)]
			vb, vbhave := t.runs[key("go", tg.VersusBase, tg.Concurrency)]
			if ok(r, have) && ok(b, bhave) && ok(v, vhave) && ok(vb, vbhave) {
				own, ref := bridgeCost(r, b), bridgeCost(v, vb)
				measured = fmt.Sprintf("%.1f µs / %.1f µs a request", own, ref)
				if cpu := []float64{r.CPUPerRequest(), b.CPUPerRequest(), v.CPUPerRequest(), vb.CPUPerRequest()}; !slices.ContainsFunc(cpu, func(x float64) bool { return x <= 0 }) {
					measured += fmt.Sprintf(" (server CPU: %.1f / %.1f)", cpu[0]-cpu[1], cpu[2]-cpu[3])
				}
				verdict = atMost(own, ref)
			}
		case tg.Metric == "per_conn_kib" && tg.Versus != "":
			target = fmt.Sprintf("%s KiB per connection at most %s's%s", t.label(tg.Server), versusLabel, at)
			own, oknown := t.perConn(tg.App, tg.Server, tg.Concurrency)
			ref, rknown := t.perConn(tg.App, versus, tg.Concurrency)
			if oknown && rknown {
				measured = fmt.Sprintf("%s / %s", trimFloat(math.Round(own*100)/100), trimFloat(math.Round(ref*100)/100))
				verdict = atMost(own, ref)
			}
		case tg.Metric == "p99_ms" && tg.Versus != "":
			target = fmt.Sprintf("%s p99 at most %s's%s", t.label(tg.Server), versusLabel, at)
			if ok(r, have) && ok(v, vhave) {
				measured = fmt.Sprintf("%s ms / %s ms", ms2(r.P99ms), ms2(v.P99ms))
				verdict = atMost(r.P99ms, v.P99ms)
			}
		case tg.Metric == "rss_kib" && tg.Versus != "":
			target = fmt.Sprintf("%s peak RSS at most %s's%s", t.label(tg.Server), versusLabel, at)
			if ok(r, have) && ok(v, vhave) && r.RSSPeakKB > 0 && v.RSSPeakKB > 0 {
				measured = fmt.Sprintf("%.1f MiB / %.1f MiB", float64(r.RSSPeakKB)/1024, float64(v.RSSPeakKB)/1024)
				verdict = atMost(float64(r.RSSPeakKB), float64(v.RSSPeakKB))
			}
		case tg.Metric == "cpu_us":
			target = fmt.Sprintf("%s server CPU per request at most %s's%s", t.label(tg.Server), versusLabel, at)
			if ok(r, have) && ok(v, vhave) && r.CPUPerRequest() > 0 && v.CPUPerRequest() > 0 {
				own, ref := r.CPUPerRequest(), v.CPUPerRequest()
				measured = fmt.Sprintf("%.1f µs / %.1f µs", own, ref)
				verdict = atMost(own, ref)
			}
		case tg.Versus != "":
			target = fmt.Sprintf("%s at least %.2fx %s%s", t.label(tg.Server), tg.Min, versusLabel, at)
			if ok(r, have) && ok(v, vhave) {
				ratio, perRound := ratio(r, v)
				measured = fmt.Sprintf("%.2fx (%s / %s)", ratio, num(r.RPS), num(v.RPS))
				if perRound {
					measured = fmt.Sprintf("%.2fx per round (medians %s / %s)", ratio, num(r.RPS), num(v.RPS))
				}
				verdict = withNoise(ratio >= tg.Min, ratio, tg.Min)
			}
		default:
			target = fmt.Sprintf("%s %s at most %s%s", t.label(tg.Server), metricName(tg.Metric), trimFloat(tg.Max), at)
			var figure float64
			known := false
			switch tg.Metric {
			case "per_conn_kib":
				figure, known = t.perConn(tg.App, tg.Server, tg.Concurrency)
			case "p99_ms":
				figure, known = r.P99ms, ok(r, have)
			}
			if known {
				measured = trimFloat(math.Round(figure*100) / 100)
				verdict = metOrNot(figure <= tg.Max)
			}
		}
		if measured == "" {
			measured, verdict = "not measured", "n/a"
		}
		if tg.Why != "" {
			verdict += " (" + tg.Why + ")"
		}
		out = append(out, fmt.Sprintf("| %s | %s | %s | %s | %s |", t.rep.Title, tg.App, target, measured, verdict))
	}
	return out
}

// perConn is server's memory per idle connection on app at conns.
func (t *table) perConn(app, server string, conns int) (float64, bool) {
	for _, m := range t.rep.Memory {
		if m.App == app && m.Server == server && m.Conns == conns && m.PerConnKiB != nil {
			return *m.PerConnKiB, true
		}
	}
	return 0, false
}

// atMost is the verdict on own at most ref, a figure both measured.
func atMost(own, ref float64) string { return withNoise(own <= ref, own, ref) }

// withNoise is the verdict met (or not), said to be within the machine's noise
// when the figure is within a tenth of its bound.
func withNoise(met bool, figure, bound float64) string {
	v := metOrNot(met)
	if math.Abs(figure-bound) < 0.1*bound {
		v += ", within the machine's noise"
	}
	return v
}

// bridgeCost is what r's server spends on a request beyond base's, in µs:
// the difference of their times per request (1/rate).
func bridgeCost(r, base Run) float64 { return 1e6/r.RPS - 1e6/base.RPS }

func metOrNot(met bool) string {
	if met {
		return "met"
	}
	return "**not met**"
}

func metricName(m string) string {
	switch m {
	case "per_conn_kib":
		return "KiB per connection"
	case "p99_ms":
		return "p99 ms"
	}
	return m
}
