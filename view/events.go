package view

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// hub fans the runs' events out to the event streams. A client whose queue
// is full is dropped: its channel is closed and its stream ends, so that a
// client that does not read never holds the pollers or the others back.
type hub struct {
	mu      sync.Mutex
	buf     int
	clients map[chan event]struct{}
	closed  bool
}

func newHub(buf int) *hub { return &hub{buf: buf, clients: map[chan event]struct{}{}} }

// subscribe returns a new client's channel, or nil once the hub is closed.
func (h *hub) subscribe() chan event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	ch := make(chan event, h.buf)
	h.clients[ch] = struct{}{}
	return ch
}

// unsubscribe forgets ch (a client that left), if the hub still has it.
func (h *hub) unsubscribe(ch chan event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[ch]; ok {
		delete(h.clients, ch)
		close(ch)
	}
}

// publish queues ev for every client, dropping those whose queue is full.
func (h *hub) publish(ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.clients {
		select {
		case ch <- ev:
		default:
			delete(h.clients, ch)
			close(ch)
		}
	}
}

// close ends every client's stream and refuses new ones.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.clients {
		delete(h.clients, ch)
		close(ch)
	}
}

// clients counts the subscribed clients.
func (h *hub) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// writeTimeout bounds each write to an event stream, so that a client that
// stopped reading cannot hold its handler forever.
const writeTimeout = 10 * time.Second

func (s *Server) handleEvents(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/event-stream")
		return
	}
	ch := s.hub.subscribe()
	if ch == nil {
		writeError(w, http.StatusServiceUnavailable, "the view is stopping")
		return
	}
	defer s.hub.unsubscribe(ch)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	send := func(format string, args ...any) bool {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": hacrl view: events of %d runs\n\n", len(s.runs)) {
		return
	}
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return // dropped, or the view is stopping
			}
			if !send("event: %s\ndata: %s\n\n", ev.name, ev.data) {
				return
			}
		case <-keep.C:
			if !send(": keep-alive\n\n") {
				return
			}
		}
	}
}
