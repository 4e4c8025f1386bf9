//go:build linux

package cpython

import (
	"context"
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

// BenchmarkWaitMany is a request's wait for its next message with many
// requests waiting at once: 1,024 goroutines in Next, each given a
// message in turn, as the collector gives a thousand connections theirs.
func BenchmarkWaitMany(b *testing.B) {
	const n = 1024
	e := &Executor{ended: make(chan struct{})}
	reqs := make([]*Request, n)
	took := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range reqs {
		r := &Request{e: e, wake: make(chan struct{}, 1)}
		reqs[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, _ := r.Next(context.Background())
				if m.Kind == CDone {
					return
				}
				took <- struct{}{}
			}
		}()
	}
	give := func(r *Request, kind int) {
		r.mu.Lock()
		r.q = append(r.q, Msg{Kind: kind})
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		give(reqs[i%n], CBody)
		if i%n == n-1 {
			for range n {
				<-took
			}
		}
	}
	for range b.N % n {
		<-took
	}
	b.StopTimer()
	for _, r := range reqs {
		give(r, CDone)
	}
	wg.Wait()
}
