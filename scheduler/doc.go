// Package scheduler is the worker-owned global scheduler (spec 11.1): weighted
// fair sharing of slot-time across Groups, starvation-free priority within a
// Group, eligibility, preemption victims, selection basis and schedule
// disclosure. It is pure and deterministic: time comes in as an argument.
package scheduler
