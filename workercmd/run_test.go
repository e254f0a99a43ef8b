package workercmd

import "testing"

func TestAgentOfKey(t *testing.T) {
	for _, tc := range []struct {
		keyID, id string
		ok        bool
	}{
		{"agent:w1#k1", "w1", true},
		{"agent:worker-7.eu#main", "worker-7.eu", true},
		{"human:alice#k1", "", false},
		{"agent:#k1", "", false},
		{"agent:w1", "", false},
		{"key-abc", "", false},
	} {
		id, ok := agentOfKey(tc.keyID)
		if id != tc.id || ok != tc.ok {
			t.Errorf("agentOfKey(%q) = %q, %v; want %q, %v", tc.keyID, id, ok, tc.id, tc.ok)
		}
	}
}
