package authoritylite

import (
	"time"

	"github.com/missionweave/mwp-worker/group"
	"github.com/missionweave/mwp-worker/group/grouptest"
	"github.com/missionweave/mwp-worker/protocol"
)

var t0 = grouptest.T0

func testContract(id string, deps ...protocol.Dependency) protocol.WorkContract {
	return grouptest.Contract(id, deps...)
}

func evidence(subject string, criteria ...string) protocol.Evidence {
	return grouptest.Evidence(subject, criteria...)
}

var owner = protocol.Actor{Kind: protocol.ActorHuman, ID: "alice"}

func agent(id string) protocol.Actor { return protocol.Actor{Kind: protocol.ActorAgent, ID: id} }

var failureEv = []protocol.Evidence{evidence("wi", protocol.CriterionFailure)}

var orgPolicy = protocol.Actor{Kind: protocol.ActorService, ID: "org-policy"}

func testLimits() group.Limits {
	return group.Limits{MaxCandidates: 3, StartWithin: 10 * time.Minute, LeaseDuration: 2 * time.Minute, BlockedHold: 30 * time.Minute}
}
