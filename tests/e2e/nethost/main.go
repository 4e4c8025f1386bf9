// Command nethost serves tests/e2e/apps/recorder.py on m0's net/http front
// end: the m0 host with a Go mux (which net/http serves), the WSGI form
// under /wsgi and the ASGI form under /asgi. The hostile-HTTP table
// (tests/e2e/test_hostile.py) runs on it beside m0serve, whose front end is
// fasthttp.
//
//	nethost --app-dir tests/e2e/apps --port 8000
package main

import (
	"net/http"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/host"
)

type app struct{}

func (app) MaxThreads() int   { return 1 }
func (app) LoadsPython() bool { return true }

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
	return mux, nil
}

func main() { host.Main(app{}) }
