package authoritylite

import (
	"strconv"

	"github.com/missionweave/mwp-worker/protocol"
)

// checkContext holds a Context Package (spec 13.3) to what only the
// service knows, before the Group state machine decides its scope and
// version chain: the generator's signature against its registered keys,
// events cited from this Group's log as it stands, artifacts published in
// this Group.
func (s *Service) checkContext(gs *groupState, pl *protocol.PublishContextPayload) error {
	p := pl.Package
	if err := protocol.VerifyContextPackage(p, s.org); err != nil {
		return protocol.Under(err, "/payload/package")
	}
	if p.SourceEvents.ToSequence > gs.last {
		return protocol.InvalidCommand("context package %s cites events up to %d; the log of group %s ends at %d", p.PackageID, p.SourceEvents.ToSequence, gs.id, gs.last).At("/payload/package/sourceEvents/toSequence")
	}
	for i, a := range p.Artifacts {
		if _, ok := gs.artifacts[a]; !ok {
			return protocol.InvalidCommand("context package %s names artifact %s, never published in group %s", p.PackageID, a, gs.id).At("/payload/package/artifacts/" + strconv.Itoa(i))
		}
	}
	return nil
}
