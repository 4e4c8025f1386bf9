package m0_test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/m0serve/m0"

// floor is the floor of the layout a package of the module stands on
// (shared/DESIGN.md, docs/architecture.md): 1 the substrate under
// internal/, 2 the public handlers, 3 the host, 4 the command. bench,
// examples and tests are programs above them all.
func floor(pkg string) int {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	switch {
	case strings.HasPrefix(rel, "internal/"):
		return 1
	case rel == "host":
		return 3
	case strings.HasPrefix(rel, "cmd/"):
		return 4
	case rel == "bench", strings.HasPrefix(rel, "bench/"), strings.HasPrefix(rel, "examples/"), strings.HasPrefix(rel, "tests/"), strings.HasPrefix(rel, "scripts/"):
		return 5
	}
	return 2
}

// TestLayersImportDownward: no package imports one of a floor above its
// own, and nothing under internal/ imports a public package of the module.
func TestLayersImportDownward(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	cmd := exec.Command(goTool, "list", "-json", "./...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			from, to := floor(p.ImportPath), floor(imp)
			if to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d)", p.ImportPath, from, imp, to)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list listed %d packages", n)
	}
}

// TestEmbeddingLinksNoHost: a program that imports the embedding API (m0,
// wsgi, asgi, static) links neither Prometheus nor the host; metrics is the
// package that brings Prometheus.
func TestEmbeddingLinksNoHost(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".", "./wsgi", "./asgi", "./static").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		for _, banned := range []string{"github.com/prometheus/", module + "/host", module + "/internal/pid1", module + "/cmd/", module + "/metrics"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the embedding API links %s", d)
			}
		}
	}
	out, err = exec.Command(goTool, "list", "-deps", "./metrics").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "github.com/prometheus/client_golang/prometheus\n") {
		t.Errorf("metrics does not link Prometheus (so this test's check means nothing): %v", err)
	}
}

// TestMiddlewareBuildsWithoutCgo: the middleware and the metrics, which a
// Go program puts around handlers of its own, need no C toolchain.
func TestMiddlewareBuildsWithoutCgo(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	cmd := exec.Command(goTool, "build", "-o", os.DevNull, "./middleware", "./metrics", "./static", "./realtime", "./prefork")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	// The check can fail: a package that imports "C" does not build so.
	cmd = exec.Command(goTool, "build", "-o", os.DevNull, "./internal/cpython")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := cmd.Run(); err == nil {
		t.Errorf("internal/cpython built without cgo: this test's check means nothing")
	}
}
