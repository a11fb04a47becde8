// Package deps pins the module's direct dependencies while the packages that use them are
// being written. It is removed once every dependency has a real importer.
package deps

import (
	_ "github.com/apache/pulsar-client-go/pulsar"
	_ "go.uber.org/zap"
	_ "google.golang.org/protobuf/proto"
)
