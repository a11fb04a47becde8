package pulsartest

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

const partitionSuffix = "-partition-"

// normalizeTopic turns the short forms clients send into persistent://tenant/namespace/name (or
// non-persistent://…).
func normalizeTopic(name string) (string, error) {
	rest, scheme := name, "persistent"
	if i := strings.Index(name, "://"); i >= 0 {
		scheme, rest = name[:i], name[i+3:]
	}
	if scheme != "persistent" && scheme != "non-persistent" {
		return "", fmt.Errorf("%w: %q: the domain must be persistent or non-persistent", ErrInvalidTopic, name)
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return scheme + "://public/default/" + parts[0], nil
	case (len(parts) == 3 || len(parts) == 4) && parts[len(parts)-1] != "":
		// tenant/namespace/topic, or the legacy tenant/cluster/namespace/topic
		if msg := namespaceProblem(parts[:len(parts)-1]); msg != "" {
			return "", fmt.Errorf("%w: %q: %s", ErrInvalidTopic, name, msg)
		}
		return scheme + "://" + rest, nil
	default:
		return "", fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
}

// namedEntity is what Pulsar accepts as the name of a tenant, a cluster or a namespace (NamedEntity.checkName):
// letters, digits and _-=:. only. A topic's local name may hold any character.
var namedEntity = regexp.MustCompile(`^[-=:.\w]*$`)

// namespaceProblem returns Pulsar 4.0's complaint about the parts of a topic name before its local name (tenant
// and namespace, or tenant, cluster and namespace), or "" when it has none.
func namespaceProblem(parts []string) string {
	if slices.Contains(parts, "") {
		return "Invalid namespace format. namespace: " + strings.Join(parts, "/")
	}
	for _, p := range parts {
		if !namedEntity.MatchString(p) {
			return "Invalid named entity: " + p
		}
	}
	return ""
}

// splitPartition returns the partitioned topic name and index of a partition name, or (name, -1).
func splitPartition(fq string) (string, int32) {
	i := strings.LastIndex(fq, partitionSuffix)
	if i < 0 {
		return fq, -1
	}
	n, err := strconv.ParseInt(fq[i+len(partitionSuffix):], 10, 32)
	if err != nil || n < 0 {
		return fq, -1
	}
	return fq[:i], int32(n)
}

// namespaceOf returns tenant/namespace of a fully qualified topic name.
func namespaceOf(fq string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(fq, "non-persistent://"), "persistent://")
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		return rest[:i]
	}
	return rest
}

// isNonPersistent reports whether a fully qualified topic name is in the non-persistent domain.
func isNonPersistent(fq string) bool { return strings.HasPrefix(fq, "non-persistent://") }

// invalidTopicMessage is Pulsar 4.0's InvalidTopicName text for a topic name normalizeTopic refuses, as in the
// client's "server error: InvalidTopicName: …".
func invalidTopicMessage(name string) string {
	rest := name
	if i := strings.Index(name, "://"); i >= 0 {
		if d := name[:i]; d != "persistent" && d != "non-persistent" {
			return "Invalid topic name: Invalid topic domain: '" + d + "'"
		}
		rest = name[i+3:]
		if strings.Count(rest, "/") == 2 && strings.HasSuffix(name, "/") {
			return "Invalid topic name: Invalid topic name: " + name + ". Topic local name must not be blank."
		}
	}
	if parts := strings.Split(rest, "/"); (len(parts) == 3 || len(parts) == 4) && parts[len(parts)-1] != "" {
		if msg := namespaceProblem(parts[:len(parts)-1]); msg != "" {
			return "Invalid topic name: " + msg
		}
	}
	return "Invalid topic name: Invalid topic name: " + name
}
