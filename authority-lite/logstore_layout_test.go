package authoritylite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/boltlog"
	"github.com/missionweave/mwp-worker/protocol"
)

// TestBoltlogReadsTheServiceLog: the bbolt store of package logstore reads
// the log the service writes (Groups, events, bounds, receipts, agents),
// so moving the service onto it keeps authority.db as it is.
func TestBoltlogReadsTheServiceLog(t *testing.T) {
	k := newSvc(t)
	for i := 1; i <= 3; i++ {
		k.toActive(fmt.Sprintf("wi-%d", i))
	}
	dir := crashCopy(t, k.s)
	want := map[string][][]byte{}
	if err := ReadLog(filepath.Join(dir, LogFile), time.Second, func(g string, raw []byte) error {
		if g != "" {
			want[g] = append(want[g], bytes.Clone(raw))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st, err := boltlog.Open(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	groups, err := st.Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) == 0 || !slices.Equal(groups, slices.Sorted(func(yield func(string) bool) {
		for g := range want {
			if !yield(g) {
				return
			}
		}
	})) {
		t.Fatalf("groups = %v, the service wrote %d", groups, len(want))
	}
	for _, g := range groups {
		first, last, err := st.Bounds(ctx, g)
		if err != nil || first != 1 || last != uint64(len(want[g])) {
			t.Fatalf("%s bounds [%d, %d] %v, the service wrote %d events", g, first, last, err, len(want[g]))
		}
		var got [][]byte
		if err := st.Read(ctx, g, 0, 0, func(_ uint64, raw []byte) bool { got = append(got, raw); return true }); err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, want[g], bytes.Equal) {
			t.Fatalf("%s: boltlog read other events than the service wrote", g)
		}
	}
	if _, _, err := st.Get(ctx, logstore.Agents, "w1"); err != nil {
		t.Fatalf("w1's record: %v", err)
	}
	if _, _, err := st.Get(ctx, logstore.Principals, "human:alice"); err != nil {
		t.Fatalf("alice's record: %v", err)
	}
	// A command's receipt is under its actor and actionId (the events'
	// actor and causationId).
	var ev protocol.Event
	if err := json.Unmarshal(want["grp-a"][0], &ev); err != nil {
		t.Fatal(err)
	}
	raw, err := st.Receipt(ctx, string(receiptKey(ev.Actor, ev.CausationID)))
	if err != nil {
		t.Fatalf("receipt of %s: %v", ev.CausationID, err)
	}
	var rec receiptRecord
	if err := json.Unmarshal(raw, &rec); err != nil || rec.Receipt.ActionID != ev.CausationID {
		t.Fatalf("receipt of %s = %s, %v", ev.CausationID, raw, err)
	}
}
