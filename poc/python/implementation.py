"""The implementation stage in Python: the feature spec (read back from the
requirements note, or the feature request when the mission has none)
becomes the function's source and a table-driven test, gofmt'd (--gofmt
PATH), and the changelog line, published as a unified diff against the
baseline project (--project, a JSON {path: text}) or, for a rework, against
the already verified base-patch with the human's requested changes. The Go
twin is poc.ImplementationHandler (ImplementFeature, UnifiedDiff)."""

import json
import subprocess

import mwpslot
import patch
import requirements
import stage


def project():
    with open(stage.args()["project"], encoding="utf-8") as f:
        return json.load(f)


def base(slot):
    """The tree a patch applies to: the baseline, with the verified
    base-patch applied when the contract names one."""
    t = project()
    if "base-patch" in slot.input_names():
        try:
            t, _ = patch.apply(t, slot.input("base-patch").decode("utf-8"))
        except ValueError as e:
            raise mwpslot.PermanentError("base-patch: %s" % e)
    return t


def feature(slot):
    if "requirements-note" in slot.input_names():
        note = slot.input("requirements-note").decode("utf-8")
        _, fence, rest = note.partition(requirements.SPEC_FENCE)
        block, end, _ = rest.partition("\n```")
        if not fence:
            raise mwpslot.PermanentError("requirements note: no feature-spec block")
        if not end:
            raise mwpslot.PermanentError("requirements note: unterminated feature-spec block")
        raw = block
    else:
        raw = slot.input("feature-request").decode("utf-8")
    try:
        return requirements.validate(json.loads(raw))
    except ValueError as e:
        raise mwpslot.PermanentError("feature request: %s" % e)


def go_quote(s):
    """Go's %q of a string."""
    esc = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
           "\\": "\\\\", '"': '\\"'}
    out = []
    for c in s:
        if c in esc:
            out.append(esc[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append("\\x%02x" % ord(c))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def gofmt(src, what, fid):
    path = stage.args().get("gofmt")
    if not path:
        raise mwpslot.PermanentError("no gofmt to format the generated Go code")
    r = subprocess.run([path], input=src.encode("utf-8"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        raise mwpslot.PermanentError("feature %s: %s does not parse: %s" % (fid, what, r.stderr.decode("utf-8", "replace").strip()))
    return r.stdout.decode("utf-8")


def render(f):
    """The source and test files implementing feature f (poc.RenderFeature)."""
    src = "package %s\n\n// %s\nfunc %s%s {\n%s\n}\n" % (f["package"], f["doc"], f["func"], f["signature"], "\n".join(f["body"]))
    t = ["package %s\n\nimport \"testing\"\n\nfunc Test%s(t *testing.T) {\ncases := []struct {\nname string\ngot, want any\n}{\n"
         % (f["package"], f["func"])]
    for c in f["cases"]:
        call = "%s(%s)" % (f["func"], c["args"])
        t.append("{%s, %s, %s},\n" % (go_quote(call), call, c["want"]))
    t.append("}\nfor _, c := range cases {\nif c.got != c.want {\nt.Errorf(\"%s = %v, want %v\", c.name, c.got, c.want)\n}\n}\n}\n")
    return gofmt(src, "the body", f["id"]), gofmt("".join(t), "a test case", f["id"])


def implement(tree, f, changes):
    """tree with f implemented (poc.ImplementFeature): the source and test
    files (re)written, the changelog line (once) and the changes appended."""
    src, test = render(f)
    out = dict(tree)
    d = f["package"] + "/"
    out[d + f["file"] + ".go"] = src
    out[d + f["file"] + "_test.go"] = test
    log = out.get("CHANGELOG.md", "")
    if log and not log.endswith("\n"):
        log += "\n"
    entry = "- " + f["changelog"] + "\n"
    if entry not in log:
        log += entry  # a rework on top of the first patch keeps its entry
    for c in changes:
        log += "  - " + " ".join(c.split()) + "\n"
    out["CHANGELOG.md"] = log
    return out


def read(job):
    job.scratch["feature"] = feature(job.slot)
    changes = []
    if "change-request" in job.slot.input_names():
        try:
            changes = json.loads(job.slot.input("change-request").decode("utf-8")).get("changes") or []
        except (ValueError, AttributeError) as e:
            raise mwpslot.PermanentError("change request: %s" % e)
    job.scratch["changes"] = changes


def write(job):
    b = base(job.slot)
    diff = patch.unified_diff(b, implement(b, job.scratch["feature"], job.scratch["changes"]))
    try:
        _, files = patch.apply(b, diff)
        applies = True
    except ValueError:
        files, applies = [], False
    go = any(p.endswith(".go") for p in files)
    tests = any(p.endswith("_test.go") for p in files)
    job.vals.update(patch=diff, applies=applies, files=len(files), tests=tests or not go)


def publish(job):
    v = job.vals
    d = job.publish("text/x-diff", v["patch"].encode("utf-8"))
    job.check("patch-applies", v["applies"], "patch applied to a fresh copy of the baseline", "%d files" % v["files"], [d])
    job.check("tests-touched", v["tests"], "patch lists a _test.go file when it changes Go code", "", [d])


if __name__ == "__main__":
    mwpslot.main(lambda slot: stage.run(slot, [("read requirements", True, read), ("write code and test", False, write)],
                                        ("publish patch", publish)))
