package poc

import (
	"context"
	"fmt"
	"time"

	authoritylite "github.com/missionweave/mwp-worker/authority-lite"
	"github.com/missionweave/mwp-worker/protocol"
)

// StartMission creates the Mission of spec as its human owner and assigns
// its first coordinator with a lease of d.
func StartMission(ctx context.Context, owner *authoritylite.Principal, spec MissionSpec, coordinator string, d time.Duration) error {
	if _, err := owner.Do(ctx, protocol.CmdMissionCreate, spec.GroupID, &protocol.CreateMissionPayload{
		MissionID: spec.MissionID, Title: spec.Title, Objective: spec.Objective, PriorityClass: spec.PriorityClass,
	}); err != nil {
		return fmt.Errorf("poc: create %s: %w", spec.MissionID, err)
	}
	return AssignCoordinator(ctx, owner, spec, coordinator, d)
}

// AssignCoordinator (re)assigns the Mission's coordinator as its owner;
// each assignment raises the coordinator epoch and fences the previous
// one (coordinator failover).
func AssignCoordinator(ctx context.Context, owner *authoritylite.Principal, spec MissionSpec, coordinator string, d time.Duration) error {
	_, err := owner.Do(ctx, protocol.CmdMissionAssignCoordinator, spec.GroupID, &protocol.AssignCoordinatorPayload{
		MissionID: spec.MissionID, AgentID: coordinator, LeaseDurationMs: uint64(d.Milliseconds())})
	if err != nil {
		return fmt.Errorf("poc: assign %s to %s: %w", coordinator, spec.MissionID, err)
	}
	return nil
}

// WorkerCapabilities are the capabilities of a worker running Handlers.
func WorkerCapabilities() []protocol.Capability {
	return []protocol.Capability{capability(CapRequirements), capability(CapImplement), capability(CapTest), capability(CapReview), capability(CapIntegrate), capability(CapLoad), capability(CapSoak)}
}

// AgentCard is the card of a PoC agent (workers pass WorkerCapabilities,
// coordinators none; a card must list at least one, so coordinators get
// "mission.coordinate").
func AgentCard(id string, caps []protocol.Capability, slots int, roles ...protocol.Role) protocol.AgentCard {
	if len(caps) == 0 {
		caps = []protocol.Capability{{ID: "mission.coordinate", Version: HandlerVersion}}
	}
	if len(roles) == 0 {
		roles = []protocol.Role{protocol.RoleWorker}
	}
	return protocol.AgentCard{AgentVersion: HandlerVersion, OrganizationID: "org-poc", DisplayName: id,
		Capabilities: caps, Roles: roles, MaxConcurrency: uint64(max(slots, 1))}
}
