#!/usr/bin/env python3
"""An external handler for the outage suite (outage_test.go): a few steps,
each a safe point, then two artifacts published and a result whose
evidence cites them. With a directory as its argument, it writes a file
there when it is about to publish and waits 0.3 s, so that the suite can
take the authority away under the upload. An artifact refused as retryable (the authority stayed
unreachable past the worker's offline grace) fails the attempt without
"permanent", so the contract's retry policy runs it again; any other
refusal fails it for good. Standard library and mwpslot only."""
import os
import sys
import time

import mwpslot

STEPS = 4


def run(slot):
    item = slot.slot["workItemId"]
    step = int(slot.resume_state or b"0")
    while step < STEPS:
        time.sleep(0.05)
        step += 1
        slot.progress("step-%d" % step, ["step-%d" % i for i in range(1, step + 1)], "step-%d" % (step + 1))
        slot.safe_point(str(step).encode(), phase="step-%d" % step)
    if len(sys.argv) > 1:
        with open(os.path.join(sys.argv[1], "%s-%d" % (item, slot.slot["attempt"])), "w"):
            pass
        time.sleep(0.3)
    digests = []
    for n in range(2):
        data = ("%s output %d\n" % (item, n)).encode() * 64
        try:
            digests.append(slot.artifact("text/plain", data))
        except mwpslot.SlotError as e:
            if e.retryable:
                raise  # main() sends fail, retried within the contract's policy
            raise mwpslot.PermanentError("publish refused: %s" % e)
    producer = {"kind": "service", "id": "publisher"}
    slot.result(artifacts=digests, evidence=mwpslot.evidence_for(slot.contract, item, producer, {
        "note": {"result": "pass", "method": "published", "artifacts": digests}}))


if __name__ == "__main__":
    mwpslot.main(run)
