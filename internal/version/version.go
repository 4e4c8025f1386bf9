// Package version is m0's release number, the one copy: the wheel's
// version is read from this file (pyproject.toml's hatch version source),
// and `m0serve --version` and the doctor print it beside the commit the
// binary was built from.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Number is the release, as the wheel and the Python package carry it.
const Number = "0.1.0"

// Distribution is the name the wheel is published under on PyPI. The
// command and the import package are both m0serve; the PyPI project named
// m0serve is another implementation of the same design.
const Distribution = "m0serve-go"

// commit is set at link time by the wheel's build (-ldflags -X), where
// the source may not be a git checkout (an sdist).
var commit string

// Commit is the commit the binary was built from: the one the build
// named, else the one Go stamped from the checkout (with "-dirty" for
// uncommitted changes), else the one a `go install ...@COMMIT`
// pseudo-version names, else "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	// v0.0.0-20261204133320-3e5f51c0a1b2: the commit is its last part.
	if v := info.Main.Version; strings.Count(v, "-") >= 2 {
		if rev := v[strings.LastIndex(v, "-")+1:]; len(rev) == 12 && strings.Trim(rev, "0123456789abcdef") == "" {
			return rev
		}
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return rev
}

// Platform is the binary's GOOS/GOARCH.
func Platform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// Line is what `m0serve --version` prints.
func Line() string {
	return "m0serve " + Number + " (" + Distribution + ", commit " + Commit() + ", " + runtime.Version() + ", " + Platform() + ")"
}

// Build is the doctor's "build" object.
func Build() map[string]string {
	return map[string]string{"version": Number, "distribution": Distribution, "commit": Commit(),
		"go": runtime.Version(), "platform": Platform()}
}
