package asgi

// Spills is the executor's count of messages that went to the queue
// behind a ring rather than through it, Go to the loop and back
// (cpython.Executor.Spills), for the tests in package asgi_test.
func Spills(h *Handler) (in, out uint64) { return h.exs[0].Spills() }
