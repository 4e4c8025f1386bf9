package main

// Interleaved rounds: every server of an application up at once, idle
// until loaded, and loaded in turn round after round, the order rotating.
// A server's figure is the median over the rounds; a ratio is the median of
// the ratios within each round, which the machine's drift from minute to
// minute moves far less than it moves a ratio of loads minutes apart.

import (
	"fmt"
	"slices"
	"time"
)

// roundOrder is the order the n servers are loaded in round r (from 0):
// the list rotated by r, so that over n rounds each server goes first once.
func roundOrder(n, r int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i + r) % n
	}
	return out
}

// rounds loads each of n servers once per round, for count rounds, in the
// order roundOrder gives, and returns each server's loads in round order.
// A server whose load failed is not loaded again: its last load is the
// failed one.
func rounds(n, count int, load func(server, round int) Run) [][]Run {
	out := make([][]Run, n)
	for r := range count {
		for _, i := range roundOrder(n, r) {
			if k := len(out[i]); k > 0 && out[i][k-1].Failed != "" {
				continue
			}
			out[i] = append(out[i], load(i, r))
		}
	}
	return out
}

// medianOf is the median of xs (the mean of the middle two of an even
// count); 0 for none.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// cpuPerRequest is microseconds of CPU time per request; 0 when no request
// completed.
func cpuPerRequest(cpuSeconds float64, requests int64) float64 {
	if requests <= 0 || cpuSeconds < 0 {
		return 0
	}
	return cpuSeconds * 1e6 / float64(requests)
}

// roundRates are a run's rates in round order: every round's, or its one.
func roundRates(r Run) []float64 {
	if len(r.Rates) > 0 {
		return r.Rates
	}
	return []float64{r.RPS}
}

// roundRatio is the median of a's rate over b's within each round, and
// those ratios; false unless both were measured in the same interleaved
// rounds (their Interleave) with figures in every one.
func roundRatio(a, b Run) (float64, []float64, bool) {
	if a.Interleave == "" || a.Interleave != b.Interleave || a.Failed != "" || b.Failed != "" {
		return 0, nil, false
	}
	ra, rb := roundRates(a), roundRates(b)
	if len(ra) != len(rb) {
		return 0, nil, false
	}
	each := make([]float64, len(ra))
	for i := range ra {
		if ra[i] <= 0 || rb[i] <= 0 {
			return 0, nil, false
		}
		each[i] = ra[i] / rb[i]
	}
	return medianOf(each), each, true
}

// roundRatios are, for every one of m0's rows among runs (one application
// and concurrency, measured in the same rounds), the median of its
// per-round ratios to every peer and baseline of its group.
func roundRatios(runs []Run, servers []ServerInfo) []Ratio {
	info := map[string]ServerInfo{}
	for _, s := range servers {
		info[s.Key] = s
	}
	var out []Ratio
	for _, a := range runs {
		sa := info[a.Server]
		if !sa.m0() {
			continue
		}
		for _, b := range runs {
			sb := info[b.Server]
			if sb.m0() || sb.Group != sa.Group {
				continue
			}
			if m, each, ok := roundRatio(a, b); ok {
				out = append(out, Ratio{App: a.App, Concurrency: a.Concurrency, Server: a.Server, Versus: b.Server, Median: m, Rounds: each})
			}
		}
	}
	return out
}

// interleaves is whether a suite is measured in interleaved rounds: every
// one whose servers the harness loads itself, pinned or not (an unpinned
// server idle until loaded takes nothing from the one loaded).
func interleaves(s Suite) bool { return s.Tool != "holds" }

// measureTogether starts every server of the suite that serves app, checks
// and warms each, measures the memory per idle connection of each in turn
// (the others idle), then at each concurrency loads them in rounds.
func (h *harness) measureTogether(s Suite, servers []Server, app App, rep *Report) []Run {
	conc := h.concurrencies(s)
	var runs []Run
	var up []*contender
	defer func() {
		for _, c := range up {
			c.stop(rep, app)
		}
	}()
	for _, sv := range servers {
		c, err := h.launch(s, sv, app, rep)
		switch {
		case err == errLeftOut:
		case err != nil:
			runs = append(runs, h.failAll(s, sv, app, conc, err.Error())...)
		default:
			up = append(up, c)
		}
	}
	// Warmed only once all are up, in the order they are loaded first.
	live := up[:0:0]
	for _, c := range up {
		if err := h.warm(s, c); err != nil {
			runs = append(runs, h.failAll(s, c.sv, app, conc, err.Error())...)
			continue
		}
		live = append(live, c)
	}
	for _, c := range live {
		h.memory(s, c, app, rep)
	}
	count := max(h.opt.rounds, 1)
	for _, conc := range conc {
		set := time.Now().UTC().Format(time.RFC3339Nano)
		h.logf("%s at %d: %d servers, %d rounds of %s each", app.Name, conc, len(live), count, h.opt.duration)
		tries := rounds(len(live), count, func(i, r int) Run {
			return h.loadOnce(s, live[i], app, conc, rep, fmt.Sprintf("round %d, ", r+1))
		})
		var measured []Run
		for i, c := range live {
			r := median(tries[i]) // with every round's rate in Rates
			r.Interleave = set
			h.judge(s, c.sv, app, conc, r)
			measured = append(measured, r)
		}
		ratios := roundRatios(measured, rep.Servers)
		for _, x := range ratios {
			h.logf("%s at %d: %s / %s, median of %d per-round ratios: %.3f", app.Name, conc, x.Server, x.Versus, len(x.Rounds), x.Median)
		}
		rep.Ratios = append(rep.Ratios, ratios...)
		runs = append(runs, measured...)
	}
	return runs
}

// describeRounds is the interleaved method in a sentence, for the report.
func describeRounds(count int) string {
	return fmt.Sprintf("All servers of an application started together, each checked and warmed, then idle until loaded; %d rounds, each loading every server in turn (the order rotating by one each round); a figure is the median over the rounds, a ratio the median of the ratios within each round.", count)
}
