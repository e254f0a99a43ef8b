"""A load stage in Python: a SHA-256 chain from the WorkItem id and the
input patch's digest, --steps steps of --rounds rounds, each step at least
--step-ms long, with progress and a checkpoint (a safe point) after every
step. The coordinator's reviewer recomputes the chain (poc.LoadChain)."""

import hashlib
import json
import time

import mwpslot
import stage

A = stage.args()
STEPS, ROUNDS, STEP_S = int(A["steps"]), int(A["rounds"]), int(A["step-ms"]) / 1000.0


def chain_step(head, rounds):
    s = hashlib.sha256(head.encode("utf-8")).digest()
    for _ in range(rounds - 1):
        s = hashlib.sha256(s).digest()
    return "sha256:" + s.hex()


def read(job):
    d, _ = job.slot.fetch(name="patch")
    if not job.vals.get("chain"):
        job.vals["chain"] = job.slot.slot["workItemId"] + " " + d
    job.scratch["patch"] = d


def step(job):
    until = time.monotonic() + STEP_S
    job.vals["chain"] = chain_step(job.vals["chain"], ROUNDS)
    left = until - time.monotonic()
    if left > 0:
        time.sleep(left)


def report(job):
    rep = {"workItemId": job.slot.slot["workItemId"], "patch": job.scratch["patch"], "steps": STEPS,
           "rounds": ROUNDS, "chain": job.vals["chain"]}
    d = job.publish("application/json", json.dumps(rep, separators=(",", ":")).encode("utf-8"))
    job.check("load-chain", True, "SHA-256 chain from the patch", "%d steps of %d rounds" % (STEPS, ROUNDS), [d])


if __name__ == "__main__":
    steps = [("read patch", True, read)] + [("load step %d" % (i + 1), False, step) for i in range(STEPS)]
    mwpslot.main(lambda slot: stage.run(slot, steps, ("write load report", report)))
