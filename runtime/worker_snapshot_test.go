package runtime

import (
	"fmt"
	"testing"
)

// A worker that was down while its Group grew and was compacted past its
// cursor (retention) restores the snapshot CURSOR_TOO_OLD names, read from
// the authority's store, and follows the Group on from it; before, the
// Group was rejected and its cursor stayed behind for good.
func TestWorkerRestoresCompactedGroup(t *testing.T) {
	k := newWKit(t)
	cfg := k.workerConfig("w1", t.TempDir(), newStepHandler(1), 1)
	if err := k.start(cfg).stop(t); err != nil { // enrolled by a first run
		t.Fatal(err)
	}
	k.member("w1")
	tw := k.start(cfg)
	k.until("grp-a followed", func() bool { return tw.w.liveStore().Cursor("grp-a") > 0 }, tw)
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the Group grows while the worker is down
		id := fmt.Sprintf("w-other-%d", i)
		k.join(id)
		k.member(id)
	}
	ref, err := k.auth.Service.Compact("grp-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	tw = k.start(cfg)
	k.until(fmt.Sprintf("grp-a restored at %d and followed on", ref.Sequence), func() bool {
		return tw.w.liveStore().Cursor("grp-a") > ref.Sequence
	}, tw)
	if err := tw.stop(t); err != nil {
		t.Fatal(err)
	}
}
