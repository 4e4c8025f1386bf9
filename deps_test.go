package m0_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEmbeddingLinksNoHost: a program that imports the embedding API (m0,
// wsgi, asgi, static) links neither Prometheus nor the command's host
// code; metrics is the package that brings Prometheus.
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
		for _, banned := range []string{"github.com/prometheus/", "/internal/host", "/internal/pid1", "/internal/pyapp", "github.com/m0serve/m0/metrics"} {
			if strings.Contains(d, banned) {
				t.Errorf("the embedding API links %s", d)
			}
		}
	}
	out, err = exec.Command(goTool, "list", "-deps", "./metrics").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "github.com/prometheus/client_golang/prometheus\n") {
		t.Errorf("metrics does not link Prometheus (so this test's check means nothing): %v", err)
	}
}
