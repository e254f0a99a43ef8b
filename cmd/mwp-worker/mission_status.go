package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/protocol"
	"github.com/missionweave/mwp-worker/remote"
)

// missionStatus is `mission status --json`'s object (docs/shapes.md).
type missionStatus struct {
	MissionID   string                `json:"missionId"`
	GroupID     string                `json:"groupId"`
	Title       string                `json:"title"`
	State       protocol.MissionState `json:"state"`
	Owner       protocol.Actor        `json:"owner"`
	Coordinator string                `json:"coordinator,omitempty"`
	// Sequence is the last event of the Group's log this view includes.
	Sequence uint64        `json:"sequence"`
	Stages   []stageStatus `json:"stages"`
}

// stageStatus is one WorkItem of the Mission.
type stageStatus struct {
	WorkItemID string                 `json:"workItemId"`
	Goal       string                 `json:"goal"`
	State      protocol.WorkItemState `json:"state"`
	Owner      string                 `json:"owner,omitempty"`
	// ETA is the owner's latest estimate: its schedule disclosure at
	// acceptance, then any revised estimate in its progress reports.
	ETA *protocol.Time `json:"eta,omitempty"`
}

// missionView folds a Group's log into what status shows: the Group state
// (group.Fold, the same fold as everyone's), estimates and memberships.
type missionView struct {
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
}

// stageWork is a WorkItem's last submission and its accepting review.
type stageWork struct {
	artifacts []string
	evidence  []protocol.Evidence // the handler's
	review    []protocol.Evidence // the coordinator's, one per review step
}

func newMissionView(groupID string) *missionView {
	return &missionView{g: group.NewGroup(groupID, group.Limits{}), eta: map[string]protocol.Time{}, members: map[protocol.Actor]uint64{},
		work: map[string]*stageWork{}, manifests: map[string]protocol.ArtifactManifest{}}
}

// add folds one verified event's bytes.
func (v *missionView) add(raw []byte) error {
	parsed, err := protocol.Parse(raw, protocol.DecodeOptions{})
	if err != nil {
		return err
	}
	doc, _ := parsed.(map[string]any)
	ev, _, err := protocol.InboundEvent(doc, nil) // verified by remote already
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
	}
	_ = json.Unmarshal(ev.Payload, &p)
	if _, ok := v.g.Items[p.WorkItemID]; ok && !slices.Contains(v.order, p.WorkItemID) {
		v.order = append(v.order, p.WorkItemID)
	}
	switch ev.Type {
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

// load folds every event after the view's last.
func (v *missionView) load(ctx context.Context, a *remote.Authority) error {
	evs, err := a.Events(ctx, v.g.GroupID, v.last, 0)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if err := v.add(e.Raw); err != nil {
			return err
		}
	}
	return nil
}

func (v *missionView) status() missionStatus {
	s := missionStatus{GroupID: v.g.GroupID, Sequence: v.last, Stages: []stageStatus{}}
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
		st := stageStatus{WorkItemID: id, Goal: w.Contract.Goal, State: w.State}
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
func (s missionStatus) render(w io.Writer) {
	fmt.Fprintf(w, "mission %s (group %s): %s", s.MissionID, s.GroupID, s.State)
	if s.Coordinator != "" {
		fmt.Fprintf(w, ", coordinator %s", s.Coordinator)
	}
	fmt.Fprintf(w, ", %d stages\n", len(s.Stages))
	idw, statew := columnWidths(s.Stages)
	for _, st := range s.Stages {
		fmt.Fprintf(w, "  %s\n", st.lineIn(idw, statew))
	}
}

// columnWidths are the widths of the id and state columns.
func columnWidths(stages []stageStatus) (id, state int) {
	for _, st := range stages {
		id, state = max(id, len(st.WorkItemID)), max(state, len(st.State))
	}
	return id, state
}

func (st stageStatus) line() string { return st.lineIn(len(st.WorkItemID), len(st.State)) }

func (st stageStatus) lineIn(idw, statew int) string {
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
func changes(before, now missionStatus) []string {
	var out []string
	if before.State != now.State || before.Coordinator != now.Coordinator {
		out = append(out, fmt.Sprintf("mission %s %s coordinator %s", now.MissionID, now.State, orDash(now.Coordinator)))
	}
	old := map[string]stageStatus{}
	for _, st := range before.Stages {
		old[st.WorkItemID] = st
	}
	for _, st := range now.Stages {
		if o, ok := old[st.WorkItemID]; !ok || o.State != st.State || o.Owner != st.Owner || !sameTime(o.ETA, st.ETA) {
			out = append(out, "stage "+st.line())
		}
	}
	return out
}

func sameTime(a, b *protocol.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(b.Time))
}

// The watch's back-off after a lost connection or a retryable answer.
const (
	watchRetryFrom = 250 * time.Millisecond
	watchRetryMax  = 10 * time.Second
)

// watchRetryable reports whether the watch waits an error out: the
// authority's retryable codes, and a request that got no answer (the
// connection: *url.Error from the HTTP client). Anything else, a bad event
// or a refusal, ends the watch.
func watchRetryable(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code.Retryable()
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

func missionStatusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a Mission's stages: states, owners and estimated completion",
		ArgsUsage: "MISSION",
		Description: "Finds MISSION's Group with GET /mwp/missions/MISSION (members only), reads the Group's log\n" +
			"(every event verified with --authority-key) and prints the Mission and one line per WorkItem:\n" +
			"its state, owner and ETA (the owner's schedule disclosure or latest revised estimate). With\n" +
			"--watch it follows the log until the Mission is approved, cancelled or terminated: on a\n" +
			"terminal the display is redrawn, otherwise one line is appended per change. --json prints the\n" +
			"status object (docs/shapes.md), one per line and per change with --watch.",
		Flags: append(requiring(authorityFlags(), "authority-key"),
			&cli.BoolFlag{Name: "watch", Usage: "follow the Mission until it ends"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON objects, one per line"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			a, _, err := dialHuman(ctx, cmd, true)
			if err != nil {
				return failOrUsage(cmd, err)
			}
			g, err := a.MissionGroup(ctx, cmd.Args().First())
			if err != nil {
				return refusal(cmd, err)
			}
			v := newMissionView(g)
			if err := v.load(ctx, a); err != nil {
				return refusal(cmd, err)
			}
			out := cmd.Root().Writer
			f, isFile := out.(*os.File)
			redraw := cmd.Bool("watch") && !cmd.Bool("json") && isFile && isTerminal(f)
			show := func(prev *missionStatus, s missionStatus) error {
				switch {
				case cmd.Bool("json"):
					b, err := json.Marshal(s)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "%s\n", b)
				case redraw:
					fmt.Fprint(out, "\x1b[H\x1b[2J")
					s.render(out)
				case prev == nil:
					s.render(out)
				default:
					for _, l := range changes(*prev, s) {
						fmt.Fprintln(out, l)
					}
				}
				if !cmd.Bool("json") && s.State == protocol.MissionAwaitingApproval && (prev == nil || redraw || prev.State != s.State) {
					v.renderReview(ctx, out, s, a.Artifact)
					decideLines(out, s.MissionID, cmd.String("owner-key"))
				}
				return nil
			}
			s := v.status()
			if err := show(nil, s); err != nil {
				return err
			}
			backoff := watchRetryFrom
			for cmd.Bool("watch") && !s.State.Terminal() {
				err := a.Wait(ctx, g, v.last)
				if err == nil {
					err = v.load(ctx, a)
				}
				if err != nil {
					// A lost connection or a retryable answer (RATE_LIMITED,
					// INTERNAL_ERROR) is waited out, the wait doubling; a
					// refusal ends the watch.
					if ctx.Err() != nil || !watchRetryable(err) {
						return refusal(cmd, err)
					}
					fmt.Fprintf(cmd.Root().ErrWriter, "%s: %s; trying again in %s\n", cmd.FullName(), oneLine(err.Error()), backoff)
					select {
					case <-time.After(backoff):
					case <-ctx.Done():
						return refusal(cmd, ctx.Err())
					}
					backoff = min(2*backoff, watchRetryMax)
					continue
				}
				backoff = watchRetryFrom
				next := v.status()
				if err := show(&s, next); err != nil {
					return err
				}
				s = next
			}
			return nil
		},
	}
}

// requiring marks the flag name of flags required: commands that read
// events need --authority-key, which the other mission commands do not.
func requiring(flags []cli.Flag, name string) []cli.Flag {
	for _, f := range flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == name {
			sf.Required = true
		}
	}
	return flags
}
