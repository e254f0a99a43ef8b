// Package protocol holds the MissionWeaveProtocol 0.1 wire layer: the Go types
// of every core object, strict I-JSON decoding, RFC 8785 canonical bytes and
// digests, Ed25519 signatures, the 22 normative JSON Schemas and the 27 error
// codes of spec 19.
//
// Inbound bytes are parsed once (Parse) into a generic value; strict checks,
// canonical bytes, schema validation and typed decoding all reuse that value.
package protocol
