package main

import (
	"errors"
	"strings"
	"testing"
)

// coordinator run is not ready from a request's first failed try until a
// request gets its answer, whichever request it is (the one that waited
// may have been cancelled); an outage that several requests wait out at
// once begins and ends once.
func TestCoordinatorReachability(t *testing.T) {
	refused := errors.New("connection refused")
	var r reachability
	type step struct {
		do       string // wait or answer
		changed  bool   // the outage began or ended
		notReady bool
	}
	for i, s := range []step{
		{do: "answer"},
		{do: "wait", changed: true, notReady: true},
		{do: "wait", notReady: true}, // another request, the same outage
		{do: "answer", changed: true},
		{do: "answer"},
		{do: "wait", changed: true, notReady: true},
		{do: "answer", changed: true},
	} {
		var changed bool
		if s.do == "wait" {
			changed = r.waiting(refused)
		} else {
			changed = r.reached()
		}
		err := r.ready()
		if changed != s.changed || (err != nil) != s.notReady {
			t.Fatalf("step %d (%s): changed %v, ready %v; want changed %v, not ready %v", i, s.do, changed, err, s.changed, s.notReady)
		}
		if err != nil && !strings.Contains(err.Error(), "the authority is unreachable: connection refused") {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}
