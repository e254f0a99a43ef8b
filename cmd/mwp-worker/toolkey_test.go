package main

import (
	"strings"
	"testing"
)

func TestToolkey(t *testing.T) {
	base := func(epoch string, extra ...string) []string {
		return append([]string{"toolkey", "--mission", "mis-a", "--work-item", "wi-7", "--epoch", epoch, "--op", "git.push"}, extra...)
	}
	// Expected keys computed with Python's json.dumps + hashlib (see toolkeys/key_test.go).
	ok := []struct {
		args []string
		out  string
	}{
		{base("3"), "tk1_YNCUCLf05YCkbOdlju2Rje5ZwkH6NSCzAHizKMcXbl0\n"},
		{base("0"), "tk1_ZscHHNKYhZn0REreNXstvl1Hb_RfwvZq-M91_KwUbiU\n"},
		{base("9007199254740991"), "tk1_6Zmzb6hwMjSV1pVTEokfaXb-6nfI7lVVue3NLZM8hbI\n"},
		{base("3", "--attempt", "1"), "tk1_YNCUCLf05YCkbOdlju2Rje5ZwkH6NSCzAHizKMcXbl0.1\n"},
		{base("3", "--attempt", "12"), "tk1_YNCUCLf05YCkbOdlju2Rje5ZwkH6NSCzAHizKMcXbl0.12\n"},
		{[]string{"toolkey", "--op=déployer", "--epoch=12", "--work-item=工作-7", "--mission=misión-ñ"}, "tk1_wekrlZJR0fgrA8XI7ggVd4vKK8i_xnXRDEac7B4AWys\n"},
		{[]string{"toolkey", "--mission", "m\u2028n", "--work-item", "w\u2029x", "--epoch", "5", "--op", "op"}, "tk1_QftuV1YeH9EXyWgC3oSUMlAoRzAJwJAHuiRuEtszeMs\n"},
		{[]string{"toolkey", "--mission", `say "hi"`, "--work-item", `back\slash`, "--epoch", "7", "--op", "q/op"}, "tk1_JWQwqPds5FVZUL2sCNDkByJfiQsSLZ2xcuSLzFnEUDw\n"},
		{[]string{"toolkey", "--mission", "emoji-\U0001F680", "--work-item", "wi-\U0001F9EA", "--epoch", "1", "--op", "\U0001F4E6.upload"}, "tk1_P3xGY30ohb_HkmHsqNtPvdB8DJJyssue88MTntstRZQ\n"},
	}
	for _, c := range ok {
		code, out, errOut := runCLI(t, c.args...)
		if code != 0 || out != c.out || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", c.args, code, out, errOut, c.out)
		}
	}

	// A bad value exits 1; a bad command line (usage_test.go) exits 2.
	bad := []struct {
		args []string
		msg  string // in stderr
		code int
	}{
		{base("-1"), "--epoch", 1},
		{base("9007199254740992"), "--epoch", 1},
		{base("18446744073709551616"), "--epoch", 1},
		{base("abc"), "--epoch", 1},
		{base("1.5"), "--epoch", 1},
		{base("1e3"), "--epoch", 1},
		{base("+3"), "--epoch", 1},
		{base(" 3"), "--epoch", 1},
		{base(""), "--epoch", 1},
		{base("3", "--attempt", "0"), "--attempt", 1},
		{base("3", "--attempt", "-2"), "--attempt", 1},
		{base("3", "--attempt", "x"), "--attempt", 1},
		{base("3", "extra"), "no arguments", exitUsage},
		{base("3", "--bogus"), "bogus", exitUsage},
		{[]string{"toolkey", "--mission", "m", "--epoch", "1", "--op", "x"}, "work-item", exitUsage},
		{[]string{"toolkey"}, "Required flags", exitUsage},
		{[]string{"toolkey", "--mission", "", "--work-item", "w", "--epoch", "1", "--op", "x"}, "mission id is required", 1},
		{[]string{"toolkey", "--mission", "m", "--work-item", "w", "--epoch", "1", "--op", ""}, "operation id is required", 1},
		{[]string{"toolkey", "--mission", "m\xff", "--work-item", "w", "--epoch", "1", "--op", "x"}, "not valid UTF-8", 1},
	}
	for _, c := range bad {
		code, out, errOut := runCLI(t, c.args...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.msg) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, one line on stderr with %q", c.args, code, out, errOut, c.code, c.msg)
		}
	}
}
