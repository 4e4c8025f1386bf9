//go:build linux

package cpython

import (
	"sync"
	"testing"
)

// BenchmarkCall is the cost of one buffered WSGI call on a Python thread,
// the cgo crossing included, without any HTTP.
func BenchmarkCall(b *testing.B) {
	rt, err := Start()
	if err != nil {
		b.Fatal(err)
	}
	app, err := rt.Load("hello:application", "../../examples/hello", "")
	if err != nil {
		b.Fatal(err)
	}
	w, err := rt.NewWSGI(app, false, false)
	if err != nil {
		b.Fatal(err)
	}
	env := request("GET", "/", "Host", "localhost:8000", "User-Agent", "wrk", "Accept", "*/*")
	var wg sync.WaitGroup
	wg.Add(1)
	rt.Go(func(t Thread) {
		defer wg.Done()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := call(t, w, env, nil, true); err != nil {
				b.Error(err)
				return
			}
		}
	})
	wg.Wait()
}
