// Command m0serve serves a Python web application from a Go process.
//
//	m0serve [flags] MODULE[:ATTR]
//	m0serve --doctor [flags] [MODULE[:ATTR]]
//
// It only wires the m0 packages together; see m0serve --help.
package main

import (
	"github.com/m0serve/m0/cmd/m0serve/internal/pyapp"
	"github.com/m0serve/m0/host"
)

func main() {
	host.Main(&pyapp.App{})
}
