package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestRoundOrder(t *testing.T) {
	t.Parallel()
	want := [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}}
	for r, w := range want {
		if got := roundOrder(3, r); !slices.Equal(got, w) {
			t.Errorf("roundOrder(3, %d) = %v, want %v", r, got, w)
		}
	}
	// Over n rounds each server goes first once and last once.
	for _, n := range []int{1, 2, 5, 6} {
		first, last := map[int]int{}, map[int]int{}
		for r := range n {
			o := roundOrder(n, r)
			first[o[0]]++
			last[o[n-1]]++
			s := slices.Clone(o)
			slices.Sort(s)
			for i := range s {
				if s[i] != i {
					t.Fatalf("roundOrder(%d, %d) = %v: not every server once", n, r, o)
				}
			}
		}
		for i := range n {
			if first[i] != 1 || last[i] != 1 {
				t.Errorf("n %d: server %d first %d times, last %d times over %d rounds", n, i, first[i], last[i], n)
			}
		}
	}
}

// rounds loads every server once a round in the rotating order, and never
// again a server whose load failed.
func TestRounds(t *testing.T) {
	t.Parallel()
	var order []string
	got := rounds(3, 3, func(i, r int) Run {
		order = append(order, fmt.Sprintf("%d.%d", r, i))
		run := Run{RPS: float64(10*i + r)}
		if i == 1 && r == 1 {
			run.Failed = "exited"
		}
		return run
	})
	if want := "0.0 0.1 0.2 1.1 1.2 1.0 2.2 2.0"; strings.Join(order, " ") != want {
		t.Errorf("order %s, want %s", strings.Join(order, " "), want)
	}
	if len(got) != 3 || len(got[0]) != 3 || len(got[1]) != 2 || len(got[2]) != 3 {
		t.Fatalf("loads per server: %d %d %d", len(got[0]), len(got[1]), len(got[2]))
	}
	for r, run := range got[2] {
		if run.RPS != float64(20+r) {
			t.Errorf("server 2's loads out of round order: %+v", got[2])
		}
	}
	if m := median(got[1]); m.Failed != "exited" {
		t.Errorf("a failed round must fail the figure: %+v", m)
	}
}

func TestMedianOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1.2, 0.8, 5, 1.1, 0.9}, 1.1},
	} {
		in := slices.Clone(c.in)
		if got := medianOf(in); !near(got, c.want) {
			t.Errorf("medianOf(%v) = %v, want %v", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("medianOf sorted its argument: %v", in)
		}
	}
}

func TestCPUPerRequest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cpu  float64
		reqs int64
		want float64
	}{
		{2.5, 50000, 50},
		{1, 1, 1e6},
		{0.01, 400, 25},
		{3, 0, 0},
		{-1, 10, 0},
	} {
		if got := cpuPerRequest(c.cpu, c.reqs); !near(got, c.want) {
			t.Errorf("cpuPerRequest(%v, %d) = %v, want %v", c.cpu, c.reqs, got, c.want)
		}
	}
	// A run's CPU per request is the median over its tries (200 µs), not
	// the median-rate try's (300 µs).
	m := median([]Run{
		{RPS: 1000, Requests: 10000, CPUSeconds: 1},
		{RPS: 2000, Requests: 10000, CPUSeconds: 3},
		{RPS: 3000, Requests: 10000, CPUSeconds: 2},
	})
	if m.RPS != 2000 || !near(m.CPUusPerReq, 200) || !slices.Equal(m.CPUPerReq, []float64{100, 300, 200}) {
		t.Fatalf("median: %+v", m)
	}
	if got := m.CPUPerRequest(); !near(got, 200) {
		t.Errorf("CPUPerRequest = %v", got)
	}
	if got := (Run{Requests: 400000, CPUSeconds: 10}).CPUPerRequest(); !near(got, 25) {
		t.Errorf("an older run's CPU per request: %v", got)
	}
}

// The machine slows down over the rounds: the ratio of the two medians
// (210 / 100) says 2.1, the rounds say 1.82, 2.10, 1.93.
func TestRoundRatio(t *testing.T) {
	t.Parallel()
	a := Run{Interleave: "s", RPS: 210, Rates: []float64{100, 210, 290}}
	b := Run{Interleave: "s", RPS: 100, Rates: []float64{55, 100, 150}}
	m, each, ok := roundRatio(a, b)
	if !ok || !near(m, 290.0/150) || len(each) != 3 || !near(each[0], 100.0/55) {
		t.Fatalf("roundRatio = %v, %v, %v", m, each, ok)
	}
	if v, perRound := ratio(a, b); !perRound || !near(v, 290.0/150) {
		t.Errorf("ratio = %v, %v", v, perRound)
	}
	one := Run{Interleave: "q", RPS: 30}
	if m, _, ok := roundRatio(one, Run{Interleave: "q", RPS: 20}); !ok || !near(m, 1.5) {
		t.Errorf("one round: %v, %v", m, ok)
	}
	for name, bb := range map[string]Run{
		"another set":    {Interleave: "t", RPS: 100, Rates: b.Rates},
		"sequential":     {RPS: 100, Rates: b.Rates},
		"failed":         {Interleave: "s", Failed: "x"},
		"fewer rounds":   {Interleave: "s", RPS: 100, Rates: b.Rates[:2]},
		"a round at 0/s": {Interleave: "s", RPS: 100, Rates: []float64{55, 0, 150}},
	} {
		if _, _, ok := roundRatio(a, bb); ok {
			t.Errorf("%s: a per-round ratio", name)
		}
		if v, perRound := ratio(a, bb); name != "failed" && (perRound || !near(v, 2.1)) {
			t.Errorf("%s: ratio = %v, %v, want the ratio of rates", name, v, perRound)
		}
	}
}

func TestRoundRatios(t *testing.T) {
	t.Parallel()
	servers := []ServerInfo{{Key: "m0"}, {Key: "p", Peer: true}, {Key: "b", Base: true}, {Key: "m1"}, {Key: "other", Peer: true, Group: "2"}}
	run := func(server string, rates ...float64) Run {
		return Run{App: "hello", Concurrency: 64, Server: server, Interleave: "s", RPS: medianOf(rates), Rates: rates}
	}
	runs := []Run{run("m0", 100, 90, 120), run("p", 50, 60, 40), run("b", 100, 100, 100), run("m1", 10, 10, 10), run("other", 1, 1, 1)}
	got := roundRatios(runs, servers)
	var pairs []string
	for _, x := range got {
		pairs = append(pairs, fmt.Sprintf("%s/%s %.2f", x.Server, x.Versus, x.Median))
		if x.App != "hello" || x.Concurrency != 64 || len(x.Rounds) != 3 {
			t.Errorf("ratio %+v", x)
		}
	}
	// m0 / p: 2.00, 1.50, 3.00; m0 / b: 1.00, 0.90, 1.20. m0's rows are not
	// compared with each other, nor across groups.
	if want := "m0/p 2.00 m0/b 1.00 m1/p 0.20 m1/b 0.10"; strings.Join(pairs, " ") != want {
		t.Errorf("ratios %s, want %s", strings.Join(pairs, " "), want)
	}
}

// An interleaved suite's page: the ratio per round beside the ratio of
// rates, CPU per request, and the targets judged per round.
func TestRenderInterleaved(t *testing.T) {
	t.Parallel()
	reps := fixtureReports()[:1]
	w := reps[0]
	w.Method.Rounds = 3
	w.Runs = []Run{
		{App: "hello", Server: "m0serve", Concurrency: 64, Interleave: "s", RPS: 60000, Rates: []float64{60000, 40000, 66000}, Requests: 600000, P99ms: 3,
			CPUSeconds: 10, CPUusPerReq: 15.25},
		{App: "hello", Server: "granian", Concurrency: 64, Interleave: "s", RPS: 50000, Rates: []float64{50000, 20000, 60000}, Requests: 500000, P99ms: 2,
			CPUSeconds: 10, CPUusPerReq: 21},
		// Merged from another run: not in the same rounds.
		{App: "hello", Server: "uwsgi", Concurrency: 64, Interleave: "t", RPS: 10000, Rates: []float64{10000, 10000, 10000}, Requests: 50000, P99ms: 9},
	}
	page, _ := render(reps, "r", "")
	pageHas(t, page,
		// Per round: 1.20, 2.00, 1.10: median 1.20; of rates 1.20 too.
		"| WSGI | hello | 64 | m0serve | 60,000 | granian | 50,000 | **1.20x** | 1.20x | 3.00 | 2.00 | 15.2 | 21.0 |",
		"| connections | server | req/s | vs best peer (per round) |",
		"| 64 | **m0serve** | 60,000 (40,000-66,000) | 1.20x |",
		"| 64 | uWSGI | 10,000 (10,000-10,000) | 0.20x (of rates) |",
		"| WSGI | hello | m0serve at least 1.10x granian at 64 connections | 1.20x per round (medians 60,000 / 50,000) | met",
		"- **Interleaved rounds**:",
		"in each of 3 rounds",
	)
	// The machine slowed in the second round: per round m0 is ahead at the
	// median, though its median rate is below granian's.
	w.Runs[0].RPS, w.Runs[0].Rates = 45000, []float64{55000, 45000, 33000}
	w.Runs[1].RPS, w.Runs[1].Rates = 50000, []float64{50000, 30000, 60000}
	page, _ = render(reps, "r", "")
	// 1.10, 1.50, 0.55: median 1.10.
	if want := "| WSGI | hello | 64 | m0serve | 45,000 | granian | 50,000 | **1.10x** | 0.90x |"; !strings.Contains(page, want) {
		t.Errorf("the page lacks %q", want)
	}
	if strings.Contains(page, "0.90x its best peer") {
		t.Errorf("a loss by the ratio of rates where the rounds say otherwise")
	}
}

func TestCommands(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want []string
	}{
		{[]string{"/bin/m0serve", "app"}, []string{"/bin/m0serve"}},
		{[]string{"/bin/embed", "-proxy", "--", "/venv/bin/granian", "--port", "@port"}, []string{"/bin/embed", "/venv/bin/granian"}},
		{[]string{"/bin/embed", "-proxy", "--"}, []string{"/bin/embed", ""}},
		{nil, []string{""}},
	} {
		if got := commands(c.argv); !slices.Equal(got, c.want) {
			t.Errorf("commands(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}
