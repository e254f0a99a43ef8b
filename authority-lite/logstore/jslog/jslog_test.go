package jslog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/memtree"
	"github.com/missionweave/mwp-worker/authority-lite/logstore/storetest"
	"github.com/missionweave/mwp-worker/internal/natstest"
)

// opener gives each subtest a stream of its own on the same servers.
func opener(url string, replicas int) func(t *testing.T) storetest.Opener {
	n := 0
	return func(t *testing.T) storetest.Opener {
		n++
		name := fmt.Sprintf("MWP%d", n)
		return func(t *testing.T) logstore.Store {
			s, err := Open(context.Background(), Config{URLs: url, Stream: name, Subjects: strings.ToLower(name), Replicas: replicas})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
}

func TestStore(t *testing.T) {
	storetest.Run(t, opener(natstest.Server(t), 1))
}

func TestStoreCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	storetest.Run(t, opener(natstest.Cluster(t, 3), 3))
}

func TestToken(t *testing.T) {
	for _, id := range []string{"grp-1_a", "", "a.b", "agent\x00a1\x00act", "=x", "*", ">"} {
		tok := token(id)
		back, err := untoken(tok)
		if err != nil || back != id {
			t.Fatalf("token(%q) = %q reads back %q, %v", id, tok, back, err)
		}
		for _, c := range tok {
			if c == '.' || c == '*' || c == '>' || c <= ' ' {
				t.Fatalf("token(%q) = %q is not one subject token", id, tok)
			}
		}
	}
}

// treeOpener gives each subtest a stream of its own on the same servers.
func treeOpener(url string, replicas int) func(t *testing.T) storetest.TreeOpener {
	n := 0
	return func(t *testing.T) storetest.TreeOpener {
		n++
		name := fmt.Sprintf("LOG%d", n)
		return func(t *testing.T) logstore.Tree {
			s, err := OpenTree(context.Background(), Config{URLs: url, Stream: name, Subjects: strings.ToLower(name), Replicas: replicas})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
}

func TestTree(t *testing.T) {
	storetest.RunTree(t, treeOpener(natstest.Server(t), 1))
}

func TestTreeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	storetest.RunTree(t, treeOpener(natstest.Cluster(t, 3), 3))
}

// TestTreeFenced: a second process writing the stream refuses every later
// write of the first, which keeps nothing of the refused one; the second
// goes on.
func TestTreeFenced(t *testing.T) {
	open := treeOpener(natstest.Server(t), 1)(t)
	put := func(tr logstore.Tree, k string) error {
		return tr.Update(func(tx logstore.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			if err := b.Put([]byte(k), []byte("1")); err != nil {
				return err
			}
			return b.Put([]byte(k+"-2"), []byte("2"))
		})
	}
	a := open(t)
	defer a.Close()
	if err := put(a, "a1"); err != nil {
		t.Fatal(err)
	}
	b := open(t)
	defer b.Close()
	if err := put(b, "b1"); err != nil {
		t.Fatal(err)
	}
	if err := put(a, "a2"); err == nil || !errors.Is(err, errExpectation) {
		t.Fatalf("the first writer's write after the second's: %v", err)
	}
	if err := a.View(func(tx logstore.Tx) error {
		if v := tx.Bucket([]byte("b")).Get([]byte("a2")); v != nil {
			return fmt.Errorf("a refused write reads %q", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := put(b, "b2"); err != nil {
		t.Fatal(err)
	}
	c := open(t)
	defer c.Close()
	var keys []string
	_ = c.View(func(tx logstore.Tx) error {
		return tx.Bucket([]byte("b")).ForEach(func(k, _ []byte) error { keys = append(keys, string(k)); return nil })
	})
	if fmt.Sprint(keys) != "[a1 a1-2 b1 b1-2 b2 b2-2]" {
		t.Fatalf("the stream holds %v", keys)
	}
}

// TestParts: a group commit too large for one batch is cut only where a
// command's write ends, unless one write alone is larger than a batch.
func TestParts(t *testing.T) {
	subject := func(op memtree.Op) string { return string(op.Key) }
	// writes of n distinct keys each, the last one repeating a key.
	build := func(sizes ...int) ([]memtree.Op, []int) {
		var ops []memtree.Op
		var cuts []int
		for w, n := range sizes {
			for i := range n {
				ops = append(ops, memtree.Op{Kind: memtree.OpPut, Key: fmt.Appendf(nil, "w%d-%d", w, i)})
			}
			ops = append(ops, memtree.Op{Kind: memtree.OpPut, Key: fmt.Appendf(nil, "w%d-0", w)})
			cuts = append(cuts, len(ops))
		}
		return ops, cuts
	}
	for _, tc := range []struct {
		sizes []int
		want  string
	}{
		{[]int{3, 4}, "[[0 9]]"},
		{[]int{600, 400}, "[[0 1002]]"},           // 1,000 subjects: one batch
		{[]int{600, 401}, "[[0 601] [601 1003]]"}, // one more: cut between the writes
		{[]int{1500, 2}, "[[0 1501] [1501 1504]]"},
		{[]int{2, 1500, 2}, "[[0 3] [3 1504] [1504 1507]]"},
	} {
		ops, cuts := build(tc.sizes...)
		if got := fmt.Sprint(parts(ops, cuts, subject)); got != tc.want {
			t.Errorf("writes of %v keys: parts %s, want %s", tc.sizes, got, tc.want)
		}
	}
}
