#!/usr/bin/env python3
"""A stage whose first attempt fails, for the JSON log tests (capability
text.flaky). The first attempt leaves the file `started` beside this
script, waits for the file `go` there, then fails; the attempt the retry
policy runs next writes a note."""

import os
import time

import mwpslot

HERE = os.path.dirname(os.path.abspath(__file__))


def run(slot):
    started = os.path.join(HERE, "started")
    if not os.path.exists(started):
        open(started, "w").close()
        while not os.path.exists(os.path.join(HERE, "go")):
            time.sleep(0.02)
        slot.fail("the first attempt fails")
        return
    d = slot.artifact("text/plain", b"written\n")
    slot.result(artifacts=[d], evidence=slot.evidence({"the note": {"result": "pass", "method": "wrote it", "artifacts": [d]}}))


mwpslot.main(run)
