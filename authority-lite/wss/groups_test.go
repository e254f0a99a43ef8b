package wss

import (
	"context"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/missionweave/mwp-worker/protocol"
)

// memberBackend is the fake with MemberGroups: its Groups' readers are
// the members; changed tells the server to look again.
type memberBackend struct {
	*fakeBackend
	cmu sync.Mutex
	ch  chan struct{}
}

func (m *memberBackend) MemberGroups(agentID string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []string{}
	for id, g := range m.groups {
		if g.readers[agentID] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (m *memberBackend) MembershipChanged() <-chan struct{} {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	return m.ch
}

func (m *memberBackend) changed() {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	close(m.ch)
	m.ch = make(chan struct{})
}

// The HELLO answer lists the agent's Groups; a GROUPS frame follows each
// change of that list, and none a change that leaves it as it was.
func TestServeGroupsNotice(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	fb.addGroup("grp-x", "other")
	mb := &memberBackend{fakeBackend: fb, ch: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := Listen(ctx, "127.0.0.1:0", ListenOptions{InsecureLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- NewServer(mb, Options{}).Serve(ctx, ln) }()
	defer func() {
		cancel()
		<-done
	}()
	c := dial(t, "ws://"+ln.Addr().String()+Path, nil)
	c.sendRaw(websocket.MessageText, helloFrame(t, key, "w1", 3, testNonce, fb.Now()))
	if h, ok := c.read().(*protocol.Hello); !ok || !slices.Equal(h.Groups, []string{"grp-a"}) {
		t.Fatalf("HELLO answer %#v, want groups [grp-a]", h)
	}
	fb.addGroup("grp-b", "w1")
	mb.changed()
	if g, ok := c.read().(*protocol.GroupsFrame); !ok || !slices.Equal(g.Groups, []string{"grp-a", "grp-b"}) {
		t.Fatalf("after joining grp-b: %#v", g)
	}
	fb.addGroup("grp-y", "other") // not w1's: its list is unchanged
	mb.changed()
	fb.addGroup("grp-c", "w1")
	mb.changed()
	if g, ok := c.read().(*protocol.GroupsFrame); !ok || !slices.Equal(g.Groups, []string{"grp-a", "grp-b", "grp-c"}) {
		t.Fatalf("after joining grp-c: %#v", g)
	}
	// A client may not send it.
	c.send(`{"type":"GROUPS","frameId":"g1","groups":[]}`)
	c.readError(protocol.CodeProtocolViolation)
	_ = c.ws.CloseNow()
}
