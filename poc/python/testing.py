"""The testing stage in Python: the patch (a contract input) applied to a
fresh copy of the project in the run's private directory, then
`go test -count=1 ./...` (--go PATH) run as a tool call, so a run resumed
after the tests ran does not run them again; the test report is published
last. The Go twin is poc.TestingHandler (RunGoTest)."""

import json
import os
import shutil
import subprocess

import implementation
import mwpslot
import patch
import stage

COMMAND = "go test -count=1 ./..."
MAX_OUTPUT = 8 << 10  # bytes of go test output kept in a report


def workspace(tree):
    d = os.path.join(os.environ.get("MWP_WORKDIR") or os.getcwd(), "project")
    shutil.rmtree(d, ignore_errors=True)
    for p in sorted(tree):
        full = os.path.join(d, *p.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8", newline="") as f:
            f.write(tree[p])
    return d


def go_test(d):
    """The outcome of go test in d as JSON bytes: a failing test is a
    report, not an error. The environment pins the local toolchain and no
    workspace, so the scratch module builds on its own."""
    go = stage.args().get("go")
    if not go:
        raise mwpslot.PermanentError("no go command to run the tests")
    env = dict(os.environ, GOTOOLCHAIN="local", GOWORK="off", GOFLAGS="", CGO_ENABLED="0")
    r = subprocess.run([go, "test", "-count=1", "./..."], cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=600)
    out = r.stdout
    tests = sum(1 for l in out.decode("utf-8", "replace").split("\n") if l.startswith("ok ") or l.startswith("ok\t"))
    if len(out) > MAX_OUTPUT:
        out = "\u2026".encode("utf-8") + out[len(out) - MAX_OUTPUT:]
    rep = {"passed": r.returncode == 0 and tests > 0, "exitCode": r.returncode, "tests": tests,
           "output": out.decode("utf-8", "replace")}
    return json.dumps(rep).encode("utf-8")


def prepare(job):
    pd, raw = job.slot.fetch(name="patch")
    job.scratch["pd"] = pd
    b = implementation.base(job.slot)
    try:
        tree, _ = patch.apply(b, raw.decode("utf-8"))
        job.scratch["apply_err"] = None
    except ValueError as e:
        tree, job.scratch["apply_err"] = b, str(e)
    job.scratch["dir"] = workspace(tree)


def run_tests(job):
    pd = job.scratch["pd"]
    rep = {"patch": pd, "applied": False, "passed": False, "exitCode": -1, "command": COMMAND, "tests": 0, "output": ""}
    if job.scratch["apply_err"] is not None:
        rep["output"] = "patch does not apply: " + job.scratch["apply_err"]
    else:
        out = job.slot.tool_call("go-test:" + pd, "go", "exec", "low", lambda key: go_test(job.scratch["dir"]))
        r = json.loads(out.decode("utf-8"))
        rep.update(applied=True, passed=r["passed"], exitCode=r["exitCode"], tests=r["tests"], output=r["output"])
    job.vals["report"] = rep


def publish(job):
    rep = job.vals["report"]
    d = job.publish("application/json", json.dumps(rep, indent=2, ensure_ascii=False).encode("utf-8"))
    job.check("test-report", rep["passed"], COMMAND + " on the patched project", "pass" if rep["passed"] else "fail",
              [d, rep["patch"]])


if __name__ == "__main__":
    mwpslot.main(lambda slot: stage.run(slot, [("prepare workspace", True, prepare), ("go test", False, run_tests)],
                                        ("write test report", publish)))
