// Command m0serve serves a Python web application from a Go process.
//
//	m0serve [flags] MODULE[:ATTR]
//	m0serve --doctor [flags] [MODULE[:ATTR]]
//
// It only wires the m0 packages together; see m0serve --help.
package main

import (
	"os"

	"github.com/m0serve/m0/internal/host"
	"github.com/m0serve/m0/internal/pid1"
	"github.com/m0serve/m0/internal/pyapp"
	"github.com/m0serve/m0/internal/stack"
)

func main() {
	if code, ok := pid1.RunAsInit(); ok {
		os.Exit(code)
	}
	os.Exit(host.Main(os.Args[1:], os.Getenv, &pyapp.App{}, stack.Wrap))
}
