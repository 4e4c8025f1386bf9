package m0

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Source says where a configuration value came from.
type Source string

const (
	FromFlag    Source = "flag"
	FromEnv     Source = "env"
	FromDefault Source = "default"
)

// Config is the resolved configuration of a server.
type Config struct {
	App             string // MODULE[:ATTR]; empty for none
	AppDir          string // prepended to sys.path
	Host            string
	Port            int
	BlockingThreads int    // Python threads; -1 means the default, min(cores, 8)
	Protocol        string // "", "wsgi" or "asgi"

	// Sources holds where each setting came from, by flag name.
	Sources map[string]Source
	// Notes are startup lines about variables that were ignored.
	Notes []string
}

// Threads returns the pool size the configuration resolves to, and whether
// it was chosen automatically.
func (c *Config) Threads() (n int, auto bool) {
	if c.BlockingThreads < 0 {
		return min(runtime.NumCPU(), 8), true
	}
	return c.BlockingThreads, false
}

// setting is one flag and its variable.
type setting struct {
	name  string // the flag, without dashes
	env   string // its M0_* variable, if it has one
	def   string
	usage string
	set   func(c *Config, v string) error
}

var settings = []setting{
	{"host", "M0_HOST", "0.0.0.0", "address to listen on (:: for IPv6 and IPv4)", func(c *Config, v string) error {
		h := strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
		if h != "" && net.ParseIP(h) == nil && h != "localhost" {
			return fmt.Errorf("not an IP address: %q", v)
		}
		c.Host = h
		return nil
	}},
	{"port", "M0_PORT", "8000", "TCP port to listen on, 1-65535", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not a port number: %q", v)
		}
		c.Port = n
		return nil
	}},
	{"blocking-threads", "M0_BLOCKING_THREADS", "auto", "Python threads running the application (0: one thread, no pool; auto: min(cores, 8))", func(c *Config, v string) error {
		if v == "auto" {
			c.BlockingThreads = -1
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("not a thread count: %q", v)
		}
		c.BlockingThreads = n
		return nil
	}},
	{"app-dir", "", ".", "directory prepended to sys.path", func(c *Config, v string) error {
		c.AppDir = v
		return nil
	}},
	{"protocol", "", "auto", "wsgi or asgi (auto: detected from the application)", func(c *Config, v string) error {
		switch v {
		case "auto":
			c.Protocol = ""
		case "wsgi", "asgi":
			c.Protocol = v
		default:
			return fmt.Errorf("want wsgi, asgi or auto, not %q", v)
		}
		return nil
	}},
}

// Parse reads the command line and the environment (getenv, usually
// os.Getenv) into a Config: a flag beats its variable, which beats the
// default. Flags are strict: a bad value is a UsageError. Variables are
// lenient: a bad value is replaced by the default and noted in Notes. A
// value that parses but cannot run is a Refusal.
func Parse(args []string, getenv func(string) string) (*Config, error) {
	c := &Config{Sources: map[string]Source{}}
	fs := flag.NewFlagSet("m0serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	given := map[string]string{}
	for _, s := range settings {
		fs.Func(s.name, s.usage, func(v string) error {
			probe := &Config{}
			if err := s.set(probe, v); err != nil {
				return err
			}
			given[s.name] = v
			return nil
		})
	}
	help := fs.Bool("help", false, "print this help")
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
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
	if len(positional) > 1 {
		return nil, &UsageError{Msg: fmt.Sprintf("one application expected, got %q (see m0serve --help)", positional)}
	}
	if len(positional) == 1 {
		c.App = positional[0]
	}
	for _, s := range settings {
		if v, ok := given[s.name]; ok {
			s.set(c, v)
			c.Sources[s.name] = FromFlag
			continue
		}
		if s.env != "" {
			if v := getenv(s.env); v != "" {
				if err := s.set(c, v); err == nil {
					c.Sources[s.name] = FromEnv
					continue
				} else {
					c.Notes = append(c.Notes, fmt.Sprintf("m0serve: ignored %s=%s (%v); using the default, %s", s.env, v, err, s.def))
				}
			}
		}
		s.set(c, s.def)
		c.Sources[s.name] = FromDefault
	}
	if c.Port < 1 || c.Port > 65535 {
		return c, &Refusal{
			Found: fmt.Sprintf("port %d is outside 1-65535", c.Port),
			Fix:   "pass --port or set M0_PORT to a port from 1 to 65535",
		}
	}
	return c, nil
}

var errHelp = &UsageError{Msg: "help requested"}

// IsHelp reports whether Parse stopped for --help.
func IsHelp(err error) bool { return err == errHelp }

// PrintHelp writes the usage text, naming each flag's variable.
func PrintHelp(w io.Writer) {
	fmt.Fprintln(w, "usage: m0serve [flags] MODULE[:ATTR]")
	fmt.Fprintln(w, "")
	fmt.Fprintln(w, "Serves a Python WSGI application. MODULE[:ATTR] names the callable (ATTR")
	fmt.Fprintln(w, "defaults to application); a bare MODULE tries MODULE.asgi:application,")
	fmt.Fprintln(w, "MODULE.wsgi:application, MODULE:app and MODULE.main:app, in that order.")
	fmt.Fprintln(w, "")
	for _, s := range settings {
		env := ""
		if s.env != "" {
			env = " [" + s.env + "]"
		}
		fmt.Fprintf(w, "  --%s VALUE%s\n        %s (default %s)\n", s.name, env, s.usage, s.def)
	}
	fmt.Fprintf(w, "\nThe libpython loaded is that of the python3 on PATH, or %s.\n", "M0_PYTHON_LIBRARY")
}

// Getenv is os.Getenv, for Parse.
var Getenv = os.Getenv
