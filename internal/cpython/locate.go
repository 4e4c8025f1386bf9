package cpython

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// LibraryEnv names the variable that points at a libpython outright.
// MojoLibraryEnv, the seed's name for it, is read too; LibraryEnv wins
// when both are set.
const (
	LibraryEnv     = "M0_PYTHON_LIBRARY"
	MojoLibraryEnv = "MOJO_PYTHON_LIBRARY"
)

// Interpreter describes the CPython the server loads, as its own python3
// reports it.
type Interpreter struct {
	Version     string   `json:"version"`       // "3.12.1"
	Executable  string   `json:"executable"`    // the real interpreter binary
	Library     string   `json:"library"`       // the libpython that is loaded
	Prefix      string   `json:"prefix"`        // sys.prefix: the virtualenv, if one is active
	BasePrefix  string   `json:"base_prefix"`   // sys.base_prefix
	SitePackage []string `json:"site_packages"` // site-packages directories to put on sys.path
	Shared      bool     `json:"shared"`        // Py_ENABLE_SHARED
	GILDisabled bool     `json:"gil_disabled"`  // a free-threaded build
	// LibraryFrom says how Library was chosen: "M0_PYTHON_LIBRARY" or
	// "MOJO_PYTHON_LIBRARY" when a variable named it, else "python3" (the
	// one the python3 on PATH reports).
	LibraryFrom string `json:"library_from"`
}

// Virtualenv returns the virtualenv's directory, or "" when none is active.
func (in Interpreter) Virtualenv() string {
	if in.Prefix != in.BasePrefix {
		return in.Prefix
	}
	return ""
}

// ErrNoLibrary is the sentinel of every failure to find a usable libpython.
var ErrNoLibrary = errors.New("cpython: no usable libpython")

// LibraryError says why no libpython could be used, and how to fix it.
type LibraryError struct {
	Found string // what was found
	Fix   string // what to do about it
}

func (e *LibraryError) Error() string { return e.Found + " (" + e.Fix + ")" }
func (e *LibraryError) Unwrap() error { return ErrNoLibrary }

const fixLibrary = "set " + LibraryEnv + " to the path of a shared libpython3.X" + libraryExt + " of CPython 3.10 or newer, or put such a python3 first on PATH"

// probe is what the interpreter prints about itself.
const probe = `import json, site, sys, sysconfig
v = sysconfig.get_config_var
print(json.dumps({
    "version": "%d.%d.%d" % sys.version_info[:3],
    "executable": sys.executable,
    "libdir": v("LIBDIR") or "",
    "ldlibrary": v("LDLIBRARY") or "",
    "instsoname": v("INSTSONAME") or "",
    "framework_prefix": (v("PYTHONFRAMEWORKPREFIX") or "") if v("PYTHONFRAMEWORK") else "",
    "abiflags": getattr(sys, "abiflags", ""),
    "shared": bool(v("Py_ENABLE_SHARED")),
    "gil_disabled": bool(v("Py_GIL_DISABLED")),
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "site_packages": site.getsitepackages() if hasattr(site, "getsitepackages") else [],
}))`

type probed struct {
	Version     string   `json:"version"`
	Executable  string   `json:"executable"`
	LibDir      string   `json:"libdir"`
	LDLibrary   string   `json:"ldlibrary"`
	InstSoname  string   `json:"instsoname"`
	Framework   string   `json:"framework_prefix"` // a macOS framework build's, where its library is
	ABIFlags    string   `json:"abiflags"`
	Shared      bool     `json:"shared"`
	GILDisabled bool     `json:"gil_disabled"`
	Prefix      string   `json:"prefix"`
	BasePrefix  string   `json:"base_prefix"`
	SitePackage []string `json:"site_packages"`
}

func ask(python string) (probed, error) {
	var p probed
	var stderr bytes.Buffer
	cmd := exec.Command(python, "-I", "-c", probe)
	cmd.Stderr = &stderr
	// -I: the answer must not depend on PYTHON* variables or the current
	// directory; a virtualenv is still found from the interpreter's path.
	out, err := cmd.Output()
	if err != nil {
		return p, fmt.Errorf("%s failed: %v %s", python, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return p, fmt.Errorf("%s printed something unexpected: %v", python, err)
	}
	return p, nil
}

// Locate finds the interpreter to load: the library M0_PYTHON_LIBRARY names,
// or the one python3 reports: the python3 beside the running binary (the
// wheel installs m0serve in a virtualenv's bin/, so venv/bin/m0serve runs
// on that virtualenv's interpreter, activated or not), else the first on
// PATH.
func Locate() (Interpreter, error) {
	from, explicit := LibraryEnv, os.Getenv(LibraryEnv)
	if explicit == "" {
		from, explicit = MojoLibraryEnv, os.Getenv(MojoLibraryEnv)
	}
	if explicit == "" {
		from = "python3"
	}
	in, err := locate(explicit, from)
	in.LibraryFrom = from
	return in, err
}

// Located is Locate's answer, asked once per process: what a check made
// before the interpreter starts (can its application run under several
// loops?) and the start itself agree on.
var Located = sync.OnceValues(Locate)

func locate(explicit, from string) (Interpreter, error) {
	python, lookErr := besidePython()
	if lookErr != nil {
		python, lookErr = exec.LookPath("python3")
	}
	if errors.Is(lookErr, exec.ErrDot) {
		// A relative PATH entry ("venv/bin"): the shell would run it too.
		python, lookErr = filepath.Abs(python)
	}
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return Interpreter{}, &LibraryError{
				Found: fmt.Sprintf("%s=%s does not exist", from, explicit),
				Fix:   fixLibrary,
			}
		}
		// The library's own interpreter knows its prefix; prefer it.
		if exe := siblingPython(explicit); exe != "" {
			python, lookErr = exe, nil
		}
	}
	if lookErr != nil {
		if explicit != "" {
			return Interpreter{Library: explicit}, nil
		}
		return Interpreter{}, &LibraryError{Found: "no python3 on PATH", Fix: fixLibrary}
	}
	p, err := ask(python)
	if err != nil {
		if explicit != "" {
			return Interpreter{Library: explicit}, nil
		}
		return Interpreter{}, &LibraryError{Found: err.Error(), Fix: fixLibrary}
	}
	in := Interpreter{
		Version:     p.Version,
		Executable:  p.Executable,
		Prefix:      p.Prefix,
		BasePrefix:  p.BasePrefix,
		SitePackage: p.SitePackage,
		Shared:      p.Shared,
		GILDisabled: p.GILDisabled,
	}
	if !versionAtLeast(p.Version, 3, 10) {
		return in, &LibraryError{
			Found: fmt.Sprintf("%s is Python %s, older than 3.10", p.Executable, p.Version),
			Fix:   fixLibrary,
		}
	}
	if explicit != "" {
		if v := libraryVersion(explicit); v != "" && !strings.HasPrefix(p.Version+".", v+".") {
			return in, &LibraryError{
				Found: fmt.Sprintf("%s=%s is Python %s, but the python3 that describes its paths (%s) is %s", from, explicit, v, p.Executable, p.Version),
				Fix:   fmt.Sprintf("put a python%s first on PATH, or point %s at the libpython of %s", v, from, p.Executable),
			}
		}
		if t := libraryFreeThreaded(explicit); t != p.GILDisabled && libraryVersion(explicit) != "" {
			return in, &LibraryError{
				Found: fmt.Sprintf("%s=%s is %s, but the python3 that describes its paths (%s) is %s", from, explicit, buildKind(t), p.Executable, buildKind(p.GILDisabled)),
				Fix:   fmt.Sprintf("put the python%s of that build first on PATH, or point %s at the libpython of %s", libraryTag(explicit), from, p.Executable),
			}
		}
		in.Library = explicit
		return in, nil
	}
	if !p.Shared && p.Framework == "" { // a framework build's library is shared
		return in, &LibraryError{
			Found: fmt.Sprintf("%s (Python %s) was built without a shared libpython", p.Executable, p.Version),
			Fix:   fixLibrary,
		}
	}
	for _, lib := range libraryPlaces(p) {
		if fileExists(lib) {
			in.Library = lib
			return in, nil
		}
	}
	found := fmt.Sprintf("%s reports its libpython at %s, which does not exist", p.Executable, filepath.Join(p.LibDir, p.LDLibrary))
	if p.InstSoname != "" && p.InstSoname != p.LDLibrary {
		found = fmt.Sprintf("%s reports its libpython at %s, and neither it nor %s exists", p.Executable,
			filepath.Join(p.LibDir, p.LDLibrary), p.InstSoname)
	}
	fix := fixLibrary
	if strings.HasPrefix(p.LibDir, "/usr/lib") {
		// A distribution's python3: its shared library is a package of its
		// own, which python3 does not depend on.
		fix = fmt.Sprintf("install the distribution's shared libpython: apt-get install libpython%s on Debian and Ubuntu; or %s",
			majorMinor(p.Version), fixLibrary)
	}
	return in, &LibraryError{Found: found, Fix: fix}
}

// libraryPlaces are where an interpreter's shared libpython may be, in
// order: its LIBDIR with the names it reports (libpython3.X.so,
// libpython3.X.dylib), then, on macOS, LIBDIR's libpython3.X.dylib, which
// a framework build links to its Python, and the framework's Python.
func libraryPlaces(p probed) []string {
	var out []string
	add := func(path string) {
		if !slices.Contains(out, path) {
			out = append(out, path)
		}
	}
	if p.Framework == "" {
		for _, name := range []string{p.LDLibrary, p.InstSoname} {
			if name != "" {
				add(filepath.Join(p.LibDir, name))
			}
		}
	}
	if p.Framework != "" || libraryExt == ".dylib" {
		add(filepath.Join(p.LibDir, "libpython"+majorMinor(p.Version)+p.ABIFlags+".dylib"))
	}
	// A framework build names its library beneath the frameworks' prefix.
	for _, name := range []string{p.LDLibrary, p.InstSoname} {
		if p.Framework != "" && name != "" {
			add(filepath.Join(p.Framework, name))
		}
	}
	return out
}

// libraryName finds where a libpython's name ends its version and ABI
// flags: the index of ".so" or ".dylib" in it, or -1.
func libraryName(v string) int {
	if i := strings.Index(v, ".so"); i >= 0 {
		return i
	}
	return strings.Index(v, ".dylib")
}

// majorMinor is "3.11" of "3.11.2".
func majorMinor(version string) string {
	parts := strings.SplitN(version, ".", 3)
	return strings.Join(parts[:min(2, len(parts))], ".")
}

// libraryVersion reads "3.11" from a name such as libpython3.11.so.1.0
// or libpython3.11.dylib, or returns "".
func libraryVersion(lib string) string {
	v := strings.TrimPrefix(filepath.Base(lib), "libpython")
	if i := libraryName(v); i > 0 {
		v = strings.TrimRight(v[:i], "dmut") // ABI flags: 3.13t, 3.7m
		if versionAtLeast(v, 3, 0) {
			return v
		}
	}
	return ""
}

// libraryTag reads "3.13t" from a name such as libpython3.13t.so.1.0:
// the version and its ABI flags.
func libraryTag(lib string) string {
	v := strings.TrimPrefix(filepath.Base(lib), "libpython")
	if i := libraryName(v); i > 0 {
		return v[:i]
	}
	return ""
}

// libraryFreeThreaded reports whether a libpython's name carries the
// free-threaded ABI flag (libpython3.13t.so).
func libraryFreeThreaded(lib string) bool {
	return strings.ContainsRune(strings.TrimLeft(libraryTag(lib), "0123456789."), 't')
}

// buildKind names a build as the refusals do.
func buildKind(freeThreaded bool) string {
	if freeThreaded {
		return "a free-threaded build"
	}
	return "a GIL build"
}

// siblingPython finds the interpreter installed beside a libpython
// (PREFIX/lib/libpython3.X.so and PREFIX/bin/python3.X).
func siblingPython(lib string) string {
	base := filepath.Base(lib)
	ver := strings.TrimPrefix(base, "libpython")
	if i := libraryName(ver); i >= 0 {
		ver = ver[:i]
	}
	bin := filepath.Join(filepath.Dir(filepath.Dir(lib)), "bin")
	for _, name := range []string{"python" + ver, "python3"} {
		if exe := filepath.Join(bin, name); fileExists(exe) {
			return exe
		}
	}
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func versionAtLeast(v string, major, minor int) bool {
	var a, b int
	if _, err := fmt.Sscanf(v, "%d.%d", &a, &b); err != nil {
		return false
	}
	return a > major || (a == major && b >= minor)
}

// AtLeast reports whether the interpreter is CPython major.minor or newer.
func (in Interpreter) AtLeast(major, minor int) bool { return versionAtLeast(in.Version, major, minor) }

// OwnGILInterpreters reports whether StartInterpreters serves from
// subinterpreters with a GIL of their own on this interpreter: CPython
// 3.13 or newer, a GIL build. 3.12 makes them, but its subinterpreters
// abort the process when two import the same module at once (importlib.
// metadata, 3.12.1: four runs in four) and refuse _datetime, so Django's
// zoneinfo fails there.
func (in Interpreter) OwnGILInterpreters() bool { return in.AtLeast(3, 13) && !in.GILDisabled }

// WhyNoInterpreters says why OwnGILInterpreters is false, "" when it is
// true.
func (in Interpreter) WhyNoInterpreters() string {
	switch {
	case in.GILDisabled:
		return fmt.Sprintf("%s (Python %s) is a free-threaded build, whose threads run at once in one interpreter already", in.Executable, in.Version)
	case !in.AtLeast(3, 12):
		return fmt.Sprintf("%s is Python %s; subinterpreters with their own GIL came in 3.12, and m0serve runs them on 3.13 and newer", in.Executable, in.Version)
	case !in.AtLeast(3, 13):
		return fmt.Sprintf("%s is Python %s; m0serve runs subinterpreters on 3.13 and newer: 3.12's abort the process when two import the same module at once, and refuse _datetime (Django's zoneinfo)", in.Executable, in.Version)
	}
	return ""
}

// besidePython is the python3 of the virtualenv the running binary is
// installed in: the directory of the binary (symlinks followed: a link in
// /usr/local/bin to venv/bin/m0serve is the virtualenv's), when its parent
// holds a pyvenv.cfg. The python3 there is run by that path (a link to the
// interpreter the virtualenv was made from; run through the link, it is
// the virtualenv's).
func besidePython() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", err
	}
	bin := filepath.Dir(exe)
	if _, err := os.Stat(filepath.Join(bin, "..", "pyvenv.cfg")); err != nil {
		return "", err // not in a virtualenv: the python3 on PATH
	}
	python := filepath.Join(bin, "python3")
	fi, err := os.Stat(python)
	if err != nil {
		return "", err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", os.ErrNotExist
	}
	return python, nil
}
