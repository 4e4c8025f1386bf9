// Command nethost serves tests/e2e/apps/recorder.py on m0's net/http front
// end: the m0 host with a Go mux (which net/http serves), the WSGI form
// under /wsgi and the ASGI form under /asgi. The hostile-HTTP table
// (tests/e2e/test_hostile.py) runs on it beside m0serve, whose front end is
// fasthttp. With $M0_NETHOST_APP naming another application of the app
// directory (MODULE:ATTR, WSGI or ASGI), it serves every other path, so a
// test can run on both front ends; under --realtime the holds are around
// it (a held WebSocket's messages are posted to /ws/message) and its
// m0pub.publish reaches their hub.
//
//	nethost --app-dir tests/e2e/apps --port 8000
//	M0_NETHOST_APP=realtime_app:application nethost --app-dir tests/e2e/apps --realtime
package main

import (
	"net/http"
	"os"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/host"
)

type app struct{}

func (app) MaxThreads() int { return 1 }

// PoolThreads is none: every handler is a Python bridge, which runs on
// its own Python threads.
func (app) PoolThreads(*host.Config) int { return 0 }
func (app) LoadsPython() bool            { return true }

func (app) Make(ctx host.Context) (http.Handler, error) {
	cfg := ctx.Config
	w, err := m0.LoadApp("recorder:application", &m0.LoadOptions{Dir: cfg.AppDir, Protocol: "wsgi"})
	if err != nil {
		return nil, err
	}
	a, err := m0.LoadApp("recorder:app", &m0.LoadOptions{Dir: cfg.AppDir, Protocol: "asgi"})
	if err != nil {
		return nil, err
	}
	wh := ctx.Bridge(w, "/wsgi")
	ah := ctx.Bridge(a, "/asgi")
	mux := host.NewMux()
	mux.HandleLoop("/wsgi/", wh)
	mux.HandleLoop("/asgi/", ah)
	if spec := os.Getenv("M0_NETHOST_APP"); spec != "" {
		o, err := m0.LoadApp(spec, &m0.LoadOptions{Dir: cfg.AppDir})
		if err != nil {
			return nil, err
		}
		mux.HandleLoop("/", ctx.Bridge(o, ""))
		m0.PublishTo(ctx.Hub)
	}
	return mux, nil
}

func main() { host.Main(app{}) }
