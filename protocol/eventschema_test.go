package protocol

import (
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// eventExample is one valid payload per Event type, with the aggregate
// kind the type belongs to ("" for Organization-scoped types), and one
// mutation of that payload the type's schema must refuse at wantPointer.
type eventExample struct {
	kind    AggregateKind
	payload string
	// The negative example: the value at pointer (below /payload)
	// replaced by value, or deleted when value is "".
	pointer, value, wantPointer string
}

var eventExamples = map[EventType]eventExample{
	EvtMissionCreated: {AggregateMission, `{"missionId":"mis-a","state":"active","mission":{{mission}},"budgets":{{budgets}},"ancestors":["mis-root"],"followUpOf":"mis-0"}`,
		"/mission", "", "/payload"},
	EvtMissionCoordinatorAssigned: {AggregateMission, `{"missionId":"mis-a","state":"active","coordinator":{{coordlease}},"previousCoordinatorEpoch":1}`,
		"/coordinator/coordinatorEpoch", `-1`, "/payload/coordinator/coordinatorEpoch"},
	EvtMissionCoordinatorRenewed: {AggregateMission, `{"missionId":"mis-a","state":"active","coordinator":{{coordlease}}}`,
		"/state", `"renewed"`, "/payload/state"},
	EvtMissionSubmittedForApproval: {AggregateMission, `{"missionId":"mis-a","state":"awaiting_approval","summary":"all verified","artifacts":[{{h1}}],"evidence":[{{evidence}}]}`,
		"/artifacts", `["not-a-digest"]`, "/payload/artifacts/0"},
	EvtMissionApproved: {AggregateMission, `{"missionId":"mis-a","state":"approved","approvalId":"apr-2","approver":{{human}},"comment":"ok"}`,
		"/approver", `{"kind":"robot","id":"r2"}`, "/payload/approver/kind"},
	EvtMissionChangesRequested: {AggregateMission, `{"missionId":"mis-a","state":"active","changes":["add docs"]}`,
		"/changes", `[""]`, "/payload/changes/0"},
	EvtMissionCancelled: {AggregateMission, `{"missionId":"mis-a","state":"cancelled","reason":"no longer needed","unfinishedWorkItems":["wi-7"]}`,
		"/missionId", `""`, "/payload/missionId"},
	EvtMissionTerminated: {AggregateMission, `{"missionId":"mis-a","state":"terminated","reason":"budget policy"}`,
		"/reason", `""`, "/payload/reason"},
	EvtMissionChildCreated: {AggregateMission, `{"missionId":"mis-a","state":"active","child":{"parentWorkItemId":"wi-7","childMissionId":"mis-c",
		"childGroupId":"grp-c","title":"Sub","objective":"Sub work","onChildFailure":"block"},"budgets":{{budgets}}}`,
		"/child/onChildFailure", `"ignore"`, "/payload/child/onChildFailure"},
	EvtMissionFollowUpCreated: {AggregateMission, `{"missionId":"mis-b","state":"active","followUpOf":"mis-a"}`,
		"/followUpOf", "", "/payload"},

	EvtMembershipChanged: {AggregateMembership, `{{membership}}`,
		"/roles", `["admin"]`, "/payload/roles/0"},
	EvtMembershipEnded: {AggregateMembership, `{"groupId":"grp-a","principal":{{agent}},"roles":["worker"],"membershipEpoch":2,"state":"ended",
		"joinedAt":{{t}},"endedAt":"2026-11-30T09:00:00Z","revision":3}`,
		"/state", `"paused"`, "/payload/state"},
	EvtMembershipDelegationGranted: {AggregateMembership, `{{membership}}`,
		"/delegations/0/expiresAt", `"tomorrow"`, "/payload/delegations/0/expiresAt"},

	EvtMessagePosted: {AggregateMessage, `{"messageId":"msg-1","conversationId":"cnv-1","author":{{agent}},"text":"hello","mediaType":"text/markdown","state":"posted"}`,
		"/mediaType", `"text/html"`, "/payload/mediaType"},
	EvtMessageCorrected: {AggregateMessage, `{"messageId":"msg-1","author":{{agent}},"text":"hello, fixed","reason":"typo","state":"corrected"}`,
		"/state", `"edited"`, "/payload/state"},
	EvtMessageRetracted: {AggregateMessage, `{"messageId":"msg-1","author":{{agent}},"reason":"wrong thread","state":"retracted"}`,
		"/author", "", "/payload"},
	EvtMessageRedacted: {AggregateMessage, `{"messageId":"msg-1","author":{{agent}},"reason":"leaked secret","state":"redacted"}`,
		"/text", `""`, "/payload/text"},

	EvtWorkProposed: {AggregateWorkItem, `{"proposalId":"prp-1","missionId":"mis-a","summary":"split the lexer","proposer":{{agent}},"parentWorkItemId":"wi-7","state":"proposed"}`,
		"/state", `"open"`, "/payload/state"},
	EvtWorkAuthorized: {AggregateWorkItem, `{"workItemId":"wi-7","state":"open","missionId":"mis-a","proposalId":"prp-1","contract":{{contract}},"contractRevision":1}`,
		"/contractRevision", `0`, "/payload/contractRevision"},
	EvtWorkOfferCreated: {AggregateWorkItem, `{"workItemId":"wi-7","state":"offered","offerId":"off-1","contract":{{contract}},"contractRevision":1,
		"candidates":[{"agentId":"worker-1","selectionBasis":{{basis}}}],"offerExpiresAt":{{t}},"startWithinMs":60000,"fencedOwnershipEpoch":3,"checkpoint":{{checkpoint}}}`,
		"/startWithinMs", `0`, "/payload/startWithinMs"},
	EvtWorkOfferAccepted: {AggregateWorkItem, `{"workItemId":"wi-7","state":"queued","offerId":"off-1","contractRevision":1,"ownership":{{ownership}},"scheduleDisclosure":{{sched}}}`,
		"/ownership", "", "/payload"},
	EvtWorkContractRevised: {AggregateWorkItem, `{"workItemId":"wi-7","state":"open","contract":{{contract}},"contractRevision":2,"previousContractRevision":1,
		"dependencies":[{"workItemId":"wi-3","policy":"submitted"}]}`,
		"/dependencies/0/policy", `"eventually"`, "/payload/dependencies/0/policy"},
	EvtWorkStarted: {AggregateWorkItem, `{"workItemId":"wi-7","state":"active","lease":{{lease}},"ownership":{{ownership}},"resumeFromCheckpointId":"chk-1","capabilityToken":{{captoken}}}`,
		"/capabilityToken/signature", "", "/payload/capabilityToken"},
	EvtWorkProgressed: {AggregateWorkItem, `{"workItemId":"wi-7","state":"active","leaseId":"lse-9","lease":{{lease}},"progress":{{progress}},"capabilityToken":{{captoken}}}`,
		"/progress/revisedEstimate/confidence", `2`, "/payload/progress/revisedEstimate/confidence"},
	EvtWorkCheckpointed: {AggregateWorkItem, `{"workItemId":"wi-7","state":"queued","leaseId":"lse-9","checkpoint":{{checkpoint}},"checkpointReason":"preempted",
		"progress":{{progress}},"ownership":{{ownership}}}`,
		"/checkpointReason", `"tired"`, "/payload/checkpointReason"},
	EvtWorkBlocked: {AggregateWorkItem, `{"workItemId":"wi-7","state":"blocked","leaseId":"lse-9","checkpoint":{{checkpoint}},
		"blocker":{"kind":"clarification","detail":"which dialect?"},"ownership":{{ownership}}}`,
		"/blocker/kind", `"whim"`, "/payload/blocker/kind"},
	EvtWorkUnblocked: {AggregateWorkItem, `{"workItemId":"wi-7","state":"queued","resolution":"dialect is ANSI","ownership":{{ownership}}}`,
		"/resolution", "", "/payload"},
	EvtWorkSubmitted: {AggregateWorkItem, `{"workItemId":"wi-7","state":"submitted","leaseId":"lse-9","ownership":{{ownership}},"artifacts":[{{h1}}],"evidence":[{{evidence}}]}`,
		"/evidence/0/result", `"great"`, "/payload/evidence/0/result"},
	EvtWorkResultAccepted: {AggregateWorkItem, `{"workItemId":"wi-7","state":"verified","contractRevision":1,"evidence":[{{evidence}}],"comment":"ok"}`,
		"/state", `"done"`, "/payload/state"},
	EvtWorkFailed: {AggregateWorkItem, `{"workItemId":"wi-7","state":"failed","reason":"attempts exhausted","evidence":[{{evidence}}],"leaseId":"lse-9","ownership":{{ownership}}}`,
		"/evidence", `{}`, "/payload/evidence"},
	EvtWorkCancelled: {AggregateWorkItem, `{"workItemId":"wi-7","state":"cancelled","reason":"superseded"}`,
		"/workItemId", `"-bad"`, "/payload/workItemId"},
	EvtApprovalExecutionGranted: {AggregateWorkItem, `{"workItemId":"wi-7","state":"open","approval":{{approval}}}`,
		"/approval/decision", `"maybe"`, "/payload/approval/decision"},

	EvtArtifactPublished: {AggregateArtifact, `{"manifest":{{manifest}}}`,
		"/manifest/contentHash", `"md5:00"`, "/payload/manifest/contentHash"},
	EvtPolicyCooperationOverrideGranted: {AggregatePolicy, `{{grant}}`,
		"/targetActionId", "", "/payload"},
	EvtGroupSnapshotCreated: {AggregateGroup, `{"snapshot":{{snapref}},"reason":"retention"}`,
		"/snapshot/digest", `"sha256:xyz"`, "/payload/snapshot/digest"},
	EvtGroupArchived: {AggregateGroup, `{"snapshot":{{snapref}}}`,
		"/snapshot/uri", `"not a uri"`, "/payload/snapshot/uri"},

	EvtAgentCardRegistered: {"", `{"agentCard":{{card}},"agentCardHash":{{h1}}}`,
		"/agentCardHash", `"sha1:00"`, "/payload/agentCardHash"},
	EvtSessionOpened: {"", `{"agentId":"worker-1","sessionEpoch":3,"agentCardHash":{{h1}}}`,
		"/sessionEpoch", `-1`, "/payload/sessionEpoch"},
	EvtResourceUsageRecorded: {AggregateWorkItem, `{"workItemId":"wi-7","state":"active","ownershipEpoch":4,"leaseId":"lse-9","usageDelta":{{usage}},
		"usedTotal":{{usage}},"historicalSessionEpoch":2,"reconcilingSessionEpoch":3}`,
		"/usageDelta/tokens", `-1`, "/payload/usageDelta/tokens"},
	EvtCooperationOverrideConsumed: {AggregatePolicy, `{"grantId":"ovr-1","policy":"max-delegation-depth","consumedByActionId":"act-9","targetCommandType":"work.authorize"}`,
		"/consumedByActionId", "", "/payload"},
	EvtContextPublished: {AggregateContext, `{"package":{{context}},"digest":{{h2}}}`,
		"/package/version", `0`, "/payload/package/version"},
}

func allEventTypes() []EventType { return slices.Concat(CoreEventTypes, ExtEventTypes) }

// eventWith returns an event envelope of type typ (Group- or
// Organization-scoped as the type is) around payload.
func eventWith(t testing.TB, typ EventType, payload string) map[string]any {
	t.Helper()
	ex := eventExamples[typ]
	base := "{{event}}"
	if typ.OrganizationScoped() {
		base = "{{orgevent}}"
	}
	doc := fixture(t, base).(map[string]any)
	doc["type"] = string(typ)
	if agg, ok := doc["aggregate"].(map[string]any); ok {
		agg["kind"] = string(ex.kind)
	}
	doc["payload"] = fixture(t, payload)
	return doc
}

// firstProblem is the pointer an error reports on the wire.
func firstProblem(t *testing.T, err error) (Code, string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %T %v", err, err)
	}
	pe := ve.ProtocolError()
	return pe.Code, pe.Pointer
}

// TestEventPayloads: for every Event type, the example validates as an
// event and inside an EVENT frame; its negative mutation, a payload of
// another shape, an unknown payload member and (for Group events) a wrong
// aggregate kind are refused with SCHEMA_VALIDATION_FAILED at the expected
// pointer.
func TestEventPayloads(t *testing.T) {
	for _, typ := range allEventTypes() {
		ex, ok := eventExamples[typ]
		if !ok {
			t.Errorf("%s: no example", typ)
			continue
		}
		t.Run(string(typ), func(t *testing.T) {
			doc := eventWith(t, typ, ex.payload)
			if err := Validate("event", doc); err != nil {
				t.Fatalf("example: %v", err)
			}
			frame := map[string]any{"type": "EVENT", "frameId": "f1", "event": doc}
			if err := Validate("websocket-frame", frame); err != nil {
				t.Fatalf("example in a frame: %v", err)
			}
			refused := func(what string, doc any, schema, want string) {
				t.Helper()
				err := Validate(schema, doc)
				if err == nil {
					t.Errorf("%s: accepted", what)
					return
				}
				if code, ptr := firstProblem(t, err); code != CodeSchemaValidationFailed || ptr != want {
					t.Errorf("%s: %s at %q, want SCHEMA_VALIDATION_FAILED at %q\n%v", what, code, ptr, want, err)
				}
			}
			refused("negative example", mutate(t, doc, "/payload"+ex.pointer, ex.value), "event", ex.wantPointer)
			refused("negative example in a frame", mutate(t, frame, "/event/payload"+ex.pointer, ex.value), "websocket-frame", "/event"+ex.wantPointer)
			refused("another shape", mutate(t, doc, "/payload", `{"anything":"goes"}`), "event", "/payload")
			refused("unknown member", mutate(t, doc, "/payload/zzz", `1`), "event", "/payload/zzz")
			if ex.kind != "" {
				other := AggregateMission
				if ex.kind == other {
					other = AggregateWorkItem
				}
				bad := mutate(t, doc, "/aggregate/kind", `"`+string(other)+`"`)
				refused("wrong aggregate kind", bad, "event", "/aggregate/kind")
				if ps := problemsOf(t, Validate("event", bad)); len(ps) != 1 {
					t.Errorf("wrong aggregate kind: want one problem, got %v", ps)
				}
			}
		})
	}
}

// TestEventTypeRefused: an unknown type outside ext.* is refused at /type;
// an unknown ext.* type carries any object (tested in TestValidateAccepts).
func TestEventTypeRefused(t *testing.T) {
	doc := eventWith(t, EvtWorkOfferAccepted, eventExamples[EvtWorkOfferAccepted].payload)
	doc["type"] = "work.offer.declined"
	code, ptr := firstProblem(t, Validate("event", doc))
	if code != CodeSchemaValidationFailed || ptr != "/type" {
		t.Errorf("unknown core type: %s at %q", code, ptr)
	}
}

// TestEventSchemaFiles: one payload schema per Event type, and the event
// dispatch names each of them once.
func TestEventSchemaFiles(t *testing.T) {
	files, err := fs.Glob(SchemaFS(), "events/*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "events/"), ".schema.json")
		if name != "defs" {
			types = append(types, name)
		}
	}
	var want []string
	for _, typ := range allEventTypes() {
		want = append(want, string(typ))
	}
	slices.Sort(want)
	if !slices.Equal(types, want) {
		t.Errorf("events/ holds schemas for %v, want %v", types, want)
	}
	raw, err := fs.ReadFile(SchemaFS(), "event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AllOf []struct {
			If struct {
				Properties struct {
					Type struct {
						Const string `json:"const"`
					} `json:"type"`
				} `json:"properties"`
			} `json:"if"`
		} `json:"allOf"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var dispatched []string
	for _, a := range doc.AllOf {
		dispatched = append(dispatched, a.If.Properties.Type.Const)
	}
	slices.Sort(dispatched)
	if !slices.Equal(dispatched, want) {
		t.Errorf("event.schema.json dispatches %v, want %v", dispatched, want)
	}
}

// TestSignedEventChecked: a producer's event is validated before it is
// signed; a valid one is signed as SignedEvent signs it, an invalid one is
// refused with the problem's pointer and left unsigned.
func TestSignedEventChecked(t *testing.T) {
	k := testKey(t, "authority:authority-1#k1", 3)
	var ev Event
	if err := json.Unmarshal([]byte(benchEvent), &ev); err != nil {
		t.Fatal(err)
	}
	plain := ev
	want, err := SignedEvent(&plain, k)
	if err != nil {
		t.Fatal(err)
	}
	got, err := SignedEventChecked(&ev, k)
	if err != nil || string(got) != string(want) || ev.Signature != plain.Signature {
		t.Fatalf("valid event: %v\n got %s\nwant %s", err, got, want)
	}
	doc, err := Parse(got, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(doc.(map[string]any), NewKeySet(k.Public())); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, pointer string
		edit          func(*Event)
	}{
		{"payload not its type", "/payload", func(e *Event) { e.Payload = json.RawMessage(`{"anything":"goes"}`) }},
		{"aggregate kind not its type", "/aggregate/kind", func(e *Event) { e.Aggregate = &Aggregate{Kind: AggregateMission, ID: "wi-7"} }},
	} {
		bad := ev
		bad.Signature = Signature{}
		tc.edit(&bad)
		raw, err := SignedEventChecked(&bad, k)
		var pe *Error
		if raw != nil || !errors.As(err, &pe) || pe.Code != CodeSchemaValidationFailed || pe.Pointer != tc.pointer {
			t.Errorf("%s: got %s, %v; want SCHEMA_VALIDATION_FAILED at %s", tc.name, raw, err, tc.pointer)
		}
		if bad.Signature.Value != "" {
			t.Errorf("%s: signed anyway", tc.name)
		}
	}
}
