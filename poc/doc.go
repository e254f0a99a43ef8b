// Package poc is the proof of concept of spec 22: two concurrent
// software-development missions sharing a worker, a human approval page and
// the fault-injection suite.
//
// Status: not yet implemented (issue 7).
package poc
