package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/queue"
)

func runInspect(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"mwp-worker", "inspect"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

const inspectContract = `{"contractId":"wc-1","revision":1,"goal":"g","requiredOutputs":[{"name":"patch","mediaType":"text/x-diff"}],
"acceptanceCriteria":[{"id":"ac-1","description":"d","evidenceRequired":["test-report"]}],"inputs":[],"dependencies":[],
"allowedTools":[],"allowedData":[],"allowedOperations":[],"resourceLimits":{},"requiredCapabilities":[{"id":"code.implement","version":"1.x"}],
"deadline":"2026-12-01T00:00:00Z","urgency":"high","businessImpact":"medium","budgets":{"toolCalls":10},
"retryPolicy":{"maxAttempts":1,"backoff":{"initialMs":1,"maxMs":1,"multiplier":1},"attemptTimeoutMs":1,"costLimit":1},
"risk":{"class":"low","preExecutionApproval":false}}`

func inspectEvent(t *testing.T, seq int, typ, aggKind, aggID, payload string) queue.Incoming {
	t.Helper()
	doc := fmt.Sprintf(`{"eventId":"evt-%d","groupId":"grp-a","sequence":%d,"aggregate":{"kind":%q,"id":%q},"revision":%d,
"type":%q,"actor":{"kind":"agent","id":"worker-1"},"causationId":"act-%d","correlationId":"mis-a",
"occurredAt":"2026-11-30T08:00:0%dZ","acceptedBy":"authority-1","payload":%s,
"signature":{"alg":"Ed25519","keyId":"authority-1#k1","createdAt":"2026-11-30T08:00:00Z","value":"x"}}`,
		seq, seq, aggKind, aggID, seq, typ, seq, seq, payload)
	in, err := queue.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// inspectStore fills a store in dir with one Group whose item wi-1 is queued
// for worker-1, plus an event held beyond a gap and one pending command.
func inspectStore(t *testing.T, dir string) *queue.Store {
	t.Helper()
	s, err := queue.Open(dir, queue.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	evs := []queue.Incoming{
		inspectEvent(t, 1, "mission.created", "mission", "mis-a", `{"missionId":"mis-a","state":"active","mission":{"missionId":"mis-a","groupId":"grp-a","title":"t","objective":"o","state":"active","owner":{"kind":"human","id":"alice"},"priorityClass":"high","createdAt":"2026-11-30T08:00:00Z","revision":1}}`),
		inspectEvent(t, 2, "work.authorized", "workItem", "wi-1", `{"workItemId":"wi-1","state":"open","missionId":"mis-a","contractRevision":1,"contract":`+inspectContract+`}`),
		inspectEvent(t, 3, "work.offer.created", "workItem", "wi-1", `{"workItemId":"wi-1","state":"offered","offerId":"off-1","contractRevision":1,"contract":`+inspectContract+`,"candidates":[{"agentId":"worker-1","selectionBasis":{}}],"offerExpiresAt":"2026-11-30T09:00:00Z"}`),
		inspectEvent(t, 4, "work.offer.accepted", "workItem", "wi-1", `{"workItemId":"wi-1","state":"queued","offerId":"off-1","contractRevision":1,"ownership":{"workItemId":"wi-1","ownerAgentId":"worker-1","ownershipEpoch":2,"startDeadline":"2026-11-30T10:00:00Z"}}`),
		inspectEvent(t, 6, "message.posted", "message", "msg-1", `{"messageId":"msg-1","conversationId":"c","text":"hi"}`),
	}
	res, err := s.Apply(evs)
	if err != nil || len(res.Applied) != 4 || len(res.Buffered) != 1 {
		t.Fatalf("apply: %+v %v", res, err)
	}
	if err := s.PutOutbox("act-9", []byte(`{"actionId":"act-9","type":"work.start","groupId":"grp-a"}`)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	s := inspectStore(t, dir)

	// While the worker runs: a live copy, including the reorder buffer.
	code, out, errOut := runInspect(t, "--data", dir)
	if code != 0 {
		t.Fatalf("inspect: %d %s", code, errOut)
	}
	for _, want := range []string{
		"copy served by the running worker", "outbox: 1 pending", "act-9 work.start grp-a",
		"group grp-a: cursor 4, inbox 4 event(s) [1..4]", "mission mis-a: active, priority high",
		"buffered: 1 event(s)", "missing after 4, before 6",
		"wi-1", "queued", "high", "2026-12-01T00:00:00Z", "worker-1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("live output lacks %q:\n%s", want, out)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Stopped: the file itself, as JSON.
	code, out, errOut = runInspect(t, "--data", dir, "--json")
	if code != 0 {
		t.Fatalf("inspect --json: %d %s", code, errOut)
	}
	var rep queue.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not a Report: %v\n%s", err, out)
	}
	if rep.Live || rep.Path != filepath.Join(dir, queue.FileName) || len(rep.Groups) != 1 || rep.Outbox.Pending != 1 {
		t.Fatalf("report = %+v", rep)
	}
	g := rep.Groups[0]
	if g.Cursor != 4 || g.Buffer != nil || len(g.Items) != 1 || g.Items[0].OwnershipEpoch != 2 || g.Items[0].State != "queued" || g.Items[0].Urgency != "high" {
		t.Fatalf("group = %+v", g)
	}
	for _, member := range []string{`"workItemId": "wi-1"`, `"ownershipEpoch": 2`, `"deadline": "2026-12-01T00:00:00Z"`, `"cursor": 4`} {
		if !strings.Contains(out, member) {
			t.Errorf("JSON lacks %s", member)
		}
	}

	// Inspect never writes: a second run sees the same bytes of report.
	_, again, _ := runInspect(t, "--data", dir, "--json")
	if again != out {
		t.Errorf("second inspect differs")
	}
}

func TestInspectProblems(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no store", []string{"--data", t.TempDir()}, "no worker store"},
		{"no data flag", nil, "data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runInspect(t, tc.args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q, want it to mention %q", code, errOut, tc.want)
			}
		})
	}
}
