"""The code review stage in Python: a rule-based review of the patch (a
contract input) against its test report. The rules are poc.ReviewDiff's:
the patch parses and was applied by the testing stage, adds no
TODO/FIXME/XXX, changes a _test.go file when it changes Go code, leaves
the Go files it creates gofmt-clean (--gofmt PATH; a file it only modifies
is checked by the coordinator's review, which holds the base tree), and
passed its tests."""

import json
import re
import subprocess

import mwpslot
import stage

HUNK = re.compile(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@")


def parse_patch(patch):
    """[{path, created, added, removed}] of a unified diff, or ValueError."""
    lines, files, i = patch.split("\n"), [], 0
    while i < len(lines):
        if lines[i] == "":
            i += 1
            continue
        if not lines[i].startswith("--- ") or i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise ValueError("patch line %d: expected a ---/+++ header" % (i + 1))
        old, new = lines[i][4:].strip(), lines[i + 1][4:].strip()
        if new == "/dev/null":
            path, created = old[2:], False
        else:
            path, created = new[2:], old == "/dev/null"
        if not path or path.startswith("/") or "/../" in "/" + path + "/":
            raise ValueError("patch line %d: unsafe path %r" % (i + 1, path))
        f = {"path": path, "created": created, "added": [], "removed": []}
        i += 2
        hunks = 0
        while i < len(lines) and lines[i].startswith("@@ "):
            m = HUNK.match(lines[i])
            if not m:
                raise ValueError("patch line %d: bad hunk header" % (i + 1))
            on, nn = int(m.group(2)), int(m.group(4))
            i += 1
            while on > 0 or nn > 0:
                if i >= len(lines) or lines[i] == "":
                    raise ValueError("patch line %d: short hunk" % (i + 1))
                l = lines[i]
                if l[0] == " ":
                    on, nn = on - 1, nn - 1
                elif l[0] == "-":
                    on -= 1
                    f["removed"].append(l[1:])
                elif l[0] == "+":
                    nn -= 1
                    f["added"].append(l[1:])
                elif l[0] != "\\":
                    raise ValueError("patch line %d: bad hunk line" % (i + 1))
                i += 1
            hunks += 1
        if not hunks:
            raise ValueError("patch: %s has no hunk" % path)
        files.append(f)
    if not files:
        raise ValueError("patch: no file changes")
    return files


def gofmt_clean(gofmt, src):
    r = subprocess.run([gofmt], input=src.encode("utf-8"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return r.returncode == 0 and r.stdout.decode("utf-8") == src


def review(patch, report, gofmt):
    """(files, findings) for patch and its test report."""
    findings = []

    def find(rule, blocking, detail, path=""):
        findings.append({"file": path, "rule": rule, "blocking": blocking, "detail": detail})
    try:
        files = parse_patch(patch)
    except ValueError as e:
        find("patch-applies", True, str(e))
        return [], findings
    if not report.get("applied"):
        find("patch-applies", True, "the testing stage could not apply the patch")
    go = [f for f in files if f["path"].endswith(".go")]
    for f in files:
        for l in f["added"]:
            for marker in ("TODO", "FIXME", "XXX"):
                if marker in l:
                    find("no-" + marker.lower(), True, l.strip(), f["path"])
    for f in go:
        if not f["created"]:
            find("gofmt", False, "modified, not created: checked by the coordinator's review", f["path"])
        elif gofmt and not gofmt_clean(gofmt, "\n".join(f["added"]) + "\n"):
            find("gofmt", True, "not gofmt-clean", f["path"])
    if go and not any(f["path"].endswith("_test.go") for f in go):
        find("tests-touched", True, "Go code changed without a _test.go change")
    if not report.get("passed"):
        find("tests-pass", True, "the test report for %s says fail" % report.get("patch"))
    return files, findings


def notes(files, findings, pd, rd):
    out = ["# Code review\n\nPatch `%s`, test report `%s`.\n\n## Files\n\n" % (pd, rd)]
    for f in files:
        out.append("- `%s`: +%d \u2212%d%s\n" % (f["path"], len(f["added"]), len(f["removed"]), " (new)" if f["created"] else ""))
    out.append("\n## Findings\n\n")
    if not findings:
        out.append("None. Approved.\n")
    for f in findings:
        out.append("- %s %s `%s`: %s\n" % ("blocking" if f["blocking"] else "note", f["rule"], f["file"], f["detail"]))
    out.append("\n_Reviewed by the Python review stage._\n")
    return "".join(out).encode("utf-8")


def read(job):
    pd, patch = job.slot.fetch(name="patch")
    rd, raw = job.slot.fetch(name="test-report")
    try:
        rep = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise mwpslot.PermanentError("test report: %s" % e)
    if rep.get("patch") != pd:
        raise mwpslot.PermanentError("the test report is for %s, not the patch under review %s" % (rep.get("patch"), pd))
    job.scratch.update(patch=patch.decode("utf-8"), pd=pd, report=rep, rd=rd)


def write(job):
    s = job.scratch
    files, findings = review(s["patch"], s["report"], stage.args().get("gofmt"))
    d = job.publish("text/markdown", notes(files, findings, s["pd"], s["rd"]))
    job.check("review-notes", len(files) > 0, "notes list every changed file", "%d files" % len(files), [d, s["pd"]])
    job.check("review-findings", not any(f["blocking"] for f in findings), "rule-based review of the diff",
              "%d findings" % len(findings), [d, s["pd"], s["rd"]])


if __name__ == "__main__":
    mwpslot.main(lambda slot: stage.run(slot, [("read diff and test report", True, read)], ("review", write)))
