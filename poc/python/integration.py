"""The integration stage in Python: the reviewed patch (a contract input)
applied to the integration repository, the PoC's external service (--svc),
as one tool call with a side effect. The worker hands the call its
idempotency key, stable across retries, restarts and reassignments of the
item; the service honours keys and nothing else, so the key alone keeps a
retry from applying the patch twice. The receipt is published last. The Go
twin is poc.IntegrationHandler."""

import json

import mwpslot
import stage


def read(job):
    pd, raw = job.slot.fetch(name="patch")
    job.scratch["pd"], job.scratch["patch"] = pd, raw.decode("utf-8")


def apply(job):
    pd = job.scratch["pd"]
    used, conflict = [], []

    def perform(key):
        used.append(key)
        try:
            rc = stage.service("/integration", {"key": key, "patchDigest": pd, "patch": job.scratch["patch"]})
        except stage.ServiceError as e:
            if e.status == 409:
                conflict.append(str(e))
            raise
        return json.dumps(rc).encode("utf-8")
    if "svc" not in stage.args():
        raise mwpslot.PermanentError("no integration repository configured")
    try:
        out = job.slot.tool_call("integrate:" + pd, "integration-repo", "apply-patch", "medium", perform,
                                 externally_visible=True, side_effect=True)
    except mwpslot.SlotError:
        if conflict:
            raise mwpslot.PermanentError(conflict[0])
        raise
    job.vals["receipt"], job.vals["used"] = json.loads(out.decode("utf-8")), used[0] if used else ""


def publish(job):
    rc, pd, used = job.vals["receipt"], job.scratch["pd"], job.vals["used"]
    d = job.publish("application/json", json.dumps(rc, indent=2).encode("utf-8"))
    job.check("integration-receipt", rc.get("patchDigest") == pd and bool(rc.get("commit")), "integration repository receipt",
              "effect %d" % rc.get("effectSeq", 0), [d, pd])
    # The worker may answer a repeat without calling perform: then the
    # first call's key is the one in the receipt.
    job.check("idempotency-key", bool(rc.get("key")) and (used in ("", rc["key"]) or rc.get("repeat", False)),
              "effect recorded under the tool key", rc.get("key", ""), [d])


if __name__ == "__main__":
    mwpslot.main(lambda slot: stage.run(slot, [("read reviewed patch", True, read), ("apply to integration repository", False, apply)],
                                        ("write receipt", publish)))
