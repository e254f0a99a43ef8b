package runtime

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/missionweave/mwp-worker/protocol"
)

func openBolt(t *testing.T, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func checkBolt(t *testing.T, db *bolt.DB) {
	t.Helper()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Records and baselines survive a close without any shutdown step (what a
// crash leaves: only committed transactions), pending ones come back in
// decision order, settled ones do not, and old settled records are pruned
// at open while old pending ones are kept.
func TestNoticeStoreCrashAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worker.db")
	db := openBolt(t, path)
	st, err := openNoticeStore(db, t0)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(id, state string, at time.Duration) noticeRecord {
		return noticeRecord{Kind: NoticeRejection, GroupID: "grp-a", WorkItemID: "wi-" + id, MessageID: "msg-" + id,
			ActionID: "act-" + id, Text: "t", Object: []byte(`{"kind":"admission.rejection"}`), State: state, At: t0.Add(at)}
	}
	for _, r := range []noticeRecord{
		rec("2", noticePending, 2*time.Second), rec("1", noticePending, time.Second), rec("3", noticePosted, 0),
		rec("old-posted", noticePosted, -8*24*time.Hour), rec("old-pending", noticePending, -8*24*time.Hour),
	} {
		if err := st.put(r); err != nil {
			t.Fatal(err)
		}
	}
	b := baseline{Disclosure: disc(0, time.Minute, 2*time.Minute, protocol.CapacityConstrained), PublishedAt: t0}
	if err := st.putBaseline(itemKey{"grp-a", "wi-1"}, b); err != nil {
		t.Fatal(err)
	}
	if err := st.putBaseline(itemKey{"grp-b", "wi-1"}, b); err != nil {
		t.Fatal(err)
	}
	if err := st.deleteBaseline(itemKey{"grp-b", "wi-1"}); err != nil {
		t.Fatal(err)
	}
	checkBolt(t, db)
	db.Close()

	db = openBolt(t, path)
	defer db.Close()
	st, err = openNoticeStore(db, t0)
	if err != nil {
		t.Fatal(err)
	}
	pend, err := st.pending()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range pend {
		ids = append(ids, r.MessageID)
	}
	if want := []string{"msg-old-pending", "msg-1", "msg-2"}; !slices.Equal(ids, want) {
		t.Fatalf("pending %v, want %v", ids, want)
	}
	if r, ok, err := st.get("msg-3"); err != nil || !ok || r.State != noticePosted || string(r.Object) != `{"kind":"admission.rejection"}` {
		t.Fatalf("settled record %+v %v %v", r, ok, err)
	}
	if _, ok, _ := st.get("msg-old-posted"); ok {
		t.Fatal("an old settled record was kept")
	}
	bl, err := st.baselines()
	if err != nil {
		t.Fatal(err)
	}
	got, ok := bl[itemKey{"grp-a", "wi-1"}]
	if len(bl) != 1 || !ok || !got.PublishedAt.Equal(t0) || got.Disclosure != b.Disclosure {
		t.Fatalf("baselines %+v", bl)
	}
	checkBolt(t, db)
}
