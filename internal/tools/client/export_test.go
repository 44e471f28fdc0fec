package client

import "time"

// WithNow reads the time from now for a Retry-After date in an answer without a Date header.
func WithNow(now func() time.Time) Option { return func(c *Client) { c.now = now } }
