package wsgi_test

import (
	"path/filepath"
	"testing"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/internal/testutil"
	"github.com/m0serve/m0/wsgi"
)

func benchHandler(b *testing.B) *wsgi.Handler {
	dir, _ := filepath.Abs("testdata")
	app, err := m0.LoadApp("hello:application", &m0.LoadOptions{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	return wsgi.New(app, &wsgi.Options{Threads: 1, MaxBody: wsgi.DefaultMaxBody})
}

// BenchmarkServeHTTP is the net/http adapter's cost for a hello-world
// request, the Python call included, net/http's own excluded.
func BenchmarkServeHTTP(b *testing.B) { testutil.BenchServeHTTP(b, benchHandler(b)) }

// BenchmarkServeFastHTTP is the same through the fasthttp adapter.
func BenchmarkServeFastHTTP(b *testing.B) {
	testutil.BenchServeFastHTTP(b, benchHandler(b).ServeFastHTTP)
}
