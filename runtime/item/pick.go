package item

import "github.com/missionweave/mwp-worker/protocol"

// Picked is the scheduler's choice of the item for a free slot (spec
// 11.1).
type Picked struct {
	// Adoptable: the store shows the item active under a lease of this
	// session and ownership epoch that is not the lease of a run it
	// already had (a start whose answer was lost): it runs under it with
	// no new start.
	Adoptable bool
	// Resume is the checkpoint the store names when this worker has it:
	// work.start resumes from it.
	Resume string
}

func (Picked) input() {}

// Selected records the scheduler's pick (Status) and starts timing it.
type Selected struct{}

// Unpick ends the scheduler's entry of an item that may not start: no
// record, or not queued any more.
type Unpick struct{}

func (Selected) effect() {}
func (Unpick) effect()   {}

// picked starts a queued item the scheduler picked: work.start naming the
// checkpoint to resume from, or the lease of a lost start's answer,
// adopted. Anything but a queued record gives the entry back.
func picked(it Item, p Picked) (Item, []Effect) {
	if it.Phase != Queued {
		return it, []Effect{Unpick{}}
	}
	it.Phase = Starting
	if p.Adoptable {
		return it, []Effect{Selected{}, Launch{}}
	}
	return it, []Effect{Selected{}, Send{Type: protocol.CmdWorkStart, Payload: &protocol.StartWorkPayload{WorkItemID: it.ID,
		OwnershipEpoch: it.Epoch, ResumeFromCheckpointID: p.Resume}}}
}
