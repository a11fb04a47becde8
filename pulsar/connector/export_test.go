package connector

// SinkRequest requests n more messages from the sink's upstream (whitebox TCK puppet).
func SinkRequest(s *Sink, n int64) { s.in.Request(n) }

// SinkCancel cancels the sink's upstream subscription (whitebox TCK puppet).
func SinkCancel(s *Sink) { s.in.Cancel() }
