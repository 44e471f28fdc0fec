package main

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// connLimit bounds the server's open connections to max: Accept waits at
// the bound, and a new connection that reaches it closes the one idle
// longest, so idle keep-alives cannot lock out new clients.
type connLimit struct {
	max  int
	mu   sync.Mutex
	open int
	idle map[net.Conn]time.Time // idle since
}

func newConnLimit(max int) *connLimit {
	return &connLimit{max: max, idle: map[net.Conn]time.Time{}}
}

// listener bounds ln's connections.
func (c *connLimit) listener(ln net.Listener) net.Listener { return netutil.LimitListener(ln, c.max) }

// track is the server's ConnState hook.
func (c *connLimit) track(conn net.Conn, state http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch state {
	case http.StateNew:
		c.open++
		if c.open >= c.max {
			c.closeLongestIdle()
		}
	case http.StateActive:
		delete(c.idle, conn)
	case http.StateIdle:
		c.idle[conn] = time.Now()
		if c.open >= c.max {
			c.closeLongestIdle()
		}
	case http.StateClosed, http.StateHijacked:
		c.open--
		delete(c.idle, conn)
	}
}

func (c *connLimit) closeLongestIdle() {
	var oldest net.Conn
	var since time.Time
	for conn, t := range c.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = conn, t
		}
	}
	if oldest != nil {
		delete(c.idle, oldest)
		_ = oldest.Close()
	}
}
