package protocol

import "testing"

func TestManifestSchema(t *testing.T) {
	for _, tc := range []struct{ named, mediaType, want string }{
		{"https://schemas.example/diff", "text/x-diff", "https://schemas.example/diff"},
		{"", "text/x-diff", "https://www.iana.org/assignments/media-types/text/x-diff"},
		{"", "Text/Plain; charset=utf-8", "https://www.iana.org/assignments/media-types/text/plain"},
	} {
		if got := ManifestSchema(tc.named, tc.mediaType); got != tc.want {
			t.Errorf("ManifestSchema(%q, %q) = %q, want %q", tc.named, tc.mediaType, got, tc.want)
		}
	}
}
