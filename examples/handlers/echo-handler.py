#!/usr/bin/env python3
"""An external mwp-worker handler (protocol mwp-slot/1, see slots/EXTERNAL.md).

Its options are a JSON object in the contract's notes (none: defaults).
It counts from its last checkpoint to options["steps"] (default 3), reporting
structured progress and taking a checkpoint at each step (its safe points);
it yields when the host says "preempt"; optionally runs one tool operation
through the host (options["toolOp"]); reads the events its Context Package
cites (the "events" request); reads each of its contract's inputs (the
"fetch" request); then publishes an artifact echoing the package, its
options, how many cited events it read and the inputs it read, and submits a
result with one passing Evidence per acceptance criterion of its contract.

options["pauseAfter"] = n makes it wait at the safe point after step n until
the host preempts it (used by the tests to preempt deterministically).

Run it through slots.Exec{Path: "/usr/bin/python3", Args: ["echo-handler.py"]}.
Only the standard library is used.
"""
import base64
import datetime
import json
import os
import sys

queued = []  # host messages that arrived while we waited for a reply


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def recv():
    if queued:
        return queued.pop(0)
    line = sys.stdin.readline()
    if not line:  # the host closed stdin: the run is over
        sys.exit(0)
    return json.loads(line)


def request(msg, *reply_types):
    """Send msg and return the host's reply to its id, keeping other messages."""
    send(msg)
    while True:
        m = sys.stdin.readline()
        if not m:
            sys.exit(0)
        m = json.loads(m)
        if m.get("id") == msg["id"] and m["type"] in reply_types + ("error",):
            return m
        queued.append(m)


def preempt_requested():
    return any(m["type"] == "preempt" for m in queued)


def b64(data):
    return base64.b64encode(data).decode("ascii")


def progress(phase, done, nxt):
    send({"type": "progress", "progress": {
        "phase": phase,
        "milestonesCompleted": done,
        "nextCheckpoint": nxt,
        "blockers": [],
        "revisedEstimate": {"completionAt": "2026-12-01T00:00:00Z", "confidence": 0.8},
        "evidenceRefs": [],
    }})


def clarify(msg):
    """Answers the clarify message (a worker run with --handler-clarify
    echo.run asks before it accepts an offer): echo writes JSON only, so a
    contract asking for any other output is one it cannot act on."""
    questions = ["output %s is %s: echo writes only application/json; which output should hold the echo?" % (o.get("name"), o.get("mediaType"))
                 for o in (msg.get("contract") or {}).get("requiredOutputs", []) if o.get("mediaType") != "application/json"]
    send({"type": "clarification", "questions": questions})


def main():
    start = recv()
    if start.get("type") == "clarify" and start.get("protocol") == "mwp-slot/1":
        clarify(start)
        return
    if start.get("type") != "start" or start.get("protocol") != "mwp-slot/1":
        send({"type": "fail", "reason": "unexpected first message", "permanent": True})
        return
    ctx = start["context"]  # the Context Package, or None
    try:
        opts = json.loads((start.get("contract") or {}).get("notes") or "{}")
    except ValueError:
        opts = {}
    if not isinstance(opts, dict):
        opts = {}
    steps = int(opts.get("steps", 3))
    step = 0
    if start["resume"]:
        step = int(base64.b64decode(start["resume"]["state"]))

    while step < steps:
        step += 1
        progress("step-%d" % step, ["step-%d" % i for i in range(1, step + 1)], "step-%d" % (step + 1))
        reply = request({"type": "checkpoint", "id": "cp-%d" % step,
                         "state": b64(str(step).encode()), "phase": "step-%d" % step}, "checkpointed")
        if reply["type"] == "error":
            send({"type": "fail", "reason": "checkpoint refused: " + reply["message"]})
            return
        if step == opts.get("pauseAfter"):
            while not preempt_requested():  # wait at this safe point
                queued.append(json.loads(sys.stdin.readline() or '{"type":"eof"}'))
                if queued[-1]["type"] == "eof":
                    return
        if preempt_requested():
            send({"type": "preempted"})  # the checkpoint above is our safe point
            return

    outputs = []
    op = opts.get("toolOp")
    if op:
        reply = request({"type": "toolCall", "id": "tc-1", "opId": op["opId"], "tool": op["tool"],
                         "operation": op["operation"], "risk": {"class": op.get("risk", "low")}},
                        "toolGo", "toolResult")
        if reply["type"] == "toolGo":
            # Perform the operation here, passing reply["key"] as its
            # idempotency key; this example just echoes the key.
            done = request({"type": "toolDone", "id": "tc-1", "output": b64(reply["key"].encode())},
                           "toolResult")
            reply = done
        if reply["type"] == "error":
            send({"type": "fail", "reason": "tool refused: %s %s" % (reply["code"], reply["message"]), "permanent": True})
            return
        outputs.append(base64.b64decode(reply["output"]).decode())

    cited = None
    if ctx:
        # The events the package cites, a page at a time, as the worker's
        # membership allows; an error reply says why not.
        cited, after = 0, 0
        while True:
            reply = request({"type": "events", "id": "ev-%d" % after, "fromSequence": after + 1}, "events")
            if reply["type"] == "error":
                cited = reply["code"]
                break
            if not reply["events"]:
                break
            cited += len(reply["events"])
            after = reply["events"][-1]["sequence"]

    # Every input of the contract, read through the worker with fetch: the
    # bytes come hash-checked from its store or the authority's.
    inputs = {}
    for i, ref in enumerate((start.get("contract") or {}).get("inputs", [])):
        ask = {"name": ref["name"]} if ref.get("name") else {"digest": ref["artifact"]}
        reply = request(dict(ask, type="fetch", id="in-%d" % i), "fetched")
        if reply["type"] == "error":
            # A retryable answer (the authority unreachable for the worker's
            # whole offline grace) is worth another attempt; a refusal is not.
            send({"type": "fail", "reason": "fetch %s refused: %s %s" % (ref["artifact"], reply["code"], reply["message"]),
                  "permanent": not reply.get("retryable", False)})
            return
        inputs[ref.get("name") or ref["artifact"]] = {"digest": reply["digest"], "bytes": len(base64.b64decode(reply["data"]))}

    echo = json.dumps({"context": ctx, "options": opts, "citedEvents": cited, "inputs": inputs,
                       "workdirIsPrivate": os.getcwd() == os.environ.get("MWP_WORKDIR"),
                       "toolOutputs": outputs}, sort_keys=True).encode()
    reply = request({"type": "artifact", "id": "art-1", "mediaType": "application/json", "data": b64(echo)}, "published")
    if reply["type"] == "error":
        # Retried within the contract's policy when retryable; not otherwise.
        send({"type": "fail", "reason": "publish refused: " + reply["message"], "permanent": not reply.get("retryable", False)})
        return
    # One passing Evidence per acceptance criterion: work.submit must map
    # evidence to every criterion (spec 13.2). The producer is this program.
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    evidence = [{"subject": start["slot"]["workItemId"], "criteria": [c["id"]], "method": "echo-handler",
                 "result": "pass", "producer": {"kind": "service", "id": "echo-handler"},
                 "timestamp": now, "artifacts": [reply["digest"]]}
                for c in (start.get("contract") or {}).get("acceptanceCriteria", [])]
    send({"type": "result", "artifacts": [reply["digest"]], "evidence": evidence})


if __name__ == "__main__":
    main()
