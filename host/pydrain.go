package host

import (
	"context"
	"errors"

	"github.com/m0serve/m0/internal/cpython"
)

// pythonDrain is the drain's last step, once per process, when Python was
// loaded (by a bridge, or by m0.LoadApp): it runs the
// application's atexit handlers, as a Python process that exits would, and
// flushes what Python code printed to sys.stdout and sys.stderr.
type pythonDrain struct{}

const exitCode = `import atexit, sys
atexit._run_exitfuncs()
for _s in (sys.stdout, sys.stderr):
    if _s is not None:
        _s.flush()`

func (pythonDrain) Shutdown(ctx context.Context) error {
	rt := cpython.Running()
	if rt == nil {
		return nil // no Python was loaded
	}
	if ctx.Err() != nil {
		return errors.New("atexit handlers skipped: the drain's time is up")
	}
	done := make(chan error, 1)
	go func() {
		// Every subinterpreter's handlers, at once, then the main one's.
		rt.EachInterpreter(func(t cpython.Thread) error { return t.Exec(exitCode) })
		done <- rt.Main(func(t cpython.Thread) error {
			return t.Exec(exitCode)
		})
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("python-main still running atexit handlers")
	}
}
