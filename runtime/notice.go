package runtime

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/missionweave/mwp-worker/protocol"
)

// Notices are the messages (message.post) a worker posts to a Group about
// its own decisions: an offer it refused (spec 10.3 wants a structured
// reason; 0.1 has no refusal command, spec 15) and a material change of an
// accepted item's schedule (spec 11.2). They are advice: they authorize
// nothing, and a refused one is dropped, never retried.

// NoticeExtensionURI names the non-critical command extension whose data
// is the notice's object, so the command log keeps it structured.
const NoticeExtensionURI = "urn:missionweave:mwp-worker:notice"

// The kinds of notice, the "kind" member of their object.
const (
	NoticeRejection  = "admission.rejection"
	NoticeDisclosure = "schedule.disclosure"
	NoticeAmbiguity  = "contract.ambiguity"
)

// AmbiguityNotice is the object of an essential ambiguity (spec 10.1): the
// questions a handler raised about an offered contract, which this worker
// therefore did not accept.
type AmbiguityNotice struct {
	Kind             string   `json:"kind"`
	GroupID          string   `json:"groupId"`
	WorkItemID       string   `json:"workItemId"`
	OfferID          string   `json:"offerId"`
	ContractRevision uint64   `json:"contractRevision"`
	Questions        []string `json:"questions"`
}

// ambiguityKey is the id key of an ambiguity notice: one per offer and
// contract revision.
func ambiguityKey(offerID string, rev uint64) string {
	return offerID + "@q" + strconv.FormatUint(rev, 10)
}

// RejectionNotice is the object of a refusal notice: the docs/wire.md
// AdmissionRejection plus the ids it is about.
type RejectionNotice struct {
	Kind       string `json:"kind"`
	GroupID    string `json:"groupId"`
	WorkItemID string `json:"workItemId"`
	OfferID    string `json:"offerId"`
	// ContractRevision is set when the refusal is of a revised contract
	// of an item this worker owned (spec 10.1), which it releases.
	ContractRevision uint64                   `json:"contractRevision,omitempty"`
	Reason           protocol.AdmissionReason `json:"reason"`
	Detail           string                   `json:"detail"`
}

// DisclosureNotice is the object of a schedule update: the docs/wire.md
// ScheduleDisclosure plus the ids it is about.
type DisclosureNotice struct {
	Kind       string `json:"kind"`
	GroupID    string `json:"groupId"`
	WorkItemID string `json:"workItemId"`
	protocol.ScheduleDisclosure
}

// noticeIDs derives a notice's messageId and actionId from what it is
// about, so a restart or a second judgement of the same offer builds the
// same ids and the authority keeps one message: a repeated actionId is
// answered idempotently or as ACTION_ID_COLLISION, never posted twice.
func noticeIDs(agentID, groupID, kind, key string) (messageID, actionID string) {
	b, err := protocol.Canonical([]any{"mwp-worker-notice", agentID, groupID, kind, key})
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	h := strings.TrimPrefix(protocol.Digest(b), "sha256:")[:32]
	return "msg-n-" + h, "act-n-" + h
}

// rejectionKey and disclosureKey are the id keys of each kind.
func rejectionKey(offerID string) string { return offerID }

func renewalRejectionKey(offerID string, rev uint64) string {
	return offerID + "@r" + strconv.FormatUint(rev, 10)
}

func disclosureKey(workItemID string, computedAt time.Time) string {
	return workItemID + "@" + strconv.FormatInt(computedAt.UnixMilli(), 10)
}

// noticeText renders a notice: one human line, then the object's JCS bytes
// in a fenced json block. The fence is longer than any backtick run in the
// object, so no value can close it early (CommonMark).
func noticeText(line string, object []byte) string {
	fence := strings.Repeat("`", max(3, longestRun(string(object), '`')+1))
	return oneLine(line) + "\n\n" + fence + "json\n" + string(object) + "\n" + fence + "\n"
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// oneLine keeps the human line one line whatever a detail holds.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func rejectionLine(n RejectionNotice) string {
	return fmt.Sprintf("Offer %s for %s refused: %s — %s", n.OfferID, n.WorkItemID, n.Reason, n.Detail)
}

func disclosureLine(n DisclosureNotice, why string) string {
	f := func(t protocol.Time) string { return t.Time.UTC().Format(time.RFC3339) }
	return fmt.Sprintf("Schedule of %s changed (%s): start %s to %s, completion %s, capacity %s, confidence %.2f",
		n.WorkItemID, why, f(n.EstimatedStartWindow.From), f(n.EstimatedStartWindow.To), f(n.EstimatedCompletion),
		n.CapacityState, n.Confidence)
}

// withoutForeignGroups withholds a detail that names another Group the
// worker serves (spec 11.2 in spirit: a notice to one Group never names
// another's). Admission details name only the offer's own Group's data
// and aggregate counts; this is the guard that keeps it so.
func withoutForeignGroups(detail, group string, groups []string) string {
	for _, g := range groups {
		if g != group && containsID(detail, g) {
			return "detail withheld: it named another Group"
		}
	}
	return detail
}

// containsID reports whether id occurs in s as a whole id, not inside a
// longer one ("grp-a" is not in "grp-ab").
func containsID(s, id string) bool {
	if id == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(s[i:], id)
		if j < 0 {
			return false
		}
		at, end := i+j, i+j+len(id)
		if (at == 0 || !idByte(s[at-1])) && (end == len(s) || !idByte(s[end])) {
			return true
		}
		i = at + 1
	}
}

// idByte: the characters of a protocol id ([A-Za-z0-9._:-]).
func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
}

// MaterialChange reports whether next, a fresh disclosure of an item,
// differs materially from prev, the one last published for it, and why.
// Material is: another capacity state; the start window's from moved,
// later or earlier, by more than max(threshold, 25% of the previous wait
// (prev from − prev computedAt)); or the estimated completion moved by more
// than max(threshold, 25% of the previous time to completion). Confidence
// alone and the window's to are not material: they follow from the rest.
func MaterialChange(prev, next protocol.ScheduleDisclosure, threshold time.Duration) (bool, string) {
	if prev.CapacityState != next.CapacityState {
		return true, fmt.Sprintf("capacity %s to %s", prev.CapacityState, next.CapacityState)
	}
	at := prev.ComputedAt.Time
	if moved, why := shifted("start", prev.EstimatedStartWindow.From.Time, next.EstimatedStartWindow.From.Time, at, threshold); moved {
		return true, why
	}
	return shifted("completion", prev.EstimatedCompletion.Time, next.EstimatedCompletion.Time, at, threshold)
}

// shifted applies the tolerance max(threshold, 25% of prev − at) to one
// estimate.
func shifted(what string, prev, next, at time.Time, threshold time.Duration) (bool, string) {
	tol := max(threshold, max(prev.Sub(at), 0)/4)
	d := next.Sub(prev)
	switch {
	case d > tol:
		return true, fmt.Sprintf("%s later by %s", what, d.Round(time.Second))
	case -d > tol:
		return true, fmt.Sprintf("%s earlier by %s", what, (-d).Round(time.Second))
	}
	return false, ""
}

// noticeBudget is a token bucket for the worker's own messages: burst at
// once, then one every `every`. It keeps the worker well inside the
// authority's message rate (spec 20), which also counts other traffic.
type noticeBudget struct {
	every time.Duration
	// credit is saved-up time, up to burst tokens' worth; a message costs
	// every. Integer time keeps take and nextAt exact: with float tokens
	// nextAt could name a moment at which take still refused.
	credit, max time.Duration
	last        time.Time
}

func newNoticeBudget(burst int, every time.Duration, now time.Time) noticeBudget {
	max := time.Duration(burst) * every
	return noticeBudget{every: every, credit: max, max: max, last: now}
}

func (b *noticeBudget) refill(now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.credit = min(b.max, b.credit+el)
		b.last = now
	}
}

// take spends one token if there is one at now.
func (b *noticeBudget) take(now time.Time) bool {
	b.refill(now)
	if b.credit < b.every {
		return false
	}
	b.credit -= b.every
	return true
}

// nextAt is when the next token is there.
func (b *noticeBudget) nextAt(now time.Time) time.Time {
	b.refill(now)
	if b.credit >= b.every {
		return now
	}
	return now.Add(b.every - b.credit)
}
