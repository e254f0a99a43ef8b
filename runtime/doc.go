// Package runtime is the worker process: its session and WebSocket client,
// per-Group subscribe/replay/ACK, command sending with stable action ids, lease
// renewal, and the wiring of queue, scheduler, slots, offline and checkpoint.
//
// Status: not yet implemented (issue 4).
package runtime
