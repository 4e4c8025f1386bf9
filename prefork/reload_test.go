package prefork

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatch: a .py written, or a new directory with one, is reported once
// quiet; other files, caches and virtualenvs are not watched.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	for _, d := range []string{"pkg", "__pycache__", "venv/lib"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), nil, 0o644)
	w, err := Watch([]string{dir}, 200*time.Millisecond) // wide: a loaded machine spreads a burst
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer w.Close() // twice is fine
	write := func(rel string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, rel), []byte("x = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := func(name string) {
		t.Helper()
		select {
		case got := <-w.Changes():
			if got != filepath.Join(dir, name) {
				t.Fatalf("changed %q, want %q", got, name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no change reported for %s", name)
		}
	}
	// Ignored first, then one that counts: the report names the latter.
	write("notes.txt")
	write("__pycache__/mod.py")
	write("venv/lib/site.py")
	write("pkg/views.py")
	want("pkg/views.py")
	// A burst is one report.
	write("a.py")
	write("b.py")
	want("b.py")
	select {
	case got := <-w.Changes():
		t.Fatalf("a second report for one burst: %q", got)
	case <-time.After(400 * time.Millisecond):
	}
	// A directory made with a module already in it.
	tmp := filepath.Join(t.TempDir(), "app")
	os.MkdirAll(tmp, 0o755)
	os.WriteFile(filepath.Join(tmp, "m.py"), nil, 0o644)
	if err := os.Rename(tmp, filepath.Join(dir, "app")); err != nil {
		t.Fatal(err)
	}
	want("app")
	if _, err := Watch([]string{filepath.Join(dir, "missing")}, time.Millisecond); err == nil {
		t.Fatal("a directory that does not exist was watched")
	}
}
