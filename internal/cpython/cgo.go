package cpython

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "m0py.h"
*/
import "C"

import (
	"context"
	"log/slog"
)

// go_log is _m0.log: Python writing a line to the server's log.
//
//export go_log
func go_log(level C.int, msg *C.char) {
	slog.Log(context.Background(), slog.Level(level), C.GoString(msg))
}
