package asgi_test

import (
	"testing"

	"github.com/m0serve/m0/internal/testutil"
)

// BenchmarkServeHTTP is the net/http adapter's cost for a hello-world
// request, the round trip through the loop included, net/http's own
// excluded; one request at a time, so no batching helps it.
func BenchmarkServeHTTP(b *testing.B) { testutil.BenchServeHTTP(b, handler) }

// BenchmarkServeFastHTTP is the same through the fasthttp adapter.
func BenchmarkServeFastHTTP(b *testing.B) { testutil.BenchServeFastHTTP(b, handler.ServeFastHTTP) }
