package toolkeys

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/missionweave/mwp-worker/protocol"
)

// Op names one external tool operation of one ownership of a WorkItem.
type Op struct {
	MissionID      string
	WorkItemID     string
	OwnershipEpoch uint64
	OperationID    string
}

// Key derives the idempotency key of op (WIRE.md, spec 16):
// "tk1_" + base64url(sha256(JCS([missionId, workItemId, ownershipEpoch, operationId]))).
// The same Op gives the same key in every process; a new ownership epoch
// gives new keys.
func Key(op Op) (string, error) {
	if op.MissionID == "" || op.WorkItemID == "" || op.OperationID == "" {
		return "", protocol.Errorf(protocol.CodeInvalidCommand, "toolkey: mission, work item and operation ids are required")
	}
	if op.OwnershipEpoch > protocol.MaxSafeInteger {
		return "", protocol.Errorf(protocol.CodeInvalidCommand, "toolkey: ownership epoch %d is beyond 2^53-1", op.OwnershipEpoch)
	}
	jcs, err := protocol.Canonical([]any{op.MissionID, op.WorkItemID, json.Number(strconv.FormatUint(op.OwnershipEpoch, 10)), op.OperationID})
	if err != nil {
		return "", fmt.Errorf("toolkey: %w", err)
	}
	sum := sha256.Sum256(jcs)
	return "tk1_" + base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// AttemptKey is the key of the n-th attempt (1-based) of the operation
// whose key is key.
func AttemptKey(key string, n uint64) string {
	return key + "." + strconv.FormatUint(n, 10)
}
