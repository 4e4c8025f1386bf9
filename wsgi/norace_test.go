//go:build !race

package wsgi_test

const raceBuild = false
