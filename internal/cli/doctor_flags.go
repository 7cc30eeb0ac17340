package cli

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// managerFlags are the manager's arguments doctor reads.
type managerFlags struct {
	leaderElect                               bool
	leaderElectionID, leaderElectionNamespace string
	relinkSecrets                             bool
}

// readManagerFlags reads the manager's flags from the command and
// arguments of its container (the one named "manager", else the first),
// as Go's flag package parses them: -name or --name, =value, or a separate
// value for a flag that is not boolean.
func readManagerFlags(containers []corev1.Container) managerFlags {
	var f managerFlags
	c, ok := managerContainer(containers)
	if !ok {
		return f
	}
	args := append(slices.Clone(c.Command), c.Args...)
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			break
		}
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		switch name {
		case "leader-elect", "relink-secrets":
			on := true
			if hasValue {
				on, _ = strconv.ParseBool(value)
			}
			if name == "leader-elect" {
				f.leaderElect = on
			} else {
				f.relinkSecrets = on
			}
		case "leader-election-id", "leader-election-namespace":
			if !hasValue && i+1 < len(args) {
				i++
				value = args[i]
			}
			if name == "leader-election-id" {
				f.leaderElectionID = value
			} else {
				f.leaderElectionNamespace = value
			}
		}
	}
	return f
}

// managerContainer is the manager's container: the one named "manager",
// else the first.
func managerContainer(containers []corev1.Container) (corev1.Container, bool) {
	if len(containers) == 0 {
		return corev1.Container{}, false
	}
	if i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == "manager" }); i >= 0 {
		return containers[i], true
	}
	return containers[0], true
}
