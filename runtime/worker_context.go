package runtime

import (
	"context"
	"encoding/json"

	"github.com/missionweave/mwp-worker/protocol"
)

// contextFor returns the Context Package a run of the WorkItem gets (spec
// 13.3), as JSON, or nil: the store's newest one for the item (else for
// its Mission). The store never notes a package scoped elsewhere, and the
// slot refuses one (slots.Pool.Start): a package of another Mission never
// reaches a handler.
func (e *engine) contextFor(groupID, itemID string) []byte {
	p, ok, err := e.store.ContextPackage(groupID, itemID)
	if err != nil {
		e.log.Warn("context package unreadable; the run starts without one", "group", groupID, "item", itemID, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	raw, err := protocol.Marshal(p)
	if err != nil {
		e.log.Warn("context package unreadable; the run starts without one", "group", groupID, "item", itemID, "err", err)
		return nil
	}
	return raw
}

// citedEvents reads events a run's package cites from the store, as this
// agent's membership of their Group allows (queue.Store.CitedEvents).
func (e *engine) citedEvents(_ context.Context, r protocol.EventRange, max int) ([]json.RawMessage, error) {
	return e.store.CitedEvents(e.cfg.AgentID, r, max)
}
