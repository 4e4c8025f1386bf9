package asgi_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
)

// runFreeThreaded runs, on a free-threaded build, the one test that holds
// there: the package refuses it.
func runFreeThreaded(m *testing.M) int {
	fmt.Fprintln(os.Stderr, "asgi: a free-threaded CPython: only TestRefusesAFreeThreadedBuild runs (the executor needs a GIL build)")
	flag.Parse()
	flag.Set("test.run", "^TestRefusesAFreeThreadedBuild$")
	return m.Run()
}

func TestRefusesAFreeThreadedBuild(t *testing.T) {
	if !m0.FreeThreaded() {
		t.Skip("a GIL build: every other test of the package runs")
	}
	dir, _ := filepath.Abs("testdata")
	app, err := m0.LoadApp("bridge:app", &m0.LoadOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for name, make := range map[string]func(){
		"New":         func() { asgi.New(app, nil) },
		"NewBuffered": func() { asgi.NewBuffered(app, nil) },
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, "needs a GIL build") {
					t.Errorf("%s on a free-threaded build: recovered %v, want a panic that says it needs a GIL build", name, r)
				}
			}()
			make()
		}()
	}
}
