package host

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/m0serve/m0/realtime/pgbus"
)

// parseSize reads a size in bytes: a whole number, optionally followed by
// k, m or g (powers of 1024).
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	shift := 0
	switch {
	case strings.HasSuffix(t, "k"):
		shift = 10
	case strings.HasSuffix(t, "m"):
		shift = 20
	case strings.HasSuffix(t, "g"):
		shift = 30
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || t == "" || t[0] == '+' || n > (1<<62)>>shift {
		return 0, fmt.Errorf("not a size such as 512k, 4m or 1g: %q", s)
	}
	return n << shift, nil
}

// parseDuration reads a duration: a number of seconds ("30", "0.5"), or
// a Go duration with its unit ("500ms", "2m").
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(t, 64); err == nil && t != "" && t[0] != '+' {
		if f < 0 || f > 1e9 || f != f {
			return 0, fmt.Errorf("not a number of seconds from 0: %q", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < 0 || strings.ContainsAny(t, "+") {
		return 0, fmt.Errorf("not a number of seconds such as 30: %q", s)
	}
	return d, nil
}

// Parse reads the command line and the environment (getenv, usually
// os.Getenv) into a Config: a flag beats its variable, which beats the
// default. Flags are strict: a bad value is a *UsageError. Variables are
// lenient: a bad value is replaced by the default and noted in Notes.
// Whether the result can run is for Checks to say.
func Parse(args []string, getenv func(string) string) (*Config, error) {
	c := &Config{Sources: map[string]Source{}, Values: map[string]string{}, Env: map[string]string{}}
	for _, e := range flaglessEnv {
		v := getenv(e.name)
		if v != "" {
			c.Env[e.name] = v
		}
		if e.set == nil {
			continue
		}
		if v != "" {
			if err := e.set(c, v); err == nil {
				continue
			} else {
				using := "using the default, " + e.def
				if e.def == "" {
					using = "leaving it unset"
				}
				c.Notes = append(c.Notes, fmt.Sprintf("m0serve: ignored %s=%s (%v); %s", e.name, v, err, using))
			}
		}
		e.set(c, e.def)
	}
	fs := flag.NewFlagSet("m0serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	given := map[string][]string{}
	for _, s := range settings {
		s := s
		parse := func(v string) error {
			if err := s.set(&Config{}, v); err != nil {
				return err
			}
			given[s.name] = append(given[s.name], v)
			return nil
		}
		if s.arg == "" {
			fs.BoolFunc(s.name, s.usage, func(v string) error { return parse(v) })
		} else {
			fs.Func(s.name, s.usage, parse)
		}
	}
	help := fs.Bool("help", false, "print this help")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.BoolVar(showVersion, "V", false, "print the version and exit")
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, errHelp
			}
			return nil, &UsageError{Msg: err.Error() + " (see m0serve --help)"}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *help {
		return nil, errHelp
	}
	if *showVersion {
		return nil, errVersion
	}
	if len(positional) > 1 {
		return nil, &UsageError{Msg: fmt.Sprintf("one application expected, got %q (see m0serve --help)", positional)}
	}
	if len(positional) == 1 {
		c.App = positional[0]
	}
	for _, s := range settings {
		if vs, ok := given[s.name]; ok {
			for _, v := range vs {
				s.set(c, v)
			}
			value := vs[len(vs)-1] // a repeated flag: the last one counts
			if s.multi {
				value = strings.Join(vs, ", ")
			}
			c.Sources[s.name], c.Values[s.name] = FromFlag, redact(s.name, value)
			continue
		}
		if s.env != "" {
			if v := getenv(s.env); v != "" {
				if err := s.set(c, v); err == nil {
					c.Sources[s.name], c.Values[s.name] = FromEnv, redact(s.name, v)
					continue
				} else {
					c.Notes = append(c.Notes, fmt.Sprintf("m0serve: ignored %s=%s (%v); using the default, %s", s.env, redact(s.name, v), err, orNone(s.def)))
				}
			}
		}
		if s.def != "" {
			s.set(c, s.def)
		}
		c.Sources[s.name], c.Values[s.name] = FromDefault, s.def
	}
	return c, nil
}

// redact hides the password of --pg-listen's DSN (pgbus.Redact).
func redact(name, v string) string {
	if name != "pg-listen" || v == "" {
		return v
	}
	return pgbus.Redact(v)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

var (
	errHelp    = &UsageError{Msg: "help requested"}
	errVersion = &UsageError{Msg: "version requested"}
)

// isHelp reports whether Parse stopped for --help.
func isHelp(err error) bool { return err == errHelp }

// isVersion reports whether Parse stopped for --version or -V.
func isVersion(err error) bool { return err == errVersion }
