//go:build linux

package cpython

import (
	"encoding/json"
	"testing"

	"github.com/m0serve/m0/internal/testutil"
)

// FuzzEnvironCall: a packed request of any bytes (method, path, a header
// of any name and value, a body), as the bridges pack it, crosses into C
// whole: the environ the application gets has every variable Go packed,
// each a str of the value's bytes (latin-1, PEP 3333's native strings),
// str keys only, and wsgi.input holds the body.
func FuzzEnvironCall(f *testing.F) {
	f.Add("GET", "/", "X-Test", "yes", []byte(nil))
	f.Add("POST", "/caf\xc3\xa9", "Content-Type", "text/plain; charset=\xff", []byte("body\x00"))
	f.Add("BREW", "", "x-\x00", "\x00\r\n", []byte("\xff"))
	f.Add("get", "/a b", "Content-Length", "5", []byte("hello"))
	rt := startT(f)
	w := loadT(f, rt, "environ_items")
	f.Fuzz(func(t *testing.T, method, path, name, value string, body []byte) {
		if len(name) > 1024 {
			name = name[:1024]
		}
		env := request(method, path, name, value)
		want := unpack(t, env.B)
		var out struct {
			Env    map[string]string `json:"env"`
			NotStr []string          `json:"not_str"`
			Body   *string           `json:"body"`
		}
		onThread(rt, func(th Thread) {
			res, err := call(th, w, env, body, false)
			if err != nil || res.Status != 200 {
				t.Fatalf("%+v, %v", res, err)
			}
			if err := json.Unmarshal(th.Body(), &out); err != nil {
				t.Fatalf("%v in %q", err, th.Body())
			}
		})
		if len(out.NotStr) > 0 || out.Body == nil || testutil.Latin1(*out.Body) != string(body) {
			t.Fatalf("keys or values not str: %q; body %v", out.NotStr, out.Body)
		}
		got := map[string]string{}
		for k, v := range out.Env {
			got[testutil.Latin1(k)] = v // keys are latin-1 too
		}
		for k, v := range want {
			if got, ok := got[k]; !ok || testutil.Latin1(got) != v {
				t.Fatalf("%s = %q packed, %q, %v in the environ", k, v, got, ok)
			}
		}
	})
}
