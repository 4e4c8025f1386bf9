package main

// The fan-out suite: bench/holds starts each server, holds the streams,
// publishes and measures; the harness runs it pinned to the client CPU
// and reads the JSON it reports.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/m0serve/m0/bench/internal/fanout"
)

// parseHolds reads the results in bench/holds's report (the lines of its
// json block).
func parseHolds(out string) ([]fanout.Result, error) {
	var rs []fanout.Result
	in := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```json":
			in = true
		case line == "```":
			in = false
		case in && strings.TrimSpace(line) != "":
			var r fanout.Result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return nil, fmt.Errorf("holds: %q: %w", line, err)
			}
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("holds: no results in its report")
	}
	return rs, nil
}

// fanoutRun is a holds result as a Run: deliveries per second over the
// measured window; its RSS is the streams' held before the publishing and
// at its end.
func fanoutRun(hr fanout.Result, duration time.Duration) Run {
	r := Run{
		Concurrency: hr.Streams, Requests: hr.Received, RPS: float64(hr.Received) / duration.Seconds(),
		P50ms: hr.P50ms, P99ms: hr.P99ms, Maxms: hr.Maxms,
		CPUSeconds:  hr.CPUPercent / 100 * duration.Seconds(),
		RSSBeforeKB: hr.RSSHeldKiB, RSSPeakKB: hr.RSSLoadKiB,
		Lost: hr.Expected - hr.Received,
	}
	r.Errors.Write = hr.PublishErrors
	r.Errors.Read = hr.Ended
	return r
}

func (h *harness) runHolds(s Suite, rep *Report) {
	rate := s.Rate
	warmup := 3 * time.Second
	if h.opt.quick {
		rate, warmup = 100, time.Second
	}
	for _, sv := range s.Servers {
		if !h.selected(sv.Key) {
			continue
		}
		if sv.Key == "centrifugo" {
			if _, err := os.Stat(filepath.Join(h.bin, "centrifugo")); err != nil {
				rep.Notes = append(rep.Notes, "Centrifugo left out: bench/.bin/centrifugo is not built (the full run builds it).")
				continue
			}
		}
		for _, streams := range h.concurrencies(s) {
			argv := []string{filepath.Join(h.bin, "holds"), "-servers", sv.Key,
				"-m0serve", filepath.Join(h.bin, "m0serve"), "-centrifugo", filepath.Join(h.bin, "centrifugo"),
				"-app-dir", filepath.Join(h.bench, "apps"), "-streams", strconv.Itoa(streams), "-channels", strconv.Itoa(min(100, streams)),
				"-rate", strconv.Itoa(rate), "-warmup", warmup.String(), "-duration", h.opt.duration.String(),
				"-server-cpu", h.serverCPU, "-workdir", filepath.Join(h.work, "holds-"+sv.Key)}
			if h.clientCPU != "" {
				argv = append([]string{"taskset", "-c", h.clientCPU}, argv...)
			}
			if busy := h.quiet(s); busy != "" {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s at %d streams: %s just before the run; treat it as noisy.", sv.Label, streams, busy))
			}
			h.logf("fanout / %s: %d streams, %d frames/s", sv.Label, streams, rate)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+warmup+h.opt.duration)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, os.Stderr
			err := cmd.Run()
			cancel()
			run := Run{App: "fanout", Server: sv.Key, Concurrency: streams}
			if err == nil {
				var hrs []fanout.Result
				if hrs, err = parseHolds(out.String()); err == nil {
					run = fanoutRun(hrs[0], h.opt.duration)
					run.App, run.Server = "fanout", sv.Key
					m := fanoutMemory(hrs[0])
					m.App, m.Server = "fanout", sv.Key
					rep.Memory = append(rep.Memory, m)
					run.Command = h.holdsCommand(hrs[0].Command)
				}
			}
			if err != nil {
				run.Failed = err.Error()
				h.warnf("fanout / %s: %v", sv.Label, err)
			} else {
				h.logf("fanout / %s at %d: %.0f deliveries/s, p50 %.2f ms, p99 %.2f ms, lost %d",
					sv.Label, streams, run.RPS, run.P50ms, run.P99ms, run.Lost)
			}
			if (h.opt.quick && (run.Lost != 0 || run.Requests == 0)) || (run.Failed != "" && (h.opt.quick || !sv.Peer)) {
				h.failures = append(h.failures, fmt.Sprintf("fanout: %s at %d streams: failed %q, lost %d, %d received", sv.Label, streams, run.Failed, run.Lost, run.Requests))
			}
			rep.Runs = append(rep.Runs, run)
		}
	}
}

// holdsCommand is the server's command line as holds reports it, as the
// page prints it.
func (h *harness) holdsCommand(c string) string {
	f := strings.Fields(c)
	for i := range f {
		if f[i] == "--port" && i+1 < len(f) {
			f[i+1] = "$PORT"
		}
		if strings.HasPrefix(f[i], h.work) {
			f[i] = "$TMP" + strings.TrimPrefix(f[i], h.work)
		}
		f[i] = strings.ReplaceAll(f[i], h.repo+"/", "")
	}
	return strings.Join(f, " ")
}

// fanoutMemory is a holds result's memory per held stream, read by holds
// settled before and after the streams were opened.
func fanoutMemory(hr fanout.Result) Memory {
	per := hr.PerStreamKiB
	return Memory{Conns: hr.Streams, Open: hr.Streams - int(hr.Ended), RSSIdleKiB: hr.RSSIdleKiB, RSSHeldKiB: hr.RSSHeldKiB, PerConnKiB: &per}
}
