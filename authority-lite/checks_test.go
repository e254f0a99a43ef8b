package authoritylite

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// One negative row per check of artifact.publish and of override-grant
// matching. Each row differs from an accepted command in one thing, and
// names the code and the JSON pointer of the check that must refuse it, so
// a row cannot pass because an earlier check refused it for another reason.

// signedManifest signs m with key after the edit, as a producer would.
func signedManifest(t *testing.T, m protocol.ArtifactManifest, key protocol.PrivateKey) protocol.ArtifactManifest {
	t.Helper()
	m.Signature = protocol.Signature{Alg: protocol.SignatureAlgEd25519, KeyID: key.KeyID, CreatedAt: m.CreatedAt}
	raw, err := protocol.SignedValue(m, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// wantRefusal fails unless err is a protocol error with code and pointer.
func wantRefusal(t *testing.T, err error, code protocol.Code, pointer string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code || pe.Pointer != pointer {
		t.Fatalf("got %v (at %q), want %s at %q", err, pointerOf(err), code, pointer)
	}
}

func TestArtifactPublishChecks(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	data := []byte("--- a/x.go\n+++ b/x.go\n")
	digest, err := k.s.PutArtifact(data)
	if err != nil {
		t.Fatal(err)
	}
	// The name of other bytes, stored with content that does not hash to it.
	corrupt := protocol.Digest([]byte("other bytes"))
	path, err := k.s.artifactPath(corrupt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not the other bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := k.s.org.agent("w1")
	base := protocol.ArtifactManifest{ContentHash: digest, MediaType: "text/x-diff", Schema: protocol.ManifestSchema("", "text/x-diff"),
		Producer:  protocol.ArtifactProducer{AgentID: "w1", AgentVersion: "1.0.0", AgentCardHash: a.CardHash},
		MissionID: "mis-a", GroupID: "grp-a", WorkItemID: "wi-1", SourceArtifacts: protocol.List[string]{}, ToolVersions: protocol.StringMap{"go": "1.26"},
		CreatedAt: protocol.NewTime(k.clk.Now()), Classification: protocol.ClassInternal, Size: uint64(len(data)), URI: "mwp-artifact:" + digest}
	epoch := w.Ownership.OwnershipEpoch
	// producer names an agent as a manifest must: its registered card.
	producer := func(id string) protocol.ArtifactProducer {
		card, _ := k.s.AgentCard(id)
		return protocol.ArtifactProducer{AgentID: id, AgentVersion: card.AgentVersion, AgentCardHash: k.s.org.agent(id).CardHash}
	}

	for _, tc := range []struct {
		name    string
		by      string // the sending agent; the signer unless signer is set
		signer  string
		edit    func(*protocol.ArtifactManifest)
		payload func(*protocol.PublishArtifactPayload)
		tamper  bool // change the manifest after signing
		code    protocol.Code
		pointer string
	}{
		{name: "another Group", edit: func(m *protocol.ArtifactManifest) { m.GroupID = "grp-b" }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/groupId"},
		{name: "another Mission", edit: func(m *protocol.ArtifactManifest) { m.MissionID = "mis-b" }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/groupId"},
		{name: "producer is not the sender", by: "w1", signer: "w2", edit: func(m *protocol.ArtifactManifest) { m.Producer.AgentID = "w2" }, code: protocol.CodeAuthForbidden},
		{name: "signed by a key not the producer's", by: "w1", signer: "w2", code: protocol.CodeAuthInvalidSignature, pointer: "/payload/manifest/signature/keyId"},
		{name: "changed after signing", tamper: true, code: protocol.CodeAuthInvalidSignature, pointer: "/payload/manifest/signature"},
		{name: "content not in the store", edit: func(m *protocol.ArtifactManifest) { m.ContentHash = protocol.Digest([]byte("never stored")) }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/contentHash"},
		{name: "stored content does not hash to its name", edit: func(m *protocol.ArtifactManifest) { m.ContentHash = corrupt }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/contentHash"},
		{name: "size one more", edit: func(m *protocol.ArtifactManifest) { m.Size++ }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/size"},
		{name: "size one less", edit: func(m *protocol.ArtifactManifest) { m.Size-- }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/size"},
		{name: "unknown work item", edit: func(m *protocol.ArtifactManifest) { m.WorkItemID = "wi-x" }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/workItemId"},
		{name: "worker without a lease", payload: func(p *protocol.PublishArtifactPayload) { p.OwnershipEpoch, p.LeaseID = nil, "" }, code: protocol.CodeInvalidCommand, pointer: "/payload/leaseId"},
		// The command schema requires the pair together.
		{name: "lease id without an epoch", payload: func(p *protocol.PublishArtifactPayload) { p.OwnershipEpoch = nil }, code: protocol.CodeSchemaValidationFailed, pointer: "/payload"},
		{name: "epoch without a lease id", payload: func(p *protocol.PublishArtifactPayload) { p.LeaseID = "" }, code: protocol.CodeSchemaValidationFailed, pointer: "/payload"},
		{name: "not the current lease", payload: func(p *protocol.PublishArtifactPayload) { p.LeaseID = "lease-old" }, code: protocol.CodeWorkLeaseExpired, pointer: "/payload/leaseId"},
		{name: "an epoch never granted", payload: func(p *protocol.PublishArtifactPayload) { p.OwnershipEpoch = protocol.Uint64(epoch + 1) }, code: protocol.CodeInvalidCommand, pointer: "/payload/ownershipEpoch"},
		{name: "another card hash", edit: func(m *protocol.ArtifactManifest) { m.Producer.AgentCardHash = protocol.Digest([]byte("other card")) }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/producer/agentCardHash"},
		{name: "another agent version", edit: func(m *protocol.ArtifactManifest) { m.Producer.AgentVersion = "9.9.9" }, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/producer/agentVersion"},
		{name: "a source the Group cannot account for", edit: func(m *protocol.ArtifactManifest) {
			m.SourceArtifacts = protocol.List[string]{protocol.Digest([]byte("never published"))}
		}, code: protocol.CodeInvalidCommand, pointer: "/payload/manifest/sourceArtifacts/0"},
		{name: "another worker under the owner's lease", by: "w2", edit: func(m *protocol.ArtifactManifest) { m.Producer = producer("w2") }, code: protocol.CodeAuthForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			by, signer := tc.by, tc.signer
			if by == "" {
				by = "w1"
			}
			if signer == "" {
				signer = by
			}
			m := base
			if tc.edit != nil {
				tc.edit(&m)
			}
			m = signedManifest(t, m, k.w[signer].Key)
			if tc.tamper {
				m.Size++
			}
			p := &protocol.PublishArtifactPayload{Manifest: m, OwnershipEpoch: protocol.Uint64(epoch), LeaseID: w.Lease.LeaseID}
			if tc.payload != nil {
				tc.payload(p)
			}
			_, err := k.do(k.w[by], protocol.CmdArtifactPublish, p)
			wantRefusal(t, err, tc.code, tc.pointer)
		})
	}
	if got := k.s.group("grp-a").artifacts[digest]; got != 0 {
		t.Fatalf("refused publications left revision %d", got)
	}

	// The unchanged manifest is accepted, and so is the coordinator's own
	// artifact without a lease (it holds none).
	k.ok(k.w["w1"], protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: signedManifest(t, base, k.w["w1"].Key), OwnershipEpoch: protocol.Uint64(epoch), LeaseID: w.Lease.LeaseID})
	// A source published in the Group is accounted for.
	derived := base
	derived.SourceArtifacts = protocol.List[string]{digest}
	k.ok(k.w["w1"], protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: signedManifest(t, derived, k.w["w1"].Key), OwnershipEpoch: protocol.Uint64(epoch), LeaseID: w.Lease.LeaseID})
	cm := base
	cm.Producer = protocol.ArtifactProducer{AgentID: "coord", AgentVersion: "1.0.0", AgentCardHash: k.s.org.agent("coord").CardHash}
	k.ok(k.coord, protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: signedManifest(t, cm, k.coord.Key)})
	// A worker is not the coordinator: without a lease it is refused even
	// for an item it does not own.
	wm := base
	wm.Producer = producer("w2")
	_, err = k.do(k.w["w2"], protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: signedManifest(t, wm, k.w["w2"].Key)})
	wantRefusal(t, err, protocol.CodeInvalidCommand, "/payload/leaseId")

	// Past the lease's expiry the same command is refused.
	k.clk.Set(w.Lease.ExpiresAt.Time)
	_, err = k.do(k.w["w1"], protocol.CmdArtifactPublish, &protocol.PublishArtifactPayload{Manifest: signedManifest(t, base, k.w["w1"].Key), OwnershipEpoch: protocol.Uint64(epoch), LeaseID: w.Lease.LeaseID})
	wantRefusal(t, err, protocol.CodeWorkLeaseExpired, "")
}

func TestOverrideGrantMatching(t *testing.T) {
	k := newSvc(t)
	k.s.cfg.Policy.MaxOpenWorkItems = 1
	authorize := func(id string) *protocol.AuthorizeWorkPayload {
		c := testContract(id)
		c.RetryPolicy.AttemptTimeoutMs, c.RetryPolicy.CostLimit = 600000, 5
		return &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: c}
	}
	k.ok(k.coord, protocol.CmdWorkAuthorize, authorize("wi-1"))
	// The grant every row starts from: it would let action id through.
	grant := func(id string) protocol.CooperationOverrideGrant {
		return protocol.CooperationOverrideGrant{GrantID: id, MissionID: "mis-a", GroupID: "grp-a", Policy: PolicyOpenWorkItems,
			Grantee: agent("coord"), TargetCommandType: protocol.CmdWorkAuthorize, TargetActionID: "act-" + id, Reason: "second stage needed",
			Approver: owner, GrantedAt: protocol.NewTime(k.clk.Now()), ExpiresAt: protocol.NewTime(k.clk.Now().Add(time.Hour))}
	}
	cite := func(id string) func(*protocol.Envelope) {
		return func(e *protocol.Envelope) { e.ActionID, e.OverrideGrantID = "act-"+id, id }
	}
	// inject puts a record the grant command would refuse to issue, to reach
	// the check that defends against it at use.
	inject := func(g protocol.CooperationOverrideGrant, consumedBy string) {
		gs := k.s.group("grp-a")
		gs.mu.Lock()
		gs.grants[g.GrantID] = &grantRecord{Grant: g, Revision: 1, ConsumedBy: consumedBy}
		gs.mu.Unlock()
	}
	const grantPtr = "/cooperationOverrideGrantId"
	for _, tc := range []struct {
		name    string
		id      string
		edit    func(*protocol.CooperationOverrideGrant)
		inject  bool
		spent   string // inject the grant as consumed by this action
		pointer string
	}{
		{name: "granted to another agent", id: "ovr-grantee", edit: func(g *protocol.CooperationOverrideGrant) { g.Grantee = agent("w1") }, pointer: grantPtr},
		{name: "granted to a human of the same id", id: "ovr-kind", edit: func(g *protocol.CooperationOverrideGrant) {
			g.Grantee = protocol.Actor{Kind: protocol.ActorHuman, ID: "coord"}
		}, pointer: grantPtr},
		{name: "for another command type", id: "ovr-type", edit: func(g *protocol.CooperationOverrideGrant) { g.TargetCommandType = protocol.CmdWorkOffer }, pointer: grantPtr},
		{name: "for another action", id: "ovr-action", edit: func(g *protocol.CooperationOverrideGrant) { g.TargetActionID = "act-other" }, pointer: grantPtr},
		{name: "another Mission", id: "ovr-mission", edit: func(g *protocol.CooperationOverrideGrant) { g.MissionID = "mis-b" }, inject: true, pointer: grantPtr},
		{name: "another Group", id: "ovr-group", edit: func(g *protocol.CooperationOverrideGrant) { g.GroupID = "grp-b" }, inject: true, pointer: grantPtr},
		{name: "expired", id: "ovr-expired", edit: func(g *protocol.CooperationOverrideGrant) { g.ExpiresAt = protocol.NewTime(k.clk.Now()) }, inject: true, pointer: grantPtr},
		// Spent by another action (a retry of that action is answered
		// from its receipt before any grant is looked at).
		{name: "already consumed", id: "ovr-spent", edit: func(*protocol.CooperationOverrideGrant) {}, inject: true, spent: "act-earlier", pointer: grantPtr},
		// A grant for another policy matches the command but does not lift
		// this one: the refusal is the policy's own.
		{name: "for another policy", id: "ovr-policy", edit: func(g *protocol.CooperationOverrideGrant) { g.Policy = PolicyMessageRate }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id
			g := grant(id)
			tc.edit(&g)
			if tc.inject {
				inject(g, tc.spent)
			} else {
				k.ok(k.alice, protocol.CmdPolicyGrantCooperationOverride, &g)
			}
			_, err := k.do(k.coord, protocol.CmdWorkAuthorize, authorize("wi-2"), cite(id))
			wantRefusal(t, err, protocol.CodeAuthForbidden, tc.pointer)
			if tc.pointer == "" && group.PolicyOf(err) != PolicyOpenWorkItems {
				t.Fatalf("refused by %q, want the %s policy", group.PolicyOf(err), PolicyOpenWorkItems)
			}
		})
	}
	_, err := k.do(k.coord, protocol.CmdWorkAuthorize, authorize("wi-2"), cite("ovr-none"))
	wantRefusal(t, err, protocol.CodeAuthForbidden, grantPtr)

	// Issuing is checked too: the grant binds this Group's Mission, its
	// approver is the issuer, and it expires in the future.
	for _, tc := range []struct {
		name    string
		edit    func(*protocol.CooperationOverrideGrant)
		pointer string
	}{
		{"another Mission", func(g *protocol.CooperationOverrideGrant) { g.MissionID = "mis-b" }, "/payload/missionId"},
		{"another Group", func(g *protocol.CooperationOverrideGrant) { g.GroupID = "grp-b" }, "/payload/missionId"},
		{"approver not the issuer", func(g *protocol.CooperationOverrideGrant) { g.Approver = agent("coord") }, "/payload/approver"},
		{"unknown policy", func(g *protocol.CooperationOverrideGrant) { g.Policy = "maxEverything" }, "/payload/policy"},
		{"expires now", func(g *protocol.CooperationOverrideGrant) { g.ExpiresAt = protocol.NewTime(k.clk.Now()) }, "/payload/expiresAt"},
		{"expires before it is granted", func(g *protocol.CooperationOverrideGrant) {
			g.GrantedAt, g.ExpiresAt = protocol.NewTime(k.clk.Now().Add(2*time.Minute)), protocol.NewTime(k.clk.Now().Add(time.Minute))
		}, "/payload/expiresAt"},
	} {
		t.Run("issue "+tc.name, func(t *testing.T) {
			g := grant("ovr-issue")
			tc.edit(&g)
			_, err := k.do(k.alice, protocol.CmdPolicyGrantCooperationOverride, &g)
			wantRefusal(t, err, protocol.CodeInvalidCommand, tc.pointer)
		})
	}

	// The unchanged grant lets exactly its command through, once.
	g := grant("ovr-good")
	k.ok(k.alice, protocol.CmdPolicyGrantCooperationOverride, &g)
	k.ok(k.coord, protocol.CmdWorkAuthorize, authorize("wi-2"), cite("ovr-good"))
	_, err = k.do(k.coord, protocol.CmdWorkAuthorize, authorize("wi-3"), func(e *protocol.Envelope) { e.ActionID, e.OverrideGrantID = "act-ovr-good-2", "ovr-good" })
	wantRefusal(t, err, protocol.CodeAuthForbidden, grantPtr)
	// A grant checked exactly at its expiry no longer matches.
	g = grant("ovr-late")
	k.ok(k.alice, protocol.CmdPolicyGrantCooperationOverride, &g)
	k.clk.Set(g.ExpiresAt.Time)
	_, err = k.do(k.coord, protocol.CmdWorkAuthorize, authorize("wi-3"), cite("ovr-late"))
	wantRefusal(t, err, protocol.CodeAuthForbidden, grantPtr)
	var consumed []string
	for _, ev := range checkLog(t, k.s, "grp-a") {
		if ev.Type == protocol.EvtCooperationOverrideConsumed {
			var oc group.OverrideConsumed
			if err := json.Unmarshal(ev.Payload, &oc); err != nil {
				t.Fatal(err)
			}
			consumed = append(consumed, oc.GrantID)
		}
	}
	if len(consumed) != 1 || consumed[0] != "ovr-good" {
		t.Fatalf("consumed %v, want [ovr-good]", consumed)
	}
}

func TestMessageRetractRows(t *testing.T) {
	k := newSvc(t)
	k.ok(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m1", ConversationID: "c", Text: "hello"})
	k.ok(k.w["w1"], protocol.CmdMessagePost, &protocol.PostMessagePayload{MessageID: "m2", ConversationID: "c", Text: "later"})
	for _, tc := range []struct {
		name string
		by   *Principal
		id   string
		code protocol.Code
	}{
		{"not the author", k.w["w2"], "m1", protocol.CodeAuthForbidden},
		{"the MissionOwner may redact, not retract", k.alice, "m1", protocol.CodeAuthForbidden},
		{"unknown message", k.w["w1"], "nope", protocol.CodeInvalidCommand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k.refuse(tc.by, protocol.CmdMessageRetract, &protocol.RetractMessagePayload{MessageID: tc.id, Reason: "x"}, tc.code)
		})
	}
	k.ok(k.w["w1"], protocol.CmdMessageRetract, &protocol.RetractMessagePayload{MessageID: "m1", Reason: "wrong thread"})
	k.refuse(k.w["w1"], protocol.CmdMessageRetract, &protocol.RetractMessagePayload{MessageID: "m1", Reason: "again"}, protocol.CodeInvalidStateTransition)
	k.ok(k.alice, protocol.CmdMessageRedact, &protocol.RedactMessagePayload{MessageID: "m2", Reason: "leaked"})
	k.refuse(k.w["w1"], protocol.CmdMessageRetract, &protocol.RetractMessagePayload{MessageID: "m2", Reason: "x"}, protocol.CodeInvalidStateTransition)
	// The retraction is one event on the message's aggregate, naming the
	// reason and the author, at the message's next revision.
	var got []protocol.Event
	for _, ev := range checkLog(t, k.s, "grp-a") {
		if ev.Type == protocol.EvtMessageRetracted {
			got = append(got, ev)
		}
	}
	if len(got) != 1 || got[0].Aggregate == nil || got[0].Aggregate.ID != "m1" || got[0].Rev() != 2 {
		t.Fatalf("retraction events %+v", got)
	}
	var me group.MessageEvent
	if err := json.Unmarshal(got[0].Payload, &me); err != nil {
		t.Fatal(err)
	}
	if me.Reason != "wrong thread" || me.State != "retracted" || me.Author != agent("w1") {
		t.Fatalf("retraction payload %+v", me)
	}
}

func pointerOf(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Pointer
	}
	return ""
}
