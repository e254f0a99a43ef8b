package slots

import "testing"

func TestVersionSatisfies(t *testing.T) {
	for _, tc := range []struct {
		offered, required string
		want              bool
	}{
		{"1.2.3", "*", true},
		{"1.2.3", "1.2.3", true},
		{"1.2.4", "1.2.3", false},
		{"1.2.3", "1", true},
		{"1.2.3", "1.x", true},
		{"1.2.3", "1.x.x", true},
		{"2.0.0", "1.x", false},
		{"1.2.3", "1.2", true},
		{"1.2.3", "1.2.x", true},
		{"1.3.0", "1.2.x", false},
		{"1.2.3", "^1.2", true},
		{"1.2.3", "^1.2.3", true},
		{"1.9.0", "^1.2.3", true},
		{"1.2.2", "^1.2.3", false},
		{"2.0.0", "^1.2", false},
		{"0.3.1", "^0.3", true},
		{"0.4.0", "^0.3", false},
		{"1.2.3-rc.1", "1.2.3", true},
		{"1.2.3+build", "1.x", true},
		{"1.2", "1.x", false},    // offered must be full semver
		{"1.2.3", "x.1", false},  // a wildcard ends the pattern
		{"1.2.3", "01.x", false}, // no leading zeros
		{"1.2.3", "1.2.3.4", false},
		{"1.2.3", "", false},
		{"1.2.3", ">=1.0", false},
	} {
		if got := VersionSatisfies(tc.offered, tc.required); got != tc.want {
			t.Errorf("VersionSatisfies(%q, %q) = %v", tc.offered, tc.required, got)
		}
	}
}
