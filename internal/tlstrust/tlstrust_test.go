package tlstrust

import (
	"crypto/tls"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url      string
		insecure bool
		want     string // "" = error
	}{
		{"wss://authority.example:8443/mwp", false, "wss://authority.example:8443/mwp"},
		{"wss://authority.example:8443", false, "wss://authority.example:8443/mwp"},
		{"ws://127.0.0.1:8080/mwp", true, "ws://127.0.0.1:8080/mwp"},
		{"ws://[::1]:8080/mwp", true, "ws://[::1]:8080/mwp"},
		{"ws://localhost:8080/mwp", true, "ws://localhost:8080/mwp"},
		{"ws://127.0.0.1:8080/mwp", false, ""},
		{"ws://10.0.0.1:8080/mwp", true, ""},
		{"ws://authority.example/mwp", true, ""},
		{"https://authority.example/mwp", false, ""},
		{"wss:///mwp", false, ""},
		{"wss://user:pw@authority.example/mwp", false, ""},
		{"::bad", false, ""},
	}
	for _, tt := range tests {
		u, err := CheckURL(tt.url, tt.insecure)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("CheckURL(%q, %v) accepted", tt.url, tt.insecure)
		case tt.want != "" && (err != nil || u.String() != tt.want):
			t.Errorf("CheckURL(%q, %v) = %v, %v; want %s", tt.url, tt.insecure, u, err, tt.want)
		}
	}
}

// A pin is accepted only in its exact form; the system-roots default is
// TLS 1.3 with normal verification.
func TestTrustConfig(t *testing.T) {
	pin := Pin([]byte("x"))
	for _, bad := range []Trust{
		{Pin: pin, CAPEM: []byte("x")},
		{Pin: "sha256:" + strings.ToUpper(pin[7:])},
		{Pin: "sha1:" + pin[7:]},
		{Pin: pin[:len(pin)-2]},
		{CAPEM: []byte("not pem")},
	} {
		if _, err := bad.Config(); err == nil {
			t.Errorf("Config accepted %+v", bad)
		}
	}
	cfg, err := Trust{Pin: pin}.Config()
	if err != nil || cfg.MinVersion != tls.VersionTLS13 || cfg.VerifyConnection == nil {
		t.Fatalf("pinned config = %+v, %v", cfg, err)
	}
	if cfg, err := (Trust{}).Config(); err != nil || cfg.MinVersion != tls.VersionTLS13 || cfg.InsecureSkipVerify {
		t.Fatalf("system-roots config = %+v, %v", cfg, err)
	}
}
