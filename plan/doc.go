// Package plan reads plan files: a Mission and its stages as a DAG, in
// YAML (or JSON), which a coordinator turns into mission.create and one
// work.authorize per stage without writing Go. The format is
// docs/plans.md; Schema is its JSON Schema.
//
// Parse reports every problem of a file at once, each with its line and
// column: YAML syntax, unknown members, wrong types and other schema
// violations (the schema error's instance location is mapped back to the
// YAML node), and what the schema cannot say: duplicate stage ids,
// dependencies and reviews naming unknown stages, dependency cycles (named),
// version ranges, deadlines, stage budgets over the Mission's.
//
// A stage's WorkItem id is the Mission id, ":" and the stage id; its
// contract id is that and ":contract". Stage ids hold no ':', so the
// derivation is reversible and two plans of the same Mission give their
// stages the same ids: re-authorizing is idempotent by id.
//
// The package is pure: bytes in, a Plan or problems out; no files, no
// clock (Contract takes the start time), no goroutines.
package plan
