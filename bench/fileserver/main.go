// Command fileserver is the Go standard library's file server, the baseline
// of the static suite of bench/run: http.FileServer on a directory under
// /static/, nothing else. See bench/README.md.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"strconv"
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 8000, "TCP port")
	dir := flag.String("dir", ".", "directory served under /static/")
	flag.Parse()

	http.Handle("/static/", http.StripPrefix("/static/", http.FileServer(http.Dir(*dir))))
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	log.Printf("fileserver: serving %s under /static/ on http://%s", *dir, addr)
	log.Fatal(http.ListenAndServe(addr, nil))
}
