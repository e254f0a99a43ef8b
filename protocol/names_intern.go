package protocol

import (
	"encoding/json"
	"io/fs"
	"sync"
)

// Member names repeat in every document: the parser takes the names the
// embedded schemas define from one table instead of allocating each again
// (a Command has about thirty members, an Event as many).

// maxInternedName bounds the names looked up; longer ones are never in the table.
const maxInternedName = 64

// internedNames maps each property name of the embedded schemas to itself.
var internedNames = sync.OnceValue(func() map[string]string {
	names := map[string]string{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if props, ok := e.(map[string]any); ok && k == "properties" {
					for name := range props {
						if len(name) <= maxInternedName {
							names[name] = name
						}
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	_ = fs.WalkDir(schemaFiles, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := schemaFiles.ReadFile(path)
		if err != nil {
			return nil
		}
		var v any
		if json.Unmarshal(data, &v) == nil {
			walk(v)
		}
		return nil
	})
	return names
})

// nameTable is internedNames as an open-addressed table under FNV-1a, the
// hash memberName computes while it looks for the closing quote.
type nameTable struct {
	slots []string
	mask  uint32
}

var internedTable = sync.OnceValue(func() *nameTable {
	names := internedNames()
	size := 1
	for size < 4*len(names) {
		size <<= 1
	}
	t := &nameTable{slots: make([]string, size), mask: uint32(size - 1)}
	for name := range names {
		h := uint32(fnvOffset)
		for i := 0; i < len(name); i++ {
			h = (h ^ uint32(name[i])) * fnvPrime
		}
		for i := h & t.mask; ; i = (i + 1) & t.mask {
			if t.slots[i] == "" {
				t.slots[i] = name
				break
			}
		}
	}
	return t
})

const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// lookup returns the table's string equal to b, which hashes to h.
func (t *nameTable) lookup(b []byte, h uint32) (string, bool) {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == "" {
			return "", false
		}
		if s == string(b) {
			return s, true
		}
	}
}

// memberName is str for a member name: a plain ASCII name in the table is
// the table's string; anything else takes str.
func (p *parser) memberName() (string, error) {
	start := p.pos + 1
	h := uint32(fnvOffset)
	for i := start; i < len(p.data) && i-start <= maxInternedName; i++ {
		c := p.data[i]
		if c == '"' {
			if i > start {
				if s, ok := p.names.lookup(p.data[start:i], h); ok {
					p.pos = i + 1
					return s, nil
				}
			}
			break
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		h = (h ^ uint32(c)) * fnvPrime
	}
	return p.str()
}
