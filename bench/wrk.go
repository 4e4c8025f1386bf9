package main

// wrk: its command line and what its output says.

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// wrkArgs is the command line of one measured wrk run.
func wrkArgs(threads, conns int, seconds, timeout float64, url string) []string {
	if threads > conns {
		threads = conns
	}
	return []string{"wrk", "-t" + strconv.Itoa(threads), "-c" + strconv.Itoa(conns),
		"-d" + secondsArg(seconds), "--timeout", secondsArg(timeout), "--latency", url}
}

// secondsArg is a duration as wrk reads it: whole seconds, at least 1.
func secondsArg(s float64) string {
	n := int(s + 0.5)
	if n < 1 {
		n = 1
	}
	return strconv.Itoa(n) + "s"
}

// parseWrk reads wrk --latency output into a Run's figures: the rate and
// the request count are of the answers wrk did not count as non-2xx (a
// server answering 500 fast is not fast). It fails when
// the output has no request rate or no latency distribution (wrk did not
// finish, or the flags were not ours).
func parseWrk(out string, r *Run) error {
	var haveRPS, haveDist bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Requests/sec:") && len(f) == 2:
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return fmt.Errorf("wrk: %q: %w", line, err)
			}
			r.RPS, haveRPS = v, true
		case strings.HasPrefix(line, "Transfer/sec:") && len(f) == 2:
			v, err := parseBytes(f[1])
			if err != nil {
				return fmt.Errorf("wrk: %q: %w", line, err)
			}
			r.TransferMiB = v / (1 << 20)
		case len(f) == 2 && strings.HasSuffix(f[0], "%") && f[0] != "%":
			ms, err := parseWrkDuration(f[1])
			if err != nil {
				continue // a Stdev column line such as "+/- Stdev" never has two fields
			}
			switch f[0] {
			case "50%":
				r.P50ms, haveDist = ms, true
			case "90%":
				r.P90ms = ms
			case "99%":
				r.P99ms = ms
			}
		case f != nil && f[0] == "Latency" && len(f) >= 4:
			if ms, err := parseWrkDuration(f[3]); err == nil {
				r.Maxms = ms
			}
		case len(f) >= 5 && f[1] == "requests" && f[2] == "in":
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return fmt.Errorf("wrk: %q: %w", line, err)
			}
			r.Requests = n
		case strings.HasPrefix(line, "Socket errors:"):
			// Socket errors: connect 0, read 0, write 0, timeout 12
			for _, part := range strings.Split(strings.TrimPrefix(line, "Socket errors:"), ",") {
				kv := strings.Fields(part)
				if len(kv) != 2 {
					return fmt.Errorf("wrk: %q: unexpected socket errors", line)
				}
				n, err := strconv.ParseInt(kv[1], 10, 64)
				if err != nil {
					return fmt.Errorf("wrk: %q: %w", line, err)
				}
				switch kv[0] {
				case "connect":
					r.Errors.Connect = n
				case "read":
					r.Errors.Read = n
				case "write":
					r.Errors.Write = n
				case "timeout":
					r.Errors.Timeout = n
				}
			}
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
			if err != nil {
				return fmt.Errorf("wrk: %q: %w", line, err)
			}
			r.Errors.Status = n
		}
	}
	if !haveRPS {
		return fmt.Errorf("wrk: no Requests/sec in its output")
	}
	if !haveDist {
		return fmt.Errorf("wrk: no latency distribution in its output (run with --latency)")
	}
	// wrk's rate counts every answer; the page's counts the right ones.
	if r.Errors.Status > 0 && r.Requests > 0 {
		good := max(r.Requests-r.Errors.Status, 0)
		r.RPS *= float64(good) / float64(r.Requests)
		r.Requests = good
	}
	return nil
}

// parseWrkDuration reads wrk's durations (812.00us, 1.23ms, 2.00s, 1.00m)
// as milliseconds.
func parseWrkDuration(s string) (float64, error) {
	units := []struct {
		suffix string
		ms     float64
	}{{"us", 0.001}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, err
			}
			return v * u.ms, nil
		}
	}
	return 0, fmt.Errorf("not a wrk duration: %q", s)
}

// parseBytes reads wrk's sizes (512.00B, 6.12KB, 1.50MB, 1.02GB: powers of
// 1024) as bytes.
func parseBytes(s string) (float64, error) {
	units := []struct {
		suffix string
		n      float64
	}{{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, err
			}
			return v * u.n, nil
		}
	}
	return 0, fmt.Errorf("not a wrk size: %q", s)
}
