package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
)

// TreeOpener opens the tree under test; called again after Close it
// opens the same log (a restart).
type TreeOpener func(t *testing.T) logstore.Tree

// RunTree runs the behaviour every logstore.Tree must have. newTree
// returns an opener of a fresh, empty log.
func RunTree(t *testing.T, newTree func(t *testing.T) TreeOpener) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, open TreeOpener)
	}{
		{"Buckets", treeBuckets},
		{"Cursor", treeCursor},
		{"Rollback", treeRollback},
		{"Reopen", treeReopen},
		{"Large", treeLarge},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newTree(t)) })
	}
}

// dump renders a tree: every bucket, key and value in order.
func dump(t *testing.T, tr logstore.Tree) string {
	t.Helper()
	var b strings.Builder
	var walk func(bk logstore.Bucket, indent string) error
	walk = func(bk logstore.Bucket, indent string) error {
		return bk.ForEach(func(k, v []byte) error {
			if sub := bk.Bucket(k); sub != nil {
				fmt.Fprintf(&b, "%s%q/\n", indent, k)
				return walk(sub, indent+"  ")
			}
			fmt.Fprintf(&b, "%s%q=%q\n", indent, k, v)
			return nil
		})
	}
	must(t, tr.View(func(tx logstore.Tx) error {
		return tx.ForEach(func(name []byte) error {
			fmt.Fprintf(&b, "%q/\n", name)
			return walk(tx.Bucket(name), "  ")
		})
	}))
	return b.String()
}

func update(t *testing.T, tr logstore.Tree, fn func(tx logstore.Tx) error) {
	t.Helper()
	must(t, tr.Update(fn))
}

// fill writes a small tree of two levels, with binary keys.
func fill(tx logstore.Tx) error {
	g, err := tx.CreateBucketIfNotExists([]byte("groups"))
	if err != nil {
		return err
	}
	for _, id := range []string{"grp-b", "grp.a", "grp a\x00"} {
		b, err := g.CreateBucket([]byte(id))
		if err != nil {
			return err
		}
		ev, err := b.CreateBucket([]byte("events"))
		if err != nil {
			return err
		}
		for i := 1; i <= 5; i++ {
			if err := ev.Put([]byte{0, 0, 0, byte(i)}, []byte(fmt.Sprintf("%s-%d", id, i))); err != nil {
				return err
			}
		}
		meta, err := b.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		if err := meta.Put([]byte("empty"), nil); err != nil {
			return err
		}
	}
	return nil
}

func treeBuckets(t *testing.T, open TreeOpener) {
	tr := open(t)
	defer tr.Close()
	update(t, tr, fill)
	var committed bool
	update(t, tr, func(tx logstore.Tx) error {
		tx.OnCommit(func() { committed = true })
		if !tx.Writable() {
			return errors.New("an Update is not writable")
		}
		g := tx.Bucket([]byte("groups"))
		if _, err := g.CreateBucket([]byte("grp-b")); err == nil {
			return errors.New("a bucket created twice")
		}
		if err := g.Put([]byte("grp-b"), []byte("x")); err == nil {
			return errors.New("a key put over a bucket")
		}
		if err := g.DeleteBucket([]byte("grp.a")); err != nil {
			return err
		}
		if err := g.DeleteBucket([]byte("nothing")); err == nil {
			return errors.New("a missing bucket deleted")
		}
		b := g.Bucket([]byte("grp-b")).Bucket([]byte("events"))
		if err := b.Delete([]byte{0, 0, 0, 2}); err != nil {
			return err
		}
		if err := b.Delete([]byte("absent")); err != nil {
			return err
		}
		for want := uint64(1); want <= 3; want++ {
			if n, err := b.NextSequence(); err != nil || n != want {
				return fmt.Errorf("NextSequence = %d, %v; want %d", n, err, want)
			}
		}
		return nil
	})
	if !committed {
		t.Fatal("OnCommit did not run")
	}
	must(t, tr.View(func(tx logstore.Tx) error {
		if tx.Writable() {
			return errors.New("a View is writable")
		}
		if tx.Bucket([]byte("missing")) != nil {
			return errors.New("a missing root bucket is not nil")
		}
		g := tx.Bucket([]byte("groups"))
		if g.Bucket([]byte("grp.a")) != nil || g.Bucket([]byte("missing")) != nil {
			return errors.New("a deleted or missing bucket is not nil")
		}
		var ids []string
		if err := g.ForEachBucket(func(k []byte) error { ids = append(ids, string(k)); return nil }); err != nil {
			return err
		}
		if fmt.Sprint(ids) != fmt.Sprint([]string{"grp a\x00", "grp-b"}) {
			return fmt.Errorf("buckets %q", ids)
		}
		b := g.Bucket([]byte("grp-b"))
		if v := b.Bucket([]byte("events")).Get([]byte{0, 0, 0, 2}); v != nil {
			return fmt.Errorf("deleted key reads %q", v)
		}
		if v := b.Bucket([]byte("meta")).Get([]byte("empty")); v == nil || len(v) != 0 {
			return fmt.Errorf("an empty value reads %q", v)
		}
		return nil
	}))
	// The sequence goes on from where it was.
	update(t, tr, func(tx logstore.Tx) error {
		n, err := tx.Bucket([]byte("groups")).Bucket([]byte("grp-b")).Bucket([]byte("events")).NextSequence()
		if err == nil && n != 4 {
			err = fmt.Errorf("NextSequence = %d after 3", n)
		}
		return err
	})
}

func treeCursor(t *testing.T, open TreeOpener) {
	tr := open(t)
	defer tr.Close()
	update(t, tr, fill)
	ev := func(tx logstore.Tx) logstore.Bucket {
		return tx.Bucket([]byte("groups")).Bucket([]byte("grp-b")).Bucket([]byte("events"))
	}
	must(t, tr.View(func(tx logstore.Tx) error {
		c := ev(tx).Cursor()
		if k, v := c.Last(); k[3] != 5 || string(v) != "grp-b-5" {
			return fmt.Errorf("Last = %x %q", k, v)
		}
		if k, _ := c.Seek([]byte{0, 0, 0, 3}); k[3] != 3 {
			return fmt.Errorf("Seek(3) = %x", k)
		}
		if k, _ := c.Seek([]byte{0, 0, 0, 3, 1}); k[3] != 4 {
			return fmt.Errorf("Seek(past 3) = %x", k)
		}
		if k, _ := c.Seek([]byte{9}); k != nil {
			return fmt.Errorf("Seek past the end = %x", k)
		}
		n := 0
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			n++
		}
		if n != 5 {
			return fmt.Errorf("walked %d keys of 5", n)
		}
		return nil
	}))
	// Deleting while walking, as a retention trim does.
	update(t, tr, func(tx logstore.Tx) error {
		c := ev(tx).Cursor()
		for k, _ := c.First(); k != nil && k[3] < 4; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
	must(t, tr.View(func(tx logstore.Tx) error {
		var keys []byte
		_ = ev(tx).ForEach(func(k, _ []byte) error { keys = append(keys, k[3]); return nil })
		if string(keys) != string([]byte{4, 5}) {
			return fmt.Errorf("after the trim: %v", keys)
		}
		return nil
	}))
}

// treeRollback: an Update that fails leaves nothing of what it did.
func treeRollback(t *testing.T, open TreeOpener) {
	tr := open(t)
	defer tr.Close()
	update(t, tr, fill)
	before := dump(t, tr)
	boom := errors.New("boom")
	committed := false
	err := tr.Update(func(tx logstore.Tx) error {
		tx.OnCommit(func() { committed = true })
		g := tx.Bucket([]byte("groups"))
		if err := g.DeleteBucket([]byte("grp.a")); err != nil {
			return err
		}
		b, err := g.CreateBucket([]byte("grp.a"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		ev := g.Bucket([]byte("grp-b")).Bucket([]byte("events"))
		if err := ev.Put([]byte{0, 0, 0, 1}, []byte("changed")); err != nil {
			return err
		}
		if err := ev.Delete([]byte{0, 0, 0, 2}); err != nil {
			return err
		}
		if _, err := ev.NextSequence(); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists([]byte("other")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	if committed {
		t.Fatal("OnCommit ran for a failed Update")
	}
	if after := dump(t, tr); after != before {
		t.Fatalf("a failed Update changed the tree\nbefore\n%s\nafter\n%s", before, after)
	}
	update(t, tr, func(tx logstore.Tx) error {
		n, err := tx.Bucket([]byte("groups")).Bucket([]byte("grp-b")).Bucket([]byte("events")).NextSequence()
		if err == nil && n != 1 {
			err = fmt.Errorf("NextSequence = %d after a rolled back one", n)
		}
		return err
	})
}

// treeReopen: what was committed reads back the same after a restart,
// including a bucket deleted and created again in one Update, whose old
// keys are gone.
func treeReopen(t *testing.T, open TreeOpener) {
	tr := open(t)
	update(t, tr, fill)
	var id uint64
	update(t, tr, func(tx logstore.Tx) error {
		g := tx.Bucket([]byte("groups"))
		if err := g.DeleteBucket([]byte("grp.a")); err != nil {
			return err
		}
		b, err := g.CreateBucket([]byte("grp.a"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("k"), []byte("again")); err != nil {
			return err
		}
		if err := g.DeleteBucket([]byte("grp a\x00")); err != nil {
			return err
		}
		ev := g.Bucket([]byte("grp-b")).Bucket([]byte("events"))
		if err := ev.Delete([]byte{0, 0, 0, 1}); err != nil {
			return err
		}
		if err := ev.Put([]byte{0, 0, 0, 2}, []byte("two")); err != nil {
			return err
		}
		if _, err := ev.NextSequence(); err != nil {
			return err
		}
		_, err = ev.NextSequence()
		return err
	})
	must(t, tr.View(func(tx logstore.Tx) error { id = tx.ID(); return nil }))
	want := dump(t, tr)
	must(t, tr.Close())
	tr = open(t)
	defer tr.Close()
	if got := dump(t, tr); got != want {
		t.Fatalf("after a restart\n%s\nwant\n%s", got, want)
	}
	update(t, tr, func(tx logstore.Tx) error {
		if tx.ID() < id {
			return fmt.Errorf("the id went back from %d to %d", id, tx.ID())
		}
		n, err := tx.Bucket([]byte("groups")).Bucket([]byte("grp-b")).Bucket([]byte("events")).NextSequence()
		if err == nil && n != 3 {
			err = fmt.Errorf("NextSequence = %d after a restart at 2", n)
		}
		return err
	})
	var later uint64
	must(t, tr.View(func(tx logstore.Tx) error { later = tx.ID(); return nil }))
	if later <= id {
		t.Fatalf("the id did not rise with an Update: %d, then %d", id, later)
	}
}

// treeLarge: an Update of more changes than a replicated store takes in
// one write, and a deleted bucket that held them.
func treeLarge(t *testing.T, open TreeOpener) {
	tr := open(t)
	update(t, tr, func(tx logstore.Tx) error {
		r, err := tx.CreateBucketIfNotExists([]byte("r"))
		if err != nil {
			return err
		}
		b, err := r.CreateBucket([]byte("big"))
		if err != nil {
			return err
		}
		for i := range 2500 {
			if err := b.Put(fmt.Appendf(nil, "%05d", i), []byte("v")); err != nil {
				return err
			}
		}
		_, err = tx.CreateBucketIfNotExists([]byte("small"))
		return err
	})
	// A group commit: many writes, each marked where it ends.
	update(t, tr, func(tx logstore.Tx) error {
		b, err := tx.Bucket([]byte("r")).CreateBucket([]byte("cut"))
		if err != nil {
			return err
		}
		for w := range 400 {
			for i := range 5 {
				if err := b.Put(fmt.Appendf(nil, "%03d-%d", w, i), []byte("v")); err != nil {
					return err
				}
			}
			if c, ok := tx.(logstore.Cutter); ok {
				c.Cut()
			}
		}
		return nil
	})
	must(t, tr.Close())
	tr = open(t)
	cut := 0
	must(t, tr.View(func(tx logstore.Tx) error {
		return tx.Bucket([]byte("r")).Bucket([]byte("cut")).ForEach(func(_, _ []byte) error { cut++; return nil })
	}))
	if cut != 2000 {
		t.Fatalf("%d keys of 2000 written in 400 parts after a restart", cut)
	}
	n := 0
	must(t, tr.View(func(tx logstore.Tx) error {
		return tx.Bucket([]byte("r")).Bucket([]byte("big")).ForEach(func(_, _ []byte) error { n++; return nil })
	}))
	if n != 2500 {
		t.Fatalf("%d keys of 2500 after a restart", n)
	}
	update(t, tr, func(tx logstore.Tx) error { return tx.Bucket([]byte("r")).DeleteBucket([]byte("big")) })
	want := dump(t, tr)
	must(t, tr.Close())
	tr = open(t)
	defer tr.Close()
	if got := dump(t, tr); got != want {
		t.Fatalf("after deleting the large bucket and a restart\n%s\nwant\n%s", got, want)
	}
}
