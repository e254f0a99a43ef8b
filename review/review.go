package review

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
)

// Status is `mission status --json`'s object (docs/shapes.md).
type Status struct {
	MissionID   string                `json:"missionId"`
	GroupID     string                `json:"groupId"`
	Title       string                `json:"title"`
	State       protocol.MissionState `json:"state"`
	Owner       protocol.Actor        `json:"owner"`
	Coordinator string                `json:"coordinator,omitempty"`
	// Sequence is the last event of the Group's log this view includes.
	Sequence uint64  `json:"sequence"`
	Stages   []Stage `json:"stages"`
}

// Stage is one WorkItem of the Mission.
type Stage struct {
	WorkItemID string                 `json:"workItemId"`
	Goal       string                 `json:"goal"`
	State      protocol.WorkItemState `json:"state"`
	Owner      string                 `json:"owner,omitempty"`
	// ETA is the owner's latest estimate: its schedule disclosure at
	// acceptance, then any revised estimate in its progress reports.
	ETA *protocol.Time `json:"eta,omitempty"`
}

// View folds a Group's log into what status shows: the Group state
// (group.Fold, the same fold as everyone's), estimates and memberships.
type View struct {
	g       *group.Group
	last    uint64
	eta     map[string]protocol.Time
	members map[protocol.Actor]uint64 // active members' membership epochs
	// order is the WorkItems in the order they entered the log: the
	// coordinator authorizes a plan's stages in plan order.
	order []string
	// work is what a reviewer reads of each WorkItem: the handler's last
	// submission and the review that accepted it.
	work map[string]*stageWork
	// manifests are the published artifacts by content hash.
	manifests map[string]protocol.ArtifactManifest
	summary   string
}

// stageWork is a WorkItem's last submission and its accepting review.
type stageWork struct {
	artifacts []string
	evidence  []protocol.Evidence // the handler's
	review    []protocol.Evidence // the coordinator's, one per review step
}

func NewView(groupID string) *View {
	return &View{g: group.NewGroup(groupID, group.Limits{}), eta: map[string]protocol.Time{}, members: map[protocol.Actor]uint64{},
		work: map[string]*stageWork{}, manifests: map[string]protocol.ArtifactManifest{}}
}

// Load is a View of groupID's log: evs in log order, raw giving each
// one's verified bytes. Every terminal that shows a review builds its
// View here (or with Fold, to continue one), whatever its events' type.
func Load[E any](groupID string, evs []E, raw func(E) []byte) (*View, error) {
	v := NewView(groupID)
	return v, Fold(v, evs, raw)
}

// Fold folds evs, the events of v's Group after v.Last() in log order,
// into v. It stops at an event that does not fold, naming it by the
// sequence it follows.
func Fold[E any](v *View, evs []E, raw func(E) []byte) error {
	for _, e := range evs {
		if err := v.Add(raw(e)); err != nil {
			return fmt.Errorf("review: the event after %d of %s: %w", v.last, v.g.GroupID, err)
		}
	}
	return nil
}

// Add folds one verified event's bytes.
func (v *View) Add(raw []byte) error {
	parsed, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		return err
	}
	doc, _ := parsed.(map[string]any)
	ev, _, err := protocol.InboundEvent(doc, nil) // the caller verified it
	if err != nil {
		return err
	}
	fe, err := group.FromWire(ev)
	if err != nil {
		return err
	}
	if err := v.g.Fold(fe); err != nil {
		return err
	}
	v.last = ev.Seq()
	var p struct {
		WorkItemID         string                       `json:"workItemId"`
		ScheduleDisclosure *protocol.ScheduleDisclosure `json:"scheduleDisclosure"`
		Progress           *protocol.Progress           `json:"progress"`
		Principal          protocol.Actor               `json:"principal"`
		MembershipEpoch    uint64                       `json:"membershipEpoch"`
		State              string                       `json:"state"`
		Artifacts          []string                     `json:"artifacts"`
		Evidence           []protocol.Evidence          `json:"evidence"`
		Manifest           *protocol.ArtifactManifest   `json:"manifest"`
		Summary            string                       `json:"summary"`
	}
	_ = json.Unmarshal(ev.Payload, &p)
	if _, ok := v.g.Items[p.WorkItemID]; ok && !slices.Contains(v.order, p.WorkItemID) {
		v.order = append(v.order, p.WorkItemID)
	}
	switch ev.Type {
	case protocol.EvtMissionSubmittedForApproval:
		v.summary = p.Summary
	case protocol.EvtWorkSubmitted:
		v.work[p.WorkItemID] = &stageWork{artifacts: p.Artifacts, evidence: p.Evidence}
	case protocol.EvtWorkResultAccepted:
		if w := v.work[p.WorkItemID]; w != nil {
			w.review = p.Evidence
		}
	case protocol.EvtArtifactPublished:
		if p.Manifest != nil {
			v.manifests[p.Manifest.ContentHash] = *p.Manifest
		}
	case protocol.EvtWorkOfferAccepted:
		if p.ScheduleDisclosure != nil {
			v.eta[p.WorkItemID] = p.ScheduleDisclosure.EstimatedCompletion
		}
	case protocol.EvtWorkProgressed, protocol.EvtWorkCheckpointed, protocol.EvtWorkBlocked:
		if p.Progress != nil && !p.Progress.RevisedEstimate.CompletionAt.IsZero() {
			v.eta[p.WorkItemID] = p.Progress.RevisedEstimate.CompletionAt
		}
	case protocol.EvtMembershipChanged, protocol.EvtMembershipEnded:
		if p.State == string(protocol.MembershipActive) {
			v.members[p.Principal] = p.MembershipEpoch
		} else {
			delete(v.members, p.Principal)
		}
	}
	return nil
}

// GroupID is the Group whose log the view folds.
func (v *View) GroupID() string { return v.g.GroupID }

// Last is the sequence of the last event folded.
func (v *View) Last() uint64 { return v.last }

// Summary is the summary the Mission was last submitted for approval with.
func (v *View) Summary() string { return v.summary }

func (v *View) Status() Status {
	s := Status{GroupID: v.g.GroupID, Sequence: v.last, Stages: []Stage{}}
	if m := v.g.Mission; m != nil {
		s.MissionID, s.Title, s.State, s.Owner = m.MissionID, m.Title, m.State, m.Owner
		if m.Coordinator != nil {
			s.Coordinator = m.Coordinator.AgentID
		}
	}
	ids := slices.Clone(v.order)
	for _, id := range slices.Sorted(maps.Keys(v.g.Items)) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		w := v.g.Items[id]
		st := Stage{WorkItemID: id, Goal: w.Contract.Goal, State: w.State}
		if w.Ownership != nil && !w.State.Terminal() {
			st.Owner = w.Ownership.OwnerAgentID
		}
		if t, ok := v.eta[id]; ok && !w.State.Terminal() {
			st.ETA = &t
		}
		s.Stages = append(s.Stages, st)
	}
	return s
}

// render writes the status as text: a Mission line, then one per stage
// in plan order, in aligned columns.
func (s Status) Render(w io.Writer) {
	fmt.Fprintf(w, "mission %s (group %s): %s", s.MissionID, s.GroupID, s.State)
	if s.Coordinator != "" {
		fmt.Fprintf(w, ", coordinator %s", s.Coordinator)
	}
	fmt.Fprintf(w, ", %d stages\n", len(s.Stages))
	idw, statew := columnWidths(s.Stages)
	for _, st := range s.Stages {
		fmt.Fprintf(w, "  %s\n", st.LineIn(idw, statew))
	}
}

// columnWidths are the widths of the id and state columns.
func columnWidths(stages []Stage) (id, state int) {
	for _, st := range stages {
		id, state = max(id, len(st.WorkItemID)), max(state, len(st.State))
	}
	return id, state
}

func (st Stage) Line() string { return st.LineIn(len(st.WorkItemID), len(st.State)) }

func (st Stage) LineIn(idw, statew int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s", idw, st.WorkItemID, statew, st.State)
	if st.Owner != "" {
		fmt.Fprintf(&b, "  owner %s", st.Owner)
	}
	if st.ETA != nil {
		fmt.Fprintf(&b, "  eta %s", st.ETA)
	}
	return strings.TrimRight(b.String(), " ")
}

// changes lists, as plain lines, what differs from before to now.
func Changes(before, now Status) []string {
	var out []string
	if before.State != now.State || before.Coordinator != now.Coordinator {
		out = append(out, fmt.Sprintf("mission %s %s coordinator %s", now.MissionID, now.State, orDash(now.Coordinator)))
	}
	old := map[string]Stage{}
	for _, st := range before.Stages {
		old[st.WorkItemID] = st
	}
	for _, st := range now.Stages {
		if o, ok := old[st.WorkItemID]; !ok || o.State != st.State || o.Owner != st.Owner || !sameTime(o.ETA, st.ETA) {
			out = append(out, "stage "+st.Line())
		}
	}
	return out
}

func sameTime(a, b *protocol.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(b.Time))
}

// What a Mission's owner reads before approving it (`mission status` of a
// Mission awaiting approval): per stage in plan order, the handler's own
// evidence, its outputs by output name with a short preview, and the
// coordinator's review in one line; then the commands that decide.

// previewBytes bounds an output's preview.
const previewBytes = 72

// RenderReview writes the review of v's stages; fetch reads an artifact's
// bytes (a failure shows in place of the preview).
func (v *View) RenderReview(ctx context.Context, w io.Writer, s Status, fetch func(context.Context, string) ([]byte, error)) {
	for _, st := range s.Stages {
		fmt.Fprintf(w, "\nstage %s: %s", st.WorkItemID, st.State)
		work := v.work[st.WorkItemID]
		if work == nil {
			fmt.Fprintln(w, ", nothing submitted")
			continue
		}
		fmt.Fprintln(w)
		for _, e := range work.evidence {
			fmt.Fprintf(w, "  evidence  [%s] %s", e.Result, safe(e.Subject))
			if e.Method != "" {
				fmt.Fprintf(w, ": %s", safe(e.Method))
			}
			if len(e.Criteria) > 0 {
				fmt.Fprintf(w, " (criteria %s)", safe(strings.Join(e.Criteria, ", ")))
			}
			fmt.Fprintln(w)
		}
		contract := v.g.Items[st.WorkItemID].Contract
		for _, d := range work.artifacts {
			m, ok := v.manifests[d]
			name := outputName(contract, m.MediaType)
			if !ok {
				fmt.Fprintf(w, "  output    %s: not published\n", shortHash(d))
				continue
			}
			fmt.Fprintf(w, "  output    %s (%s, %d bytes): %s\n", name, m.MediaType, m.Size, preview(ctx, fetch, d))
		}
		if len(work.review) > 0 {
			var steps []string
			for _, e := range work.review {
				steps = append(steps, strings.TrimPrefix(safe(e.Method), "coordinator review: ")+": "+string(e.Result))
			}
			fmt.Fprintf(w, "  review    %s\n", strings.Join(steps, "; "))
		}
	}
}

// DecideLines are the commands that approve or send back missionID.
func DecideLines(w io.Writer, missionID, ownerKey string) {
	key := ownerKey
	if key == "" {
		key = "KEY"
	}
	fmt.Fprintf(w, "\nto approve:          mwp-worker mission approve %s --owner-key %s [--comment TEXT]\n", missionID, key)
	fmt.Fprintf(w, "to request changes:  mwp-worker mission request-changes %s --owner-key %s --comment 'ONE CHANGE PER LINE'\n", missionID, key)
	fmt.Fprintln(w, "(with the same --authority, --authority-fingerprint and --authority-key)")
}

// outputName is the contract's name for an output of mediaType.
func outputName(c protocol.WorkContract, mediaType string) string {
	for _, o := range c.RequiredOutputs {
		if o.MediaType == mediaType {
			return o.Name
		}
	}
	return "(unnamed)"
}

// preview is an output's first bytes on one line, or why there are none.
func preview(ctx context.Context, fetch func(context.Context, string) ([]byte, error), digest string) string {
	b, err := fetch(ctx, digest)
	if err != nil {
		return "(not readable: " + oneLine(err.Error()) + ")"
	}
	if !utf8.Valid(b) {
		return "(binary)"
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	if len(text) > previewBytes {
		cut := previewBytes
		for !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return safe(text)
}

// safe replaces control characters, so that text from handlers cannot
// drive the reader's terminal.
func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '\uFFFD'
		}
		return r
	}, s)
}

func shortHash(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}

// Show writes what a terminal shows before asking for the decision: the
// Mission's status, the review of its stages and the summary it was
// submitted with (Summary, or what the caller was told).
func (v *View) Show(ctx context.Context, w io.Writer, summary string, fetch func(context.Context, string) ([]byte, error)) error {
	s := v.Status()
	s.Render(w)
	v.RenderReview(ctx, w, s, fetch)
	_, err := fmt.Fprintf(w, "\nsummary: %s\n", safe(oneLine(summary)))
	return err
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Revision is the Mission's revision (0 before it exists): an approval
// names the revision it approves.
func (v *View) Revision() uint64 {
	if v.g.Mission == nil {
		return 0
	}
	return v.g.Mission.Revision
}

// MembershipEpoch is a's membership epoch in the Group, 0 when a is not
// an active member.
func (v *View) MembershipEpoch(a protocol.Actor) uint64 { return v.members[a] }
