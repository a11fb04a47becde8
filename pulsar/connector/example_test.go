package connector_test

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
)

// New creates the connector; register it with the runtime, then configure channels with
// mp.messaging.* keys naming it.
func ExampleNew() {
	conn, err := connector.New(connector.WithLogger(zap.NewNop()))
	if err != nil {
		fmt.Println("connector:", err)
		return
	}
	cfg, err := messaging.LoadConfig(messaging.FromMap(map[string]string{
		"mp.messaging.incoming.orders-in.connector":        connector.Name,
		"mp.messaging.incoming.orders-in.serviceUrl":       "pulsar://localhost:6650",
		"mp.messaging.incoming.orders-in.topic":            "persistent://public/default/orders",
		"mp.messaging.incoming.orders-in.subscriptionName": "invoicing",
	}))
	if err != nil {
		fmt.Println("configuration:", err)
		return
	}
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	messaging.Consume(rt, "orders-in", func(context.Context, []byte) error { return nil })
	// rt.Start(ctx) subscribes; rt.Shutdown(ctx) closes the channels and the connector.
	fmt.Println(conn.Name())

	// An option refuses a bad value.
	_, err = connector.New(connector.WithLogger(nil))
	fmt.Println(errors.Is(err, bqpulsar.ErrInvalidOption))
	// Output:
	// babelqueue-pulsar
	// true
}
