// Package envelope is the BabelQueue wire envelope (schema_version 1).
package envelope
