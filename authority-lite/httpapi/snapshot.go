package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/missionweave/mwp-worker/protocol"
)

// snapshot answers GET /mwp/groups/{group}/snapshots/{digest}: the signed
// Group Snapshot a CURSOR_TOO_OLD named (details.snapshot.digest), as
// stored, to an active member of the Group. A reader behind the online log
// restores it and reads on after its sequence. A digest not stored, or the
// snapshot of another Group, is INVALID_COMMAND, 404.
func (h *Handler) snapshot(w http.ResponseWriter, r *http.Request, a protocol.Actor) {
	g, d := r.PathValue("group"), r.PathValue("digest")
	if err := checkDigest(d); err != nil {
		writeError(w, err)
		return
	}
	if err := h.b.AuthorizeActor(a, g); err != nil {
		writeError(w, err)
		return
	}
	doc, err := h.b.Snapshot(protocol.SnapshotRef{GroupID: g, Digest: d})
	if err == nil {
		var head struct {
			GroupID string `json:"groupId"`
		}
		if json.Unmarshal(doc, &head) != nil || head.GroupID != g {
			err = protocol.Errorf(protocol.CodeInvalidCommand, "snapshot %s is not stored here", d)
		}
	}
	if protocol.CodeOf(err) == protocol.CodeInvalidCommand {
		writeErrorStatus(w, http.StatusNotFound, err)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
	_, _ = w.Write(doc)
}
