package authoritylite

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/missionweave/mwp-worker/authority-lite/logstore"
	"github.com/missionweave/mwp-worker/protocol"
)

// KeyFile is the authority's event-signing key inside its data directory.
const KeyFile = "authority.key"

// The log records, when it is created, which key it belongs to and a
// random id of its own (root bucket "log", key "identity"). Receipts, HELLO
// nonces and event sequences live in the log only: an empty log beside the
// old key would be a new authority that signs as the old one, restarting
// sequences at 1 and forgetting every replay guard. So Open refuses a log
// that does not match the key, and a new log beside an existing key needs
// Config.Init (`authority serve --init`).
var (
	bucketLog   = []byte("log")
	keyIdentity = []byte("identity")
)

// LogIdentity is what a log records about itself when it is created.
type LogIdentity struct {
	LogID     string    `json:"logId"`
	CreatedAt time.Time `json:"createdAt"`
	KeyID     string    `json:"keyId"`
	// PublicKey is the key's public half (base64url), so a regenerated key
	// under the same keyId is told apart too.
	PublicKey string `json:"publicKey"`
}

// Store refusal reasons: details.reason of the INTERNAL_ERROR Open and the
// integrity check return (docs/operations.md lists them).
const (
	ReasonLogMissing     = "LOG_MISSING"      // a key without its log
	ReasonKeyMissing     = "KEY_MISSING"      // a log without its key
	ReasonLogKeyMismatch = "LOG_KEY_MISMATCH" // the log was created for another key
	ReasonLogExists      = "LOG_EXISTS"       // Init asked for a new log, one exists
	ReasonStoreDamaged   = "STORE_DAMAGED"    // the file or its events fail the integrity check
	ReasonLogRolledBack  = "LOG_ROLLED_BACK"  // the log is older than the last commit it made
)

// storeError is a refusal about the store files: INTERNAL_ERROR (the only
// core code for the authority's own state), not retryable (resending does
// not mend a file), with the reason and files in details.
func storeError(reason string, files []string, format string, args ...any) *protocol.Error {
	e := protocol.Errorf(protocol.CodeInternalError, "%s: %s", reason, fmt.Sprintf(format, args...))
	e.Retryable = false
	if files == nil {
		return protocol.WithDetails(e, "reason", reason)
	}
	return protocol.WithDetails(e, "reason", reason, "files", files)
}

// ReasonOf returns details.reason of a store refusal, "" for other errors.
func ReasonOf(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		r, _ := pe.Details["reason"].(string)
		return r
	}
	return ""
}

// logFileState tells a missing or empty log file from one with content.
func logFileState(path string) (exists bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("authority: %w", err)
	}
	return fi.Size() > 0, nil
}

// openKey loads the event key, creating it only when no log exists: a new
// key beside an existing log would make every stored event unverifiable.
// loaded reports a key that was there before this start.
func openKey(dir, id string, logExists bool) (k protocol.PrivateKey, loaded bool, err error) {
	keyPath, logPath := filepath.Join(dir, KeyFile), filepath.Join(dir, LogFile)
	k, err = protocol.LoadPrivateKey(keyPath)
	if err == nil {
		return k, true, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return k, false, fmt.Errorf("authority: %w", err)
	}
	if logExists {
		return k, false, storeError(ReasonKeyMissing, []string{logPath, keyPath},
			"%s exists but %s does not: restore the key from its backup (a new key would not verify a single stored event)", logPath, keyPath)
	}
	k, err = loadOrCreateKey(dir, id)
	return k, false, err
}

// checkIdentity runs in Open's first transaction. A log with an identity
// must match key; a log without one is either new (no buckets yet) or was
// written before identities were recorded, and gets one: in a read
// transaction it then only reports that one must be created (the bool),
// in a write transaction it creates it. keyExisted is a key file that was
// there before this start: then a new log needs init.
func checkIdentity(tx logstore.Tx, dir string, key protocol.VerifyingKey, keyExisted, init bool, now time.Time) (LogIdentity, bool, error) {
	logPath, keyPath := filepath.Join(dir, LogFile), filepath.Join(dir, KeyFile)
	files := []string{logPath, keyPath}
	pub := base64.RawURLEncoding.EncodeToString(key.Key)
	if b := tx.Bucket(bucketLog); b != nil {
		var id LogIdentity
		if err := json.Unmarshal(b.Get(keyIdentity), &id); err != nil {
			return id, false, storeError(ReasonStoreDamaged, files, "%s: unreadable log identity: %v", logPath, err)
		}
		if init {
			return id, false, storeError(ReasonLogExists, files,
				"--init creates a new log, but %s already holds log %s (created %s): remove --init", logPath, id.LogID, id.CreatedAt.Format(time.RFC3339))
		}
		if id.KeyID != key.KeyID || id.PublicKey != pub {
			return id, false, storeError(ReasonLogKeyMismatch, files,
				"%s was created for key %s (%s), %s holds %s (%s): put back the key that log was created with",
				logPath, id.KeyID, short(id.PublicKey), keyPath, key.KeyID, short(pub))
		}
		return id, false, nil
	}
	fresh := true
	_ = tx.ForEach(func([]byte) error { fresh = false; return nil })
	if fresh && keyExisted && !init {
		return LogIdentity{}, false, errLogMissing(dir)
	}
	if !tx.Writable() {
		return LogIdentity{}, true, nil // to be created in a write transaction
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return LogIdentity{}, false, err
	}
	id := LogIdentity{LogID: "log-" + hex.EncodeToString(rnd[:]), CreatedAt: now.UTC(), KeyID: key.KeyID, PublicKey: pub}
	b, err := tx.CreateBucketIfNotExists(bucketLog)
	if err != nil {
		return id, false, err
	}
	return id, true, putJSON(b, keyIdentity, id)
}

func errLogMissing(dir string) error {
	logPath, keyPath := filepath.Join(dir, LogFile), filepath.Join(dir, KeyFile)
	return storeError(ReasonLogMissing, []string{logPath, keyPath},
		"%s exists but %s is missing or empty: restore the log from its backup, or start with --init to begin a new log (receipts, replay guards and sequences start over)",
		keyPath, logPath)
}

func short(pub string) string {
	if len(pub) > 12 {
		return pub[:12] + "…"
	}
	return pub
}

// sameKey reports whether a stored identity names key.
func (id LogIdentity) sameKey(key protocol.VerifyingKey) bool {
	return id.KeyID == key.KeyID && id.PublicKey == base64.RawURLEncoding.EncodeToString(key.Key)
}
