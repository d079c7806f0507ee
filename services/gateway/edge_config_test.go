package gateway

// shortTimeouts sets the server timeouts under test.
func shortTimeouts(c *Config) {
	c.ReadHeaderTimeout = testHeaderTimeout
	c.BodyReadTimeout = testBodyTimeout
	c.IdleTimeout = testIdleTimeout
}

// oneBodySlot lets one request body be read at a time.
func oneBodySlot(c *Config) { c.MaxConcurrentBodyReads = 1 }
