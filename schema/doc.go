// Package schema validates the data block of BabelQueue envelopes against a JSON Schema
// registered for their URN. It is opt-in per URN: a message whose URN has no registered
// schema is never checked.
//
// Validation is done by github.com/santhosh-tekuri/jsonschema/v6, a complete
// implementation of JSON Schema drafts 4, 6, 7, 2019-09 and 2020-12 that is tested against
// the official JSON-Schema-Test-Suite; the draft is the one the schema's "$schema" names
// (draft-07 is "http://json-schema.org/draft-07/schema#"), and 2020-12 when it names none.
// Every keyword of the draft applies; "format" is an annotation, not an assertion, as the
// drafts specify by default. A schema may "$ref" another schema of the same provider by its
// URN, by its "$id", or (in a registry.json) by its path relative to the referring file;
// a schema given by its URN alone ([NewMapProvider], [Compile]) has no path, and a relative
// "$ref" in it is refused, where the validator would read it as a "$ref" to the schema
// itself. Nothing is ever loaded from the network or from files the provider was not
// given. Each URL names one schema: two schemas of a provider that declare the same "$id",
// or one whose "$id" is another's URN, are refused.
//
// # Providers
//
// A [Provider] maps URNs to compiled schemas. Three are built in, and each compiles every
// schema when it is built, so a broken schema fails at start-up, not on the first message
// (of several, the error names the first by URN, on every start).
// A schema that compiles but can validate no value is refused there too ([ErrSchema]): one
// with a "$ref" cycle that never moves into the data ({"$ref":"#"}, or a → b → a through
// $ref, allOf, anyOf, oneOf, not, if/then/else or dependentSchemas; the error names the
// path of the cycle, such as "urn:a# → urn:b# → urn:a#"), where the validator would fail
// every value, and one that no value satisfies (false, {"not":{}}, an allOf holding one of
// those, an anyOf or oneOf made only of them). Recursion through properties or items, as
// in a tree, is fine. The providers:
//
//   - [NewMapProvider]: URN → schema text, in memory.
//   - [NewDirProvider]: a directory whose files "<urn>.json" (for example
//     "urn:babel:orders:created.json") are the schemas of those URNs.
//   - [NewRegistryProvider]: a registry.json manifest, the format of the BabelQueue schema
//     registry: {"schemas": [{"urn": "urn:babel:orders:created", "schema":
//     "schemas/orders-created.json", "owner": "orders", "status": "active"}]}. "urn" and
//     "schema" are required; "schema" is a file path, relative to the manifest's
//     directory unless absolute; a URN may appear once. "owner", "status" and any other
//     member are accepted and not used. [NewRegistryProviderFS] reads the same from an
//     fs.FS, such as an embed.FS that ships the registry inside the binary.
//
// # Publishing
//
// [Publisher] wraps a pulsar.Publisher: Publish and its variants refuse data that fails
// its URN's schema with a [*ValidationError] listing the violations (the JSON pointer into
// data, the failing keyword and a message), and send nothing.
//
// # Bounded errors
//
// A [*ValidationError] keeps the first [MaxViolations] violations (by pointer, then
// keyword, then message), each pointer and message cut at 256 bytes, and counts them all
// in Total; its text ends with "; and N more". However large the data and however many
// ways it fails (a 0.4 MB payload with 30,000 violations gives about 6 KiB), the error,
// and the dead-letter copy that carries it, stay far below the broker's message-size
// limit.
//
// # Consuming
//
// [Middleware] is pulsar consumer middleware, a Handler hook (pulsar.Hooks): a delivery whose data
// fails its URN's schema is dead-lettered at once (pulsar.DeadLetter: reason failed, no
// retries) with the [*ValidationError] as the error; valid data goes on to the handler. Put
// it inside the idempotency middleware, if any, so an invalid message is never remembered.
package schema
