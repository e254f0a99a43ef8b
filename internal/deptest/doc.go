// Package deptest holds the module's import rules and the test that
// enforces them (deptest_test.go), in the manner of tailscale's
// tstest/deptest: docs/design.md §2 says which way dependencies point and which
// packages are pure, and a rule only a document states is broken by the
// first convenient import. One table names every package of the module,
// the module packages it may import, what it must never link, and, for the
// pure cores, the wall-clock calls and go statements their source may not
// contain. A package without a row fails the test, so whoever adds one
// decides where it stands.
//
// Only non-test code is ruled: tests may reach across (runtime's
// end-to-end tests start an embedded authority-lite).
package deptest
