package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
)

var updateConfigDoc = flag.Bool("update-config-doc", false, "rewrite docs/configuration.md from the commands' flags")

// configDoc renders every flag of the long-running commands as one table
// per command: docs/configuration.md is this output, so it cannot drift.
func configDoc() string {
	var b strings.Builder
	b.WriteString("# Configuration\n\n")
	b.WriteString("Every flag of the long-running commands, its environment variable and its default. Generated from\n")
	b.WriteString("the commands themselves (`go test ./cmd/mwp-worker -run TestConfigDoc -update-config-doc`); a test\n")
	b.WriteString("fails when this page and the flags disagree. What the endpoints, logs and exit statuses mean is in\n")
	b.WriteString("[operations.md](operations.md).\n")
	serve := authorityCommand().Commands[0]
	for _, c := range []struct {
		title string
		cmd   *cli.Command
		notes string // prose after the table
	}{{"mwp-worker run", runCommand(), admissionNotes}, {"mwp-worker up", upCommand(), upNotes}, {"mwp-worker authority serve", serve, ""},
		{"mwp-worker mission status", missionStatusCommand(), ""}, {"mwp-worker coordinator run", coordinatorCommand().Commands[0], ""}} {
		fmt.Fprintf(&b, "\n## `%s`\n\n| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n", c.title)
		for _, f := range c.cmd.Flags {
			d, ok := f.(cli.DocGenerationFlag)
			if !ok {
				continue
			}
			name := "--" + f.Names()[0]
			if d.TakesValue() {
				name += " " + strings.ToUpper(d.TypeName())
			}
			env := strings.Join(d.GetEnvVars(), ", ")
			if env != "" {
				env = "`" + env + "`"
			}
			def := d.GetDefaultText()
			if def == "" {
				def = d.GetValue()
			}
			if def == `""` || def == "[]" || def == "false" {
				def = ""
			}
			if def != "" {
				def = "`" + strings.Trim(def, `"`) + "`"
			}
			if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
				def = "required"
			}
			usage := strings.ReplaceAll(d.GetUsage(), "|", `\|`)
			usage = strings.ReplaceAll(usage, "`", "")
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, env, def, usage)
		}
		if c.notes != "" {
			b.WriteString("\n" + c.notes)
		}
	}
	return b.String()
}

// upNotes point up's --cost and --limit to run's explanation.
const upNotes = "`up`'s worker takes `--cost` and `--limit` (`MWP_COSTS`, `MWP_LIMITS`) as `run` does: see\n" +
	"[Admission: costs and limits](#admission-costs-and-limits).\n"

// admissionNotes explain run's --cost and --limit, which the table can
// only name.
const admissionNotes = `### Admission: costs and limits

Admission control (spec 10.3) judges an offer in all six budget dimensions (` + "`money`, `tokens`, `toolCalls`, `computeSeconds`, `wallClockSeconds`, `sideEffects`" + `):

- **cost**: the expected cost of one run of a capability, ` + "`--cost CAP:DIM=N`" + ` per capability and dimension
  (` + "`MWP_COSTS`" + `, comma- or newline-separated). An item's expected cost is the sum over its required
  capabilities; a dimension not given costs 0. An offer whose contract budget does not cover its
  expected cost in some dimension is refused, the refusal naming the dimension. Wall-clock is not
  given here: it is ` + "`--estimate`" + `, then the mean of the runs observed per capability.
- **limit**: the most the accepted, unfinished items may hold at once, ` + "`--limit DIM=N`" + ` (` + "`MWP_LIMITS`" + `); an
  offer that would take the worker past one is refused. A dimension not given has no limit.
- Money, compute and wall-clock seconds take numbers, the others whole numbers, all ≥ 0. Without
  either flag (the default) a worker compares wall-clock only: its estimate against the contract's
  ` + "`wallClockSeconds`" + ` budget.

` + "```sh" + `
mwp-worker run --data /var/lib/mwp --key worker.key \
    --cost code.review:tokens=20000,code.review:money=0.40 --cost code.implement:toolCalls=30 \
    --limit money=25 --limit tokens=500000
# or in an EnvironmentFile:
MWP_COSTS=code.review:tokens=20000,code.review:money=0.40,code.implement:toolCalls=30
MWP_LIMITS=money=25,tokens=500000
` + "```" + `
`

func TestConfigDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	want := configDoc()
	if *updateConfigDoc {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("docs/configuration.md is not what the flags say; run go test ./cmd/mwp-worker -run TestConfigDoc -update-config-doc")
	}
}
