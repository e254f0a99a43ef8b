package plan

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// head is a valid plan's first ten lines; cases append stages to it.
const head = `version: 1
mission:
  id: mis-1
  groupId: grp-1
  title: T
  objective: O
  budgets: {money: 10, tokens: 1000}
  deadline: 8h
approval:
  approvers: [alice]
stages:
`

// stage returns a valid stage (7 lines) with id, and extra lines appended.
func stage(id string, extra ...string) string {
	s := "  - id: " + id + "\n" +
		"    goal: G\n" +
		"    capability: {id: code.implement, version: 1.x}\n" +
		"    acceptance: [{id: ok, description: D, evidence: [E]}]\n" +
		"    outputs: [{name: out, mediaType: text/plain}]\n" +
		"    budgets: {money: 1}\n" +
		"    deadline: 2h\n"
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

func TestParseGood(t *testing.T) {
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		src   string
		order []string
		check func(t *testing.T, p *Plan)
	}{
		{"one stage, defaults", head + stage("a"), []string{"a"}, func(t *testing.T, p *Plan) {
			st := p.Stages[0]
			want := protocol.RetryPolicy{MaxAttempts: 1, Backoff: protocol.Backoff{InitialMs: 1000, MaxMs: 60000, Multiplier: 2},
				AttemptTimeoutMs: 3600000, CostLimit: 1}
			if st.Retry != want {
				t.Errorf("retry %+v, want %+v", st.Retry, want)
			}
			if st.Urgency != protocol.UrgencyNormal || st.BusinessImpact != protocol.ImpactMedium ||
				st.Risk != (protocol.Risk{Class: protocol.RiskLow}) || p.Mission.PriorityClass != protocol.PriorityNormal {
				t.Errorf("defaults: %v %v %v %v", st.Urgency, st.BusinessImpact, st.Risk, p.Mission.PriorityClass)
			}
			if st.WorkItemID != "mis-1:a" || st.ContractID != "mis-1:a:contract" || st.Line != 12 {
				t.Errorf("ids %q %q line %d", st.WorkItemID, st.ContractID, st.Line)
			}
		}},
		{"topological order, file order among ready", head +
			stage("d", "dependsOn: [b, c]") + stage("c", "dependsOn: [a]") + stage("b") + stage("a"),
			[]string{"b", "a", "c", "d"}, nil},
		{"diamond with a reviewer", head +
			stage("design") + stage("api", "dependsOn: [design]") + stage("ui", "dependsOn: [design]") +
			stage("review", "reviews: [api, ui]", "dependsOn: [{stage: api, policy: terminal}]"),
			[]string{"design", "api", "ui", "review"}, func(t *testing.T, p *Plan) {
				got := p.Stage("review").DependsOn
				want := []Dependency{{"api", protocol.DependencyTerminal}, {"ui", protocol.DependencySubmitted}}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("review depends on %v, want %v (declared policy wins, reviewed implies submitted)", got, want)
				}
			}},
		{"deadline inherited from the Mission, retry from budgets", strings.Replace(head, "deadline: 8h", "deadline: 2026-12-03T00:00:00Z", 1) +
			strings.Replace(stage("a", "retry: {maxAttempts: 2}"), "    deadline: 2h\n", "", 1) +
			"    resources: {cpu: 0.5, gpus: 0}\n",
			[]string{"a"}, func(t *testing.T, p *Plan) {
				st := p.Stages[0]
				if st.Deadline.From(start).String() != "2026-12-03T00:00:00Z" {
					t.Errorf("deadline %v", st.Deadline)
				}
				if st.Retry.MaxAttempts != 2 || st.Retry.CostLimit != 1 {
					t.Errorf("retry %+v", st.Retry)
				}
				if st.Resources.CPU == nil || *st.Resources.CPU != 0.5 || st.Resources.GPUs == nil || *st.Resources.GPUs != 0 || st.Resources.MemoryMiB != nil {
					t.Errorf("resources %+v", st.Resources)
				}
			}},
		{"JSON", `{"version": 1, "mission": {"id": "m", "groupId": "g", "title": "t", "objective": "o", "deadline": "1h"},
 "approval": {"approvers": ["h1"]},
 "stages": [{"id": "s", "goal": "g", "capability": {"id": "c", "version": "2.0.1"},
   "acceptance": [{"id": "a", "description": "d", "evidence": ["e"]}],
   "outputs": [{"name": "o", "mediaType": "application/json"}], "budgets": {"sideEffects": 0},
   "checks": [{"name": "lint", "command": ["make", "lint"], "pass": {"exitCode": 0, "stdoutContains": "clean"}}]}]}`,
			[]string{"s"}, func(t *testing.T, p *Plan) {
				want := []Check{{Name: "lint", Command: []string{"make", "lint"}, Pass: Pass{StdoutContains: "clean"}}}
				if !reflect.DeepEqual(p.Stages[0].Checks, want) {
					t.Errorf("checks %+v", p.Stages[0].Checks)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(c.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var order []string
			for _, st := range p.Stages {
				order = append(order, st.ID)
			}
			if !reflect.DeepEqual(order, c.order) {
				t.Errorf("order %v, want %v", order, c.order)
			}
			checkCommand(t, protocol.CmdMissionCreate, p.CreateMission(start))
			for _, st := range p.Stages {
				ct, err := p.Authorize(st.ID, start)
				if err != nil {
					t.Fatal(err)
				}
				checkContract(t, ct)
			}
			if c.check != nil {
				c.check(t, p)
			}
		})
	}
}

// checkContract holds a built contract to the normative schemas: the
// work.authorize command that carries it, signed, through command.schema.json
// (its payload schema embeds work-contract.schema.json).
func checkContract(t *testing.T, p protocol.AuthorizeWorkPayload) {
	t.Helper()
	checkCommand(t, protocol.CmdWorkAuthorize, p)
}

var testKey = func() protocol.PrivateKey {
	k, err := protocol.GenerateKey("agent:coord#k1", bytes.NewReader(make([]byte, 64)))
	if err != nil {
		panic(err)
	}
	return k
}()

func checkCommand(t *testing.T, typ protocol.CommandType, payload any) {
	t.Helper()
	env := protocol.Envelope{GroupID: "grp-1", SessionEpoch: new(uint64(1)), MembershipEpoch: new(uint64(1)), CoordinatorEpoch: new(uint64(1))}
	_, raw, err := protocol.BuildCommand(protocol.Actor{Kind: protocol.ActorAgent, ID: "coord"}, testKey, typ, env, payload,
		time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	v, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.Validate("command", v); err != nil {
		t.Errorf("%s: %v\n%s", typ, err, raw)
	}
}

func TestParseBad(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string // "LINE:COL: message"
	}{
		{"syntax", head + "  - id: a\n   goal: [\n", []string{"12:1: YAML syntax: did not find expected '-' indicator"}},
		{"unclosed flow sequence", head + stage("a", "allowedTools: [git, go"), []string{"19:1: YAML syntax: did not find expected ',' or ']'"}},
		{"scanner error", head + stage("a", "notes: @x"), []string{"19:1: YAML syntax: found character that cannot start any token"}},
		{"empty", "# nothing\n", []string{"1:1: the plan is empty"}},
		{"two documents", head + stage("a") + "---\nversion: 1\n", []string{`19:1: a plan file holds one YAML document; a second one starts here`}},
		{"unknown member and wrong type", head + stage("a", "colour: red", "urgency: 3"), []string{
			`19:5: unknown member "colour"`,
			`20:14: 3 is not allowed: must be one of "low", "normal", "high", "critical"`,
		}},
		{"missing members and duplicate key", head + "  - id: a\n    goal: G\n    goal: H\n", []string{
			`12:5: missing required member "acceptance"`,
			`12:5: missing required member "budgets"`,
			`12:5: missing required member "capability"`,
			`12:5: missing required member "outputs"`,
			`14:5: duplicate member "goal" (first at line 13)`,
		}},
		{"schema leaves", strings.Replace(head, "version: 1", "version: 2", 1) + stage("A") + "    inputs: [{artifact: sha256:abc}]\n", []string{
			`1:10: 2 is not allowed: must be 1`,
			`12:9: "A" does not match ^[a-z0-9][a-z0-9_-]{0,47}$`,
			`19:25: "sha256:abc" does not match ^sha256:[0-9a-f]{64}$`,
		}},
		{"JSON escaped slashes keep their columns", `{"version": 1, "mission": {"id": "m", "groupId": "g", "title": "a\/b\/c", "objective": "o", "deadline": "1h"},
 "approval": {"approvers": ["h"]}, "stages": [{"id": "s", "goal": "\/", "capability": {"id": "c", "version": "1.x"},
  "acceptance": [{"id": "a", "description": "d", "evidence": ["e"]}], "outputs": [{"name": "o", "mediaType": "x\/y"}],
  "budgets": {"money": 1}, "colour": "\/\/", "size": 1}]}`, []string{
			`4:28: unknown member "colour"`,
			`4:46: unknown member "size"`,
		}},
		{"duplicate stage ids", head + stage("a") + stage("a"), []string{`19:9: duplicate stage id "a" (first at line 12)`}},
		{"unknown and self dependency", head + stage("a", "dependsOn: [a, ghost]"), []string{
			`19:17: stage "a" depends on itself`,
			`19:20: stage "a" depends on unknown stage "ghost"`,
		}},
		{"cycle named", head + stage("a", "dependsOn: [c]") + stage("b", "dependsOn: [a]") + stage("c", "dependsOn: [{stage: b}]"), []string{
			`19:17: dependency cycle (each stage depends on the next): a -> c -> b -> a`,
		}},
		{"two cycles", head + stage("a", "dependsOn: [b]") + stage("b", "dependsOn: [a]") +
			stage("c", "dependsOn: [d]") + stage("d", "dependsOn: [c]"), []string{
			`19:17: dependency cycle (each stage depends on the next): a -> b -> a`,
			`35:17: dependency cycle (each stage depends on the next): c -> d -> c`,
		}},
		{"reviewer of unknown stage and itself", head + stage("a") + stage("r", "reviews: [a, nobody, r]"), []string{
			`26:18: stage "r" reviews unknown stage "nobody"`,
			`26:26: stage "r" reviews itself`,
		}},
		{"review closes a cycle", head + stage("a", "dependsOn: [r]") + stage("r", "reviews: [a]"), []string{
			`19:17: dependency cycle (each stage depends on the next): a -> r -> a`,
		}},
		{"version ranges", head + strings.Replace(stage("a"), "1.x", "^1.2", 1) + strings.Replace(stage("b"), "1.x", "1.2.3.4", 1) +
			strings.Replace(stage("c"), "1.x", "01.x", 1) + strings.Replace(stage("d"), "1.x", "3.1.x", 1), []string{
			`14:47: version range "^1.2" is not MAJOR.x, MAJOR.MINOR.x or an exact MAJOR.MINOR.PATCH`,
			`21:47: version range "1.2.3.4" is not MAJOR.x, MAJOR.MINOR.x or an exact MAJOR.MINOR.PATCH`,
			`28:47: version range "01.x" is not MAJOR.x, MAJOR.MINOR.x or an exact MAJOR.MINOR.PATCH`,
		}},
		{"budgets over the Mission's", head + strings.Replace(stage("a"), "{money: 1}", "{money: 10.5, tokens: 1001, toolCalls: 5}", 1), []string{
			`17:22: budgets.money 10.5 is over the Mission's 10`,
			`17:36: budgets.tokens 1001 is over the Mission's 1000`,
		}},
		{"deadlines", head + strings.Replace(stage("a"), "2h", "9h", 1) + strings.Replace(stage("b"), "2h", "0s", 1) +
			strings.Replace(stage("c"), "2h", "2026-02-30T00:00:00Z", 1) + strings.Replace(stage("d"), "2h", "in two hours", 1), []string{
			`18:15: deadline 9h is after the Mission's 8h`,
			`25:15: deadline "0s" is not after the start`,
			`32:15: deadline "2026-02-30T00:00:00Z" is not a valid time`,
			`39:15: "in two hours" is not a duration from the Mission's start (90m, 4h, 1h30m) or an RFC 3339 UTC time (2026-12-03T17:00:00Z)`,
		}},
		{"deadline out of range or too fine", head + strings.Replace(stage("a"), "2h", "9999999999h", 1) + strings.Replace(stage("b"), "2h", "0.0001s", 1), []string{
			`18:15: deadline "9999999999h": time: invalid duration "9999999999h"`,
			`25:15: deadline "0.0001s" is finer than a millisecond`,
		}},
		{"absolute deadline after the Mission's", strings.Replace(head, "deadline: 8h", "deadline: 2026-12-03T00:00:00Z", 1) +
			strings.Replace(stage("a"), "2h", "2026-12-03T00:00:00.001Z", 1) + strings.Replace(stage("b"), "2h", "2026-12-02T23:00:00Z", 1), []string{
			`18:15: deadline 2026-12-03T00:00:00.001Z is after the Mission's 2026-12-03T00:00:00Z`,
		}},
		{"no deadline anywhere", strings.Replace(head, "  deadline: 8h\n", "", 1) + strings.Replace(stage("a"), "    deadline: 2h\n", "", 1), []string{
			`11:5: stage "a" has no deadline, and the Mission none to inherit: give one of them a deadline`,
		}},
		{"dependency policy", head + stage("a") + stage("b", "dependsOn: [{stage: a, policy: maybe}]"), []string{
			`26:36: "maybe" is not allowed: must be one of "verified", "submitted", "terminal"`,
		}},
		{"duplicates within a stage", head + stage("a",
			"checks: [{name: t, command: [go, test]}, {name: t, command: [go, vet]}]",
			"dependsOn: [b, b]") + stage("b"), []string{
			`19:53: duplicate check "t" in stage "a" (first at line 19)`,
			`20:20: stage "a" depends on "b" twice`,
		}},
		{"backoff", head + stage("a", "retry: {backoff: {initialMs: 5000, maxMs: 100}}"), []string{
			`19:22: backoff initialMs 5000 is over maxMs 100`,
		}},
		{"YAML features a plan refuses", head + stage("a", "notes: &n hello", "allowedTools: [*n]", "allowedData: !!binary aGk="), []string{
			`19:12: YAML anchors (&n) are not allowed in a plan`,
			`20:20: YAML aliases (*n) are not allowed in a plan: write the value out`,
			`21:18: YAML tag !!binary is not allowed in a plan`,
		}},
		{"number JSON cannot carry", head + strings.Replace(stage("a"), "{money: 1}", "{money: .inf}", 1), []string{
			`17:22: .inf is not a finite number`,
		}},
		{"derived id too long", strings.Replace(head, "mis-1", "m"+strings.Repeat("x", 100), 1) + stage(strings.Repeat("s", 40)), []string{
			`12:9: the contract id "m` + strings.Repeat("x", 100) + ":" + strings.Repeat("s", 40) + `:contract" derived from the Mission and stage ids is longer than 128 characters: shorten one`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse("bad.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\nstages %d", c.src, len(p.Stages))
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v, want *Error", err, err)
			}
			var got []string
			for _, pr := range pe.Problems {
				got = append(got, pr.String())
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("problems:\n%s\nwant:\n%s\nsource:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"), numbered(c.src))
			}
			if protocol.CodeOf(err) != protocol.CodeSchemaValidationFailed {
				t.Errorf("code %v", protocol.CodeOf(err))
			}
			if !strings.HasPrefix(err.Error(), "bad.yaml:") || strings.Count(err.Error(), "\n") != len(pe.Problems)-1 {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(src, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", i+1, l)
	}
	return b.String()
}

func TestContractUnknownStage(t *testing.T) {
	p, err := Parse("p.yaml", []byte(head+stage("a")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Contract("zz", time.Time{}); err == nil {
		t.Fatal("Contract of an unknown stage succeeded")
	}
}
