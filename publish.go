package m0

import (
	"github.com/m0serve/m0/internal/cpython"
	"github.com/m0serve/m0/realtime"
)

// PublishTo makes hub where the Python applications of the process publish:
// m0pub.publish(channel, data, event=...) from a view, a thread or a command running
// in the process calls hub.PublishEvent. Without a hub (nil, the default),
// m0pub.publish raises, saying the server publishes nowhere. m0serve
// --realtime calls it with the hub its holds serve.
func PublishTo(hub *realtime.Hub) {
	if hub == nil {
		cpython.SetPublisher(nil)
		return
	}
	cpython.SetPublisher(func(channel, event string, data []byte) (string, bool) {
		id, ok := hub.PublishEvent(channel, event, data)
		if !ok {
			return "", false
		}
		return id.String(), true
	})
}
