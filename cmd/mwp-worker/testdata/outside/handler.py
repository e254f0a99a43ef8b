#!/usr/bin/env python3
"""The outside plan's handler (capability outside.run), by stage. mwpslot
is on the handler's path: the worker sets PYTHONPATH."""

import json

import mwpslot


def run(slot):
    stage = slot.slot["workItemId"].rsplit(":", 1)[1]
    slot.progress(stage)
    if stage == "gather":
        spec, data = slot.input("spec").decode(), slot.input("data").decode()
        out = ("# notes\n\nspec: %s\n\ndata rows: %d\n" % (spec.strip(), len(data.strip().splitlines()) - 1)).encode()
        media = "text/markdown"
    elif stage == "summarize":
        out, media = b"# summary\n\n" + slot.input("notes"), "text/markdown"
    elif stage == "count":
        rows = slot.input("data").decode().strip().splitlines()[1:]
        out, media = json.dumps({"rows": len(rows)}).encode(), "application/json"
    else:  # review: a verdict per reviewed stage
        mission = slot.slot["missionId"]
        verdict = {"summarize": "summary" in slot.input_names(), "count": json.loads(slot.input("counts"))["rows"] == 3}
        out, media = json.dumps(verdict, sort_keys=True).encode(), "application/json"
        d = slot.artifact(media, out)
        ev = slot.evidence({"read": {"result": "pass", "method": "read the reviewed outputs", "artifacts": [d]}})
        for st, ok in sorted(verdict.items()):
            ev.append(dict(ev[0], subject="%s:%s" % (mission, st), result="pass" if ok else "fail"))
        slot.result(artifacts=[d], evidence=ev)
        return
    d = slot.artifact(media, out)
    slot.result(artifacts=[d], evidence=slot.evidence({"read": {"result": "pass", "method": "read its inputs", "artifacts": [d]}}))


mwpslot.main(run)
