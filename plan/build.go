package plan

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Defaults of the optional members (docs/plans.md lists them).
const (
	DefaultAttemptTimeoutMs = 3_600_000
	DefaultBackoffInitialMs = 1_000
	DefaultBackoffMaxMs     = 60_000
	DefaultBackoffFactor    = 2
	maxIDLength             = 128 // common.schema.json#/$defs/id
)

// versionRange is what a stage may require: MAJOR.x, MAJOR.MINOR.x or an
// exact MAJOR.MINOR.PATCH (slots.VersionSatisfies reads all three).
var versionRange = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(x|(0|[1-9][0-9]*)\.(x|0|[1-9][0-9]*))$`)

// builder turns the tree into a Plan, tolerating what the schema already
// reported (a value of the wrong type reads as absent), and adds the
// problems only the whole plan shows.
type builder struct {
	t     *tree
	ps    []Problem
	edges []stageEdges // per stage, in file order
}

func (b *builder) problem(ptr string, format string, args ...any) {
	w := b.t.where(ptr, false)
	b.ps = append(b.ps, Problem{Line: w.line, Column: w.col, Path: ptr, Message: fmt.Sprintf(format, args...)})
}

// node is a value of the tree with its pointer.
type node struct {
	v   any
	ptr string
}

func (n node) get(k string) node {
	m, _ := n.v.(map[string]any)
	return node{m[k], n.ptr + "/" + escapeToken(k)}
}

func (n node) has(k string) bool {
	m, _ := n.v.(map[string]any)
	_, ok := m[k]
	return ok
}

func (n node) str() string { s, _ := n.v.(string); return s }

func (n node) items() []node {
	l, _ := n.v.([]any)
	out := make([]node, len(l))
	for i, v := range l {
		out[i] = node{v, n.ptr + "/" + strconv.Itoa(i)}
	}
	return out
}

func (n node) strs() []string {
	var out []string
	for _, it := range n.items() {
		if s, ok := it.v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func (n node) float() (float64, bool) {
	num, ok := n.v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := num.Float64()
	return f, err == nil && f >= 0
}

func (n node) uint() (uint64, bool) {
	f, ok := n.float()
	if !ok || f != math.Trunc(f) || f > 1<<53-1 {
		return 0, false
	}
	return uint64(f), true
}

func (b *builder) budgets(n node) protocol.Budgets {
	var out protocol.Budgets
	fl := func(k string) *float64 {
		if f, ok := n.get(k).float(); ok {
			return &f
		}
		return nil
	}
	ui := func(k string) *uint64 {
		if u, ok := n.get(k).uint(); ok {
			return &u
		}
		return nil
	}
	out.Money, out.Tokens, out.ToolCalls = fl("money"), ui("tokens"), ui("toolCalls")
	out.ComputeSeconds, out.WallClockSeconds, out.SideEffects = fl("computeSeconds"), fl("wallClockSeconds"), ui("sideEffects")
	return out
}

// The two forms of a deadline, as plan.schema.json#/$defs/deadline has
// them (TestDeadlineShapes keeps them equal): a value of neither form is
// the schema's to report.
var (
	durationShape = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`)
	timeShape     = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,3})?Z$`)
)

func (b *builder) deadline(n node) Deadline {
	s, _ := n.v.(string)
	switch {
	case timeShape.MatchString(s):
		at, err := protocol.ParseTime(s)
		if err != nil {
			b.problem(n.ptr, "deadline %q is not a valid time", s)
			return Deadline{}
		}
		return Deadline{At: at}
	case durationShape.MatchString(s):
		d, err := time.ParseDuration(s)
		switch {
		case err != nil: // too long for a time.Duration
			b.problem(n.ptr, "deadline %q: %v", s, err)
		case d <= 0:
			b.problem(n.ptr, "deadline %q is not after the start", s)
		case d%time.Millisecond != 0:
			b.problem(n.ptr, "deadline %q is finer than a millisecond", s)
		default:
			return Deadline{After: d}
		}
	}
	return Deadline{}
}

// build reads the tree into a Plan and checks it as a whole.
func build(t *tree) (*Plan, []Problem) {
	b := &builder{t: t}
	root := node{t.root, ""}
	p := &Plan{}
	m := root.get("mission")
	p.Mission = Mission{
		ID: m.get("id").str(), GroupID: m.get("groupId").str(),
		Title: m.get("title").str(), Objective: m.get("objective").str(),
		PriorityClass: protocol.PriorityClass(m.get("priorityClass").str()),
		Deadline:      b.deadline(m.get("deadline")),
	}
	if p.Mission.PriorityClass == "" {
		p.Mission.PriorityClass = protocol.PriorityNormal
	}
	if m.has("budgets") {
		bud := b.budgets(m.get("budgets"))
		p.Mission.Budgets = &bud
	}
	a := root.get("approval")
	p.Approval = Approval{Approvers: a.get("approvers").strs(), Instructions: a.get("instructions").str()}

	var stages []Stage
	ptrs := map[string]string{} // stage id -> its pointer
	for _, sn := range root.get("stages").items() {
		stages = append(stages, b.stage(p, sn))
		st := &stages[len(stages)-1]
		if st.ID == "" {
			continue
		}
		if first, dup := ptrs[st.ID]; dup {
			b.problem(sn.ptr+"/id", "duplicate stage id %q (first at line %d)", st.ID, t.where(first, false).line)
			st.ID = "" // keep edges pointing at the first
			continue
		}
		ptrs[st.ID] = sn.ptr
	}
	p.Stages = b.order(stages, root.get("stages").items())
	return p, b.ps
}

func (b *builder) stage(p *Plan, sn node) Stage {
	st := Stage{
		ID: sn.get("id").str(), Goal: sn.get("goal").str(),
		Capability:        protocol.Capability{ID: sn.get("capability").get("id").str(), Version: sn.get("capability").get("version").str()},
		AllowedTools:      sn.get("allowedTools").strs(),
		AllowedData:       sn.get("allowedData").strs(),
		AllowedOperations: sn.get("allowedOperations").strs(),
		Budgets:           b.budgets(sn.get("budgets")),
		Deadline:          b.deadline(sn.get("deadline")),
		Urgency:           protocol.Urgency(sn.get("urgency").str()),
		BusinessImpact:    protocol.BusinessImpact(sn.get("businessImpact").str()),
		Notes:             sn.get("notes").str(),
		Line:              b.t.where(sn.ptr, false).line,
	}
	if st.ID != "" && p.Mission.ID != "" {
		st.WorkItemID = p.Mission.ID + ":" + st.ID
		st.ContractID = st.WorkItemID + ":contract"
		if len(st.ContractID) > maxIDLength {
			b.problem(sn.ptr+"/id", "the contract id %q derived from the Mission and stage ids is longer than %d characters: shorten one", st.ContractID, maxIDLength)
		}
	}
	if v := st.Capability.Version; v != "" && !versionRange.MatchString(v) {
		b.problem(sn.get("capability").get("version").ptr, "version range %q is not MAJOR.x, MAJOR.MINOR.x or an exact MAJOR.MINOR.PATCH", v)
	}
	if st.Urgency == "" {
		st.Urgency = protocol.UrgencyNormal
	}
	if st.BusinessImpact == "" {
		st.BusinessImpact = protocol.ImpactMedium
	}

	seen := map[string]string{}
	unique := func(kind, name, ptr string) {
		if name == "" {
			return
		}
		if first, dup := seen[kind+"\x00"+name]; dup {
			b.problem(ptr, "duplicate %s %q in stage %q (first at line %d)", kind, name, st.ID, b.t.where(first, false).line)
			return
		}
		seen[kind+"\x00"+name] = ptr
	}
	for _, c := range sn.get("acceptance").items() {
		ac := protocol.AcceptanceCriterion{ID: c.get("id").str(), Description: c.get("description").str(), EvidenceRequired: c.get("evidence").strs()}
		unique("acceptance criterion", ac.ID, c.get("id").ptr)
		st.Acceptance = append(st.Acceptance, ac)
	}
	for _, o := range sn.get("outputs").items() {
		out := protocol.OutputSpec{Name: o.get("name").str(), MediaType: o.get("mediaType").str(), Schema: o.get("schema").str()}
		unique("output", out.Name, o.get("name").ptr)
		st.Outputs = append(st.Outputs, out)
	}
	for _, in := range sn.get("inputs").items() {
		st.Inputs = append(st.Inputs, protocol.InputRef{Artifact: in.get("artifact").str(), Name: in.get("name").str()})
		b.input(p, st.ID, in)
	}
	for _, c := range sn.get("checks").items() {
		ch := Check{Name: c.get("name").str(), Command: c.get("command").strs()}
		if code, ok := c.get("pass").get("exitCode").uint(); ok {
			ch.Pass.ExitCode = int(code)
		}
		ch.Pass.StdoutContains = c.get("pass").get("stdoutContains").str()
		unique("check", ch.Name, c.get("name").ptr)
		st.Checks = append(st.Checks, ch)
	}

	r := sn.get("resources")
	if f, ok := r.get("cpu").float(); ok && f > 0 {
		st.Resources.CPU = &f
	}
	for k, dst := range map[string]**uint64{"memoryMiB": &st.Resources.MemoryMiB, "diskMiB": &st.Resources.DiskMiB, "gpus": &st.Resources.GPUs} {
		if u, ok := r.get(k).uint(); ok {
			*dst = &u
		}
	}

	rk := sn.get("risk")
	st.Risk = protocol.Risk{Class: protocol.RiskClass(rk.get("class").str()), PreExecutionApproval: rk.get("preExecutionApproval").v == true}
	if st.Risk.Class == "" {
		st.Risk.Class = protocol.RiskLow
	}
	st.Retry = b.retry(sn.get("retry"), st.Budgets)

	if !sn.has("deadline") {
		st.Deadline = p.Mission.Deadline
		if !b.t.has("/mission/deadline") {
			b.problem(sn.ptr, "stage %q has no deadline, and the Mission none to inherit: give one of them a deadline", st.ID)
		}
	}
	md, sd := p.Mission.Deadline, st.Deadline
	if sn.has("deadline") && (md.After > 0 && sd.After > md.After || !md.At.IsZero() && !sd.At.IsZero() && sd.At.After(md.At.Time)) {
		b.problem(sn.get("deadline").ptr, "deadline %s is after the Mission's %s", sn.get("deadline").str(), node{b.t.root, ""}.get("mission").get("deadline").str())
	}
	if p.Mission.Budgets != nil {
		b.overMission(sn.get("budgets"), st.Budgets, *p.Mission.Budgets)
	}
	b.edges = append(b.edges, b.readEdges(&st, sn))
	return st
}

func (t *tree) has(ptr string) bool { _, ok := t.at[ptr]; return ok }

func (b *builder) retry(n node, bud protocol.Budgets) protocol.RetryPolicy {
	rp := protocol.RetryPolicy{
		MaxAttempts:      1,
		Backoff:          protocol.Backoff{InitialMs: DefaultBackoffInitialMs, MaxMs: DefaultBackoffMaxMs, Multiplier: DefaultBackoffFactor},
		AttemptTimeoutMs: DefaultAttemptTimeoutMs,
	}
	if bud.WallClockSeconds != nil && *bud.WallClockSeconds > 0 {
		rp.AttemptTimeoutMs = uint64(math.Ceil(*bud.WallClockSeconds * 1000))
	}
	if bud.Money != nil {
		rp.CostLimit = *bud.Money
	}
	if u, ok := n.get("maxAttempts").uint(); ok && u > 0 {
		rp.MaxAttempts = u
	}
	if u, ok := n.get("attemptTimeoutMs").uint(); ok && u > 0 {
		rp.AttemptTimeoutMs = u
	}
	if f, ok := n.get("costLimit").float(); ok {
		rp.CostLimit = f
	}
	bo := n.get("backoff")
	if u, ok := bo.get("initialMs").uint(); ok {
		rp.Backoff.InitialMs = u
	}
	if u, ok := bo.get("maxMs").uint(); ok {
		rp.Backoff.MaxMs = u
	}
	if f, ok := bo.get("multiplier").float(); ok && f >= 1 {
		rp.Backoff.Multiplier = f
	}
	if rp.Backoff.InitialMs > rp.Backoff.MaxMs {
		b.problem(bo.ptr, "backoff initialMs %d is over maxMs %d", rp.Backoff.InitialMs, rp.Backoff.MaxMs)
	}
	return rp
}

// overMission reports each dimension in which the stage's cap is over the
// Mission's: no stage may be allowed more than the whole Mission.
func (b *builder) overMission(n node, st, ms protocol.Budgets) {
	over := func(k string, s, m *float64) {
		if s != nil && m != nil && *s > *m {
			b.problem(n.get(k).ptr, "budgets.%s %s is over the Mission's %s", k, num(*s), num(*m))
		}
	}
	overU := func(k string, s, m *uint64) {
		if s != nil && m != nil && *s > *m {
			b.problem(n.get(k).ptr, "budgets.%s %d is over the Mission's %d", k, *s, *m)
		}
	}
	over("money", st.Money, ms.Money)
	overU("tokens", st.Tokens, ms.Tokens)
	overU("toolCalls", st.ToolCalls, ms.ToolCalls)
	over("computeSeconds", st.ComputeSeconds, ms.ComputeSeconds)
	over("wallClockSeconds", st.WallClockSeconds, ms.WallClockSeconds)
	overU("sideEffects", st.SideEffects, ms.SideEffects)
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// edge is a dependency or review with the pointer that declares it.
type edge struct {
	to  string
	ptr string
}

// stageEdges are one stage's declared dependencies and reviews.
type stageEdges struct{ deps, reviews []edge }

// readEdges reads dependsOn and reviews into st.DependsOn and returns
// where each was declared, for the graph checks.
func (b *builder) readEdges(st *Stage, sn node) stageEdges {
	var se stageEdges
	seen := map[string]bool{}
	for _, d := range sn.get("dependsOn").items() {
		dep := Dependency{Stage: d.str(), Policy: protocol.DependencyVerified}
		if obj, ok := d.v.(map[string]any); ok {
			dep.Stage = d.get("stage").str()
			if pol, _ := obj["policy"].(string); pol != "" {
				dep.Policy = protocol.DependencyPolicy(pol)
			}
		}
		if dep.Stage == "" {
			continue
		}
		if seen[dep.Stage] {
			b.problem(d.ptr, "stage %q depends on %q twice", st.ID, dep.Stage)
			continue
		}
		seen[dep.Stage] = true
		st.DependsOn = append(st.DependsOn, dep)
		se.deps = append(se.deps, edge{dep.Stage, d.ptr})
	}
	reviewed := map[string]bool{}
	for _, r := range sn.get("reviews").items() {
		id := r.str()
		if id == "" {
			continue
		}
		if reviewed[id] {
			b.problem(r.ptr, "stage %q reviews %q twice", st.ID, id)
			continue
		}
		reviewed[id] = true
		st.Reviews = append(st.Reviews, id)
		se.reviews = append(se.reviews, edge{id, r.ptr})
		if !seen[id] {
			seen[id] = true
			st.DependsOn = append(st.DependsOn, Dependency{Stage: id, Policy: protocol.DependencySubmitted})
			se.deps = append(se.deps, edge{id, r.ptr})
		}
	}
	return se
}

// order checks every edge against the stage ids, finds and names every
// cycle, and returns the stages in topological order (file order among
// stages ready together).
func (b *builder) order(stages []Stage, nodes []node) []Stage {
	index := map[string]int{}
	for i, st := range stages {
		if st.ID != "" {
			index[st.ID] = i
		}
	}
	adj := make([][]edge, len(stages)) // i -> the stages i depends on
	for i, st := range stages {
		if st.ID == "" {
			continue
		}
		se := b.edges[i]
		for _, r := range se.reviews {
			if _, ok := index[r.to]; !ok {
				b.problem(r.ptr, "stage %q reviews unknown stage %q", st.ID, r.to)
			} else if r.to == st.ID {
				b.problem(r.ptr, "stage %q reviews itself", st.ID)
			}
		}
		for _, d := range se.deps {
			j, ok := index[d.to]
			declared := !slices.ContainsFunc(se.reviews, func(r edge) bool { return r.ptr == d.ptr }) // else reported above
			switch {
			case !ok:
				if declared {
					b.problem(d.ptr, "stage %q depends on unknown stage %q", st.ID, d.to)
				}
			case j == i:
				if declared {
					b.problem(d.ptr, "stage %q depends on itself", st.ID)
				}
			default:
				adj[i] = append(adj[i], d)
			}
		}
	}
	b.cycles(stages, index, adj)

	// Kahn's algorithm; stages are few, so the ready scan is linear.
	waiting := make([]int, len(stages))
	users := make([][]int, len(stages))
	for i := range stages {
		for _, e := range adj[i] {
			waiting[i]++
			users[index[e.to]] = append(users[index[e.to]], i)
		}
	}
	done := make([]bool, len(stages))
	out := make([]Stage, 0, len(stages))
	for len(out) < len(stages) {
		next := -1
		for i := range stages {
			if !done[i] && waiting[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 { // a cycle, reported above: keep the rest in file order
			for i := range stages {
				if !done[i] {
					out = append(out, stages[i])
				}
			}
			break
		}
		done[next] = true
		out = append(out, stages[next])
		for _, u := range users[next] {
			waiting[u]--
		}
	}
	return out
}

// cycles reports each dependency cycle once, by name, at the edge that
// closes it as seen from the cycle's first stage in file order.
func (b *builder) cycles(stages []Stage, index map[string]int, adj [][]edge) {
	const white, grey, black = 0, 1, 2
	color := make([]int, len(stages))
	var stack []int
	reported := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, e := range adj[i] {
			j := index[e.to]
			switch color[j] {
			case white:
				visit(j)
			case grey:
				at := slices.Index(stack, j)
				cyc := slices.Clone(stack[at:])
				// Start the name at the cycle's first stage in the file.
				low := slices.Index(cyc, slices.Min(cyc))
				cyc = append(cyc[low:], cyc[:low]...)
				names := make([]string, 0, len(cyc)+1)
				for _, k := range cyc {
					names = append(names, stages[k].ID)
				}
				names = append(names, stages[cyc[0]].ID)
				key := strings.Join(names, " -> ")
				if reported[key] {
					continue
				}
				reported[key] = true
				// The edge from the first stage to the next one in the cycle
				// (self-edges never enter adj, so there are two at least).
				ptr := e.ptr
				for _, fe := range adj[cyc[0]] {
					if fe.to == stages[cyc[1]].ID {
						ptr = fe.ptr
						break
					}
				}
				b.problem(ptr, "dependency cycle (each stage depends on the next): %s", key)
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range stages {
		if color[i] == white && stages[i].ID != "" {
			visit(i)
		}
	}
}
