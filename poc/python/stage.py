"""The PoC's step runner for its Python stages (the Go twin is runSteps in
poc/handlers.go): structured progress before each step, a checkpoint after
each (a safe point: the stage yields there when asked), setup steps redone
on resume, and one Evidence per acceptance criterion from the checks the
steps recorded. The outputs are published by the final step, just before
the result, so they always go out under the current lease."""

import datetime
import json
import sys

import mwpslot


def args():
    """The stage's --name value arguments (the Go side passes its constants)."""
    a, out = sys.argv[1:], {}
    for k, v in zip(a[::2], a[1::2]):
        out[k.lstrip("-")] = v
    return out


class ServiceError(Exception):
    """The PoC's local service answered with an error: status is its HTTP
    status (409 for a patch that does not apply)."""

    def __init__(self, status, message):
        super().__init__("%d: %s" % (status, message))
        self.status = status


def service(path, body):
    """POSTs body (a dict) to the PoC's local service named by --svc (the
    driver's integration repository and hold points) and returns its JSON
    answer; ServiceError when it refuses."""
    import http.client  # here: the load stages, which never call it, skip its import
    import urllib.parse
    u = urllib.parse.urlsplit(args()["svc"])
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    try:
        c.request("POST", u.path + path, body=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read().decode("utf-8", "replace")
    finally:
        c.close()
    if r.status != 200:
        raise ServiceError(r.status, data.strip())
    return json.loads(data)


def hold(slot, at):
    """Waits at the driver's hold point at ("safe-point") while one is
    armed for this run; the Go side answers once it is released, the
    worker asks the run to yield, or the run ends. True: the worker asked
    the run to yield meanwhile (its preempt message may not be read yet).
    No --svc: no holds."""
    if "svc" not in args():
        return False
    return service("/hold", {"lease": slot.slot["leaseId"], "at": at}).get("yield", False)


class Job:
    def __init__(self, slot):
        self.slot = slot
        self.state = {"done": 0, "vals": {}, "checks": {}}
        if slot.resume_state:
            self.state = json.loads(slot.resume_state.decode("utf-8"))
        self.vals = self.state["vals"]
        self.scratch = {}  # what setup steps rebuild; not checkpointed
        self.outputs = []

    def check(self, kind, ok, method, detail="", artifacts=()):
        self.state["checks"][kind] = {"result": "pass" if ok else "fail", "method": method,
                                      "detail": detail, "artifacts": list(artifacts)}

    def publish(self, media_type, data):
        d = self.slot.artifact(media_type, data)
        self.outputs.append(d)
        return d


def run(slot, steps, finish):
    """steps: [(name, setup, fn(job))]; finish (name, fn(job)) publishes the
    outputs.
    The Evidence names the agent given as --agent."""
    job = Job(slot)
    names = [s[0] for s in steps] + [finish[0]]
    now = datetime.datetime.now(datetime.timezone.utc)
    for i, (name, setup, fn) in enumerate(steps + [(finish[0], False, finish[1])]):
        if i < job.state["done"] and not setup:
            continue
        # Between steps is a safe point once a checkpoint exists: the
        # driver may hold the run here, and a run asked to yield meanwhile
        # checkpoints again (so the log shows when it really stopped) and
        # yields before new work.
        if 0 < job.state["done"] <= i and (hold(slot, "safe-point") | slot.poll()):
            slot.checkpoint(json.dumps(job.state).encode("utf-8"), phase=names[job.state["done"] - 1])
            slot.preempted()
            raise mwpslot.Yielded(slot.preempt_reason or "preempt")
        slot.progress(name, milestones=names[:i], next_checkpoint="after " + name,
                      completion_at=now + datetime.timedelta(seconds=2 * (len(names) - i)), confidence=0.8,
                      evidence_refs=job.outputs)
        fn(job)
        if i < job.state["done"] or i == len(steps):
            continue
        job.state["done"] = i + 1
        slot.safe_point(json.dumps(job.state).encode("utf-8"), phase=name)
    producer = {"kind": "agent", "id": args()["agent"]}
    slot.result(artifacts=job.outputs,
                evidence=mwpslot.evidence_for(slot.contract, slot.slot["workItemId"], producer, job.state["checks"]))
