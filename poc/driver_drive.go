package poc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// drive serves the approval page, injects the chosen faults as the run
// reaches them, approves (automatically or by the human) and returns once
// both Missions are approved.
func (r *run) drive() error {
	human := protocol.Actor{Kind: protocol.ActorHuman, ID: humanID}
	src := ServiceSource{Service: r.svc, Human: human}
	approver := Approver{Human: human, Key: r.keys[humanID], Submit: SubmitTo(r.svc)}
	page := NewApprovalServer(src, approver, clock.Real{}, r.log.With("component", "approval-page"))
	url, err := page.ListenLocal(r.ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	if !strings.HasSuffix(url, "/") {
		url += "/"
	}
	if err := WriteAPIInfo(r.dir, APIInfo{URL: url, Token: page.APIToken(), Human: humanID, KeyFile: r.path("keys", humanID+".key")}); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "approval page: %s\n", url)
	if r.opts.OnApprovalPage != nil {
		r.opts.OnApprovalPage(url)
	}
	if !r.opts.AutoApprove {
		fmt.Fprintf(r.out, "waiting for the MissionOwner (%s) to approve on the page, or from a terminal: mwp-worker poc approve MISSION --data %s\n", humanID, r.dir)
		if r.plan.want[FaultChangeRequest] {
			fmt.Fprintf(r.out, "fault %s: request changes on a Mission (page or terminal) to inject it\n", FaultChangeRequest)
		}
	}
	f := r.plan
	announced := map[string]protocol.MissionState{}
	for {
		if err := f.step(); err != nil {
			r.fail(err)
		}
		done, workDone, allApproved := true, true, true
		for _, spec := range r.specs {
			m, _ := r.svc.Mission(spec.GroupID)
			if m.State == protocol.MissionActive {
				workDone = false
			}
			if m.State != protocol.MissionApproved {
				allApproved = false
			}
		}
		if workDone && !f.finished() {
			f.giveUp(allApproved)
		}
		for _, spec := range r.specs {
			m, _ := r.svc.Mission(spec.GroupID)
			if announced[spec.MissionID] != m.State {
				announced[spec.MissionID] = m.State
				fmt.Fprintf(r.out, "mission %s: %s\n", spec.MissionID, m.State)
			}
			if m.State != protocol.MissionApproved {
				done = false
			}
			if m.State == protocol.MissionAwaitingApproval && r.opts.AutoApprove && !f.holdApproval(spec) {
				if _, err := AutoApprove(r.ctx, src, approver, clock.Real{}, "approved by --auto-approve"); err != nil {
					r.fail(fmt.Errorf("auto-approve: %w", err))
				}
			}
		}
		if done && f.finished() {
			r.catchUp(30 * time.Second)
			return nil
		}
		if err := r.ctx.Err(); err != nil {
			return fmt.Errorf("poc: the run did not finish: %w", err)
		}
		r.waitChange(250 * time.Millisecond)
	}
}

// waitChange returns when any Mission's log moves, or after d.
func (r *run) waitChange(d time.Duration) {
	ctx, cancel := context.WithTimeout(r.ctx, d)
	defer cancel()
	cases := make(chan struct{}, len(r.specs))
	for _, spec := range r.specs {
		ch := r.svc.Changed(spec.GroupID, r.svc.LastSequence(spec.GroupID))
		go func() {
			select {
			case <-ch:
				cases <- struct{}{}
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-cases:
	case <-r.holds.Moved():
	case <-ctx.Done():
	}
}

// missionGroups lists the run's Group ids.
func (r *run) missionGroups() []string {
	out := make([]string, len(r.specs))
	for i, s := range r.specs {
		out[i] = s.GroupID
	}
	return out
}

// workerIDs lists the run's workers, sorted.
func (r *run) workerIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.workers))
	for id := range r.workers {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// catchUp waits (bounded) until every running worker's store has applied
// its Groups' logs to the end, so the durable stores checked afterwards
// show the run's final state rather than a worker that was still
// replaying when the run ended.
func (r *run) catchUp(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		behind := false
		for _, id := range r.workerIDs() {
			wr := r.worker(id)
			if wr == nil {
				continue
			}
			for _, g := range wr.w.Status().Groups {
				if g.Cursor < r.svc.LastSequence(g.GroupID) {
					behind = true
				}
			}
		}
		if !behind {
			return
		}
		r.waitChange(100 * time.Millisecond)
	}
	fmt.Fprintf(r.out, "workers still behind the authority after %s; checking the stores as they are\n", bound)
}
