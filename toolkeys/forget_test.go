package toolkeys

import (
	"context"
	"testing"
)

// ForgetMission deletes the records and fences of one Mission's
// operations and nothing of another's.
func TestForgetMission(t *testing.T) {
	db := openDB(t, tempDBPath(t))
	l := openLedger(t, db, Options{})
	ctx := context.Background()
	svc := newService()
	other := opA
	other.MissionID = "mis-other"
	for _, op := range []Op{opA, other} {
		if _, err := l.Do(ctx, op, callService(svc, op)); err != nil {
			t.Fatal(err)
		}
		if err := l.Fence(op.MissionID, op.WorkItemID, op.OwnershipEpoch); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.ForgetMission(opA.MissionID); err != nil || n != 1 {
		t.Fatalf("forget: %d, %v; want 1", n, err)
	}
	var left []string
	if err := l.Records(func(r Record) error { left = append(left, r.Op.MissionID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != "mis-other" {
		t.Fatalf("records left: %v", left)
	}
	if e, _ := l.FenceOf(opA.MissionID, opA.WorkItemID); e != 0 {
		t.Fatalf("fence of the forgotten Mission: %d", e)
	}
	if e, _ := l.FenceOf(other.MissionID, other.WorkItemID); e != other.OwnershipEpoch {
		t.Fatalf("fence of the other Mission: %d", e)
	}
}
