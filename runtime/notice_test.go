package runtime

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
	"pgregory.net/rapid"
)

// disc builds a disclosure computed at t0+at whose start window opens
// `from` after t0 and which completes `done` after t0.
func disc(at, from, done time.Duration, cs protocol.CapacityState) protocol.ScheduleDisclosure {
	ts := func(d time.Duration) protocol.Time { return protocol.NewTime(t0.Add(d)) }
	return protocol.ScheduleDisclosure{
		EstimatedStartWindow: protocol.TimeWindow{From: ts(from), To: ts(from + 5*time.Minute)},
		EstimatedCompletion:  ts(done), Confidence: 0.5, CapacityState: cs, ComputedAt: ts(at),
	}
}

func TestMaterialChange(t *testing.T) {
	const sat, avail = protocol.CapacitySaturated, protocol.CapacityAvailable
	m := time.Minute
	// prev: computed at t0, start in 20m (wait 20m: tolerance 5m),
	// completion in 40m (tolerance 10m).
	prev := disc(0, 20*m, 40*m, sat)
	short := disc(0, 2*m, 4*m, sat) // wait 2m: the 1m threshold rules
	for _, tc := range []struct {
		name string
		prev protocol.ScheduleDisclosure
		next protocol.ScheduleDisclosure
		thr  time.Duration
		want bool
		why  string
	}{
		{"identical", prev, prev, m, false, ""},
		{"recomputed later, same estimates", prev, disc(3*m, 20*m, 40*m, sat), m, false, ""},
		{"capacity changed only", prev, disc(0, 20*m, 40*m, avail), m, true, "capacity saturated to available"},
		{"start later within 25% of the wait", prev, disc(0, 25*m, 40*m, sat), m, false, ""},
		{"start later past 25% of the wait", prev, disc(0, 25*m+time.Second, 44*m, sat), m, true, "start later by 5m1s"},
		{"start earlier past 25% of the wait", prev, disc(0, 14*m, 38*m, sat), m, true, "start earlier by 6m0s"},
		{"start earlier within tolerance", prev, disc(0, 16*m, 38*m, sat), m, false, ""},
		{"completion later past 25% of its horizon", prev, disc(0, 20*m, 51*m, sat), m, true, "completion later by 11m0s"},
		{"completion later within its horizon", prev, disc(0, 20*m, 49*m, sat), m, false, ""},
		{"completion earlier past tolerance", prev, disc(0, 20*m, 29*m, sat), m, true, "completion earlier by 11m0s"},
		{"short wait: threshold rules, under it", short, disc(0, 2*m+50*time.Second, 4*m+50*time.Second, sat), m, false, ""},
		{"short wait: threshold rules, over it", short, disc(0, 3*m+time.Second, 4*m, sat), m, true, "start later by 1m1s"},
		{"exactly the tolerance is not more than it", short, disc(0, 3*m, 5*m, sat), m, false, ""},
		{"larger threshold absorbs the move", prev, disc(0, 30*m, 45*m, sat), 15 * m, false, ""},
		{"start already due (no wait): threshold only", disc(0, 0, 10*m, avail), disc(0, 90*time.Second, 10*m, avail), m, true, "start later by 1m30s"},
		{"confidence alone is not material", prev, func() protocol.ScheduleDisclosure { d := prev; d.Confidence = 0.1; return d }(), m, false, ""},
	} {
		got, why := MaterialChange(tc.prev, tc.next, tc.thr)
		if got != tc.want || why != tc.why {
			t.Errorf("%s: MaterialChange = %v %q, want %v %q", tc.name, got, why, tc.want, tc.why)
		}
	}
}

func TestNoticeIDsAreDerived(t *testing.T) {
	m1, a1 := noticeIDs("w1", "grp-a", NoticeRejection, "off-1")
	m2, a2 := noticeIDs("w1", "grp-a", NoticeRejection, "off-1")
	if m1 != m2 || a1 != a2 {
		t.Fatalf("same inputs gave %s/%s and %s/%s", m1, a1, m2, a2)
	}
	if m1 == a1 || !strings.HasPrefix(m1, "msg-") || !strings.HasPrefix(a1, "act-") {
		t.Fatalf("ids %s %s", m1, a1)
	}
	seen := map[string]string{m1: "base"}
	for name, in := range map[string][4]string{
		"another agent": {"w2", "grp-a", NoticeRejection, "off-1"},
		"another group": {"w1", "grp-b", NoticeRejection, "off-1"},
		"another kind":  {"w1", "grp-a", NoticeDisclosure, "off-1"},
		"another offer": {"w1", "grp-a", NoticeRejection, "off-2"},
		"no separator":  {"w1", "grp-ao", NoticeRejection, "ff-1"},
	} {
		m, _ := noticeIDs(in[0], in[1], in[2], in[3])
		if prev, dup := seen[m]; dup {
			t.Errorf("%s collides with %s", name, prev)
		}
		seen[m] = name
	}
	// Valid protocol ids (common.schema.json#/$defs/id).
	if len(m1) > 128 || strings.ContainsFunc(m1, func(r rune) bool { return r > 127 || !idByte(byte(r)) }) {
		t.Fatalf("%s is not a protocol id", m1)
	}
	if disclosureKey("wi-1", t0) == disclosureKey("wi-1", t0.Add(time.Millisecond)) {
		t.Fatal("disclosure keys ignore the computation time")
	}
}

// noticeObject extracts the fenced json block of a notice text (what a
// reader of the Group log does).
func noticeObject(t testing.TB, text string) (line string, obj []byte) {
	t.Helper()
	line, rest, ok := strings.Cut(text, "\n\n")
	if !ok {
		t.Fatalf("no blank line after the human line: %q", text)
	}
	fence := rest[:strings.IndexFunc(rest, func(r rune) bool { return r != '`' })]
	if len(fence) < 3 || !strings.HasPrefix(rest, fence+"json\n") || !strings.HasSuffix(rest, "\n"+fence+"\n") {
		t.Fatalf("not one fenced json block: %q", rest)
	}
	return line, []byte(strings.TrimSuffix(strings.TrimPrefix(rest, fence+"json\n"), "\n"+fence+"\n"))
}

func TestNoticeTextCarriesTheObject(t *testing.T) {
	for _, detail := range []string{
		"1 items committed, capacity 1 for 1 slots",
		"multi\nline ```` detail with a fence",
	} {
		obj := RejectionNotice{Kind: NoticeRejection, GroupID: "grp-a", WorkItemID: "wi-2", OfferID: "off-wi-2",
			Reason: protocol.RejectCapacity, Detail: detail}
		raw, err := protocol.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		text := noticeText(rejectionLine(obj), raw)
		line, got := noticeObject(t, text)
		if strings.Contains(line, "\n") || !strings.HasPrefix(line, "Offer off-wi-2 for wi-2 refused: capacity — ") {
			t.Errorf("line %q", line)
		}
		if string(got) != string(raw) {
			t.Errorf("block %s, want the JCS bytes %s", got, raw)
		}
		var back RejectionNotice
		if err := json.Unmarshal(got, &back); err != nil || back != obj {
			t.Errorf("round trip %+v %v", back, err)
		}
	}
}

func TestWithoutForeignGroups(t *testing.T) {
	groups := []string{"grp-a", "grp-b"}
	for _, tc := range []struct{ detail, want string }{
		{"2 items committed, capacity 2 for 1 slots", "2 items committed, capacity 2 for 1 slots"},
		{"dependency wi-1 of grp-a is cancelled", "dependency wi-1 of grp-a is cancelled"},
		{"blocked behind grp-b/wi-9", "detail withheld: it named another Group"},
		{"grp-b", "detail withheld: it named another Group"},
		{"grp-bx is not grp-b's id", "detail withheld: it named another Group"},
		{"grp-bx only", "grp-bx only"},
		{"xgrp-b only", "xgrp-b only"},
	} {
		if got := withoutForeignGroups(tc.detail, "grp-a", groups); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.detail, got, tc.want)
		}
	}
}

func TestNoticeBudget(t *testing.T) {
	b := newNoticeBudget(2, 10*time.Second, t0)
	if !b.take(t0) || !b.take(t0) {
		t.Fatal("the burst is not available at once")
	}
	if b.take(t0) {
		t.Fatal("a third message within the burst")
	}
	if got := b.nextAt(t0); !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("next token at %v", got.Sub(t0))
	}
	if b.take(t0.Add(9 * time.Second)) {
		t.Fatal("a token before its time")
	}
	if !b.take(t0.Add(10 * time.Second)) {
		t.Fatal("no token when due")
	}
	// Idle time refills up to the burst, not beyond.
	later := t0.Add(time.Hour)
	n := 0
	for b.take(later) {
		n++
	}
	if n != 2 {
		t.Fatalf("%d tokens after an hour idle, want the burst 2", n)
	}
}

// The budget never lets more than burst + elapsed/every messages through
// in any window starting at a take, and never refuses when a token is due.
func TestNoticeBudgetProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		burst := rapid.IntRange(1, 5).Draw(t, "burst")
		every := time.Duration(rapid.IntRange(1, 60).Draw(t, "everySeconds")) * time.Second
		b := newNoticeBudget(burst, every, t0)
		now := t0
		var taken []time.Time
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 30_000).Draw(t, "gapMs")) * time.Millisecond)
			due := !b.nextAt(now).After(now)
			ok := b.take(now)
			if ok != due {
				t.Fatalf("step %d: take %v but nextAt said due=%v", i, ok, due)
			}
			if ok {
				taken = append(taken, now)
			}
		}
		for i, from := range taken {
			for j := i; j < len(taken); j++ {
				allowed := float64(burst) + float64(taken[j].Sub(from))/float64(every)
				if float64(j-i+1) > allowed+1e-9 {
					t.Fatalf("%d messages in %v, at most %.2f allowed", j-i+1, taken[j].Sub(from), allowed)
				}
			}
		}
	})
}
