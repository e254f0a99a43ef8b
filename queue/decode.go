package queue

import (
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// v1Semantics are encoding/json's rules (case-insensitive member names,
// duplicates allowed, the last one winning, invalid UTF-8 replaced, ...)
// for the decoder of json/v2, the one Go's encoding/json runs on under
// GOEXPERIMENT=jsonv2.
var v1Semantics = jsonv1.DefaultOptionsV1()

// unmarshal is json.Unmarshal, decoded by json/v2 with encoding/json's
// semantics: it gives the same values and fails on the same inputs, and
// takes about half the time for the stored events and entries the view
// replays and loads (replay is the start-up path, and its decoding was most
// of a rebuild: docs/performance.md). Only the error text differs.
func unmarshal(b []byte, v any) error {
	return jsonv2.Unmarshal(b, v, v1Semantics)
}
