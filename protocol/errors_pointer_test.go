package protocol

import (
	"errors"
	"fmt"
	"testing"
)

func TestPointerOf(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{Errorf(CodeInvalidCommand, "x").At("/payload/a"), "/payload/a"},
		{fmt.Errorf("wrapped: %w", &Error{Code: CodeInvalidCommand, Details: map[string]any{"pointer": "/payload/b"}}), "/payload/b"},
		{&Error{Code: CodeInvalidCommand, Details: map[string]any{"pointer": 3}}, ""},
		{errors.New("plain"), ""},
		{nil, ""},
	}
	for _, c := range cases {
		if got := PointerOf(c.err); got != c.want {
			t.Errorf("PointerOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
