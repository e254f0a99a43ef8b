package poc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// The spec 22 fault suite. A fault is injected for real by the driver
// through a Harness, which records each injection in the run's fault
// journal; after the run, CheckFaults judges every fault from what happened
// (the authority's log and audit records, the worker stores, the effect
// log, the workers' own counters and logs in the observations file), the
// journal saying only where and when to look: was it injected, and did the
// protocol's guarantees hold through it.

// FaultName names one fault of the suite.
type FaultName string

// The faults, in the order the suite runs and reports them.
const (
	FaultDuplicateDelivery   FaultName = "duplicate-delivery"
	FaultWorkerRestart       FaultName = "worker-restart"
	FaultCoordinatorFailover FaultName = "coordinator-failover"
	FaultGroupDisconnect     FaultName = "group-disconnect"
	FaultLeaseExpiry         FaultName = "lease-expiry"
	FaultPriorityArrival     FaultName = "priority-arrival"
	FaultChangeRequest       FaultName = "change-request"
)

// AllFaults is the whole suite, in order.
var AllFaults = []FaultName{FaultDuplicateDelivery, FaultWorkerRestart, FaultCoordinatorFailover,
	FaultGroupDisconnect, FaultLeaseExpiry, FaultPriorityArrival, FaultChangeRequest}

// ParseFaults reads the --faults flag: "" (none), "all", or a comma list
// of fault names (spaces around names allowed, repeats ignored). The
// result is in suite order. An unknown name is an error naming the valid
// ones.
func ParseFaults(s string) ([]FaultName, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if s == "all" {
		return slices.Clone(AllFaults), nil
	}
	want := map[FaultName]bool{}
	for _, part := range strings.Split(s, ",") {
		n := FaultName(strings.TrimSpace(part))
		switch {
		case n == "":
			return nil, fmt.Errorf("faults: empty name in %q", s)
		case n == "all":
			return nil, fmt.Errorf("faults: \"all\" cannot be combined with other names")
		case !slices.Contains(AllFaults, n):
			names := make([]string, len(AllFaults))
			for i, f := range AllFaults {
				names[i] = string(f)
			}
			return nil, fmt.Errorf("faults: unknown fault %q (valid: all, %s)", n, strings.Join(names, ", "))
		}
		want[n] = true
	}
	var out []FaultName
	for _, f := range AllFaults {
		if want[f] {
			out = append(out, f)
		}
	}
	return out, nil
}

// Harness is implemented by the PoC driver, which owns the worker
// processes, their connections and the coordinators. Each method injects
// one fault for real and records it in the journal (Journal.Record) before
// returning; the checks read the journal, never the harness.
//
//   - RedeliverEvents: send worker the Group's events after fromSequence
//     again on its live connection (duplicate-delivery). Record Worker,
//     Group and Sequence = fromSequence.
//   - RestartWorker: stop the worker (slots interrupted, store closed),
//     start it again on the same data dir so its queue is rebuilt from its
//     store and replay (worker-restart). Record Worker.
//   - CutConnection: drop the worker's connection for d, then let it
//     reconnect and resubscribe from its cursors (group-disconnect).
//     Record Worker, Group and Sequence = the authority's last sequence of
//     Group when the connection came back.
//   - StallWorker: make the worker stop renewing the lease of workItem and
//     hold back its result until the lease has expired and the item was
//     offered again, then let the late result go out (lease-expiry).
//     Record Worker, Group, WorkItem and Epoch = the stalled ownership
//     epoch.
//   - InjectPriorityWork: while every slot is busy, authorize and offer a
//     critical-urgency WorkItem in group (priority-arrival); the worker's
//     scheduler must preempt a running item at its next checkpoint. Record
//     Group and WorkItem = the critical item.
//   - FailoverCoordinator: stop mission's coordinator, have the owner
//     assign a replacement (FailoverCoordinator below does this for
//     in-process coordinators) and send a late command of the old one
//     (coordinator-failover). Record Group, Agent = the old coordinator,
//     Code = the late command's error code.
//   - RequestChanges: as the human owner, request changes on mission once
//     it awaits approval, then approve the reworked result
//     (change-request). Record Group.
type Harness interface {
	RedeliverEvents(ctx context.Context, worker, group string, fromSequence uint64) error
	RestartWorker(ctx context.Context, worker string) error
	CutConnection(ctx context.Context, worker, group string, d time.Duration) error
	StallWorker(ctx context.Context, worker, group, workItem string) error
	InjectPriorityWork(ctx context.Context, group string) error
	FailoverCoordinator(ctx context.Context, mission string) error
	RequestChanges(ctx context.Context, mission string, changes []string) error
}

// Injection is one journal record: a fault really caused.
type Injection struct {
	Fault FaultName     `json:"fault"`
	At    protocol.Time `json:"at"`
	// Since is when a fault that lasts began (lease-expiry: the worker
	// was cut off holding the lease); At is when it was complete.
	Since    *protocol.Time `json:"since,omitempty"`
	Worker   string         `json:"worker,omitempty"`
	Agent    string         `json:"agent,omitempty"`
	Group    string         `json:"group,omitempty"`
	WorkItem string         `json:"workItem,omitempty"`
	Sequence uint64         `json:"sequence,omitempty"`
	Epoch    uint64         `json:"epoch,omitempty"`
	Code     protocol.Code  `json:"code,omitempty"`
	Detail   string         `json:"detail,omitempty"`
}

// JournalFile is the fault journal's name in the data dir.
const JournalFile = "faults.jsonl"

// Journal is the durable, append-only record of injections: one JSON line
// each, fsynced before Record returns.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// OpenJournal opens (creating) the journal at path for appending.
func OpenJournal(path string) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	return &Journal{f: f, path: path}, nil
}

// Record appends one injection durably.
func (j *Journal) Record(in Injection) error {
	if !slices.Contains(AllFaults, in.Fault) {
		return fmt.Errorf("faults: unknown fault %q", in.Fault)
	}
	line, err := json.Marshal(in)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("faults: journal: %w", err)
	}
	return j.f.Sync()
}

// Close closes the journal.
func (j *Journal) Close() error { return j.f.Close() }

// ReadJournal returns every complete record of the journal at path; a torn
// last line (a crash mid-write) is ignored, anything else malformed is an
// error. A missing journal is empty: nothing was injected.
func ReadJournal(path string) ([]Injection, error) {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	var out []Injection
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		var in Injection
		if err := json.Unmarshal(line, &in); err != nil {
			if !bytes.HasSuffix(raw, []byte("\n")) && bytes.HasSuffix(raw, line) {
				break // torn tail
			}
			return nil, fmt.Errorf("faults: journal line %d: %w", n, err)
		}
		out = append(out, in)
	}
	return out, sc.Err()
}
