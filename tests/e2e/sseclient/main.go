// Command sseclient reads an SSE stream with r3labs/sse, a client written
// apart from m0, for the end-to-end suite: it prints "connected" once the
// stream is open, then each event with data as a JSON line, and exits after
// -n of them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/r3labs/sse/v2"
)

func main() {
	url := flag.String("url", "", "the stream's URL")
	n := flag.Int("n", 1, "events to read")
	last := flag.String("last", "", "the Last-Event-ID to resume from")
	flag.Parse()
	c := sse.NewClient(*url)
	c.ReconnectStrategy = nil
	if *last != "" {
		c.LastEventID.Store([]byte(*last))
	}
	c.OnConnect(func(*sse.Client) { fmt.Println("connected") })
	events := make(chan *sse.Event, *n)
	go func() {
		err := c.SubscribeRaw(func(e *sse.Event) {
			if len(e.Data) > 0 {
				events <- e
			}
		})
		fmt.Fprintln(os.Stderr, "sseclient:", err)
		os.Exit(1)
	}()
	enc := json.NewEncoder(os.Stdout)
	for range *n {
		select {
		case e := <-events:
			enc.Encode(map[string]string{"id": string(e.ID), "data": string(e.Data), "event": string(e.Event)})
		case <-time.After(20 * time.Second):
			fmt.Fprintln(os.Stderr, "sseclient: no event in 20 s")
			os.Exit(1)
		}
	}
}
