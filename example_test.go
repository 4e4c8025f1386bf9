package m0_test

import (
	"fmt"
	"log"

	"github.com/m0serve/m0"
)

// Discovery finds the callable of a bare module name, and tells its
// protocol.
func ExampleLoadApp() {
	app, err := m0.LoadApp("hello", &m0.LoadOptions{Dir: "examples/hello"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(app.Spec, app.Protocol)
	// Output:
	// hello:application wsgi
}
