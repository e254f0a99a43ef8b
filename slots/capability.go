package slots

import (
	"github.com/missionweave/mwp-worker/protocol"
)

// pickHandler returns the handler for the first required capability that
// some handler provides in a satisfying version.
func pickHandler(hs []Handler, required []protocol.Capability) Handler {
	for _, req := range required {
		for _, h := range hs {
			if c := h.Capability(); c.ID == req.ID && VersionSatisfies(c.Version, req.Version) {
				return h
			}
		}
	}
	return nil
}

// VersionSatisfies is protocol.VersionSatisfies: one rule for the worker
// picking a handler and a coordinator picking a worker.
func VersionSatisfies(offered, required string) bool {
	return protocol.VersionSatisfies(offered, required)
}
