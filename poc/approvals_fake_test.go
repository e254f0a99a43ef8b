package poc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// fakeAuthority is both the ApprovalSource and the receiving end of the
// approver: like the Group Authority it verifies each signed Command with
// the human's public key (signature, signer, freshness, epochs, schema),
// checks expectedRevision and the Mission state, and records what it
// accepted.
type fakeAuthority struct {
	clock clock.Clock
	keys  protocol.KeySet
	owner protocol.Actor

	mu        sync.Mutex
	missions  map[string]PendingMission
	artifacts map[string][]byte
	accepted  []*protocol.Command
	rawSeen   [][]byte
	seq       uint64
	refuse    error // when set, Submit fails with it after verification
}

func newFakeAuthority(t testing.TB, clk clock.Clock) (*fakeAuthority, Approver) {
	t.Helper()
	owner := protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}
	key, err := protocol.GenerateKey("human:alice#k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAuthority{clock: clk, keys: protocol.NewKeySet(key.Public()), owner: owner,
		missions: map[string]PendingMission{}, artifacts: map[string][]byte{}, seq: 40}
	return f, Approver{Human: owner, Key: key, Submit: f.Submit}
}

// addMission puts a Mission in awaiting_approval with one artifact per
// (mediaType, content) pair and one evidence record citing them all.
func (f *fakeAuthority) addMission(id, group string, rev uint64, subject string, arts ...[2]string) PendingMission {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := PendingMission{MissionID: id, GroupID: group, Title: "Mission " + id, Revision: rev, MembershipEpoch: 3,
		Summary: "All stages verified.\nSee the evidence below.", SubmittedAt: t0.Add(-time.Minute)}
	var digests []string
	for i, a := range arts {
		data := []byte(a[1])
		d := protocol.Digest(data)
		f.artifacts[d] = data
		digests = append(digests, d)
		p.Artifacts = append(p.Artifacts, protocol.ArtifactManifest{
			ContentHash: d, MediaType: a[0], MissionID: id, GroupID: group, WorkItemID: fmt.Sprintf("wi-%d", i+1),
			Producer:  protocol.ArtifactProducer{AgentID: "worker-1", AgentVersion: "0.1.0", AgentCardHash: protocol.Digest([]byte("card"))},
			CreatedAt: protocol.NewTime(t0.Add(-2 * time.Minute)), Classification: "internal", Size: uint64(len(data)), URI: "mwp-artifact:" + d,
		})
	}
	p.Evidence = []protocol.Evidence{{Subject: subject, Criteria: []string{"ac-1", "ac-2"}, Method: "go test ./...", Result: protocol.EvidencePass,
		Producer: protocol.Actor{Kind: protocol.ActorAgent, ID: "reviewer-1"}, Timestamp: protocol.NewTime(t0.Add(-90 * time.Second)), Artifacts: digests}}
	f.missions[id] = p
	return p
}

func (f *fakeAuthority) Pending(context.Context) ([]PendingMission, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]PendingMission, 0, len(f.missions))
	for _, p := range f.missions {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PendingMission) int { return strings.Compare(a.MissionID, b.MissionID) })
	return out, nil
}

func (f *fakeAuthority) ArtifactBytes(_ context.Context, d string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.artifacts[d]
	if !ok {
		return nil, fmt.Errorf("no artifact %s", d)
	}
	return bytes.Clone(b), nil
}

// Submit plays the authority's command pipeline for the two decisions.
func (f *fakeAuthority) Submit(_ context.Context, signed []byte) (protocol.Receipt, error) {
	in := protocol.Inbound{Keys: f.keys}
	ic, err := in.DecodeCommand(signed, f.clock.Now())
	if err != nil {
		return protocol.Receipt{}, err
	}
	cmd := ic.Command
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rawSeen = append(f.rawSeen, bytes.Clone(signed))
	if f.refuse != nil {
		return protocol.Receipt{}, f.refuse
	}
	if cmd.Actor != f.owner {
		return protocol.Receipt{}, protocol.Errorf(protocol.CodeAuthForbidden, "not the MissionOwner")
	}
	var missionID string
	switch cmd.Type {
	case protocol.CmdMissionApprove:
		var p protocol.ApproveMissionPayload
		if err := json.Unmarshal(cmd.Payload, &p); err != nil {
			return protocol.Receipt{}, err
		}
		missionID = p.MissionID
	case protocol.CmdMissionRequestChanges:
		var p protocol.RequestChangesPayload
		if err := json.Unmarshal(cmd.Payload, &p); err != nil {
			return protocol.Receipt{}, err
		}
		missionID = p.MissionID
	default:
		return protocol.Receipt{}, protocol.Errorf(protocol.CodeInvalidCommand, "unexpected %s", cmd.Type)
	}
	m, ok := f.missions[missionID]
	if !ok {
		return protocol.Receipt{}, protocol.Errorf(protocol.CodeInvalidStateTransition, "mission %s is not awaiting approval", missionID)
	}
	if cmd.ExpectedRevision != nil && *cmd.ExpectedRevision != m.Revision {
		return protocol.Receipt{}, protocol.Errorf(protocol.CodeRevisionConflict, "mission %s is at revision %d, command expected %d", missionID, m.Revision, *cmd.ExpectedRevision)
	}
	if cmd.GroupID != m.GroupID || cmd.MembershipEpoch == nil || *cmd.MembershipEpoch != m.MembershipEpoch {
		return protocol.Receipt{}, protocol.Errorf(protocol.CodeMembershipStale, "wrong group or membership epoch")
	}
	delete(f.missions, missionID)
	f.accepted = append(f.accepted, cmd)
	f.seq++
	seq := f.seq
	return protocol.Receipt{ActionID: cmd.ActionID, Events: []protocol.EventRef{{EventID: fmt.Sprintf("evt-%d", seq), GroupID: m.GroupID, Sequence: &seq}}}, nil
}

func (f *fakeAuthority) commands() []*protocol.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.accepted)
}

// bumpRevision makes the Mission change under an open page.
func (f *fakeAuthority) bumpRevision(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.missions[id]
	m.Revision++
	f.missions[id] = m
}

func (f *fakeAuthority) corrupt(digest string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.artifacts[digest] = append(bytes.Clone(f.artifacts[digest]), '!')
}

func mustJSON(t testing.TB, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}
