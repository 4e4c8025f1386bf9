package static

import (
	"strings"

	"github.com/m0serve/m0/internal/wire"
)

// accepts reports whether an Accept-Encoding value takes enc: the first
// member naming it, unless its weight (a q parameter, in any case and any
// place among the member's parameters) is a qvalue of 0 (RFC 9110 12.4.2).
func accepts(accept, enc string) bool {
	for more := accept != ""; more; {
		var member string
		member, accept, more = strings.Cut(accept, ",")
		name, params, _ := strings.Cut(member, ";")
		if !wire.EqualFold(strings.Trim(name, " \t"), enc) {
			continue
		}
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			k, v, ok := strings.Cut(p, "=")
			if ok && wire.EqualFold(strings.Trim(k, " \t"), "q") {
				return !zeroWeight(strings.Trim(v, " \t"))
			}
		}
		return true
	}
	return false
}

// zeroWeight reports whether a qvalue is 0: "0", "0.", or "0." and up to
// three zeros.
func zeroWeight(q string) bool {
	frac, ok := strings.CutPrefix(q, "0")
	if !ok {
		return false
	}
	if frac == "" {
		return true
	}
	frac, ok = strings.CutPrefix(frac, ".")
	return ok && len(frac) <= 3 && strings.Trim(frac, "0") == ""
}
