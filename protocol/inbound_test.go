package protocol

import (
	"crypto/ed25519"
	"encoding/json"
	"runtime"
	"syscall"
	"testing"
	"time"
)

var inboundNow = time.Date(2026, 11, 30, 8, 0, 30, 0, time.UTC)

// signedFixture returns the bytes of the schema fixture command after the
// mutations, signed by worker-1's key, and the key set that verifies it.
func signedFixture(t testing.TB, mutations ...[2]string) ([]byte, KeySet) {
	t.Helper()
	k := testKey(t, "agent:worker-1#k1", 7)
	doc := fixture(t, "{{command}}")
	for _, m := range mutations {
		doc = mutate(t, doc, m[0], m[1])
	}
	raw := []byte(mustMarshal(t, doc))
	v, err := Parse(raw, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := SignCommand(v.(map[string]any), k); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out, NewKeySet(k.Public(), testKey(t, "agent:other#k1", 9).Public())
}

func TestDecodeCommand(t *testing.T) {
	withOffline := [2]string{"/extensions", `{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":{{offline}}}}`}
	tests := []struct {
		name      string
		mutations [][2]string
		tamper    func([]byte) []byte // applied after signing
		now       time.Time
		want      Code
		pointer   string
	}{
		{name: "valid", want: ""},
		{name: "valid with the offline binding", mutations: [][2]string{withOffline}},
		{name: "unknown non-critical extension", mutations: [][2]string{{"/extensions", `{"urn:example:x":{"critical":false,"data":{"a":1}}}`}}},
		{name: "duplicate member", tamper: func(b []byte) []byte { return append([]byte(`{"actionId":"x",`), b[1:]...) },
			want: CodeProtocolViolation, pointer: "/actionId"},
		{name: "not an object", tamper: func([]byte) []byte { return []byte(`[1]`) }, want: CodeProtocolViolation},
		{name: "other protocol version", mutations: [][2]string{{"/protocolVersion", `"0.2"`}},
			want: CodeUnsupportedVersion, pointer: "/protocolVersion"},
		{name: "tampered after signing", tamper: func(b []byte) []byte { return replaceOnce(b, `"wi-7"`, `"wi-8"`) },
			want: CodeAuthInvalidSignature, pointer: "/signature/value"},
		{name: "stale", now: inboundNow.Add(time.Hour), want: CodeAuthInvalidSignature, pointer: "/issuedAt"},
		{name: "from the future", now: inboundNow.Add(-time.Hour), want: CodeAuthInvalidSignature, pointer: "/issuedAt"},
		{name: "signed with another actor's key", mutations: [][2]string{{"/actor", `{"kind":"agent","id":"other"}`}},
			want: CodeAuthInvalidSignature, pointer: "/signature/keyId"},
		{name: "agent without session epoch", mutations: [][2]string{{"/sessionEpoch", ""}},
			want: CodeInvalidCommand, pointer: "/sessionEpoch"},
		{name: "schema violation", mutations: [][2]string{{"/payload/offerId", ""}},
			want: CodeSchemaValidationFailed, pointer: "/payload"},
		{name: "unknown critical extension", mutations: [][2]string{{"/extensions", `{"urn:example:x":{"critical":true,"data":{}}}`}},
			want: CodeUnknownCriticalExtension, pointer: "/extensions/urn:example:x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, keys := signedFixture(t, tt.mutations...)
			if tt.tamper != nil {
				raw = tt.tamper(raw)
			}
			now := tt.now
			if now.IsZero() {
				now = inboundNow
			}
			in := &Inbound{Keys: keys}
			got, err := in.DecodeCommand(raw, now)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if got.Command.Type != CmdWorkAcceptOffer || got.Command.SessionEpoch == nil || *got.Command.SessionEpoch != 3 {
					t.Fatalf("typed decode wrong: %+v", got.Command)
				}
				c1, _ := got.CanonicalBytes()
				c2, _ := CanonicalBytes(raw, DecodeOptions{})
				if string(c1) != string(c2) {
					t.Fatal("canonical bytes differ from the input's")
				}
				return
			}
			if CodeOf(err) != tt.want {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
			if tt.pointer != "" {
				var pe *Error
				if asError(err, &pe); pe == nil || pe.Pointer != tt.pointer {
					t.Fatalf("pointer of %v, want %s", err, tt.pointer)
				}
			}
		})
	}
}

func asError(err error, target **Error) {
	if ve, ok := err.(*ValidationError); ok {
		*target = ve.ProtocolError()
		return
	}
	*target, _ = err.(*Error)
}

func replaceOnce(b []byte, old, new string) []byte {
	s := string(b)
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return []byte(s[:i] + new + s[i+len(old):])
		}
	}
	panic("replaceOnce: " + old + " not found")
}

// BenchmarkInboundCommand measures the whole inbound pipeline for a ~1 KiB
// signed Command (strict decode, version, signature, freshness, signer, epoch
// rules, schema, extensions, typed decode) and, in the same run, two
// baselines over the same bytes: Ed25519 verification alone of its signing
// input (the floor) and a plain encoding/json Unmarshal into Command.
// Reported: pipeline ops/s, and its throughput as a percentage of each
// baseline's (verification timed in chunks between the pipeline's
// operations; the -cpu figure compares the thread's CPU time).
func BenchmarkInboundCommand(b *testing.B) {
	raw, keys := signedFixture(b, [2]string{"/extensions",
		`{"urn:missionweaveprotocol:extension:bounded-offline-execution":{"critical":true,"data":{{offline}}}}`})
	in := &Inbound{Keys: keys}
	if _, err := in.DecodeCommand(raw, inboundNow); err != nil {
		b.Fatal(err)
	}
	v, _ := Parse(raw, DecodeOptions{})
	doc := v.(map[string]any)
	input, _ := SigningInput(doc)
	sig, _ := decodeB64(doc["signature"].(map[string]any)["value"].(string), ed25519.SignatureSize)
	pub, _ := keys.PublicKey("agent:worker-1#k1")

	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	// The pipeline and verification alternate in chunks, so a shared
	// machine's load weighs on both alike.
	// The thread's CPU time counts neither kind's wait for a core.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const chunk = 64
	var pipeline, verify, pipeCPU, verifyCPU time.Duration
	n := 0
	b.ResetTimer()
	for n < b.N {
		b.StopTimer()
		start, cpu := time.Now(), threadCPU()
		for range chunk {
			if !ed25519.Verify(pub, input, sig) {
				b.Fatal("verify")
			}
		}
		verify += time.Since(start)
		verifyCPU += threadCPU() - cpu
		b.StartTimer()
		start, cpu = time.Now(), threadCPU()
		for range min(chunk, b.N-n) {
			if _, err := in.DecodeCommand(raw, inboundNow); err != nil {
				b.Fatal(err)
			}
			n++
		}
		pipeline += time.Since(start)
		pipeCPU += threadCPU() - cpu
	}
	b.StopTimer()
	verified := time.Duration(chunk * ((n + chunk - 1) / chunk))
	verify = verify * time.Duration(n) / verified
	verifyCPU = verifyCPU * time.Duration(n) / verified
	start := time.Now()
	for range n {
		var c Command
		if err := json.Unmarshal(raw, &c); err != nil {
			b.Fatal(err)
		}
	}
	plain := time.Since(start)

	b.ReportMetric(float64(n)/pipeline.Seconds(), "cmds/s")
	b.ReportMetric(100*verify.Seconds()/pipeline.Seconds(), "%of-verify-alone")
	b.ReportMetric(100*verifyCPU.Seconds()/pipeCPU.Seconds(), "%of-verify-alone-cpu")
	b.ReportMetric(100*plain.Seconds()/pipeline.Seconds(), "%of-json-unmarshal")
}

// threadCPU is the calling OS thread's user and system time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A Command that arrives canonical is its own canonical form: its
// CanonicalBytes are Raw, not a copy; one that does not is written again.
func TestInboundCommandCanonicalBytes(t *testing.T) {
	canon, keys := signedFixture(t)
	spaced := append([]byte(" "), canon...)
	for _, tt := range []struct {
		name   string
		raw    []byte
		shared bool
	}{{"canonical", canon, true}, {"with a space before it", spaced, false}} {
		t.Run(tt.name, func(t *testing.T) {
			in := &Inbound{Keys: keys}
			got, err := in.DecodeCommand(tt.raw, inboundNow)
			if err != nil {
				t.Fatal(err)
			}
			c, err := got.CanonicalBytes()
			if err != nil || string(c) != string(canon) {
				t.Fatalf("canonical bytes %s (%v), want %s", c, err, canon)
			}
			if shared := &c[0] == &tt.raw[0]; shared != tt.shared {
				t.Fatalf("the canonical bytes are Raw: %v, want %v", shared, tt.shared)
			}
		})
	}
}
