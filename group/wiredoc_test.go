package group

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// TestWireDocPointers keeps docs/wire.md's table of where epochs and lease
// ids appear true: every /payload/<member> it names for an event type is a
// member of that type's payload.
func TestWireDocPointers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "wire.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z][a-z0-9_.]+)`[^|]*\\| (.*/payload/.*) \\|$")
	ptr := regexp.MustCompile("/payload/([A-Za-z]+)")
	rows := 0
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		r, ok := Events[protocol.EventType(m[1])]
		if !ok {
			continue
		}
		rows++
		members := jsonMembers(r.Payload)
		for _, p := range ptr.FindAllStringSubmatch(m[2], -1) {
			if !members[p[1]] {
				t.Errorf("wire.md: %s has no payload member %q", m[1], p[1])
			}
		}
	}
	if rows < 10 {
		t.Fatalf("found %d event rows in wire.md; did the table move?", rows)
	}
}

// jsonMembers lists the JSON member names of a struct type, embedded
// structs included.
func jsonMembers(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k := range jsonMembers(f.Type) {
				out[k] = true
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}
