package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Fixtures are compact JSON with {{name}} placeholders expanded from this
// table, so each negative case is a small mutation of a valid document.
var schemaFixtures = map[string]string{
	"t":       `"2026-11-30T08:00:00Z"`,
	"h1":      `"sha256:` + strings.Repeat("a1", 32) + `"`,
	"h2":      `"sha256:` + strings.Repeat("0f", 32) + `"`,
	"sig":     `{"alg":"Ed25519","keyId":"agent:w1#k1","createdAt":"2026-11-30T08:00:00Z","value":"` + strings.Repeat("s", 85) + `A"}`,
	"agent":   `{"kind":"agent","id":"worker-1"}`,
	"human":   `{"kind":"human","id":"alice"}`,
	"usage":   `{"money":0.25,"tokens":1200,"toolCalls":3,"computeSeconds":12.5,"wallClockSeconds":30,"sideEffects":0}`,
	"budgets": `{"money":5,"tokens":200000,"toolCalls":100,"computeSeconds":600,"wallClockSeconds":3600,"sideEffects":10}`,
	"contract": `{"contractId":"wc-1","revision":1,"goal":"Implement the parser",
		"requiredOutputs":[{"name":"patch","mediaType":"text/x-diff"}],
		"acceptanceCriteria":[{"id":"ac-1","description":"unit tests pass","evidenceRequired":["test-report"]}],
		"inputs":[{"artifact":{{h1}}}],"dependencies":[{"workItemId":"wi-1","policy":"verified"}],
		"allowedTools":["git"],"allowedData":["repo:a"],"allowedOperations":["read","write"],
		"resourceLimits":{"cpu":1,"memoryMiB":512},"requiredCapabilities":[{"id":"code.implement","version":"1.x"}],
		"deadline":"2026-12-01T00:00:00Z","urgency":"normal","businessImpact":"medium","budgets":{{budgets}},
		"retryPolicy":{"maxAttempts":3,"backoff":{"initialMs":500,"maxMs":30000,"multiplier":2},"attemptTimeoutMs":600000,"costLimit":5},
		"risk":{"class":"low","preExecutionApproval":false},"notes":"prose never replaces a field"}`,
	"progress": `{"phase":"implement","milestonesCompleted":["parser skeleton"],"nextCheckpoint":"tests green",
		"blockers":[],"revisedEstimate":{"completionAt":"2026-11-30T10:00:00Z","confidence":0.7},"evidenceRefs":[{{h2}}]}`,
	"sched": `{"estimatedStartWindow":{"from":"2026-11-30T08:05:00Z","to":"2026-11-30T08:20:00.250Z"},
		"estimatedCompletion":"2026-11-30T09:30:00Z","confidence":0.8,"capacityState":"available","computedAt":{{t}}}`,
	"basis": `{"capabilityMatches":[{"id":"code.implement","required":"1.x","offered":"1.4.0"}],"authorizationEligible":true,
		"availabilityEstimate":{"earliestStart":{{t}},"confidence":0.9},"expectedCost":{"money":2,"tokens":50000},
		"reliabilityEvidence":[{"capabilityId":"code.implement","attempts":20,"successes":19}],"policyRulesApplied":["org-default"]}`,
	"evidence": `{"subject":"wi-7","criteria":["ac-1"],"method":"deterministic-test","result":"pass","producer":{{agent}},
		"timestamp":{{t}},"artifacts":[{{h1}}]}`,
	"manifest": `{"contentHash":{{h1}},"mediaType":"text/x-diff","schema":"https://www.iana.org/assignments/media-types/text/x-diff","producer":{"agentId":"worker-1","agentVersion":"0.1.0","agentCardHash":{{h2}}},
		"missionId":"mis-a","groupId":"grp-a","workItemId":"wi-7","sourceArtifacts":[{{h2}}],"toolVersions":{"git":"2.45"},
		"createdAt":{{t}},"classification":"internal","size":1024,"uri":"https://artifacts.example/a1","signature":{{sig}}}`,
	"card": `{"agentId":"worker-1","agentVersion":"0.1.0","organizationId":"org-1","displayName":"Worker one",
		"keys":[{"keyId":"agent:w1#k1","alg":"Ed25519","publicKey":"` + strings.Repeat("k", 42) + `A"}],
		"capabilities":[{"id":"code.implement","version":"1.4.0"}],"roles":["worker"],"maxConcurrency":2,
		"issuedAt":{{t}},"signature":{{sig}}}`,
	"presence": `{"agentId":"worker-1","sessionEpoch":3,"capacityState":"constrained","maxConcurrency":2,"activeSlots":1,
		"queuedWorkItems":4,"observedAt":{{t}}}`,
	"mission": `{"missionId":"mis-a","groupId":"grp-a","title":"Parser","objective":"Ship the parser","state":"active",
		"owner":{{human}},"priorityClass":"normal","coordinator":{"agentId":"coord-1","coordinatorEpoch":2,"leaseExpiresAt":{{t}}},
		"createdAt":{{t}},"revision":4}`,
	"group": `{"groupId":"grp-a","organizationId":"org-1","missionId":"mis-a","state":"active","createdAt":{{t}},"revision":1,
		"lastSequence":42,"extensionProfiles":[{"uri":"urn:acme:ext:review","major":1}]}`,
	"membership": `{"groupId":"grp-a","principal":{{agent}},"roles":["worker"],"membershipEpoch":1,"state":"active","joinedAt":{{t}},
		"delegations":[{"delegationId":"dlg-1","delegator":{"kind":"agent","id":"coord-1"},"delegate":{{agent}},
		"commandTypes":["work.authorize"],"expiresAt":{{t}}}],"revision":2}`,
	"conversation": `{"conversationId":"cnv-1","groupId":"grp-a","subject":{"kind":"workItem","id":"wi-7"},"state":"open","createdAt":{{t}}}`,
	"message": `{"messageId":"msg-1","groupId":"grp-a","conversationId":"cnv-1","author":{{agent}},"text":"approve this please",
		"mediaType":"text/plain","state":"posted","postedAt":{{t}},"revision":1}`,
	"workitem": `{"workItemId":"wi-7","missionId":"mis-a","groupId":"grp-a","state":"active","contract":{{contract}},"revision":5,
		"ownership":{{ownership}},"lease":{{lease}},"attempts":1,"createdAt":{{t}},"updatedAt":{{t}}}`,
	"ownership": `{"workItemId":"wi-7","ownerAgentId":"worker-1","ownershipEpoch":4,"startDeadline":{{t}}}`,
	"lease": `{"leaseId":"lse-9","agentId":"worker-1","sessionEpoch":3,"workItemId":"wi-7","ownershipEpoch":4,"startedAt":{{t}},
		"renewals":["2026-11-30T08:01:00Z"],"expiresAt":"2026-11-30T08:05:00Z"}`,
	"approval": `{"approvalId":"apr-1","kind":"execution","missionId":"mis-a","groupId":"grp-a","workItemId":"wi-7","contractRevision":1,
		"approver":{{human}},"decision":"approved","decidedAt":{{t}}}`,
	"context": `{"packageId":"ctx-1","version":2,"previousVersion":{"version":1,"digest":{{h2}}},
		"scope":{"missionId":"mis-a","groupId":"grp-a","workItemId":"wi-7"},"sourceEvents":{"groupId":"grp-a","fromSequence":1,"toSequence":40},
		"artifacts":[{{h1}}],"decisions":[{"summary":"use a recursive-descent parser","eventIds":["evt-12"]}],
		"constraints":["no new dependencies"],"openQuestions":[],"generator":{"agentId":"coord-1","agentVersion":"0.1.0"},
		"generatedAt":{{t}},"signature":{{sig}}}`,
	"snapshot": `{"snapshotId":"snp-1","groupId":"grp-a","sequence":42,"lastEventId":"evt-42","createdAt":{{t}},"createdBy":"authority-1",
		"mission":{{mission}},"memberships":[{{membership}}],"workItems":[{{workitem}}],"approvals":[{{approval}}],"artifacts":[{{h1}}],
		"policyLogDigest":{{h2}},"signature":{{sig}}}`,
	"profile": `{"uri":"urn:acme:ext:review","version":"1.2.0","schemaUri":"https://acme.example/review.schema.json","schemaHash":{{h1}},
		"requiredCapabilities":[{"id":"review.code","version":"1.x"}],"critical":false,"commandTypes":["ext.acme.review.request"],
		"organizationId":"org-1","approvedAt":{{t}},"signature":{{sig}}}`,
	"admission": `{"recordId":"adm-1","organizationId":"org-1","agentId":"worker-1","agentCardHash":{{h1}},
		"key":{"keyId":"agent:w1#k1","alg":"Ed25519","publicKey":"` + strings.Repeat("k", 42) + `A"},
		"admittedAt":{{t}},"admittedBy":{"kind":"service","id":"org-registry"},"logSequence":7,"previousRecordDigest":{{h2}},"signature":{{sig}}}`,
	"error": `{"code":"REVISION_CONFLICT","message":"expected revision 7, current 8","retryable":false,"inReplyTo":"frm-3",
		"actionId":"act-1","details":{"current":8}}`,
	"command": `{"actionId":"act-01J","protocolVersion":"0.1","actor":{{agent}},"type":"work.accept_offer","groupId":"grp-a",
		"sessionEpoch":3,"membershipEpoch":1,"expectedRevision":7,"correlationId":"mis-a","issuedAt":{{t}},
		"payload":{"workItemId":"wi-7","offerId":"off-1","contractRevision":1,"scheduleDisclosure":{{sched}}},"signature":{{sig}}}`,
	"event": `{"eventId":"evt-42","groupId":"grp-a","sequence":42,"aggregate":{"kind":"workItem","id":"wi-7"},"revision":5,
		"type":"work.offer.accepted","actor":{{agent}},"causationId":"act-01J","correlationId":"mis-a",
		"occurredAt":"2026-11-30T08:00:00.120Z","acceptedBy":"authority-1","payload":{"workItemId":"wi-7","state":"queued","offerId":"off-1","contractRevision":1,
		"ownership":{{ownership}},"scheduleDisclosure":{{sched}}},"signature":{{sig}}}`,
	"orgevent": `{"eventId":"evt-o1","type":"ext.missionweaveprotocol.identity.session_opened","actor":{{agent}},"causationId":"act-2",
		"correlationId":"worker-1","occurredAt":{{t}},"acceptedBy":"authority-1","payload":{"agentId":"worker-1","sessionEpoch":3,"agentCardHash":{{h1}}},"signature":{{sig}}}`,
	"coordlease": `{"agentId":"coord-1","coordinatorEpoch":2,"leaseExpiresAt":{{t}}}`,
	"captoken": `{"tokenId":"tok-1","leaseId":"lse-9","agentId":"worker-1","groupId":"grp-a","workItemId":"wi-7","ownershipEpoch":4,
		"allowedTools":["git"],"allowedOperations":["read","write"],"allowedData":["repo:a"],"issuedAt":{{t}},"expiresAt":"2026-11-30T08:05:00Z","signature":{{sig}}}`,
	"grant": `{"grantId":"ovr-1","missionId":"mis-a","groupId":"grp-a","policy":"max-delegation-depth","grantee":{{agent}},
		"targetCommandType":"work.authorize","targetActionId":"act-9","reason":"deep plan","approver":{{human}},"grantedAt":{{t}},"expiresAt":"2026-11-30T09:00:00Z"}`,
	"snapref":    `{"snapshotId":"snp-1","groupId":"grp-a","sequence":42,"digest":{{h2}},"uri":"https://authority.example/snapshots/snp-1"}`,
	"checkpoint": `{"checkpointId":"chk-1","stateDigest":{{h2}},"at":{{t}}}`,
	"offline": `{"agentId":"worker-1","groupId":"grp-a","workItemId":"wi-7","originalSessionEpoch":2,"ownershipEpoch":4,
		"historicalLeaseId":"lse-9","disconnectedAt":{{t}},"bufferedAt":"2026-11-30T08:00:30Z","graceDeadline":"2026-11-30T08:10:00Z",
		"historicalLeaseExpiresAt":"2026-11-30T08:05:00Z","usageDelta":{{usage}}}`,
}

// schemaExamples holds one valid document per schema.
var schemaExamples = map[string]string{
	"common": `{}`, "command": `{{command}}`, "event": `{{event}}`, "agent-card": `{{card}}`,
	"presence-record": `{{presence}}`, "mission": `{{mission}}`, "group": `{{group}}`, "membership": `{{membership}}`,
	"conversation": `{{conversation}}`, "message": `{{message}}`, "work-contract": `{{contract}}`,
	"work-item": `{{workitem}}`, "artifact": `{{manifest}}`, "evidence": `{{evidence}}`, "lease": `{{lease}}`,
	"approval": `{{approval}}`, "context-package": `{{context}}`, "group-snapshot": `{{snapshot}}`,
	"extension-profile": `{{profile}}`, "first-admission-record": `{{admission}}`, "error": `{{error}}`,
	"websocket-frame": `{"type":"COMMAND","frameId":"frm-1","command":{{command}}}`,
}

// payloadExamples holds one valid payload per Command type.
var payloadExamples = map[CommandType]string{
	CmdMissionCreate:                  `{"missionId":"mis-a","title":"Parser","objective":"Ship it","priorityClass":"high","budgets":{{budgets}}}`,
	CmdMissionAssignCoordinator:       `{"missionId":"mis-a","agentId":"coord-1","leaseDurationMs":60000}`,
	CmdMissionRenewCoordinator:        `{"missionId":"mis-a","leaseDurationMs":60000}`,
	CmdMissionSubmitForApproval:       `{"missionId":"mis-a","summary":"all verified","artifacts":[{{h1}}],"evidence":[{{evidence}}]}`,
	CmdMissionApprove:                 `{"missionId":"mis-a","approvalId":"apr-2","comment":"ok"}`,
	CmdMissionRequestChanges:          `{"missionId":"mis-a","changes":["add docs"]}`,
	CmdMissionCancel:                  `{"missionId":"mis-a","reason":"no longer needed"}`,
	CmdMissionTerminate:               `{"missionId":"mis-a","reason":"budget policy"}`,
	CmdMissionCreateChild:             `{"missionId":"mis-a","parentWorkItemId":"wi-7","childMissionId":"mis-c","childGroupId":"grp-c","title":"Sub","objective":"Sub work","onChildFailure":"block"}`,
	CmdMissionCreateFollowUp:          `{"missionId":"mis-b","followUpOf":"mis-a","title":"Next","objective":"More","priorityClass":"normal"}`,
	CmdMembershipChange:               `{"principal":{{agent}},"roles":["worker","reviewer"]}`,
	CmdMembershipEnd:                  `{"principal":{{agent}}}`,
	CmdMembershipGrantDelegation:      `{"delegationId":"dlg-2","delegate":{{agent}},"commandTypes":["work.offer"],"expiresAt":{{t}}}`,
	CmdMessagePost:                    `{"messageId":"msg-1","conversationId":"cnv-1","text":"hello","mediaType":"text/markdown"}`,
	CmdMessageCorrect:                 `{"messageId":"msg-1","text":"hello, fixed"}`,
	CmdMessageRetract:                 `{"messageId":"msg-1"}`,
	CmdMessageRedact:                  `{"messageId":"msg-1","reason":"leaked secret"}`,
	CmdWorkPropose:                    `{"proposalId":"prp-1","missionId":"mis-a","summary":"split the lexer","draftContract":{"goal":"lexer"}}`,
	CmdWorkAuthorize:                  `{"workItemId":"wi-7","missionId":"mis-a","contract":{{contract}}}`,
	CmdWorkOffer:                      `{"workItemId":"wi-7","offerId":"off-1","contract":{{contract}},"candidates":[{"agentId":"worker-1","selectionBasis":{{basis}}}],"expiresAt":{{t}}}`,
	CmdWorkAcceptOffer:                `{"workItemId":"wi-7","offerId":"off-1","contractRevision":1,"scheduleDisclosure":{{sched}}}`,
	CmdWorkStart:                      `{"workItemId":"wi-7","ownershipEpoch":4}`,
	CmdWorkCheckpoint:                 `{"workItemId":"wi-7","ownershipEpoch":4,"leaseId":"lse-9","checkpointId":"chk-1","stateDigest":{{h2}},"progress":{{progress}},"reason":"preempted"}`,
	CmdWorkBlock:                      `{"workItemId":"wi-7","ownershipEpoch":4,"leaseId":"lse-9","checkpointId":"chk-2","stateDigest":{{h2}},"resolution":{"kind":"clarification","detail":"which dialect?"}}`,
	CmdWorkUnblock:                    `{"workItemId":"wi-7","resolution":"dialect is ANSI"}`,
	CmdWorkSubmit:                     `{"workItemId":"wi-7","ownershipEpoch":4,"leaseId":"lse-9","artifacts":[{{h1}}],"evidence":[{{evidence}}]}`,
	CmdWorkAcceptResult:               `{"workItemId":"wi-7","contractRevision":1,"reviewEvidence":[{{evidence}}]}`,
	CmdWorkFail:                       `{"workItemId":"wi-7","reason":"attempts exhausted","evidence":[{{evidence}}],"ownershipEpoch":4,"leaseId":"lse-9"}`,
	CmdWorkCancel:                     `{"workItemId":"wi-7","reason":"superseded"}`,
	CmdArtifactPublish:                `{"manifest":{{manifest}},"ownershipEpoch":4,"leaseId":"lse-9"}`,
	CmdApprovalGrantExecution:         `{"approvalId":"apr-1","workItemId":"wi-7","contractRevision":1}`,
	CmdPolicyGrantCooperationOverride: `{"grantId":"ovr-1","missionId":"mis-a","groupId":"grp-a","policy":"max-delegation-depth","grantee":{{agent}},"targetCommandType":"work.authorize","targetActionId":"act-9","reason":"deep plan","approver":{{human}},"grantedAt":{{t}},"expiresAt":"2026-11-30T09:00:00Z"}`,
	CmdAgentCardRegister:              `{"agentCard":{{card}}}`,
	CmdSessionOpen:                    `{"agentId":"worker-1","sessionEpoch":4,"agentCardHash":{{h1}}}`,
	CmdDependencyInsert:               `{"workItemId":"wi-7","contractRevision":2,"dependencies":[{"workItemId":"wi-3","policy":"submitted"}]}`,
	CmdLeaseRenew:                     `{"workItemId":"wi-7","ownershipEpoch":4,"leaseId":"lse-9","progress":{{progress}}}`,
	CmdResourceUsageRecord:            `{"workItemId":"wi-7","ownershipEpoch":4,"leaseId":"lse-9","usageDelta":{{usage}}}`,
	CmdGroupArchive:                   `{"snapshot":{{snapshot}}}`,
	CmdContextPublish:                 `{"package":{{context}}}`,
}

var placeholder = regexp.MustCompile(`\{\{(\w+)\}\}`)

func expandFixture(t testing.TB, s string) string {
	t.Helper()
	for i := 0; placeholder.MatchString(s); i++ {
		if i > 10 {
			t.Fatalf("fixture placeholders nest too deep: %.80s", s)
		}
		s = placeholder.ReplaceAllStringFunc(s, func(m string) string {
			f, ok := schemaFixtures[m[2:len(m)-2]]
			if !ok {
				t.Fatalf("unknown fixture %s", m)
			}
			return f
		})
	}
	return s
}

// fixture decodes a fixture the way Parse does: numbers stay json.Number.
func fixture(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(expandFixture(t, s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("bad fixture: %v\n%s", err, expandFixture(t, s))
	}
	return v
}

// commandWith returns a command envelope of type typ around payload.
func commandWith(t testing.TB, typ CommandType, payload string) any {
	doc := fixture(t, "{{command}}").(map[string]any)
	doc["type"] = string(typ)
	doc["payload"] = fixture(t, payload)
	return doc
}

// mutate returns a deep copy of doc with the value at pointer replaced by
// the JSON text value, or deleted when value is "".
func mutate(t testing.TB, doc any, pointer, value string) any {
	t.Helper()
	cp := fixture(t, mustMarshal(t, doc))
	toks := strings.Split(pointer, "/")[1:]
	for i, tok := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
	}
	parent, _ := valueAt(cp, toks[:len(toks)-1])
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		if _, ok := p[last]; !ok && value == "" {
			t.Fatalf("mutate: %s does not exist", pointer)
		}
		delete(p, last)
		if value != "" {
			p[last] = fixture(t, value)
		}
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i >= len(p) || value == "" {
			t.Fatalf("mutate: bad array step %s", pointer)
		}
		p[i] = fixture(t, value)
	default:
		t.Fatalf("mutate: %s has no parent container", pointer)
	}
	return cp
}

func mustMarshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// problemsOf asserts err is a *ValidationError and returns its problems.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %T %v", err, err)
	}
	return ve.Problems
}

func TestSchemasCompile(t *testing.T) {
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	if len(SchemaNames) != 22 || len(set.byName) != 22 {
		t.Fatalf("want 22 schemas, have names=%d compiled=%d", len(SchemaNames), len(set.byName))
	}
	for _, n := range SchemaNames {
		if _, err := fs.Stat(SchemaFS(), n+".schema.json"); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	payloads, err := fs.Glob(SchemaFS(), "payloads/*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	want := len(CoreCommandTypes) + len(ExtCommandTypes)
	if len(payloads) != want {
		t.Errorf("payload schemas: %d files, %d Command types", len(payloads), want)
	}
	for _, typ := range append(append([]CommandType{}, CoreCommandTypes...), ExtCommandTypes...) {
		if _, err := fs.Stat(SchemaFS(), "payloads/"+string(typ)+".schema.json"); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
	for _, name := range []string{"time", "id", "digest", "signatureValue", "extType"} {
		found := false
		for _, d := range set.patterns {
			found = found || strings.Contains(d, "valid "+name+" ")
		}
		if !found {
			t.Errorf("no readable description for the %s pattern", name)
		}
	}
}

func TestValidateExamples(t *testing.T) {
	for _, name := range SchemaNames {
		src, ok := schemaExamples[name]
		if !ok {
			t.Errorf("%s: no example", name)
			continue
		}
		if err := Validate(name, fixture(t, src)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		schema, base, pointer, value string // value "" deletes the member at pointer
		wantCode                     Code
		wantPointer, wantMsg         string
	}{
		{"command", "{{command}}", "/foo", `1`, CodeSchemaValidationFailed, "/foo", `unknown member "foo" (additionalProperties false)`},
		{"command", "{{command}}", "/protocolVersion", `"0.2"`, CodeSchemaValidationFailed, "/protocolVersion", `must be "0.1"`},
		{"command", "{{command}}", "/sessionEpoch", `9007199254740992`, CodeSchemaValidationFailed, "/sessionEpoch", `value 9007199254740992 exceeds 2^53-1`},
		{"command", "{{command}}", "/sessionEpoch", `-1`, CodeSchemaValidationFailed, "/sessionEpoch", `below the minimum 0`},
		{"command", "{{command}}", "/membershipEpoch", `1.5`, CodeSchemaValidationFailed, "/membershipEpoch", `want integer`},
		{"command", "{{command}}", "/issuedAt", `"2026-11-30T08:00:00+01:00"`, CodeSchemaValidationFailed, "/issuedAt", `not a valid time`},
		{"command", "{{command}}", "/issuedAt", `"2026-11-30T08:00:00.1234Z"`, CodeSchemaValidationFailed, "/issuedAt", `not a valid time`},
		{"command", "{{command}}", "/actionId", `"-bad"`, CodeSchemaValidationFailed, "/actionId", `not a valid id`},
		{"command", "{{command}}", "/type", `"work.explode"`, CodeSchemaValidationFailed, "/type", `value "work.explode" is not a core Command type (spec 15.1) or an ext.<organization>.<profile>.<name> type`},
		{"command", "{{command}}", "/type", `"ext.acme"`, CodeSchemaValidationFailed, "/type", `value "ext.acme" is not a core Command type`},
		{"command", "{{command}}", "/signature/value", `"abc"`, CodeSchemaValidationFailed, "/signature/value", `not a valid signatureValue`},
		{"command", "{{command}}", "/signature/alg", `"RS256"`, CodeSchemaValidationFailed, "/signature/alg", `must be "Ed25519"`},
		{"command", "{{command}}", "/correlationId", "", CodeSchemaValidationFailed, "", `missing required member "correlationId"`},
		{"command", "{{command}}", "/payload/extra", `true`, CodeSchemaValidationFailed, "/payload/extra", `unknown member "extra"`},
		{"command", "{{command}}", "/payload/scheduleDisclosure/capacityState", `"busy"`, CodeSchemaValidationFailed, "/payload/scheduleDisclosure/capacityState", `must be one of`},
		{"command", "{{command}}", "/extensions", `{"not a uri":{"critical":false,"data":{}}}`, CodeSchemaValidationFailed, "/extensions/not a uri", `invalid member name "not a uri"`},
		{"command", "{{command}}", "/extensions", `{"urn:acme:ext:x":{"critical":false}}`, CodeSchemaValidationFailed, "/extensions/urn:acme:ext:x", `missing required member "data"`},
		{"command", "{{command}}", "/extensions", `{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":false,"data":{{offline}}}}`, CodeSchemaValidationFailed, "/extensions/urn:missionweaveprotocol:extension:bounded-offline-execution/critical", `must be true`},
		{"command", "{{command}}", "/extensions", `{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":{"agentId":"worker-1"}}}`, CodeSchemaValidationFailed, "/extensions/urn:missionweaveprotocol:extension:bounded-offline-execution/data", `missing required member "usageDelta"`},
		{"event", "{{event}}", "/sequence", "", CodeSchemaValidationFailed, "", `missing required member "sequence"`},
		{"event", "{{event}}", "/aggregate/kind", `"planet"`, CodeSchemaValidationFailed, "/aggregate/kind", `must be one of`},
		{"event", "{{event}}", "/type", `"work.exploded"`, CodeSchemaValidationFailed, "/type", `value "work.exploded" is not a core Event type`},
		{"event", "{{orgevent}}", "/groupId", `"grp-a"`, CodeSchemaValidationFailed, "/groupId", `member "groupId" is not allowed here`},
		{"event", "{{orgevent}}", "/revision", `1`, CodeSchemaValidationFailed, "/revision", `member "revision" is not allowed here`},
		{"event", "{{event}}", "/payload", `[]`, CodeSchemaValidationFailed, "/payload", `wrong type: got array, want object`},
		{"websocket-frame", `{"type":"COMMAND","frameId":"f1","command":{{command}}}`, "/type", `"SHOUT"`, CodeSchemaValidationFailed, "/type", `must be one of "HELLO"`},
		{"websocket-frame", `{"type":"COMMAND","frameId":"f1","command":{{command}}}`, "/command/payload/offerId", "", CodeSchemaValidationFailed, "/command/payload", `missing required member "offerId"`},
		{"websocket-frame", `{"type":"PING","frameId":"f1","nonce":"n0nce-n0nce-n0nce"}`, "/nonce", `"short"`, CodeSchemaValidationFailed, "/nonce", `not a valid nonce`},
		{"websocket-frame", `{"type":"PING","frameId":"f1","nonce":"n0nce-n0nce-n0nce"}`, "/cursors", `[]`, CodeSchemaValidationFailed, "/cursors", `unknown member "cursors"`},
		{"websocket-frame", `{"type":"BACKPRESSURE","frameId":"f1","groupId":"grp-a","retryAfterMs":250}`, "/retryAfterMs", "", CodeSchemaValidationFailed, "", `missing required member "retryAfterMs"`},
		{"websocket-frame", `{"type":"ACK","frameId":"f1","inReplyTo":"f0","receipt":{"actionId":"a1","events":[{"eventId":"e1","groupId":"g"}]}}`, "/receipt/actionId", `"a1"`, CodeSchemaValidationFailed, "/receipt/events/0", `member "groupId" requires member(s) "sequence"`},
		{"error", "{{error}}", "/retryable", `true`, CodeSchemaValidationFailed, "/retryable", `must be false`},
		{"error", "{{error}}", "/code", `"TEAPOT"`, CodeSchemaValidationFailed, "/code", `must be one of`},
		{"agent-card", "{{card}}", "/keys/0/publicKey", `"short"`, CodeSchemaValidationFailed, "/keys/0/publicKey", `not a valid publicKeyValue`},
		{"agent-card", "{{card}}", "/capabilities/0/version", `"1.x"`, CodeSchemaValidationFailed, "/capabilities/0/version", `not a valid semver`},
		{"agent-card", "{{card}}", "/maxConcurrency", `0`, CodeSchemaValidationFailed, "/maxConcurrency", `below the minimum 1`},
		{"presence-record", "{{presence}}", "/activeSlots", `"1"`, CodeSchemaValidationFailed, "/activeSlots", `wrong type: got string, want integer`},
		{"presence-record", "{{presence}}", "/percent", `50`, CodeSchemaValidationFailed, "/percent", `unknown member "percent"`},
		{"mission", "{{mission}}", "/owner/kind", `"agent"`, CodeSchemaValidationFailed, "/owner/kind", `must be "human"`},
		{"mission", "{{mission}}", "/state", `"done"`, CodeSchemaValidationFailed, "/state", `must be one of`},
		{"group", "{{group}}", "/lastSequence", "", CodeSchemaValidationFailed, "", `missing required member "lastSequence"`},
		{"group", "{{group}}", "/extensionProfiles/0/uri", `"acme review"`, CodeSchemaValidationFailed, "/extensionProfiles/0/uri", `not a valid extensionUri`},
		{"membership", "{{membership}}", "/roles", `[]`, CodeSchemaValidationFailed, "/roles", `at least 1 required`},
		{"membership", "{{membership}}", "/roles/0", `"admin"`, CodeSchemaValidationFailed, "/roles/0", `must be one of`},
		{"conversation", "{{conversation}}", "/subject/kind", `"artifact"`, CodeSchemaValidationFailed, "/subject/kind", `must be one of`},
		{"conversation", "{{conversation}}", "/createdAt", `"yesterday"`, CodeSchemaValidationFailed, "/createdAt", `not a valid time`},
		{"message", "{{message}}", "/approve", `true`, CodeSchemaValidationFailed, "/approve", `unknown member "approve"`},
		{"message", "{{message}}", "/mediaType", `"text/html"`, CodeSchemaValidationFailed, "/mediaType", `must be one of`},
		{"work-contract", "{{contract}}", "/urgency", `"asap"`, CodeSchemaValidationFailed, "/urgency", `must be one of "low"`},
		{"work-contract", "{{contract}}", "/budgets", `{}`, CodeWorkContractIncomplete, "/budgets", `at least 1 required`},
		{"work-contract", "{{contract}}", "/percentDone", `10`, CodeSchemaValidationFailed, "/percentDone", `unknown member`},
		{"work-contract", "{{contract}}", "/acceptanceCriteria", `[]`, CodeWorkContractIncomplete, "/acceptanceCriteria", `at least 1 required`},
		{"work-contract", "{{contract}}", "/goal", `""`, CodeWorkContractIncomplete, "/goal", `string must not be empty`},
		{"work-contract", "{{contract}}", "/requiredCapabilities/0/version", "", CodeWorkContractIncomplete, "/requiredCapabilities/0", `missing required member "version"`},
		{"work-item", "{{workitem}}", "/state", `"paused"`, CodeSchemaValidationFailed, "/state", `must be one of`},
		{"work-item", "{{workitem}}", "/contract/risk", "", CodeWorkContractIncomplete, "/contract", `missing required member "risk"`},
		{"work-item", "{{workitem}}", "/lease/renewals/0", `"soon"`, CodeSchemaValidationFailed, "/lease/renewals/0", `not a valid time`},
		{"artifact", "{{manifest}}", "/contentHash", `"sha256:ABC"`, CodeSchemaValidationFailed, "/contentHash", `not a valid digest`},
		{"artifact", "{{manifest}}", "/size", `-1`, CodeSchemaValidationFailed, "/size", `below the minimum 0`},
		{"artifact", "{{manifest}}", "/producer/agentCardHash", "", CodeSchemaValidationFailed, "/producer", `missing required member "agentCardHash"`},
		{"evidence", "{{evidence}}", "/method", "", CodeSchemaValidationFailed, "", `missing required member "method"`},
		{"evidence", "{{evidence}}", "/result", `"ok"`, CodeSchemaValidationFailed, "/result", `must be one of`},
		{"evidence", "{{evidence}}", "/criteria", `[]`, CodeSchemaValidationFailed, "/criteria", `at least 1 required`},
		{"lease", "{{lease}}", "/expiresAt", "", CodeSchemaValidationFailed, "", `missing required member "expiresAt"`},
		{"lease", "{{ownership}}", "/startDeadline", "", CodeSchemaValidationFailed, "", `missing required member "startDeadline"`},
		{"lease", "{{ownership}}", "/renewals", `[]`, CodeSchemaValidationFailed, "/renewals", `unknown member "renewals"`},
		{"approval", "{{approval}}", "/contractRevision", "", CodeSchemaValidationFailed, "", `missing required member "contractRevision"`},
		{"approval", "{{approval}}", "/decision", `"maybe"`, CodeSchemaValidationFailed, "/decision", `must be one of`},
		{"context-package", "{{context}}", "/previousVersion", "", CodeSchemaValidationFailed, "", `missing required member "previousVersion"`},
		{"context-package", "{{context}}", "/sourceEvents/toSequence", "", CodeSchemaValidationFailed, "/sourceEvents", `missing required member "toSequence"`},
		{"group-snapshot", "{{snapshot}}", "/signature", "", CodeSchemaValidationFailed, "", `missing required member "signature"`},
		{"group-snapshot", "{{snapshot}}", "/workItems/0/contract/goal", "", CodeWorkContractIncomplete, "/workItems/0/contract", `missing required member "goal"`},
		{"extension-profile", "{{profile}}", "/version", `"v1"`, CodeSchemaValidationFailed, "/version", `not a valid semver`},
		{"extension-profile", "{{profile}}", "/commandTypes/0", `"review.request"`, CodeSchemaValidationFailed, "/commandTypes/0", `not a valid extType`},
		{"first-admission-record", "{{admission}}", "/key/alg", `"P-256"`, CodeSchemaValidationFailed, "/key/alg", `must be "Ed25519"`},
		{"first-admission-record", "{{admission}}", "/logSequence", "", CodeSchemaValidationFailed, "", `missing required member "logSequence"`},
	}
	for _, tc := range tests {
		t.Run(tc.schema+tc.pointer, func(t *testing.T) {
			doc := mutate(t, fixture(t, tc.base), tc.pointer, tc.value)
			err := Validate(tc.schema, doc)
			ps := problemsOf(t, err)
			for _, p := range ps {
				if p.Pointer == tc.wantPointer && strings.Contains(p.Message, tc.wantMsg) {
					if p.Code != tc.wantCode {
						t.Errorf("code %s, want %s", p.Code, tc.wantCode)
					}
					if CodeOf(err) != tc.wantCode {
						t.Errorf("CodeOf = %s, want %s", CodeOf(err), tc.wantCode)
					}
					return
				}
			}
			t.Errorf("no problem at %q containing %q; got %v", tc.wantPointer, tc.wantMsg, ps)
		})
	}
}

func allCommandTypes() []CommandType {
	return append(append([]CommandType{}, CoreCommandTypes...), ExtCommandTypes...)
}

func TestCommandPayloads(t *testing.T) {
	for _, typ := range allCommandTypes() {
		t.Run(string(typ), func(t *testing.T) {
			src, ok := payloadExamples[typ]
			if !ok {
				t.Fatal("no payload example")
			}
			if err := Validate("command", commandWith(t, typ, src)); err != nil {
				t.Fatalf("valid payload rejected: %v", err)
			}
			// An unknown member is rejected by this type's payload schema.
			bad := mutate(t, commandWith(t, typ, src), "/payload/bogus", `1`)
			if ps := problemsOf(t, Validate("command", bad)); len(ps) != 1 || ps[0].Pointer != "/payload/bogus" {
				t.Errorf("unknown payload member: %v", ps)
			}
			// So is a payload missing its first required member.
			req := requiredOf(t, "payloads/"+string(typ)+".schema.json")
			bad = mutate(t, commandWith(t, typ, src), "/payload/"+req[0], "")
			ps := problemsOf(t, Validate("command", bad))
			want := fmt.Sprintf("missing required member %q", req[0])
			if len(ps) != 1 || ps[0].Pointer != "/payload" || ps[0].Message != want {
				t.Errorf("missing %s: %v", req[0], ps)
			}
			// And the payload of one type does not pass as another's.
			other := CmdWorkCancel
			if typ == other {
				other = CmdWorkUnblock
			}
			if err := Validate("command", commandWith(t, other, src)); err == nil {
				t.Errorf("payload of %s accepted as %s", typ, other)
			}
		})
	}
}

func requiredOf(t *testing.T, file string) []string {
	t.Helper()
	data, err := fs.ReadFile(SchemaFS(), file)
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Required []string }
	if err := json.Unmarshal(data, &s); err != nil || len(s.Required) == 0 {
		t.Fatalf("%s: required list: %v", file, err)
	}
	return s.Required
}

// contractMembers are the members docs/wire.md requires of every Work Contract.
var contractMembers = []string{
	"contractId", "revision", "goal", "requiredOutputs", "acceptanceCriteria", "inputs",
	"dependencies", "allowedTools", "allowedData", "allowedOperations", "resourceLimits",
	"requiredCapabilities", "deadline", "urgency", "businessImpact", "budgets", "retryPolicy", "risk",
}

func TestWorkContractIncomplete(t *testing.T) {
	places := []struct {
		schema string
		doc    func(t *testing.T) any
		at     string
	}{
		{"work-contract", func(t *testing.T) any { return fixture(t, "{{contract}}") }, ""},
		{"command", func(t *testing.T) any { return commandWith(t, CmdWorkAuthorize, payloadExamples[CmdWorkAuthorize]) }, "/payload/contract"},
		{"command", func(t *testing.T) any { return commandWith(t, CmdWorkOffer, payloadExamples[CmdWorkOffer]) }, "/payload/contract"},
		{"work-item", func(t *testing.T) any { return fixture(t, "{{workitem}}") }, "/contract"},
	}
	for _, pl := range places {
		for _, m := range contractMembers {
			t.Run(pl.schema+pl.at+"/"+m, func(t *testing.T) {
				err := Validate(pl.schema, mutate(t, pl.doc(t), pl.at+"/"+m, ""))
				ps := problemsOf(t, err)
				want := Problem{Code: CodeWorkContractIncomplete, Pointer: pl.at, Message: fmt.Sprintf("missing required member %q", m)}
				if len(ps) != 1 || ps[0] != want {
					t.Errorf("got %v, want [%v]", ps, want)
				}
				var pe *Error
				if !errors.As(err, &pe) || pe.Code != CodeWorkContractIncomplete || pe.Pointer != pl.at {
					t.Errorf("protocol error: %#v", pe)
				}
			})
		}
	}
	// notes is the only optional member.
	if err := Validate("work-contract", mutate(t, fixture(t, "{{contract}}"), "/notes", "")); err != nil {
		t.Errorf("contract without notes: %v", err)
	}
	// A missing member outside any contract stays SCHEMA_VALIDATION_FAILED.
	doc := mutate(t, commandWith(t, CmdWorkOffer, payloadExamples[CmdWorkOffer]), "/payload/candidates/0/selectionBasis/expectedCost", "")
	if c := CodeOf(Validate("command", doc)); c != CodeSchemaValidationFailed {
		t.Errorf("selection basis problem: %s", c)
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name, schema, doc string
		muts              [][2]string // pointer, JSON value ("" deletes)
	}{
		{"unknown non-critical extension", "command", `{{command}}`, [][2]string{{"/extensions",
			`{"https://acme.example/ext/trace":{"critical":false,"data":{"span":[1,2,{"x":null}]}}}`}}},
		{"offline binding", "command", `{{command}}`, [][2]string{{"/extensions",
			`{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":{{offline}}}}`}}},
		{"ext command type, free payload", "command", `{{command}}`,
			[][2]string{{"/type", `"ext.acme.review.request_review"`}, {"/payload", `{"anything":[1,"two"]}`}}},
		{"ext event type, free payload", "event", `{{event}}`,
			[][2]string{{"/type", `"ext.acme.review.review_requested"`}, {"/payload", `{"x":1}`}}},
		{"org-scoped event", "event", `{{orgevent}}`, nil},
		{"hello request", "websocket-frame", `{"type":"HELLO","frameId":"f1","protocolVersions":["0.1"],"agentId":"worker-1","sessionEpoch":3,
			"proof":{"agentId":"worker-1","sessionEpoch":3,"nonce":"bm9uY2Utbm9uY2UtMDE","issuedAt":{{t}},"signature":{{sig}}}}`, nil},
		{"hello reply", "websocket-frame", `{"type":"HELLO","frameId":"f2","protocolVersion":"0.1","sessionEpoch":3,"serverTime":"2026-11-30T08:00:00.001Z"}`, nil},
		{"subscribe", "websocket-frame", `{"type":"SUBSCRIBE","frameId":"f3","groups":[{"groupId":"grp-a","afterSequence":0},
			{"groupId":"grp-b","afterSequence":17,"filter":{"types":["work.offer.created"]}}]}`, nil},
		{"event frame", "websocket-frame", `{"type":"EVENT","frameId":"f4","event":{{event}}}`, nil},
		{"ack cursors", "websocket-frame", `{"type":"ACK","frameId":"f5","cursors":[{"groupId":"grp-a","sequence":42}]}`, nil},
		{"ack receipt", "websocket-frame", `{"type":"ACK","frameId":"f6","inReplyTo":"f1","receipt":{"actionId":"act-1",
			"events":[{"eventId":"evt-1","groupId":"grp-a","sequence":43},{"eventId":"evt-o1"}]}}`, nil},
		{"ping with presence", "websocket-frame", `{"type":"PING","frameId":"f7","nonce":"n0nce-n0nce-n0nce","presence":{{presence}},"reply":true}`, nil},
		{"error frame", "websocket-frame", `{"type":"ERROR","frameId":"f8","inReplyTo":"f1","error":{{error}}}`, nil},
		{"retryable error", "error", `{"code":"BACKPRESSURE","message":"slow down","retryable":true}`, nil},
		{"backpressure", "websocket-frame", `{"type":"BACKPRESSURE","frameId":"f9","groupId":"grp-a","retryAfterMs":250}`, nil},
		{"max safe integer", "presence-record", `{{presence}}`, [][2]string{{"/queuedWorkItems", `9007199254740991`}}},
		{"mission approval", "approval", `{"approvalId":"apr-2","kind":"mission","missionId":"mis-a","groupId":"grp-a","approver":{{human}},
			"decision":"changes_requested","comment":"add docs","decidedAt":{{t}}}`, nil},
		{"first context package", "context-package", `{{context}}`, [][2]string{{"/version", `1`}, {"/previousVersion", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := fixture(t, tc.doc)
			for _, m := range tc.muts {
				doc = mutate(t, doc, m[0], m[1])
			}
			if err := Validate(tc.schema, doc); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestValidationErrorShape(t *testing.T) {
	doc := fixture(t, "{{command}}")
	doc = mutate(t, doc, "/zzz", `1`)
	doc = mutate(t, doc, "/actionId", `""`)
	doc = mutate(t, doc, "/payload/contractRevision", `0`)
	doc = mutate(t, doc, "/actor/id", "")
	err := Validate("command", doc)
	ps := problemsOf(t, err)
	want := []string{"/actionId", "/actor", "/payload/contractRevision", "/zzz"}
	if len(ps) != len(want) {
		t.Fatalf("problems %v, want pointers %v", ps, want)
	}
	for i, p := range ps {
		if p.Pointer != want[i] {
			t.Errorf("problem %d at %q, want %q", i, p.Pointer, want[i])
		}
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeSchemaValidationFailed || pe.Retryable || pe.Pointer != "/actionId" {
		t.Fatalf("protocol error %#v", pe)
	}
	if got := pe.Details["problems"].([]any); len(got) != len(ps) {
		t.Errorf("details carry %d problems, want %d", len(got), len(ps))
	}
	if !strings.Contains(err.Error(), `/zzz: unknown member "zzz"`) {
		t.Errorf("error text: %s", err)
	}
	// RFC 6901 escaping of member names.
	ps = problemsOf(t, Validate("evidence", mutate(t, fixture(t, "{{evidence}}"), "/a~1b~0c", `1`)))
	if len(ps) != 1 || ps[0].Pointer != "/a~1b~0c" {
		t.Errorf("escaped pointer: %v", ps)
	}
}

func TestValidateBadCalls(t *testing.T) {
	if c := CodeOf(Validate("nope", map[string]any{})); c != CodeSchemaValidationFailed {
		t.Errorf("unknown schema: %s", c)
	}
	for _, v := range []any{nil, "x", []any{}, true} {
		if err := Validate("command", v); CodeOf(err) != CodeSchemaValidationFailed {
			t.Errorf("%v: %v", v, err)
		}
	}
}

func TestCommonDefinitions(t *testing.T) {
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	c, err := newSchemaCompiler(map[string]string{}, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		def, value string
		ok         bool
	}{
		{"time", `"2026-11-30T08:00:00Z"`, true}, {"time", `"2026-11-30T08:00:00.123Z"`, true},
		{"time", `"2026-11-30T08:00:00.1234Z"`, false}, {"time", `"2026-11-30T08:00:00z"`, false},
		{"time", `"2026-11-30 08:00:00Z"`, false}, {"time", `"2026-13-30T08:00:00Z"`, false},
		{"time", `"2026-11-30T24:00:00Z"`, false}, {"id", `"a"`, true}, {"id", `"grp-a:1.x_y"`, true},
		{"id", `"` + strings.Repeat("a", 128) + `"`, true}, {"id", `"` + strings.Repeat("a", 129) + `"`, false},
		{"id", `"_a"`, false}, {"id", `"a b"`, false}, {"id", `""`, false},
		{"digest", `"sha256:` + strings.Repeat("0", 64) + `"`, true},
		{"digest", `"sha256:` + strings.Repeat("0", 63) + `"`, false},
		{"digest", `"sha512:` + strings.Repeat("0", 64) + `"`, false}, {"uint", `0`, true},
		{"uint", `9007199254740991`, true}, {"uint", `9007199254740992`, false}, {"uint", `-1`, false},
		{"uint", `1e3`, true}, {"uint", `1.5`, false},
		{"signatureValue", `"` + strings.Repeat("A", 85) + `w"`, true},
		{"signatureValue", `"` + strings.Repeat("A", 85) + `B"`, false},
		{"signatureValue", `"` + strings.Repeat("A", 84) + `=="`, false},
		{"publicKeyValue", `"` + strings.Repeat("_", 42) + `8"`, true},
		{"publicKeyValue", `"` + strings.Repeat("_", 42) + `9"`, false},
		{"extType", `"ext.acme.review.request"`, true}, {"extType", `"ext.acme.review.v1.request_2"`, true},
		{"extType", `"ext.Acme.review.request"`, false}, {"extType", `"mission.create"`, false},
		{"semver", `"2.0.0-rc.1+b5"`, true}, {"semver", `"01.0.0"`, false}, {"usage", `{{usage}}`, true},
		{"usage", `{"money":1}`, false}, {"budgets", `{"tokens":5}`, true}, {"budgets", `{"tokens":-5}`, false},
		{"extensions", `{"urn:acme:x":{"critical":true,"data":null}}`, true},
		{"extensions", `{"urn:acme:x":{"critical":"yes","data":null}}`, false},
		{"offlineBinding", `{{offline}}`, true}, {"progress", `{{progress}}`, true},
		{"progress", `{"phase":"x","percent":50}`, false}, {"scheduleDisclosure", `{{sched}}`, true},
		{"selectionBasis", `{{basis}}`, true},
		{"admissionRejection", `{"reason":"capacity","detail":"all slots busy"}`, true},
		{"admissionRejection", `{"reason":"mood","detail":"no"}`, false},
		{"snapshotRef", `{"snapshotId":"snp-1","groupId":"grp-a","sequence":42,"digest":{{h1}},"uri":"https://a.example/s"}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.def+" "+tc.value, func(t *testing.T) {
			s, err := c.Compile(SchemaBaseURL + "common.schema.json#/$defs/" + tc.def)
			if err != nil {
				t.Fatal(err)
			}
			err = set.check("common#"+tc.def, s, fixture(t, tc.value))
			if (err == nil) != tc.ok {
				t.Errorf("ok=%v, err=%v", tc.ok, err)
			}
		})
	}
}

func TestDetectSchema(t *testing.T) {
	tests := []struct {
		doc, want string // want "" expects an error
	}{
		{`{{command}}`, "command"}, {`{{event}}`, "event"}, {`{{orgevent}}`, "event"},
		{`{"type":"PING","frameId":"f1","nonce":"n0nce-n0nce-n0nce"}`, "websocket-frame"},
		{`{"type":"SHOUT","frameId":"f1"}`, "websocket-frame"}, {`{{error}}`, "error"},
		{`{{ownership}}`, "lease"}, {`{{manifest}}`, "artifact"},
		{`{"hello":"world"}`, ""},
		{`{}`, ""}, {`[1,2]`, ""}, {`"command"`, ""},
		{`{"contractId":"wc-1","leaseId":"l1","expiresAt":"x"}`, ""}, // fits two schemas
	}
	detected := map[string]bool{}
	for _, tc := range tests {
		got, err := DetectSchema(fixture(t, tc.doc))
		if tc.want == "" {
			if err == nil || CodeOf(err) != CodeSchemaValidationFailed {
				t.Errorf("%.60s: got %q, %v; want SCHEMA_VALIDATION_FAILED", tc.doc, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%.60s: got %q, %v; want %q", tc.doc, got, err, tc.want)
		}
		detected[got] = true
	}
	// Every example detects as its own schema.
	for name, src := range schemaExamples {
		if name == "common" {
			continue
		}
		if got, err := DetectSchema(fixture(t, src)); err != nil || got != name {
			t.Errorf("example %s detected as %q, %v", name, got, err)
		}
		detected[name] = true
	}
	for _, n := range SchemaNames[1:] {
		if !detected[n] {
			t.Errorf("no detection case for %s", n)
		}
	}
}

// TestSplitMatchesNormative proves that Validate's split path (envelope
// without dispatch + payload schema) reports exactly what the normative
// command.schema.json with its per-type if/then reports.
func TestSplitMatchesNormative(t *testing.T) {
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	var commands []any
	for _, typ := range allCommandTypes() {
		src := payloadExamples[typ]
		req := requiredOf(t, "payloads/"+string(typ)+".schema.json")
		commands = append(commands,
			commandWith(t, typ, src),
			mutate(t, commandWith(t, typ, src), "/payload/bogus", `1`),
			mutate(t, commandWith(t, typ, src), "/payload/"+req[len(req)-1], ""),
			mutate(t, commandWith(t, typ, src), "/payload", `"not an object"`),
			mutate(t, commandWith(t, typ, src), "/payload", `{}`),
		)
	}
	base := fixture(t, "{{command}}")
	for _, m := range []struct{ ptr, val string }{
		{"/type", `"work.explode"`}, {"/type", `"ext.acme.review.request"`}, {"/type", `7`},
		{"/type", ""}, {"/payload", ""}, {"/payload/contractRevision", `"1"`}, {"/sessionEpoch", `-3`},
		{"/payload/scheduleDisclosure/estimatedStartWindow/from", `"later"`},
	} {
		commands = append(commands, mutate(t, base, m.ptr, m.val))
	}
	type doc struct {
		schema string
		v      any
	}
	var docs []doc
	for _, c := range commands {
		docs = append(docs, doc{"command", c},
			doc{"websocket-frame", map[string]any{"type": "COMMAND", "frameId": "f1", "command": c}})
	}
	docs = append(docs,
		doc{"websocket-frame", map[string]any{"type": "COMMAND", "frameId": "f1", "command": "x"}},
		doc{"websocket-frame", map[string]any{"type": "COMMAND", "frameId": "f1"}},
		doc{"websocket-frame", map[string]any{"type": "EVENT", "frameId": "f1", "command": base}},
		doc{"websocket-frame", fixture(t, `{"type":"PING","frameId":"f1","nonce":"n0nce-n0nce-n0nce"}`)},
		doc{"command", []any{}}, doc{"websocket-frame", nil})
	for i, d := range docs {
		normative := set.check(d.schema, set.byName[d.schema], d.v)
		split := Validate(d.schema, d.v)
		var a, b []Problem
		if normative != nil {
			a = problemsOf(t, normative)
		}
		if split != nil {
			b = problemsOf(t, split)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("doc %d (%s): normative %v\nsplit %v\n%s", i, d.schema, a, b, mustMarshal(t, d.v))
		}
	}
}

func TestValidateConcurrent(t *testing.T) {
	good := fixture(t, "{{command}}")
	bad := mutate(t, good, "/payload/offerId", "")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if err := Validate("command", good); err != nil {
					t.Error(err)
				}
				if err := Validate("command", bad); err == nil {
					t.Error("bad command accepted")
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkValidateCommand validates a ~1 KiB work.accept_offer command.
// decode (encoding/json with UseNumber) is the baseline to read it against;
// normative runs command.schema.json's own per-type dispatch, validate the
// split path Validate uses.
func BenchmarkValidateCommand(b *testing.B) {
	withOffline := mutate(b, fixture(b, "{{command}}"), "/extensions",
		`{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":{{offline}}}}`)
	src := mustMarshal(b, withOffline)
	doc := fixture(b, src)
	if err := Validate("command", doc); err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			d := json.NewDecoder(strings.NewReader(src))
			d.UseNumber()
			var v any
			if err := d.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("normative", func(b *testing.B) {
		set, _ := loadSchemas()
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			if err := set.check("command", set.byName["command"], doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("validate", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			if err := Validate("command", doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
