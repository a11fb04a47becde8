package envelope

import (
	"encoding/binary"
	"slices"
)

// memberID names a member the decoder knows, at its level: the frame, meta or dead_letter.
// Every other key is memberUnknown and kept verbatim.
type memberID uint8

const (
	memberUnknown memberID = iota

	memberJob
	memberTraceID
	memberURN
	memberData
	memberMeta
	memberAttempts
	memberDeadLetter
	memberTimestamp // forbidden

	memberMetaID
	memberMetaQueue
	memberMetaLang
	memberMetaSchemaVersion
	memberMetaCreatedAt
	memberMetaMaxRetries // forbidden
	memberMetaAttempts   // forbidden
	memberMetaSource     // forbidden
	memberMetaTS         // forbidden

	memberDLReason
	memberDLError
	memberDLException
	memberDLFailedAt
	memberDLOriginalQueue
	memberDLAttempts
	memberDLLang
)

// memberPointer is the JSON pointer of the forbidden members, for their warnings.
var memberPointer = [...]string{
	memberTimestamp:      "/timestamp",
	memberMetaMaxRetries: "/meta/max_retries",
	memberMetaAttempts:   "/meta/attempts",
	memberMetaSource:     "/meta/source",
	memberMetaTS:         "/meta/ts",
}

// memberNamed returns the member of lvl with the decoded key name.
func memberNamed(lvl level, name string) memberID {
	switch lvl {
	case levelMeta:
		switch name {
		case "id":
			return memberMetaID
		case "queue":
			return memberMetaQueue
		case "lang":
			return memberMetaLang
		case "schema_version":
			return memberMetaSchemaVersion
		case "created_at":
			return memberMetaCreatedAt
		case "max_retries":
			return memberMetaMaxRetries
		case "attempts":
			return memberMetaAttempts
		case "source":
			return memberMetaSource
		case "ts":
			return memberMetaTS
		}
	case levelDeadLetter:
		switch name {
		case "reason":
			return memberDLReason
		case "error":
			return memberDLError
		case "exception":
			return memberDLException
		case "failed_at":
			return memberDLFailedAt
		case "original_queue":
			return memberDLOriginalQueue
		case "attempts":
			return memberDLAttempts
		case "lang":
			return memberDLLang
		}
	default:
		switch name {
		case "job":
			return memberJob
		case "trace_id":
			return memberTraceID
		case "urn":
			return memberURN
		case "data":
			return memberData
		case "meta":
			return memberMeta
		case "attempts":
			return memberAttempts
		case "dead_letter":
			return memberDeadLetter
		case "timestamp":
			return memberTimestamp
		}
	}
	return memberUnknown
}

// knownNames lists the keys memberNamed knows, by level.
var knownNames = [...][]string{
	levelTop:        {"job", "trace_id", "urn", "data", "meta", "attempts", "dead_letter", "timestamp"},
	levelMeta:       {"id", "queue", "lang", "schema_version", "created_at", "max_retries", "attempts", "source", "ts"},
	levelDeadLetter: {"reason", "error", "exception", "failed_at", "original_queue", "attempts", "lang"},
}

// plainKeyText is a known key and its closing quote as the first 16 bytes of text would
// hold them (two little-endian words, masked to the key's length).
type plainKeyText struct {
	w0, m0, w1, m1 uint64
	first          byte // the name's first byte
	n              int  // the length of the name and its quote
	id             memberID
}

// plainKeys holds the known keys of each level, those with the same first byte together;
// plainIndex maps a level's first bytes to 1 + the index of their first key, 0 for none.
var plainKeys, plainIndex = func() (keys [3][]plainKeyText, index [3][256]uint8) {
	for lvl, names := range knownNames {
		names = slices.Clone(names)
		slices.SortStableFunc(names, func(a, b string) int { return int(a[0]) - int(b[0]) })
		for _, name := range names {
			var b [16]byte
			n := copy(b[:], name+`"`)
			var m [16]byte
			for k := range n {
				m[k] = 0xff
			}
			if index[lvl][name[0]] == 0 {
				index[lvl][name[0]] = uint8(len(keys[lvl]) + 1)
			}
			keys[lvl] = append(keys[lvl], plainKeyText{
				w0: binary.LittleEndian.Uint64(b[:]), m0: binary.LittleEndian.Uint64(m[:]),
				w1: binary.LittleEndian.Uint64(b[8:]), m1: binary.LittleEndian.Uint64(m[8:]),
				first: name[0], n: n, id: memberNamed(level(lvl), name),
			})
		}
	}
	return keys, index
}()

// plainKey recognises the key starting at s[i] == '"' when it is a known member of lvl
// spelled without escapes, and returns the member and the offset just past the key, or
// memberUnknown (then the key is scanned as any string and looked up with memberNamed). It
// compares the 16 bytes after the opening quote with the known keys that start with the
// same byte; a key less than 16 bytes before the end of s takes the general path.
//
// hint is the member that the encoders' order puts next (see canonicalNext), tried first:
// a body written in that order is recognised with one comparison a key.
func plainKey(lvl level, s []byte, i int, hint memberID) (memberID, int) {
	k := s[i+1:]
	if len(k) < 16 {
		return memberUnknown, 0
	}
	w0, w1 := binary.LittleEndian.Uint64(k), binary.LittleEndian.Uint64(k[8:])
	if h := &plainByID[hint]; w0&h.m0 == h.w0 && w1&h.m1 == h.w1 && hint != memberUnknown {
		return hint, i + 1 + h.n
	}
	j := int(plainIndex[lvl][k[0]])
	if j == 0 {
		return memberUnknown, 0
	}
	for keys := plainKeys[lvl][j-1:]; len(keys) > 0 && keys[0].first == k[0]; keys = keys[1:] {
		if k := &keys[0]; w0&k.m0 == k.w0 && w1&k.m1 == k.w1 {
			return k.id, i + 1 + k.n
		}
	}
	return memberUnknown, 0
}

// numMembers is the number of memberIDs, memberUnknown included.
const numMembers = int(memberDLLang) + 1

// plainByID is plainKeys by member (the zero value, which matches no key text, for
// memberUnknown).
var plainByID = func() (byID [numMembers]plainKeyText) {
	for _, keys := range plainKeys {
		for _, k := range keys {
			byID[k.id] = k
		}
	}
	return byID
}()

// canonicalFirst is the first member of each level in the encoders' order (Encode's, and
// that of the other SDKs' fixtures), and canonicalNext the member after each; memberUnknown
// where nothing follows.
var (
	canonicalFirst = [...]memberID{levelTop: memberJob, levelMeta: memberMetaID, levelDeadLetter: memberDLReason}
	canonicalNext  = [numMembers]memberID{
		memberJob:               memberTraceID,
		memberTraceID:           memberData,
		memberData:              memberMeta,
		memberMeta:              memberAttempts,
		memberAttempts:          memberDeadLetter,
		memberMetaID:            memberMetaQueue,
		memberMetaQueue:         memberMetaLang,
		memberMetaLang:          memberMetaSchemaVersion,
		memberMetaSchemaVersion: memberMetaCreatedAt,
		memberDLReason:          memberDLError,
		memberDLError:           memberDLException,
		memberDLException:       memberDLFailedAt,
		memberDLFailedAt:        memberDLOriginalQueue,
		memberDLOriginalQueue:   memberDLAttempts,
		memberDLAttempts:        memberDLLang,
	}
)
