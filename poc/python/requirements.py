"""The requirements analysis stage in Python: the feature request (a
contract input) becomes a requirements note, human-readable, with the
feature spec in a fenced block that the implementation reads back
(poc.FeatureFromNote)."""

import json
import re

import mwpslot
import stage

SPEC_FENCE = "```json feature-spec\n"
KEYS = ["id", "package", "file", "func", "signature", "doc", "body", "cases", "changelog"]
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate(f):
    """The checks of poc.Feature.Validate that a note needs to be read back."""
    if not isinstance(f, dict) or sorted(f) != sorted(KEYS):
        raise mwpslot.PermanentError("feature request: members must be exactly %s" % ", ".join(KEYS))
    problems = []
    if not f["id"]:
        problems.append("id is required")
    if not IDENT.match(f["package"]):
        problems.append("package %r is not an identifier" % f["package"])
    if not IDENT.match(f["func"]) or not f["func"][0].isupper():
        problems.append("func %r is not an exported identifier" % f["func"])
    if not re.match(r"^[a-z][a-z0-9_]*$", f["file"]):
        problems.append("file %r is not a plain lower-case name" % f["file"])
    if not f["signature"].startswith("("):
        problems.append("signature must start with the parameter list")
    if not f["body"]:
        problems.append("the body is empty")
    if not f["cases"] or any(sorted(c) != ["args", "want"] for c in f["cases"]):
        problems.append("acceptance test cases need args and want")
    if "\n" in f["changelog"] or "\r" in f["changelog"]:
        problems.append("the changelog line spans lines")
    if problems:
        raise mwpslot.PermanentError("feature %s: %s" % (f.get("id"), "; ".join(problems)))
    return f


def note(f, source):
    # The canonical form (JCS) poc.RequirementsNote writes, for this content.
    spec = json.dumps(f, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    out = ["# Requirements: %s.%s\n\nSource: feature request `%s`\n\n" % (f["package"], f["func"], source),
           "## Function\n\n`func %s%s` in package `%s`, file `%s/%s.go`.\n\n%s\n\n" % (
               f["func"], f["signature"], f["package"], f["package"], f["file"], f["doc"]),
           "## Acceptance test cases\n\n| call | want |\n| --- | --- |\n"]
    for c in f["cases"]:
        out.append("| `%s(%s)` | `%s` |\n" % (f["func"], c["args"], c["want"]))
    out.append("\n## Changelog\n\n%s\n\n## Spec\n\n%s%s\n```\n" % (f["changelog"], SPEC_FENCE, spec))
    return "".join(out).encode("utf-8")


def read(job):
    d, raw = job.slot.fetch(name="feature-request")
    try:
        f = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise mwpslot.PermanentError("feature request: %s" % e)
    job.scratch["feature"], job.scratch["source"] = validate(f), d


def write(job):
    f = job.scratch["feature"]
    d = job.publish("text/markdown", note(f, job.scratch["source"]))
    job.check("requirements-note", True, "requirements note written from the validated feature request", "", [d])
    job.check("test-cases", len(f["cases"]) > 0, "acceptance cases listed", "%d cases" % len(f["cases"]), [d])


if __name__ == "__main__":
    mwpslot.main(lambda slot: stage.run(slot, [("read feature request", True, read)], ("write requirements note", write)))
