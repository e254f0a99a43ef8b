package protocol

import (
	"errors"
	"fmt"
	"testing"
)

// A sender's metric label tells an answer from its absence: the code of a
// refusal, however wrapped, and "transport" only for an error the
// authority did not give.
func TestMetricResult(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "accepted"},
		{Errorf(CodeRateLimited, "slow down"), "RATE_LIMITED"},
		{fmt.Errorf("submit: %w", Errorf(CodeAuthForbidden, "no")), "AUTH_FORBIDDEN"},
		{Errorf(CodeInternalError, "disk"), "INTERNAL_ERROR"},
		{errors.New("connection reset"), "transport"},
	} {
		if got := MetricResult(tc.err); got != tc.want {
			t.Errorf("MetricResult(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
