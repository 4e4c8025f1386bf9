//go:build race

package wsgi_test

// raceBuild: the race detector's instrumentation makes frames larger.
const raceBuild = true
