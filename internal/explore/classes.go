package explore

import "github.com/initlock/initlock/internal/kubeenv/faults"

// classMap is the explorer's mapping from the fault catalogue
// (internal/kubeenv/faults): for each class it models, the outcomes,
// events, cache reads and script ways that inject it. It is assembled from
// the tables next to each of them (outcomeClasses, eventClasses,
// staleReadClass, wayClasses), which name the class of every choice and
// so of every count in Result.Faults.
func classMap() faults.Map {
	m := faults.Map{}
	add := func(c faults.Class, name string) {
		if c != "" {
			m[c] = append(m[c], name)
		}
	}
	for o, c := range outcomeClasses {
		add(c, "outcome "+outcomeNames[o])
	}
	for k, c := range eventClasses {
		add(c, "event "+string(k))
	}
	for w, c := range wayClasses {
		add(c, "init "+w)
	}
	add(staleReadClass("provider"), "a provider's cache read older than the live version")
	add(staleReadClass("manager"), "the manager's cache read older than the live version")
	return m
}
