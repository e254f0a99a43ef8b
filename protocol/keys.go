package protocol

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/missionweave/mwp-worker/internal/atomicfile"
)

// PrivateKey is an Ed25519 signing key with the key id that names it in
// signatures.
type PrivateKey struct {
	KeyID string
	Key   ed25519.PrivateKey
}

// VerifyingKey is the public half of a PrivateKey. Its wire form is the
// PublicKey object of docs/shapes.md (see Encode and DecodePublicKey).
type VerifyingKey struct {
	KeyID string
	Key   ed25519.PublicKey
}

// b64 is unpadded base64url that refuses non-zero trailing bits, so every
// key and signature has exactly one accepted spelling.
var b64 = base64.RawURLEncoding.Strict()

var (
	keyIDPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:#/-]{0,255}$`)
	keyNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// ValidKeyID reports whether id matches the keyId pattern of docs/shapes.md
// (keyIDPattern). It runs once per verified document, so it is written out
// rather than left to the regexp (TestValidKeyIDMatchesPattern).
func ValidKeyID(id string) bool {
	if len(id) == 0 || len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == ':' || c == '#' || c == '/' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// GenerateKey makes a new key pair reading randomness from rand
// (crypto/rand.Reader when nil).
func GenerateKey(keyID string, rand io.Reader) (PrivateKey, error) {
	if !ValidKeyID(keyID) {
		return PrivateKey{}, fmt.Errorf("protocol: key id %q does not match %s", keyID, keyIDPattern)
	}
	_, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return PrivateKey{}, fmt.Errorf("protocol: generate key: %w", err)
	}
	return PrivateKey{KeyID: keyID, Key: priv}, nil
}

// Public returns the verifying half of k; its Key is nil when k.Key is not
// a 64-byte Ed25519 private key.
func (k PrivateKey) Public() VerifyingKey {
	if len(k.Key) != ed25519.PrivateKeySize {
		return VerifyingKey{KeyID: k.KeyID}
	}
	pub, _ := k.Key.Public().(ed25519.PublicKey)
	return VerifyingKey{KeyID: k.KeyID, Key: pub}
}

// check rejects keys that would make crypto/ed25519 panic or that no
// signature could name.
func (k PrivateKey) check() error {
	if !ValidKeyID(k.KeyID) {
		return fmt.Errorf("protocol: key id %q does not match %s", k.KeyID, keyIDPattern)
	}
	if len(k.Key) != ed25519.PrivateKeySize {
		return fmt.Errorf("protocol: private key %s has %d bytes, want %d", k.KeyID, len(k.Key), ed25519.PrivateKeySize)
	}
	return nil
}

// Encode returns the wire PublicKey object of k.
func (k VerifyingKey) Encode() PublicKey {
	return PublicKey{KeyID: k.KeyID, Alg: SignatureAlgEd25519, PublicKey: b64.EncodeToString(k.Key)}
}

// DecodePublicKey checks a wire PublicKey (an Agent Card key, say) and
// returns it as a VerifyingKey. Errors are SCHEMA_VALIDATION_FAILED.
func DecodePublicKey(p PublicKey) (VerifyingKey, error) {
	return decodeKeyMembers(map[string]any{"keyId": p.KeyID, "alg": p.Alg, "publicKey": p.PublicKey}, "publicKey", ed25519.PublicKeySize)
}

// KeyIDFor names a principal's key: "<kind>:<id>#<name>", as in docs/wire.md's
// agent:w1#k1.
func KeyIDFor(kind ActorKind, id, name string) string {
	return string(kind) + ":" + id + "#" + name
}

// KeyBelongsTo reports whether keyID is one of the keys of the principal
// (kind, id), that is exactly "<kind>:<id>#<name>" with a plain key name.
// Actor ids never contain '#', so the prefix identifies one principal and
// agent:w1#k1 can never be taken for a key of agent:w1:x or agent:w. The
// authority refuses a Command whose keyId does not belong to its actor, so
// a key admitted for one principal cannot sign for another.
func KeyBelongsTo(keyID string, kind ActorKind, id string) bool {
	prefix := string(kind) + ":" + id + "#"
	return kind.Known() && id != "" && !strings.Contains(id, "#") &&
		strings.HasPrefix(keyID, prefix) && keyNamePattern.MatchString(keyID[len(prefix):]) &&
		ValidKeyID(keyID)
}

// KeyOwner is the principal a key id "<kind>:<id>#<name>" names, and
// false when the id does not belong to one (KeyBelongsTo).
func KeyOwner(keyID string) (Actor, bool) {
	owner, _, ok := strings.Cut(keyID, "#")
	kind, id, ok2 := strings.Cut(owner, ":")
	a := Actor{Kind: ActorKind(kind), ID: id}
	return a, ok && ok2 && KeyBelongsTo(keyID, a.Kind, a.ID)
}

// Key files are small JSON documents:
//
//	private (mode 0600): {"alg":"Ed25519","keyId":"...","privateKey":"<base64url seed>"}
//	public:              {"alg":"Ed25519","keyId":"...","publicKey":"<base64url key>"}
//
// The public file is exactly the PublicKey object of docs/shapes.md, so it
// can be pasted into an Agent Card.
const (
	PrivateKeyExt = ".key"
	PublicKeyExt  = ".pub"
	maxKeyFile    = 64 << 10
)

// ErrInsecureKeyFile is returned (wrapped) when a private key file can be
// read by its group or by others.
var ErrInsecureKeyFile = errors.New("private key file is accessible by group or others")

// WriteKeyFiles writes DIR/NAME.key (mode 0600) and DIR/NAME.pub (0644),
// each atomically: temporary file, fsync, link or rename, fsync of the
// directory. It never replaces an existing private key.
func WriteKeyFiles(dir, name string, k PrivateKey) (privPath, pubPath string, err error) {
	if err := k.check(); err != nil {
		return "", "", err
	}
	if !keyNamePattern.MatchString(name) {
		return "", "", fmt.Errorf("protocol: key file name %q does not match %s", name, keyNamePattern)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	privPath = filepath.Join(dir, name+PrivateKeyExt)
	pubPath = filepath.Join(dir, name+PublicKeyExt)
	priv, err := Canonical(map[string]any{
		"keyId": k.KeyID, "alg": SignatureAlgEd25519, "privateKey": b64.EncodeToString(k.Key.Seed()),
	})
	if err != nil {
		return "", "", err
	}
	pk := k.Public()
	pub, err := Canonical(map[string]any{
		"keyId": pk.KeyID, "alg": SignatureAlgEd25519, "publicKey": b64.EncodeToString(pk.Key),
	})
	if err != nil {
		return "", "", err
	}
	if err := writeFileAtomic(privPath, append(priv, '\n'), 0o600, false); err != nil {
		return "", "", err
	}
	if err := writeFileAtomic(pubPath, append(pub, '\n'), 0o644, true); err != nil {
		// Nobody can have used the new key yet; leave no half pair behind.
		_ = os.Remove(privPath)
		_ = atomicfile.SyncDir(dir)
		return "", "", err
	}
	return privPath, pubPath, nil
}

// writeFileAtomic makes path appear complete or not at all. Without
// replace, an existing file is an error.
func writeFileAtomic(path string, data []byte, mode os.FileMode, replace bool) error {
	if replace {
		return atomicfile.WriteFile(path, data, mode)
	}
	err := atomicfile.CreateFile(path, data, mode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("protocol: %s already exists; refusing to overwrite a private key", path)
	}
	return err
}

// LoadPrivateKey reads a private key file. Like ssh, it refuses a file that
// its group or others may access (on Unix).
func LoadPrivateKey(path string) (PrivateKey, error) {
	data, err := readKeyFile(path, true)
	if err != nil {
		return PrivateKey{}, err
	}
	k, err := ParsePrivateKey(data)
	if err != nil {
		return PrivateKey{}, fmt.Errorf("private key %s: %w", path, err)
	}
	return k, nil
}

// LoadPublicKey reads a public key file.
func LoadPublicKey(path string) (VerifyingKey, error) {
	data, err := readKeyFile(path, false)
	if err != nil {
		return VerifyingKey{}, err
	}
	k, err := ParsePublicKey(data)
	if err != nil {
		return VerifyingKey{}, fmt.Errorf("public key %s: %w", path, err)
	}
	return k, nil
}

func readKeyFile(path string, private bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if private && runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: %w (mode %04o); run chmod 600 %s", path, ErrInsecureKeyFile, st.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%s is larger than %d bytes; not a key file", path, maxKeyFile)
	}
	return data, nil
}

// ParsePrivateKey decodes a private key file's bytes. Malformed JSON is
// PROTOCOL_VIOLATION; a wrong shape, alg or size is SCHEMA_VALIDATION_FAILED.
func ParsePrivateKey(data []byte) (PrivateKey, error) {
	v, err := Parse(data, DecodeOptions{MaxBytes: maxKeyFile, MaxDepth: 4})
	if err != nil {
		return PrivateKey{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return PrivateKey{}, Errorf(CodeSchemaValidationFailed, "a private key file holds a JSON object")
	}
	vk, err := decodeKeyMembers(m, "privateKey", ed25519.SeedSize)
	if err != nil {
		return PrivateKey{}, err
	}
	return PrivateKey{KeyID: vk.KeyID, Key: ed25519.NewKeyFromSeed(vk.Key)}, nil
}

// ParsePublicKey decodes a public key file's bytes (a wire PublicKey).
func ParsePublicKey(data []byte) (VerifyingKey, error) {
	v, err := Parse(data, DecodeOptions{MaxBytes: maxKeyFile, MaxDepth: 4})
	if err != nil {
		return VerifyingKey{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return VerifyingKey{}, Errorf(CodeSchemaValidationFailed, "a public key file holds a JSON object")
	}
	return decodeKeyMembers(m, "publicKey", ed25519.PublicKeySize)
}

// decodeKeyMembers checks {keyId, alg, <member>} and returns the decoded
// bytes of member (a seed or a public key) in the Key field.
func decodeKeyMembers(m map[string]any, member string, size int) (VerifyingKey, error) {
	for name := range m {
		if name != "keyId" && name != "alg" && name != member {
			return VerifyingKey{}, Errorf(CodeSchemaValidationFailed, "unknown member %q (want keyId, alg, %s)", name, member).At(pointerOf([]string{name}))
		}
	}
	id, _ := m["keyId"].(string)
	if !ValidKeyID(id) {
		return VerifyingKey{}, Errorf(CodeSchemaValidationFailed, "keyId must be a string matching %s", keyIDPattern).At("/keyId")
	}
	if alg, _ := m["alg"].(string); alg != SignatureAlgEd25519 {
		return VerifyingKey{}, Errorf(CodeSchemaValidationFailed, "alg must be %q", SignatureAlgEd25519).At("/alg")
	}
	s, ok := m[member].(string)
	if !ok {
		return VerifyingKey{}, Errorf(CodeSchemaValidationFailed, "%s must be a string", member).At("/" + member)
	}
	raw, err := decodeB64(s, size)
	if err != nil {
		return VerifyingKey{}, Errorf(CodeSchemaValidationFailed, "%s %v", member, err).At("/" + member)
	}
	return VerifyingKey{KeyID: id, Key: raw}, nil
}

// decodeB64 decodes unpadded base64url of exactly size bytes.
func decodeB64(s string, size int) ([]byte, error) {
	if want := b64.EncodedLen(size); len(s) != want {
		if strings.HasSuffix(s, "=") {
			return nil, fmt.Errorf("must be unpadded base64url (no '=')")
		}
		return nil, fmt.Errorf("must be %d base64url characters (%d bytes), got %d", want, size, len(s))
	}
	raw, err := b64.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("is not unpadded base64url: %v", err)
	}
	return raw, nil
}
