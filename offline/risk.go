package offline

import (
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
)

// Risk flags what an operation would do beyond reversible local computation
// (spec 11.5); the flags combine with |. slots.Risk describes a tool call
// with the same three facts, but docs/design.md §2 lets offline import neither
// slots nor anything above protocol, so the runtime converts with RiskFrom.
type Risk uint8

// The three kinds of operation spec 11.5 forbids while offline.
const (
	HighRisk Risk = 1 << iota
	Irreversible
	ExternallyVisible
)

// None is reversible local computation: allowed whenever the work may run.
const None Risk = 0

// RiskFrom builds a Risk from a risk class and the two flags (the fields of
// slots.Risk). High and critical classes are HighRisk, and so is an unknown
// class, which must not pass as harmless.
func RiskFrom(c protocol.RiskClass, irreversible, externallyVisible bool) Risk {
	var r Risk
	if c != protocol.RiskLow && c != protocol.RiskMedium {
		r |= HighRisk
	}
	if irreversible {
		r |= Irreversible
	}
	if externallyVisible {
		r |= ExternallyVisible
	}
	return r
}

func (r Risk) String() string {
	if r == None {
		return "none"
	}
	var parts []string
	for _, f := range []struct {
		bit  Risk
		name string
	}{{HighRisk, "high-risk"}, {Irreversible, "irreversible"}, {ExternallyVisible, "externally-visible"}} {
		if r&f.bit != 0 {
			parts = append(parts, f.name)
		}
	}
	if rest := r &^ (HighRisk | Irreversible | ExternallyVisible); rest != 0 {
		parts = append(parts, "unknown")
	}
	return strings.Join(parts, "|")
}
