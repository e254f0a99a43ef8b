package wss

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// pipelinedBackend is a fakeBackend that is a Pipeliner: Begin notes the
// decision, and its wait holds until the test releases that actionId.
type pipelinedBackend struct {
	*fakeBackend
	begun   chan string
	release map[string]chan struct{}
}

func (p *pipelinedBackend) Begin(ctx context.Context, peer string, raw []byte) func() (*protocol.Receipt, error) {
	var cmd struct {
		ActionID string `json:"actionId"`
	}
	_ = json.Unmarshal(raw, &cmd)
	p.begun <- cmd.ActionID
	rel := p.release[cmd.ActionID]
	return func() (*protocol.Receipt, error) {
		select {
		case <-rel:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &protocol.Receipt{ActionID: cmd.ActionID, Events: protocol.List[protocol.EventRef]{}}, nil
	}
}

// TestServePipelinedCommands: with a Pipeliner backend a Group's Commands
// are all decided, in arrival order, while none of them is durable yet,
// and their answers still go out in arrival order when the writes finish
// in another.
func TestServePipelinedCommands(t *testing.T) {
	fb := newFakeBackend(t)
	key := fb.addAgent(t, "w1", 3)
	fb.addGroup("grp-a", "w1")
	ids := []string{"act-1", "act-2", "act-3"}
	pb := &pipelinedBackend{fakeBackend: fb, begun: make(chan string, len(ids)), release: map[string]chan struct{}{}}
	for _, id := range ids {
		pb.release[id] = make(chan struct{})
	}
	url, _ := startServer(t, pb, Options{}, nil)
	c := openClient(t, url, fb, key, testNonce, nil)
	for i, id := range ids {
		c.send(commandFrame("c"+id[4:], id, "grp-a"))
		select {
		case got := <-pb.begun:
			if got != id {
				t.Fatalf("command %d decided: %s, want %s", i, got, id)
			}
		case <-time.After(safety):
			t.Fatalf("%s was not decided while the Commands before it waited for their writes", id)
		}
	}
	for i := len(ids) - 1; i >= 0; i-- {
		close(pb.release[ids[i]])
	}
	for _, id := range ids {
		if ack, ok := c.read().(*protocol.AckFrame); !ok || ack.Receipt.ActionID != id || ack.InReplyTo != "c"+id[4:] {
			t.Fatalf("got %#v, want the ACK of %s", ack, id)
		}
	}
}
