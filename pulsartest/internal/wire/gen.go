// Package wire holds the generated protobuf types of the Pulsar binary protocol subset that pulsartest speaks.
//
// The proto package (babelqueue.pulsartest.wire) and file path differ from pulsar-client-go's on purpose: both
// are registered in the global protobuf registry of any binary that links the client and pulsartest together.
package wire

//go:generate protoc -I ../../.. --go_out=../../.. --go_opt=module=github.com/babelqueue/babelqueue-go-pulsar pulsartest/internal/wire/pulsar_wire.proto
