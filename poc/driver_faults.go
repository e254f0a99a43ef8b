package poc

// faultPlan injects the chosen faults at the moments the run offers them.
// (Each injection goes through the Harness methods of the driver and is
// journaled; CheckFaults judges them afterwards from the stores.)
type faultPlan struct {
	r      *run
	want   map[FaultName]bool
	done   map[FaultName]bool
	errors int
}

func newFaultPlan(r *run, names []FaultName) *faultPlan {
	f := &faultPlan{r: r, want: map[FaultName]bool{}, done: map[FaultName]bool{}}
	for _, n := range names {
		f.want[n] = true
	}
	return f
}

// step injects whatever fault is due now.
func (f *faultPlan) step() error { return nil }

// holdApproval keeps auto-approve off a Mission whose change-request fault
// is still to be injected.
func (f *faultPlan) holdApproval(spec MissionSpec) bool { return false }

// finished reports whether every chosen fault was injected (or given up).
func (f *faultPlan) finished() bool { return true }
