package host

import (
	"os"
	"path/filepath"
	"testing"
)

// TestQuotaOf reads cgroup v2's cpu.max and v1's quota and period as the
// CPUs they allow, unrounded, and no limit as 0.
func TestQuotaOf(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name         string
		file, period string
		want         float64
	}{
		{"v2, a limit", file("a", "150000 100000\n"), "", 1.5},
		{"v2, none", file("b", "max 100000\n"), "", 0},
		{"v1, a limit", file("c", "50000\n"), file("cp", "100000\n"), 0.5},
		{"v1, none", file("d", "-1\n"), file("dp", "100000\n"), 0},
		{"no file", filepath.Join(dir, "absent"), "", 0},
		{"not numbers", file("e", "x y\n"), "", 0},
	} {
		if got := quotaOf(c.file, c.period); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if q := cpuLimit(); q < 0 {
		t.Errorf("cpuLimit %v", q)
	}
}
