package protocol

import "strings"

// MediaTypeSchemaBase prefixes the schema a manifest names when neither
// its producer nor the WorkItem's contract names one (spec 13.1 makes the
// schema a MUST): the media type's registration at IANA, which claims no
// structure beyond the media type itself.
const MediaTypeSchemaBase = "https://www.iana.org/assignments/media-types/"

// ManifestSchema is the schema a manifest carries: named when the
// producer or the contract names one, else the media type's default,
// MediaTypeSchemaBase followed by the type without its parameters, in
// lower case.
func ManifestSchema(named, mediaType string) string {
	if named != "" {
		return named
	}
	base, _, _ := strings.Cut(mediaType, ";")
	return MediaTypeSchemaBase + strings.ToLower(strings.TrimSpace(base))
}
