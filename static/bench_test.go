package static_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/m0serve/m0/static"
	"github.com/valyala/fasthttp"
)

// BenchmarkServeFastHTTP is the handler's own cost for a 1 KiB file, without
// the network.
func BenchmarkServeFastHTTP(b *testing.B) {
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "1k.bin"), make([]byte, 1024), 0o644)
	h, err := static.New(dir, &static.Options{Prefix: "/static/"})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.SetRequestURI("/static/1k.bin")
		h.ServeFastHTTP(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatal(ctx.Response.StatusCode())
		}
		ctx.Response.Reset() // closes the body stream
	}
}
