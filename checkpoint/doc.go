// Package checkpoint stores durable checkpoints keyed by WorkItem and
// ownership epoch, so preempted, restarted or reassigned work resumes from its
// last safe point (spec 11.3).
//
// Status: not yet implemented (issue 5).
package checkpoint
