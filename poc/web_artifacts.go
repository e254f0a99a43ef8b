package poc

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/missionweave/mwp-worker/protocol"
)

// artifact serves the bytes of an artifact that a pending Mission lists,
// after checking them against its manifest. Only text that a browser shows
// as text is inline; everything else, HTML included, is an attachment, and
// a sandbox CSP keeps any active content inert.
func (s *ApprovalServer) artifact(w http.ResponseWriter, r *http.Request) {
	digest := r.PathValue("digest")
	if !validDigest(digest) {
		http.Error(w, "not a sha256 content hash", http.StatusBadRequest)
		return
	}
	list, err := s.src.Pending(r.Context())
	if err != nil {
		http.Error(w, "cannot list pending missions", http.StatusBadGateway)
		return
	}
	m, ok := manifestFor(list, digest)
	if !ok {
		http.Error(w, "no mission awaiting approval lists this artifact", http.StatusNotFound)
		return
	}
	data, err := FetchArtifact(r.Context(), s.src, m)
	if err != nil {
		s.log.Warn("approval page: artifact refused", "contentHash", digest, "err", err)
		http.Error(w, "artifact bytes do not match their manifest: "+string(protocol.CodeOf(err)), http.StatusBadGateway)
		return
	}
	mediaType, inline := artifactContentType(m.MediaType)
	h := w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("X-Content-Type-Options", "nosniff")
	disposition := "attachment"
	if inline {
		disposition = "inline"
	}
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": artifactFileName(m)}))
	_, _ = w.Write(data)
}

func manifestFor(list []PendingMission, digest string) (protocol.ArtifactManifest, bool) {
	for _, p := range list {
		for _, m := range p.Artifacts {
			if m.ContentHash == digest {
				return m, true
			}
		}
	}
	return protocol.ArtifactManifest{}, false
}

func validDigest(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// artifactContentType returns the media type to serve (the manifest's when
// it parses, else application/octet-stream) and whether it may be inline.
func artifactContentType(manifestType string) (string, bool) {
	mt, params, err := mime.ParseMediaType(manifestType)
	if err != nil {
		return "application/octet-stream", false
	}
	inline := strings.HasPrefix(mt, "text/") && mt != "text/html" && mt != "text/xml" && mt != "text/javascript" && mt != "text/css"
	return mime.FormatMediaType(mt, params), inline
}

// artifactFileName names a download after its work item and hash, never
// after anything a producer chose freely.
func artifactFileName(m protocol.ArtifactManifest) string {
	ext := ".bin"
	mt, _, _ := mime.ParseMediaType(m.MediaType)
	switch mt {
	case "text/x-diff", "text/x-patch":
		ext = ".diff"
	case "text/plain":
		ext = ".txt"
	case "text/markdown":
		ext = ".md"
	case "application/json":
		ext = ".json"
	case "text/html":
		ext = ".html"
	}
	name := shortDigest(m.ContentHash) + ext
	if validID(m.WorkItemID) {
		name = m.WorkItemID + "-" + name
	}
	return name
}

// shortDigest is the first 12 hex digits of a sha256 digest, for display.
func shortDigest(d string) string {
	h := strings.TrimPrefix(d, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}
