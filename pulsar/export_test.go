package pulsar

// TeardownDone returns a channel closed when the teardown that [Consumer.Close] started has
// ended, which may be after Close returned (nil before Close). Tests wait for it after
// their assertions, so that the goroutine leak check sees an abandoned close end.
func (c *Consumer) TeardownDone() <-chan struct{} { return c.teardown }
