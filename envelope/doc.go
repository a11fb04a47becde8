// Package envelope is the BabelQueue wire envelope (schema_version 1): building messages
// ([Make]), the one strict decoder of the SDK ([Decode], [Classify]), the canonical encoder
// ([Envelope.Encode]) and the dead-letter copies ([Envelope.ToDeadLetter], [PoisonCopy],
// [TruncatedCopy]).
// It implements section 1 of the BabelQueue wire contract and imports only the standard
// library.
//
//	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"order_id": 1042},
//		envelope.WithQueue("orders"))
//	if err != nil { … }
//	body, err := env.Encode()
//	…
//	in, err := envelope.Classify(body)
//	if err != nil { … dead-letter with envelope.PoisonCopy(body, …) … }
//	var order struct{ OrderID int64 `json:"order_id"` }
//	err = in.Bind(&order)
//
// # Acceptance
//
// A body is acceptable when all the rules below hold; [Classify] returns a
// *[PoisonError] naming the first failed [Rule] and, when known, the JSON pointer of the
// member:
//
//  1. [RuleUTF8]: the whole payload is valid UTF-8 (utf8.Valid). encoding/json would
//     replace invalid bytes with U+FFFD; here they make the body poison.
//  2. [RuleSingleObject]: exactly one JSON object, JSON whitespace (space, TAB, LF, CR)
//     around it allowed. A BOM, trailing bytes, null, arrays, strings and numbers are
//     poison, and so is malformed JSON anywhere, inside data and unknown members too.
//  3. Keys match case-sensitively ("JOB" is an unknown key). A key spelled with escapes
//     ("\u006aob") is the key it decodes to. On duplicate keys the last value wins.
//  4. [RuleType]: job, urn, trace_id, meta.id, meta.queue, meta.lang and the dead_letter
//     strings are strings; meta.schema_version, meta.created_at, attempts,
//     dead_letter.failed_at and dead_letter.attempts are JSON integers ("3", 3.0 and 1e2
//     are not) that fit int64 (int for the counters); data, meta and dead_letter are
//     objects; dead_letter.error and dead_letter.exception are strings or null. Every
//     occurrence of a duplicated key is type-checked, not only the last.
//  5. [RuleURN]: the resolved URN ([Envelope.URN]) is not blank.
//  6. [RuleSchemaVersion], [RuleData], [RuleTraceID]: meta.schema_version is 1, data is
//     present, trace_id is not blank.
//  7. A missing attempts reads as 0, a negative one as 0.
//
// [Decode] applies rules 1–4 and 7 only, for callers that must look at an envelope that is
// not acceptable (tools, conformance runners); consumers use [Classify]. "Blank" is
// [IsBlank]: empty or only the six ASCII blanks; NBSP, NEL, U+3000 and the BOM are not.
//
// # Lossless re-emit
//
// The data member and unknown members (top level, in meta and in dead_letter) are kept as
// their received JSON text with only insignificant whitespace removed: key order, number
// spelling (9007199254740993, 1.0, 1E+400) and string escapes are untouched, so a retry
// ([Envelope.WithAttempts]), a dead-letter copy or a redrive ([Envelope.WithoutDeadLetter])
// changes only what the operation changes. Numbers in data are checked for JSON syntax,
// not magnitude: 1E+400 is accepted and kept, although binding it to a float64 fails.
//
// Forbidden keys (timestamp, meta.max_retries, meta.attempts, meta.source, meta.ts) do not
// make a body poison: [Envelope.Warnings] names each by pointer (once), and they are never
// stored nor re-emitted.
//
// # Canonical encoding
//
// [Envelope.Encode] writes compact JSON in the order job, trace_id, data, meta (id, queue,
// lang, schema_version, created_at, unknown meta keys), attempts, dead_letter when present
// (reason, error, exception, failed_at, original_queue, attempts, lang, unknown keys), then
// the unknown top-level keys in received order. Strings written by this package use no
// HTML escaping, escape U+2028 and U+2029, use \b \f \n \r \t or \u00xx (lower-case hex)
// for other control characters and write other non-ASCII as raw UTF-8. Received text (data,
// unknown members) is never re-escaped. A Data that is not one JSON object is an error
// wrapping [ErrInvalidData] and nothing is written.
//
// # Decisions
//
//   - Every known member is always written, with its zero value when it was absent; an
//     empty meta.queue is written as "queue":"" (the producer schema requires the key), an
//     absent data as {}. Re-encoding is therefore a fixed point after one pass.
//   - The urn alias is kept as received, among the unknown keys at its position. When job
//     is absent or blank, job is written as the resolved URN, so every re-emitted message
//     carries the canonical field; [Make] never writes urn.
//   - A lone or mismatched UTF-16 surrogate escape (\ud800) is valid JSON and accepted.
//     In a known string member it decodes to U+FFFD, as encoding/json does; in data and
//     unknown members the escape text is kept verbatim.
//   - Duplicate keys: the last value wins. An unknown key keeps the position of its first
//     occurrence; a duplicated meta, data or dead_letter object replaces the earlier one
//     entirely.
//   - Nesting deeper than 10000 levels (the frame counts as one) is poison, the limit of
//     encoding/json.
//   - [Classify] returns a nil envelope with every error, so a poison body is never
//     handled by accident; dead-letter it with [PoisonCopy].
//   - A poison copy writes each invalid UTF-8 byte of raw as \ufffd and adds raw_base64
//     (standard, padded) only when the payload is not valid UTF-8.
//
// # Dead-letter copies
//
// An acceptable message is dead-lettered as itself plus a dead_letter block
// ([Envelope.ToDeadLetter]); an unacceptable body as a poison copy ([PoisonCopy]):
//
//	{"raw":"<payload as a JSON string>","raw_base64":"<exact bytes>","dead_letter":{…}}
//
// Escaping makes a poison copy larger than its body (6 bytes per NUL, 6 per invalid byte
// plus the base64 of the whole body), so a copy can exceed the broker's message size limit
// even though its body did not, and would then be refused on every redelivery. A copy that
// must fit a limit is built with [PoisonCopyWithin] (poison bodies),
// [Envelope.DeadLetterWithin] (acceptable ones) or [FitDeadLetter] (a ready copy): the full
// copy when it fits, else a truncated copy ([TruncatedCopy]) of at most limit bytes:
//
//	{"raw":"<prefix>","raw_base64":"<prefix bytes>","truncated":true,"raw_size":65536,
//	 "original_size":1048576,"original_sha256":"<64 lower-case hex digits>","dead_letter":{…}}
//
// raw is the first [TruncatedKeep] bytes of the received body at most (fewer when the limit
// demands), cut before a whole UTF-8 sequence, written as in a poison copy; raw_base64 holds
// those bytes exactly and is present only when they are not valid UTF-8; raw_size is their
// number; original_size and original_sha256 (SHA-256 of the received bytes) identify the
// whole body. dead_letter is the block the full copy would carry (its error text cut at a
// character boundary if the block alone would not leave room). A truncated copy is never an
// acceptable envelope, so it cannot be redriven; it records that the message existed, why
// it failed and how to recognise it. The limit is the body's: leave room for the message's
// properties and metadata below the broker's maximum (5 MiB by default in Pulsar).
//
// # Ownership of bytes
//
// [Decode] and [Classify] only read the caller's payload and, once it is accepted, copy
// what the envelope keeps of it (the string members, data, and the unknown members of each
// object as one string of their compact text) into a buffer owned by the envelope; they
// never keep the caller's slice, so the caller may reuse its buffer as soon as they return.
// Keys, numbers and punctuation are not copied: the buffer is about half the payload for an
// envelope as the SDKs send it. For a buffer of up to about 8 KiB the buffer and the
// Envelope are one allocation (an envelope with the urn alias, unknown top-level members or
// forbidden keys has one more small one for them, as a dead-lettered one has for its
// block). Decoded strings are read-only views of that buffer (those
// with escapes are unescaped as they are copied), and Data is a sub-slice of it whose
// capacity ends with the data text, so appending to Data reallocates and writing Data's
// bytes changes nothing else; the buffer lives as long as any of these does. A refused payload costs no buffer. [Make] copies raw data. [Envelope.Clone] and the With… methods return deep copies of Data, so
// mutating their Data does not affect the original. An Envelope is not safe for concurrent
// mutation; concurrent reads (Encode, URN, Bind) are safe.
//
// # Limits
//
// An object decoded into the envelope (the frame, meta, dead_letter) may have at most
// [MaxMembers] members, every occurrence of a duplicated key counted; one more is poison
// with [RuleMembers]. Duplicate keys are found through a hash index, so decoding costs time
// linear in the payload however many unknown keys it has. Objects inside data and inside
// unknown members are not counted: they are kept as text. Nesting is limited as stated
// under Decisions.
//
// # Performance
//
// Decoding is one hand-written scan of the payload, which validates UTF-8 inside strings as
// it goes (outside strings JSON is ASCII) and skips plain string bytes eight at a time,
// followed by one copy: no reflection, no maps, one allocation for a typical envelope (the
// Envelope and the text it keeps together), time linear in the payload
// however many keys it holds. Values (data above all) are validated by a fast scanner that
// decides the text producers send in one loop and hands whatever it cannot decide, every
// error among it, to the general scanner, so that verdicts and error texts are the general
// scanner's; the keys of a body in the encoders' order are recognised with one comparison
// each. A body of exactly the encoders' shape (compact, its members and meta's known ones,
// each once, in the encoders' order, any of them absent) takes a shorter path: its keys and
// punctuation are compared as written, and only its values are decoded, by the same code as
// on the general path. Any other body is decided by the general path from the start, so the
// verdict, the error and the envelope are the same on both (FuzzClassifyFastPathAgrees sets
// them against the general scanner alone). Counted in instructions under Valgrind's
// cachegrind, which the machine's load does not move, the scan of the compact order-created
// body takes about 2670 on that path against 3930 on the general one (make
// bench-instructions BENCH_PKG=envelope BENCH_FIRST=ClassifyParts/scan-general
// BENCH_SECOND=ClassifyParts/scan), and the whole Classify about 4030. Measured with go
// test -run='^$' -bench='^Benchmark(Decode|Classify|Encode)$' -benchmem -count=6
// ./envelope on the idle 2-core amd64 development machine (Go 1.26), the medians against
// encoding/json through map[string]any:
//
//	Decode   order-created           ~0.39 µs, 384 B, 1 alloc   vs ~3.3 µs, 1632 B, 42 allocs  (~8×)
//	Decode   nested-4k               ~4.1 µs, 4.9 KB, 1 alloc   vs ~65 µs, 39.6 KB, 910 allocs (~16×)
//	Classify order-created           ~0.40 µs, 384 B, 1 alloc   vs ~3.4 µs, 1632 B, 42 allocs  (~8×)
//	Classify order-created, compact  ~0.32 µs, 320 B, 1 alloc   vs ~3.1 µs, 1632 B, 42 allocs  (~10×)
//	Classify nested-4k               ~4.1 µs (1.04 GB/s), 4.9 KB, 1 alloc vs ~66 µs, 910 allocs (~16×)
//	Encode   order-created           ~0.12 µs, 0 allocs (AppendEncode into a reused buffer)
//	                                 ~0.20 µs, 1 alloc (Encode)  vs ~1.9 µs, 1072 B, 26 allocs  (~10×)
//	Encode   nested-4k               ~4.3 µs, 1 alloc (Encode)   vs ~47 µs, 24 KB, 571 allocs   (~11×)
//	Classify 100,000 unknown keys (1.5 MB)  ~6.2–6.5 ms, 8.9 MB, 23 allocs
//
// [Make] followed by [Envelope.AppendEncode] into a reused buffer allocates twice (the
// envelope, and the caller's option value), go test -run='^$' -bench=Make -benchmem.
//
// Absolute times move by 5 % or more from one run to the next on that machine; the ratios
// and allocation counts are stable. The bytes above are of that run; the one allocation now
// takes the runtime's size class of the Envelope (160 B) and the text it keeps, among every
// class up to 8 KiB, which is 288 B for the compact order-created body and 320 B for the
// indented one (go test -run='^$' -bench='^Benchmark(Decode|Classify)$' -benchmem); the
// body of 100,000 unknown keys makes one allocation more than above, 24.
package envelope
