package group

import (
	"strconv"

	"github.com/missionweave/mwp-worker/protocol"
)

// The WorkItems of a Mission form an evolving DAG (spec 10.4): an edge
// points from a WorkItem to each dependency it declares.

// DependenciesMet returns the dependencies of WorkItem id that do not yet
// meet their policy; empty means the WorkItem is eligible to start.
func (g *Group) DependenciesMet(id string) []protocol.Dependency {
	w := g.Items[id]
	if w == nil {
		return nil
	}
	return unmetDependencies(w, func(id string) *WorkItem { return g.Items[id] })
}

func unmetDependencies(w *WorkItem, lookup func(string) *WorkItem) []protocol.Dependency {
	var unmet []protocol.Dependency
	for _, d := range w.Contract.Dependencies {
		dep := lookup(d.WorkItemID)
		if dep == nil || !satisfies(dep.State, d.Policy) {
			unmet = append(unmet, d)
		}
	}
	return unmet
}

func satisfies(s protocol.WorkItemState, p protocol.DependencyPolicy) bool {
	switch p {
	case protocol.DependencyVerified:
		return s == protocol.WorkVerified
	case protocol.DependencySubmitted:
		return s == protocol.WorkSubmitted || s == protocol.WorkVerified
	case protocol.DependencyTerminal:
		return s.Terminal()
	}
	return false
}

// checkDependencies refuses a dependency set for WorkItem id that names an
// unknown WorkItem, the item itself, or closes a cycle (INVALID_COMMAND).
func (t *txn) checkDependencies(id string, deps []protocol.Dependency) error {
	for i, d := range deps {
		ptr := "/payload/dependencies/" + strconv.Itoa(i)
		if d.WorkItemID == id {
			return protocol.InvalidCommand("WorkItem %s cannot depend on itself", id).At(ptr)
		}
		if t.peek(d.WorkItemID) == nil {
			return protocol.InvalidCommand("dependency on unknown WorkItem %s", d.WorkItemID).At(ptr)
		}
		if !d.Policy.Known() {
			return protocol.Errorf(protocol.CodeSchemaValidationFailed, "unknown dependency policy %q", d.Policy).At(ptr + "/policy")
		}
		if path := t.pathTo(d.WorkItemID, id); path != nil {
			e := protocol.InvalidCommand("dependency %s → %s closes a cycle", id, d.WorkItemID).At(ptr)
			return protocol.WithDetails(e, "cycle", append([]string{id}, path...))
		}
	}
	return nil
}

// pathTo returns a dependency path from → … → to, or nil when there is none.
func (t *txn) pathTo(from, to string) []string {
	seen := map[string]bool{}
	var walk func(cur string) []string
	walk = func(cur string) []string {
		if cur == to {
			return []string{cur}
		}
		if seen[cur] {
			return nil
		}
		seen[cur] = true
		w := t.peek(cur)
		if w == nil {
			return nil
		}
		for _, d := range w.Contract.Dependencies {
			if p := walk(d.WorkItemID); p != nil {
				return append([]string{cur}, p...)
			}
		}
		return nil
	}
	return walk(from)
}
