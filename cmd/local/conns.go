package main

import (
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// connLimit tracks the server's open connections, at most max: one that reaches the bound
// closes the one idle longest, so idle keep-alives cannot lock out new clients.
type connLimit struct {
	max  int
	mu   sync.Mutex
	open int
	idle map[net.Conn]time.Time // idle since
}

// track is the server's ConnState hook.
func (c *connLimit) track(conn net.Conn, state http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch state {
	case http.StateNew:
		c.open++
	case http.StateActive:
		delete(c.idle, conn)
	case http.StateIdle:
		c.idle[conn] = time.Now()
	case http.StateClosed, http.StateHijacked:
		c.open--
		delete(c.idle, conn)
	}
	if (state == http.StateNew || state == http.StateIdle) && c.open >= c.max && len(c.idle) > 0 {
		oldest := slices.MinFunc(slices.Collect(maps.Keys(c.idle)), func(a, b net.Conn) int { return c.idle[a].Compare(c.idle[b]) })
		delete(c.idle, oldest)
		_ = oldest.Close()
	}
}
