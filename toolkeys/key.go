package toolkeys

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/missionweave/mwp-worker/protocol"
)

// Op names one external tool operation of one ownership of a WorkItem.
type Op struct {
	MissionID      string `json:"missionId"`
	WorkItemID     string `json:"workItemId"`
	OwnershipEpoch uint64 `json:"ownershipEpoch"`
	OperationID    string `json:"operationId"`
}

// KeyPrefix starts every key this version derives; another derivation
// would get another prefix, so keys never collide across versions.
const KeyPrefix = "tk1_"

// Key derives the idempotency key of op (docs/wire.md, spec 16):
// "tk1_" + base64url(sha256(JCS([missionId, workItemId, ownershipEpoch, operationId]))).
// The same Op gives the same key in every process; a new ownership epoch
// gives new keys. Ids must be non-empty valid UTF-8 (JCS is defined on
// Unicode text) and the epoch an I-JSON integer.
func Key(op Op) (string, error) {
	for _, f := range [...][2]string{{"mission", op.MissionID}, {"work item", op.WorkItemID}, {"operation", op.OperationID}} {
		if err := checkID(f[0], f[1]); err != nil {
			return "", err
		}
	}
	if err := checkEpoch(op.OwnershipEpoch); err != nil {
		return "", err
	}
	jcs, err := protocol.Canonical([]any{op.MissionID, op.WorkItemID, op.OwnershipEpoch, op.OperationID})
	if err != nil {
		return "", fmt.Errorf("toolkey: %w", err)
	}
	sum := sha256.Sum256(jcs)
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// AttemptKey is the key of the n-th attempt (1-based) of the operation
// whose key is key.
func AttemptKey(key string, n uint64) string {
	return key + "." + strconv.FormatUint(n, 10)
}

// checkID rejects what Key cannot hash the same way in every language: an
// empty id, or bytes that are not UTF-8 text.
func checkID(name, v string) error {
	if v == "" {
		return protocol.Errorf(protocol.CodeInvalidCommand, "toolkey: %s id is required", name)
	}
	if !utf8.ValidString(v) {
		return protocol.Errorf(protocol.CodeInvalidCommand, "toolkey: %s id is not valid UTF-8", name)
	}
	return nil
}

func checkEpoch(epoch uint64) error {
	if epoch > protocol.MaxSafeInteger {
		return protocol.Errorf(protocol.CodeInvalidCommand, "toolkey: ownership epoch %d is beyond 2^53-1", epoch)
	}
	return nil
}
