package protocol

import (
	"strconv"
	"strings"
)

// VersionSatisfies reports whether the semantic version offered (as in an
// Agent Card: MAJOR.MINOR.PATCH, pre-release and build ignored) meets the
// requirement: "*"; an exact "1.2.3"; "1", "1.x" or "1.x.x" (any 1.*);
// "1.2" or "1.2.x" (any 1.2.*); "^1.2.3" (same major, at least 1.2.3;
// for major 0, same minor). Anything else does not match.
func VersionSatisfies(offered, required string) bool {
	have, ok := parseVersion(offered, false)
	if !ok || len(have) != 3 {
		return false
	}
	if required == "*" {
		return true
	}
	if rest, caret := strings.CutPrefix(required, "^"); caret {
		want, ok := parseVersion(rest, false)
		if !ok {
			return false
		}
		for len(want) < 3 {
			want = append(want, 0)
		}
		if have[0] != want[0] || want[0] == 0 && have[1] != want[1] {
			return false
		}
		for i := range 3 {
			if have[i] != want[i] {
				return have[i] > want[i]
			}
		}
		return true
	}
	want, ok := parseVersion(required, true)
	if !ok {
		return false
	}
	for i, w := range want {
		if have[i] != w {
			return false
		}
	}
	return true
}

// parseVersion reads up to three dot-separated numbers. With wildcards, a
// trailing "x" (or "*") ends the prefix that must match.
func parseVersion(s string, wildcards bool) ([]uint64, bool) {
	if i := strings.IndexAny(s, "-+"); i >= 0 && !wildcards {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return nil, false
	}
	var out []uint64
	for i, p := range parts {
		if wildcards && (p == "x" || p == "X" || p == "*") {
			for _, q := range parts[i+1:] {
				if q != "x" && q != "X" && q != "*" {
					return nil, false
				}
			}
			return out, len(out) > 0
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil || p == "" || (len(p) > 1 && p[0] == '0') {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}
