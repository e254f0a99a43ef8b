// Package queue is the worker's durable store: per Group an inbox, a durable
// cursor and a work-queue projection, all in one bbolt file and rebuildable
// by replaying the inbox (spec 11.1, 16).
//
// Status: not yet implemented (issue 4).
package queue
