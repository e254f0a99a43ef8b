// Package authoritylite is a minimal Group Authority: one Organization service
// and one logical Group service that own the signed, append-only per-Group
// event log workers project. It can run embedded in a worker process or serve
// the WebSocket binding (spec 17) on its own.
//
// Status: not yet implemented (issue 3).
package authoritylite
