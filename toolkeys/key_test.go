package toolkeys

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/missionweave/mwp-worker/protocol"
)

// Expected keys computed outside Go:
//
//	json.dumps([m, w, e, o], separators=(',', ':'), ensure_ascii=False).encode()
//	-> sha256 -> urlsafe_b64encode without '='
//
// which equals ECMAScript JSON.stringify, hence JCS, for these values.
var keyKAT = []struct {
	op   Op
	want string
}{
	{Op{"mis-a", "wi-7", 3, "git.push"}, "tk1_YNCUCLf05YCkbOdlju2Rje5ZwkH6NSCzAHizKMcXbl0"},
	{Op{"mis-a", "wi-7", 4, "git.push"}, "tk1_fJMQ7zG7EGuH3oVooVVhF_AGmRHxKsYZNmQSpSnpYOk"},
	{Op{"mis-a", "wi-7", 0, "git.push"}, "tk1_ZscHHNKYhZn0REreNXstvl1Hb_RfwvZq-M91_KwUbiU"},
	{Op{"mis-a", "wi-7", protocol.MaxSafeInteger, "git.push"}, "tk1_6Zmzb6hwMjSV1pVTEokfaXb-6nfI7lVVue3NLZM8hbI"},
	{Op{"mis-a", "wi-8", 3, "git.push"}, "tk1_VA77QBwqMIqberkOVyK1O0S2MLXlqwjPCRWzKeiTU9Y"},
	{Op{"mis-b", "wi-7", 3, "git.push"}, "tk1_EFEXQQ_JAi-m1rNLmANtmIC4wWt48hKNSc4CgTNg_eo"},
	{Op{"mis-a", "wi-7", 3, "git.push "}, "tk1_-4X7NG27D5XnmCQrUVh4UyVfTnVH6HUkHyLdG-PFORc"},
	// Moving a character across a field boundary changes the key.
	{Op{"a", "bc", 1, "op"}, "tk1_HQVmjQj7VSuHG-dt-FtptL8nv-iOYxRzlZjcXgSjFek"},
	{Op{"ab", "c", 1, "op"}, "tk1_mz97mAIcGb3rg5TCnmhwJ2E4axmlE_pEhIxpGrZfnB4"},
	{Op{"misión-ñ", "工作-7", 12, "déployer"}, "tk1_wekrlZJR0fgrA8XI7ggVd4vKK8i_xnXRDEac7B4AWys"},
	// JCS leaves U+2028/U+2029 raw (encoding/json would escape them).
	{Op{"m\u2028n", "w\u2029x", 5, "op"}, "tk1_QftuV1YeH9EXyWgC3oSUMlAoRzAJwJAHuiRuEtszeMs"},
	{Op{`say "hi"`, `back\slash`, 7, "q/op"}, "tk1_JWQwqPds5FVZUL2sCNDkByJfiQsSLZ2xcuSLzFnEUDw"},
	{Op{"emoji-\U0001F680", "wi-\U0001F9EA", 1, "\U0001F4E6.upload"}, "tk1_P3xGY30ohb_HkmHsqNtPvdB8DJJyssue88MTntstRZQ"},
	// Control characters: short escapes where JSON has them, else \u00xx
	// in lowercase hex; DEL stays raw.
	{Op{"ctl\x00\x01\x1f", "tab\t\n\r\b\f", 2, "del\x7f"}, "tk1_8avgjU4CAXYUCvJeg2UJ12aQ-mlWEoPr0S2nSsnR2pc"},
	// No HTML escaping; a private-use and a supplementary character.
	{Op{"\ue000", "\U00010000", 3, "<script>&'"}, "tk1_f6W-F0iAkYCVOjgUmvNnYW8EoGRT_tFVRvf2fCkKIf8"},
}

func TestKeyKnownAnswers(t *testing.T) {
	for _, c := range keyKAT {
		got, err := Key(c.op)
		if err != nil {
			t.Fatalf("Key(%#v): %v", c.op, err)
		}
		if got != c.want {
			t.Errorf("Key(%#v) = %s, want %s", c.op, got, c.want)
		}
		if ref := refKey(c.op); ref != c.want {
			t.Errorf("reference key of %#v = %s, want %s", c.op, ref, c.want)
		}
	}
}

func TestAttemptKey(t *testing.T) {
	k := keyKAT[0].want
	for n, want := range map[uint64]string{1: k + ".1", 2: k + ".2", 10: k + ".10", protocol.MaxSafeInteger: k + ".9007199254740991"} {
		if got := AttemptKey(k, n); got != want {
			t.Errorf("AttemptKey(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestKeyRejects(t *testing.T) {
	good := Op{"mis-a", "wi-7", 3, "git.push"}
	for name, mut := range map[string]func(*Op){
		"empty mission":     func(o *Op) { o.MissionID = "" },
		"empty work item":   func(o *Op) { o.WorkItemID = "" },
		"empty operation":   func(o *Op) { o.OperationID = "" },
		"epoch 2^53":        func(o *Op) { o.OwnershipEpoch = protocol.MaxSafeInteger + 1 },
		"epoch max uint64":  func(o *Op) { o.OwnershipEpoch = ^uint64(0) },
		"invalid utf-8":     func(o *Op) { o.MissionID = "mis-\xff" },
		"lone surrogate":    func(o *Op) { o.WorkItemID = "wi-\xed\xa0\x80" },
		"truncated rune op": func(o *Op) { o.OperationID = "op-\xe2\x82" },
	} {
		op := good
		mut(&op)
		k, err := Key(op)
		if protocol.CodeOf(err) != protocol.CodeInvalidCommand {
			t.Errorf("%s: Key = %q, %v; want INVALID_COMMAND", name, k, err)
		}
	}
}

// refKey is a second, rune-by-rune implementation of the derivation after
// ECMAScript JSON.stringify, to check Key on inputs no table lists.
func refKey(op Op) string {
	s := "[" + refQuote(op.MissionID) + "," + refQuote(op.WorkItemID) + "," +
		strconv.FormatUint(op.OwnershipEpoch, 10) + "," + refQuote(op.OperationID) + "]"
	sum := sha256.Sum256([]byte(s))
	return "tk1_" + base64.RawURLEncoding.EncodeToString(sum[:])
}

func refQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzKey: for any valid Op the key is well formed, stable, equal to the
// reference derivation, and changes when any one field changes.
func FuzzKey(f *testing.F) {
	for _, c := range keyKAT {
		f.Add(c.op.MissionID, c.op.WorkItemID, c.op.OwnershipEpoch, c.op.OperationID)
	}
	f.Fuzz(func(t *testing.T, m, w string, e uint64, o string) {
		op := Op{m, w, e, o}
		k, err := Key(op)
		valid := m != "" && w != "" && o != "" && utf8.ValidString(m) && utf8.ValidString(w) && utf8.ValidString(o) && e <= protocol.MaxSafeInteger
		if !valid {
			if protocol.CodeOf(err) != protocol.CodeInvalidCommand {
				t.Fatalf("Key(%#v) = %q, %v; want INVALID_COMMAND", op, k, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Key(%#v): %v", op, err)
		}
		raw, derr := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k, KeyPrefix))
		if !strings.HasPrefix(k, KeyPrefix) || len(k) != len(KeyPrefix)+43 || derr != nil || len(raw) != sha256.Size {
			t.Fatalf("malformed key %q", k)
		}
		if again, _ := Key(op); again != k {
			t.Fatalf("unstable key: %s then %s", k, again)
		}
		if ref := refKey(op); ref != k {
			t.Fatalf("Key(%#v) = %s, reference %s", op, k, ref)
		}
		nextEpoch := e + 1
		if e == protocol.MaxSafeInteger {
			nextEpoch = 0
		}
		for _, other := range []Op{{m + "x", w, e, o}, {m, w + "x", e, o}, {m, w, nextEpoch, o}, {m, w, e, o + "x"}} {
			if k2, err := Key(other); err != nil || k2 == k {
				t.Fatalf("Key(%#v) = %s, %v: same as Key(%#v)", other, k2, err, op)
			}
		}
		if a := AttemptKey(k, 1); a == k || !strings.HasPrefix(a, k+".") {
			t.Fatalf("attempt key %q of %q", a, k)
		}
	})
}

func TestKeyErrorsAreProtocolErrors(t *testing.T) {
	_, err := Key(Op{})
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("Key(Op{}) error %T %v, want *protocol.Error", err, err)
	}
}
