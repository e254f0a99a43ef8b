package slots

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

var lineSeeds = []string{
	`{"type":"progress","progress":{"phase":"p","milestonesCompleted":[],"nextCheckpoint":"n","blockers":[],"revisedEstimate":{"completionAt":"2026-12-01T00:00:00Z","confidence":0.5},"evidenceRefs":[]}}`,
	`{"type":"checkpoint","id":"c1","state":"MQ==","phase":"step-1"}`,
	`{"type":"artifact","id":"a1","mediaType":"text/plain","data":"aGk="}`,
	`{"type":"artifact","id":"a2","mediaType":"text/plain","schema":"s","classification":"restricted","toolVersions":{"pytest":"8"},"data":"aGk="}`,
	`{"type":"toolCall","id":"t1","opId":"op","tool":"git","operation":"write","risk":{"class":"low","irreversible":true},"sideEffect":true,"cost":{"money":1,"tokens":2,"toolCalls":0,"computeSeconds":0,"wallClockSeconds":0,"sideEffects":0}}`,
	`{"type":"toolDone","id":"t1","output":""}`,
	`{"type":"toolDone","id":"t1","error":"boom"}`,
	`{"type":"charge","usage":{"money":0.5,"tokens":10,"toolCalls":0,"computeSeconds":1.5,"wallClockSeconds":0,"sideEffects":0}}`,
	`{"type":"block","resolution":{"kind":"clarification","detail":"which?"},"state":""}`,
	`{"type":"preempted"}`,
	`{"type":"result","artifacts":["sha256:00"],"evidence":[]}`,
	`{"type":"fail","reason":"r","permanent":true}`,
	`{"type":"events","id":"e1","fromSequence":3,"max":10}`,
	`{"type":"events","id":"e1"}`,
	`{"type":"events"}`,
	`{"type":"events","id":"e1","max":-1}`,
	`{"type":"events","id":"e1","fromSequence":-2}`,
	`{"type":"fetch","id":"f1","name":"feature-request"}`,
	`{"type":"fetch","id":"f2","digest":"sha256:00"}`,
	`{"type":"fetch","id":"f3","name":"a","digest":"sha256:00"}`,
	`{"type":"fetch","id":"f4"}`,
	`{"type":"result","type":"fail"}`,
	`{"type":"checkpoint","id":"c","state":"%%"}`,
	`[1,2]`,
	"\xef\xbb\xbf{}",
}

// The decoder of external handler output never panics, refuses with a
// PROTOCOL_VIOLATION, and what it accepts survives a round trip.
func FuzzDecodeLine(f *testing.F) {
	for _, s := range lineSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := decodeLine(line)
		if err != nil {
			if m != nil {
				t.Fatal("a message with an error")
			}
			return
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeLine(again)
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", again, err)
		}
		if third, _ := json.Marshal(m2); !bytes.Equal(again, third) {
			t.Fatalf("round trip changed %s into %s", again, third)
		}
	})
}

func TestDecodeLineSeeds(t *testing.T) {
	ok := 0
	for _, s := range lineSeeds {
		if _, err := decodeLine([]byte(s)); err == nil {
			ok++
		}
	}
	if ok != 16 {
		t.Fatalf("%d of the seeds decoded, want the 16 valid ones", ok)
	}
}

// The decoder of a program's clarification never panics, refuses only with
// a PROTOCOL_VIOLATION, and what it accepts is within the bounds and
// survives a round trip.
func FuzzDecodeClarification(f *testing.F) {
	for _, s := range []string{
		`{"type":"clarification","questions":[]}`,
		`{"type":"clarification","questions":["which branch?","which file?"]}`,
		`{"type":"clarification","questions":[""]}`,
		`{"type":"clarification"}`,
		`{"type":"clarification","questions":null}`,
		`{"type":"result","questions":[]}`,
		`{"type":"clarification","questions":["a"],"x":1}`,
		`{"type":"clarification","questions":["\ud800"]}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		qs, err := decodeClarification(line)
		if err != nil {
			var pe *protocol.Error
			if qs != nil || !errors.As(err, &pe) || pe.Code != protocol.CodeProtocolViolation {
				t.Fatalf("refusal %v (questions %q)", err, qs)
			}
			return
		}
		if qs == nil || len(qs) > MaxClarifyQuestions {
			t.Fatalf("accepted %d questions", len(qs))
		}
		again, _ := json.Marshal(clarificationMsg{Type: "clarification", Questions: qs})
		qs2, err := decodeClarification(again)
		if err != nil || strings.Join(qs2, "\x00") != strings.Join(qs, "\x00") {
			t.Fatalf("round trip of %s: %q, %v", again, qs2, err)
		}
	})
}
