package host

import (
	"fmt"
	"io"
)

// printHelp writes the usage text, naming each flag's variable.
func printHelp(w io.Writer) {
	fmt.Fprint(w, `usage: m0serve [flags] MODULE[:ATTR]
       m0serve --doctor [flags] [MODULE[:ATTR]]
       m0serve --version | -V

Serves a Python web application. MODULE[:ATTR] names the callable (ATTR
defaults to application); a bare MODULE tries MODULE.asgi:application,
MODULE.wsgi:application, MODULE:app and MODULE.main:app, in that order.
A flag beats its M0_* variable, which beats the default.

`)
	for _, s := range settings {
		head := "  --" + s.name
		if s.arg != "" {
			head += " " + s.arg
		}
		if s.env != "" {
			head += "   [" + s.env + "]"
		}
		def := ""
		if s.def != "" && s.def != "false" {
			def = " (default " + s.def + ")"
		}
		fmt.Fprintf(w, "%s\n        %s%s\n", head, s.usage, def)
	}
	fmt.Fprint(w, `
The libpython loaded is that of the python3 on PATH, or M0_PYTHON_LIBRARY.
Exit codes: 2 usage, 1 startup failure, 78 a configuration that cannot run.
`)
}
