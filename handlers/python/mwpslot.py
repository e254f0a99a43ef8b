"""mwpslot: write an mwp-worker external handler in Python (protocol mwp-slot/1).

The protocol is in slots/EXTERNAL.md. This module speaks it over stdin and
stdout so that a handler reads like its steps:

    import mwpslot

    def run(slot):
        spec = slot.input("feature-request")        # bytes, hash-checked by the worker
        state = slot.resume_state or b"0"           # the newest checkpoint, if any
        slot.progress("step-1", next_checkpoint="after step 1")
        slot.safe_point(b"1", phase="step-1")       # checkpoint; yields if asked to
        digest = slot.artifact("text/markdown", b"# notes\\n")
        slot.result(artifacts=[digest], evidence=[...])

    mwpslot.main(run)

main() sends `fail` for an uncaught exception (`permanent` for a
PermanentError) and exits 0 once the run is over. Only the standard
library is used; Python 3.8 or later.

Importing it: `mwp-worker run` and `up` (and a Go program on
workercmd.Main) start every --handler-exec program with PYTHONPATH naming a
directory that holds this module, so `import mwpslot` works in a handler
anywhere; the rest of a handler's environment is scrubbed (slots/EXTERNAL.md),
so a PYTHONPATH of your own does not reach it. A program run some other way
copies this file beside itself (handlers/python.Install in Go).
PYTHONDONTWRITEBYTECODE is set too, so no __pycache__ is left behind.

Shapes used below: an Actor is a dict {"kind": "agent"|"human"|"service",
"id": text} (slot.agent is the worker's); a digest is "sha256:" and 64 hex
digits; an Evidence is a dict {"subject", "criteria", "method", "result",
"producer", "timestamp", "artifacts"} (docs/wire.md), as evidence_for makes.
"""

import base64
import datetime
import json
import os
import select
import sys

PROTOCOL = "mwp-slot/1"


class SlotError(Exception):
    """The host refused a request: code is a protocol error code.

    retryable says the same request may be sent again unchanged later
    (for example the authority was unreachable for the worker's whole
    offline grace): retry_after_ms is the wait the host suggests. Raised
    out of the handler, it fails the attempt without "permanent", so the
    contract's retry policy runs another."""

    def __init__(self, code, message, about="", retryable=False, retry_after_ms=0):
        super().__init__("%s: %s" % (code, message))
        self.code, self.message, self.about = code, message, about
        self.retryable, self.retry_after_ms = bool(retryable), int(retry_after_ms or 0)

    @classmethod
    def of(cls, msg):
        """The SlotError an error message from the host says."""
        return cls(msg["code"], msg["message"], msg.get("about", ""), msg.get("retryable", False), msg.get("retryAfterMs", 0))


class PermanentError(Exception):
    """Raise it (or a subclass) for a failure no retry can fix."""


class Yielded(Exception):
    """Raised by safe_point after `preempted` was sent: the run is over."""


class Closed(Exception):
    """The host closed stdin: the run is over, nothing more is accepted."""


def _b64(data):
    return base64.b64encode(data).decode("ascii")


def _unb64(text):
    return base64.b64decode(text.encode("ascii"), validate=True)


def rfc3339(t):
    """An aware datetime as the protocol's time text: UTC, milliseconds."""
    t = t.astimezone(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


class Slot:
    """One run's conversation with the worker.

    infd is the file descriptor the host writes to (stdin), out the text
    stream the program writes to (stdout). The start message is read at
    once; its parts are attributes: slot (ids), contract, context,
    resume (the checkpoint's metadata or None) and resume_state (bytes or
    None).
    """

    def __init__(self, infd=None, out=None, first=None):
        self._fd = sys.stdin.fileno() if infd is None else infd
        self._out = sys.stdout if out is None else out
        self._buf = b""
        self._seq = 0
        self.finished = False
        self.preempt_reason = None  # "preempt" or "leaseLost" once asked
        self.notices = []  # errors about progress or charge, as SlotError
        start = self._read(block=True) if first is None else first
        if start.get("type") != "start" or start.get("protocol") != PROTOCOL:
            raise PermanentError("the first message is not a %s start: %r" % (PROTOCOL, start.get("type")))
        self.start = start
        self.slot = start["slot"]
        self.contract = start["contract"]
        self.context = start.get("context")
        # The offer's extensions by profile URI: {"critical": bool, "data": ...}.
        self.extensions = start.get("extensions") or {}
        self.resume = start.get("resume")
        self.resume_state = _unb64(self.resume["state"]) if self.resume else None

    # -- transport

    def _send(self, msg):
        if self.finished:
            raise PermanentError("a %s message after the final one" % msg["type"])
        self._out.write(json.dumps(msg, separators=(",", ":"), ensure_ascii=False) + "\n")
        self._out.flush()

    def _read(self, block):
        """The next host message, or None when none is waiting (block False)."""
        while b"\n" not in self._buf:
            if not block and not select.select([self._fd], [], [], 0)[0]:
                return None
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise Closed("the host closed stdin")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line.decode("utf-8"))

    def _note(self, msg):
        """Keeps what arrives unasked: a preempt, a refused progress or charge."""
        if msg["type"] == "preempt":
            self.preempt_reason = msg["reason"]
        elif msg["type"] == "error" and not msg.get("id"):
            self.notices.append(SlotError.of(msg))
        else:
            raise PermanentError("unexpected host message %r" % msg["type"])

    def _next_id(self, kind):
        self._seq += 1
        return "%s-%d" % (kind, self._seq)

    def _request(self, msg, *replies):
        """Sends msg and waits for the host's reply to its id."""
        self._send(msg)
        while True:
            m = self._read(block=True)
            if m.get("id") == msg["id"] and m["type"] in replies + ("error",):
                if m["type"] == "error":
                    raise SlotError.of(m)
                return m
            self._note(m)

    def poll(self):
        """Reads what the host sent meanwhile; True once a preemption was asked."""
        while True:
            m = self._read(block=False)
            if m is None:
                return self.preempt_reason is not None
            self._note(m)

    # -- requests

    def progress(self, phase, milestones=(), next_checkpoint=None, blockers=(),
                 completion_at=None, confidence=0.5, evidence_refs=()):
        """A structured progress report (no percentages).

        phase: non-empty text, what the run is doing now.
        milestones: texts, the milestones completed so far.
        next_checkpoint: non-empty text, what the next checkpoint will hold
            (default "after " + phase; "" is refused by the schema).
        blockers: texts, what stops the run now ([] for nothing).
        completion_at: an aware datetime.datetime, the revised completion
            estimate (default a minute from now).
        confidence: a number from 0 to 1 in that estimate.
        evidence_refs: digests of artifacts that show the progress.
        A refusal arrives later, in notices."""
        if not phase:
            raise ValueError("progress needs a phase")
        if next_checkpoint is None:
            next_checkpoint = "after " + phase
        if not next_checkpoint:
            raise ValueError("next_checkpoint must not be empty (the schema refuses it)")
        if completion_at is None:
            completion_at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)
        self._send({"type": "progress", "progress": {
            "phase": phase, "milestonesCompleted": list(milestones), "nextCheckpoint": next_checkpoint,
            "blockers": list(blockers), "evidenceRefs": list(evidence_refs),
            "revisedEstimate": {"completionAt": rfc3339(completion_at), "confidence": confidence}}})

    def checkpoint(self, state, phase=None, note=None):
        """Saves state (bytes) durably; returns (checkpointId, digest).
        phase and note (text, optional) describe it to a later resume."""
        msg = {"type": "checkpoint", "id": self._next_id("cp"), "state": _b64(state)}
        if phase:
            msg["phase"] = phase
        if note:
            msg["note"] = note
        r = self._request(msg, "checkpointed")
        return r["checkpointId"], r["digest"]

    def safe_point(self, state, phase=None, note=None):
        """Checkpoints state (bytes; phase and note as for checkpoint), then
        yields when the host asked for a preemption or said the lease is
        lost: sends `preempted` and raises Yielded (main() ends quietly)."""
        self.checkpoint(state, phase, note)
        if self.poll():
            self.preempted()
            raise Yielded(self.preempt_reason)

    def fetch(self, name=None, digest=None):
        """The bytes of one contract input, by name (text: the plan's input
        name, or a dependency's output name) or digest: (digest, bytes)."""
        if (name is None) == (digest is None):
            raise ValueError("fetch takes exactly one of name and digest")
        msg = {"type": "fetch", "id": self._next_id("fetch")}
        if name is not None:
            msg["name"] = name
        else:
            msg["digest"] = digest
        r = self._request(msg, "fetched")
        return r["digest"], _unb64(r["data"])

    def input(self, name):
        """The bytes of the contract input called name (text)."""
        return self.fetch(name=name)[1]

    def input_names(self):
        """The names (texts; "" for an unnamed one) of the contract's inputs."""
        return [i.get("name", "") for i in self.contract.get("inputs") or []]

    @property
    def agent(self):
        """The worker's Actor, {"kind": "agent", "id": text}: the producer
        of this run's Evidence."""
        return self.slot.get("agent")

    def evidence(self, checks):
        """evidence_for this run's contract, about its WorkItem, by its agent."""
        return evidence_for(self.contract, self.slot["workItemId"], self.agent, checks)

    def artifact(self, media_type, data, schema=None, classification=None, tool_versions=None):
        """Publishes data (bytes) as media_type (text, "text/markdown");
        returns its digest. schema (an absolute URI), classification
        (public, internal, confidential, restricted) and tool_versions
        ({tool: version}, texts) go into the signed manifest."""
        msg = {"type": "artifact", "id": self._next_id("art"), "mediaType": media_type, "data": _b64(data)}
        if schema:
            msg["schema"] = schema
        if classification:
            msg["classification"] = classification
        if tool_versions:
            msg["toolVersions"] = dict(tool_versions)
        return self._request(msg, "published")["digest"]

    def cited_events(self, from_sequence=0, max_events=0):
        """The Group events the run's Context Package cites, as the authority
        signed them (dicts), from from_sequence on; at most max_events (0:
        the worker's page)."""
        msg = {"type": "events", "id": self._next_id("events")}
        if from_sequence:
            msg["fromSequence"] = from_sequence
        if max_events:
            msg["max"] = max_events
        return self._request(msg, "events")["events"]

    def tool_call(self, op_id, tool, operation, risk_class, perform,
                  irreversible=False, externally_visible=False, side_effect=False, cost=None):
        """Runs one tool operation under the host's policy and idempotency key.

        op_id: text naming the operation within the run (the same op_id
            after a restart is the same operation).
        tool, operation: texts the contract's allowedTools and
            allowedOperations must hold.
        risk_class: "low", "medium", "high" or "critical".
        perform(key): does it and returns bytes; key (text) is the
            idempotency key to pass to the tool. It is not called when the
            operation already ran under this key.
        irreversible, externally_visible, side_effect: booleans.
        cost: a usage dict (as charge takes, camelCase keys) or None.
        Returns the output bytes."""
        msg = {"type": "toolCall", "id": self._next_id("tool"), "opId": op_id, "tool": tool,
               "operation": operation, "risk": {"class": risk_class}}
        if irreversible:
            msg["risk"]["irreversible"] = True
        if externally_visible:
            msg["risk"]["externallyVisible"] = True
        if side_effect:
            msg["sideEffect"] = True
        if cost is not None:
            msg["cost"] = cost
        r = self._request(msg, "toolGo", "toolResult")
        if r["type"] == "toolGo":
            try:
                out = perform(r["key"])
                done = {"type": "toolDone", "id": msg["id"], "output": _b64(out)}
            except Exception as e:  # the host records the failure
                done = {"type": "toolDone", "id": msg["id"], "error": "%s: %s" % (type(e).__name__, e)}
            self._send(done)
            while True:
                r = self._read(block=True)
                if r.get("id") == msg["id"] and r["type"] in ("toolResult", "error"):
                    break
                self._note(r)
            if r["type"] == "error":
                raise SlotError.of(r)
        return _unb64(r["output"])

    def charge(self, money=0.0, tokens=0, tool_calls=0, compute_seconds=0.0, wall_clock_seconds=0.0, side_effects=0):
        """Usage spent outside tool calls: money and seconds are numbers,
        the others integers, all >= 0. A refusal arrives later in notices."""
        self._send({"type": "charge", "usage": {
            "money": money, "tokens": tokens, "toolCalls": tool_calls, "computeSeconds": compute_seconds,
            "wallClockSeconds": wall_clock_seconds, "sideEffects": side_effects}})

    # -- final messages

    def _final(self, msg):
        self._send(msg)
        self.finished = True

    def result(self, artifacts=(), evidence=(), progress=None):
        """The run's final message: artifacts are digests (of artifact()),
        evidence a list of Evidence dicts (evidence_for), progress an
        optional final progress dict (the wire's Progress)."""
        msg = {"type": "result"}
        if artifacts:
            msg["artifacts"] = list(artifacts)
        if evidence:
            msg["evidence"] = list(evidence)
        if progress is not None:
            msg["progress"] = progress
        self._final(msg)

    def fail(self, reason, permanent=False):
        """Ends the run failed: reason is text; permanent True says a retry
        cannot help."""
        msg = {"type": "fail", "reason": reason}
        if permanent:
            msg["permanent"] = True
        self._final(msg)

    def block(self, kind, detail, state=b""):
        """Ends the run blocked: kind is a resolution kind (for example
        "clarification"), detail text, state the bytes to resume from."""
        self._final({"type": "block", "resolution": {"kind": kind, "detail": detail}, "state": _b64(state)})

    def preempted(self):
        """Ends the run yielding its slot (after a checkpoint)."""
        self._final({"type": "preempted"})


def evidence_for(contract, subject, producer, checks):
    """One Evidence (docs/wire.md) per acceptance criterion of the contract.

    contract: the Work Contract dict (slot.contract).
    subject: text, what the Evidence is about: the WorkItem id
        (slot.slot["workItemId"]), or for a reviewer stage the reviewed
        stage's WorkItem or stage id (docs/plans.md, the reviewer's verdict).
    producer: an Actor dict {"kind": "agent", "id": text}, who produced
        it: the worker, slot.agent (not a plain id string).
    checks maps an evidence kind (a name in a criterion's evidenceRequired)
    to {"result": "pass"|"fail"|"inconclusive", "method": text,
    "artifacts": [digests], "detail": text?}. A criterion passes when every
    kind it requires was checked and passed; one not checked makes it
    inconclusive. slot.evidence(checks) fills in the first three."""
    if not isinstance(producer, dict) or "kind" not in producer or "id" not in producer:
        raise TypeError("producer is an Actor dict {'kind': 'agent', 'id': ...} (slot.agent), not %r" % (producer,))
    now = rfc3339(datetime.datetime.now(datetime.timezone.utc))
    out = []
    for ac in contract.get("acceptanceCriteria") or []:
        result, methods, arts = "pass", [], set()
        for kind in ac.get("evidenceRequired") or []:
            c = checks.get(kind)
            if c is None:
                result = "inconclusive"
                methods.append(kind + ": not checked")
                continue
            if c["result"] != "pass" and result == "pass":
                result = c["result"]
            m = kind + ": " + c["method"]
            if c.get("detail"):
                m += " (" + c["detail"] + ")"
            methods.append(m)
            arts.update(c.get("artifacts") or [])
        out.append({"subject": subject, "criteria": [ac["id"]], "method": "; ".join(methods) or "none",
                    "result": result, "producer": producer, "timestamp": now, "artifacts": sorted(arts)})
    return out


def main(handler, infd=None, out=None, clarify=None):
    """Runs handler(slot) and makes sure the run ends with one final message.

    clarify, when given, answers the clarify message a worker started with
    --handler-clarify sends about an offered contract before accepting it
    (slots/EXTERNAL.md): clarify(contract, offer, extensions) returns the
    questions the handler cannot act on without guessing, [] for none.
    A program asked to clarify without one exits 1: the worker then
    refuses the offer and its log says why.
    """
    fd = sys.stdin.fileno() if infd is None else infd
    out = sys.stdout if out is None else out
    try:
        first = _read_first(fd)
    except Closed:
        return
    if first.get("type") == "clarify":
        _answer_clarify(first, out, clarify)
        return
    try:
        slot = Slot(fd, out, first=first)
    except Closed:
        return
    try:
        handler(slot)
        if not slot.finished:
            slot.fail("the handler returned without a final message", permanent=True)
    except (Yielded, Closed):
        return
    except PermanentError as e:
        if not slot.finished:
            slot.fail(str(e), permanent=True)
    except Exception as e:
        if not slot.finished:
            slot.fail("%s: %s" % (type(e).__name__, e))


def _read_first(fd):
    buf = b""
    while b"\n" not in buf:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise Closed("the host closed stdin")
        buf += chunk
    return json.loads(buf.split(b"\n", 1)[0].decode("utf-8"))


def _answer_clarify(msg, out, clarify):
    if msg.get("protocol") != PROTOCOL:
        sys.stderr.write("clarify: not %s: %r\n" % (PROTOCOL, msg.get("protocol")))
        sys.exit(1)
    if clarify is None:
        sys.stderr.write("clarify: this handler does not answer clarify (pass clarify= to mwpslot.main)\n")
        sys.exit(1)
    questions = [str(q) for q in (clarify(msg["contract"], msg["offer"], msg.get("extensions") or {}) or [])]
    out.write(json.dumps({"type": "clarification", "questions": questions}, separators=(",", ":"), ensure_ascii=False) + "\n")
    out.flush()
