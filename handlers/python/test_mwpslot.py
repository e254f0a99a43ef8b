"""Tests of mwpslot against a scripted host over pipes: python3 -m unittest."""

import base64
import json
import os
import threading
import unittest

import mwpslot

START = {"type": "start", "protocol": "mwp-slot/1",
         "slot": {"groupId": "grp-a", "missionId": "mis-a", "workItemId": "wi-1", "ownershipEpoch": 1,
                  "leaseId": "l1", "attempt": 1, "agent": {"kind": "agent", "id": "worker-1"}},
         "contract": {"inputs": [{"name": "spec", "artifact": "sha256:aa"}],
                      "acceptanceCriteria": [{"id": "ac-1", "evidenceRequired": ["notes"]},
                                                 {"id": "ac-2", "evidenceRequired": ["notes", "findings"]},
                                                 {"id": "ac-3", "evidenceRequired": ["notes", "tests"]}]},
         "context": {"k": 1}, "resume": None}


def b64(data):
    return base64.b64encode(data).decode()


CHECKS = {"notes": {"result": "pass", "method": "listed", "detail": "2 files", "artifacts": ["sha256:a"]},
          "findings": {"result": "fail", "method": "rules", "artifacts": ["sha256:b", "sha256:a"]}}

HOSTS = []  # closed after each test


class Host:
    """The worker's side of the pipes: the test sends and reads lines."""

    def __init__(self, start=START):
        HOSTS.append(self)
        to_prog_r, self._to_prog = os.pipe()
        self._from_prog, from_prog_w = os.pipe()
        self.prog_in, self.prog_out = to_prog_r, os.fdopen(from_prog_w, "w")
        self._reader = os.fdopen(self._from_prog, "r")
        if start is not None:
            self.send(start)

    def send(self, msg):
        os.write(self._to_prog, (json.dumps(msg) + "\n").encode())

    def recv(self):
        line = self._reader.readline()
        if not line:
            raise EOFError("the program closed stdout")
        return json.loads(line)

    def close(self):
        os.close(self._to_prog)
        self._to_prog = None

    def release(self):
        if self._to_prog is not None:
            self.close()
        self._reader.close()
        for f in (self.prog_out,):
            if not f.closed:
                f.close()
        try:
            os.close(self.prog_in)
        except OSError:
            pass

    def run(self, handler):
        """Runs mwpslot.main(handler) in a thread; returns the thread."""
        def target():
            try:
                mwpslot.main(handler, self.prog_in, self.prog_out)
            finally:
                self.prog_out.close()
        t = threading.Thread(target=target, daemon=True)
        t.start()
        return t

    def run_with(self, handler, clarify, exits=None):
        """Runs mwpslot.main(handler, clarify=clarify) in a thread; a
        SystemExit's code goes to exits."""
        def target():
            try:
                mwpslot.main(handler, self.prog_in, self.prog_out, clarify=clarify)
            except SystemExit as e:
                exits.append(e.code)
            finally:
                self.prog_out.close()
        t = threading.Thread(target=target, daemon=True)
        t.start()
        return t


class SlotTest(unittest.TestCase):
    def tearDown(self):
        while HOSTS:
            HOSTS.pop().release()
    def test_start_and_resume(self):
        start = dict(START, resume={"checkpointId": "cp-1", "digest": "sha256:bb", "state": b64(b"step 2")})
        h = Host(start)
        s = mwpslot.Slot(h.prog_in, h.prog_out)
        self.assertEqual(s.slot["workItemId"], "wi-1")
        self.assertEqual(s.context, {"k": 1})
        self.assertEqual(s.extensions, {})
        self.assertEqual(s.resume_state, b"step 2")
        self.assertEqual(s.input_names(), ["spec"])

    def test_extensions(self):
        h = Host(dict(START, extensions={"urn:example:ext:gpu": {"critical": True, "data": {"model": "L4"}}}))
        s = mwpslot.Slot(h.prog_in, h.prog_out)
        self.assertEqual(s.extensions["urn:example:ext:gpu"]["data"], {"model": "L4"})

    def test_first_message_must_be_start(self):
        h = Host({"type": "preempt", "reason": "preempt"})
        with self.assertRaises(mwpslot.PermanentError):
            mwpslot.Slot(h.prog_in, h.prog_out)

    def test_fetch(self):
        cases = [
            ("by name", {"name": "spec"}, {"type": "fetched", "name": "spec", "digest": "sha256:aa", "data": b64(b"bytes")},
             ("sha256:aa", b"bytes"), None),
            ("by digest", {"digest": "sha256:aa"}, {"type": "fetched", "digest": "sha256:aa", "data": b64(b"")},
             ("sha256:aa", b""), None),
            ("refused", {"digest": "sha256:cc"}, {"type": "error", "code": "AUTH_FORBIDDEN", "message": "not an input"},
             None, "AUTH_FORBIDDEN"),
        ]
        for name, ask, reply, want, code in cases:
            with self.subTest(name):
                h = Host()
                s = mwpslot.Slot(h.prog_in, h.prog_out)
                out = {}

                def call():
                    try:
                        out["got"] = s.fetch(**ask)
                    except mwpslot.SlotError as e:
                        out["err"] = e
                t = threading.Thread(target=call)
                t.start()
                req = h.recv()
                self.assertEqual(req["type"], "fetch")
                self.assertEqual({k: v for k, v in req.items() if k in ("name", "digest")}, ask)
                h.send(dict(reply, id=req["id"]))
                t.join(10)
                if code:
                    self.assertEqual(out["err"].code, code)
                else:
                    self.assertEqual(out["got"], want)

    def test_artifact_manifest_fields_and_cited_events(self):
        h = Host()
        s = mwpslot.Slot(h.prog_in, h.prog_out)
        out = {}

        def call():
            out["digest"] = s.artifact("application/json", b"{}", schema="s:r", classification="confidential",
                                       tool_versions={"pytest": "8.3.2"})
            out["plain"] = s.artifact("text/plain", b"x")
            out["events"] = s.cited_events(from_sequence=3, max_events=2)
        t = threading.Thread(target=call)
        t.start()
        req = h.recv()
        self.assertEqual((req["type"], req["schema"], req["classification"], req["toolVersions"]),
                         ("artifact", "s:r", "confidential", {"pytest": "8.3.2"}))
        h.send({"type": "published", "id": req["id"], "digest": "sha256:aa"})
        req = h.recv()
        self.assertNotIn("classification", req)
        self.assertNotIn("toolVersions", req)
        h.send({"type": "published", "id": req["id"], "digest": "sha256:bb"})
        req = h.recv()
        self.assertEqual((req["type"], req["fromSequence"], req["max"]), ("events", 3, 2))
        h.send({"type": "events", "id": req["id"], "events": [{"sequence": 3}]})
        t.join(10)
        self.assertEqual((out["digest"], out["plain"], out["events"]), ("sha256:aa", "sha256:bb", [{"sequence": 3}]))

    def test_artifact_refusals_say_whether_to_retry(self):
        cases = [
            ("authority unreachable", {"code": "INTERNAL_ERROR", "message": "unreachable", "retryable": True, "retryAfterMs": 200},
             ("INTERNAL_ERROR", True, 200)),
            ("refused", {"code": "INVALID_COMMAND", "message": "bad", "retryable": False}, ("INVALID_COMMAND", False, 0)),
            ("an older host", {"code": "INTERNAL_ERROR", "message": "boom"}, ("INTERNAL_ERROR", False, 0)),
        ]
        for name, reply, want in cases:
            with self.subTest(name):
                h = Host()
                s = mwpslot.Slot(h.prog_in, h.prog_out)
                out = {}

                def call():
                    try:
                        s.artifact("text/plain", b"x")
                    except mwpslot.SlotError as e:
                        out["err"] = e
                t = threading.Thread(target=call)
                t.start()
                req = h.recv()
                h.send(dict(reply, type="error", id=req["id"]))
                t.join(10)
                e = out["err"]
                self.assertEqual((e.code, e.retryable, e.retry_after_ms), want)

    def test_fetch_takes_one_of_name_and_digest(self):
        h = Host()
        s = mwpslot.Slot(h.prog_in, h.prog_out)
        for kw in ({}, {"name": "a", "digest": "sha256:aa"}):
            with self.assertRaises(ValueError):
                s.fetch(**kw)

    def test_safe_point_yields_when_asked(self):
        h = Host()
        steps = []

        def handler(s):
            for i in range(3):
                steps.append(i)
                s.safe_point(str(i).encode(), phase="step-%d" % i)
            s.result()
        t = h.run(handler)
        cp = h.recv()
        self.assertEqual((cp["type"], cp["phase"], base64.b64decode(cp["state"])), ("checkpoint", "step-0", b"0"))
        # The preemption arrives while the program waits for its reply.
        h.send({"type": "preempt", "reason": "preempt"})
        h.send({"type": "checkpointed", "id": cp["id"], "checkpointId": "cp-x", "digest": "sha256:dd"})
        self.assertEqual(h.recv(), {"type": "preempted"})
        t.join(10)
        self.assertEqual(steps, [0])

    def test_safe_point_goes_on_unasked(self):
        h = Host()
        t = h.run(lambda s: (s.safe_point(b"1"), s.result(artifacts=["sha256:ee"])))
        cp = h.recv()
        h.send({"type": "checkpointed", "id": cp["id"], "checkpointId": "cp-x", "digest": "sha256:dd"})
        self.assertEqual(h.recv(), {"type": "result", "artifacts": ["sha256:ee"]})
        t.join(10)

    def test_tool_call(self):
        for name, first, performed in (("performed", "toolGo", True), ("already ran", "toolResult", False)):
            with self.subTest(name):
                h = Host()
                keys, out = [], {}

                def handler(s):
                    out["got"] = s.tool_call("op-1", "git", "write", "low", lambda key: keys.append(key) or b"done",
                                             irreversible=True)
                    s.result()
                t = h.run(handler)
                call = h.recv()
                self.assertEqual((call["type"], call["opId"], call["risk"]), ("toolCall", "op-1", {"class": "low", "irreversible": True}))
                if first == "toolGo":
                    h.send({"type": "toolGo", "id": call["id"], "key": "k-1"})
                    done = h.recv()
                    self.assertEqual((done["type"], base64.b64decode(done["output"])), ("toolDone", b"done"))
                h.send({"type": "toolResult", "id": call["id"], "output": b64(b"done")})
                self.assertEqual(h.recv()["type"], "result")
                t.join(10)
                self.assertEqual(out["got"], b"done")
                self.assertEqual(keys, ["k-1"] if performed else [])

    def test_tool_failure_is_reported(self):
        h = Host()

        def boom(key):
            raise RuntimeError("disk full")
        t = h.run(lambda s: s.tool_call("op-1", "git", "write", "low", boom))
        call = h.recv()
        h.send({"type": "toolGo", "id": call["id"], "key": "k-1"})
        done = h.recv()
        self.assertEqual((done["type"], done["error"]), ("toolDone", "RuntimeError: disk full"))
        h.send({"type": "error", "id": call["id"], "code": "INTERNAL_ERROR", "message": "disk full"})
        final = h.recv()
        self.assertEqual(final["type"], "fail")
        self.assertIn("INTERNAL_ERROR", final["reason"])
        t.join(10)

    def test_progress_and_notices(self):
        h = Host()
        s = mwpslot.Slot(h.prog_in, h.prog_out)
        s.progress("step-1", milestones=["read"], next_checkpoint="after step 1", confidence=0.8)
        p = h.recv()["progress"]
        self.assertEqual((p["phase"], p["milestonesCompleted"], p["revisedEstimate"]["confidence"]), ("step-1", ["read"], 0.8))
        # The worker's time form: UTC with milliseconds.
        self.assertRegex(p["revisedEstimate"]["completionAt"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertFalse(s.poll())
        h.send({"type": "error", "about": "progress", "code": "WORK_LEASE_EXPIRED", "message": "lost"})
        h.send({"type": "preempt", "reason": "leaseLost"})
        for _ in range(100):  # both lines were written; poll reads what has arrived
            if s.poll():
                break
        self.assertEqual(s.preempt_reason, "leaseLost")
        self.assertEqual([(n.code, n.about) for n in s.notices], [("WORK_LEASE_EXPIRED", "progress")])

    def test_progress_defaults_are_valid(self):
        # Called as the docstring shows, with only a phase: every member
        # the schema requires is there and non-empty where it must be.
        h = Host()
        s = mwpslot.Slot(h.prog_in, h.prog_out)
        s.progress("step-1")
        p = h.recv()["progress"]
        self.assertEqual(p["nextCheckpoint"], "after step-1")
        self.assertEqual((p["milestonesCompleted"], p["blockers"], p["evidenceRefs"]), ([], [], []))
        self.assertEqual(p["revisedEstimate"]["confidence"], 0.5)
        for bad in ({"next_checkpoint": ""}, {}):
            with self.assertRaises(ValueError):
                s.progress("" if not bad else "x", **bad)

    def test_evidence_by_the_slots_agent(self):
        h = Host()
        s = mwpslot.Slot(h.prog_in, h.prog_out)
        self.assertEqual(s.agent, {"kind": "agent", "id": "worker-1"})
        ev = s.evidence(CHECKS)
        self.assertEqual([(e["subject"], e["producer"]["id"], e["result"]) for e in ev],
                         [("wi-1", "worker-1", "pass"), ("wi-1", "worker-1", "fail"), ("wi-1", "worker-1", "inconclusive")])
        # producer is an Actor dict, not an id: said at once, not at work.submit.
        with self.assertRaises(TypeError):
            mwpslot.evidence_for(s.contract, "wi-1", "worker-1", CHECKS)

    def test_main_ends_every_run_with_one_final_message(self):
        def returns(s):
            pass

        def raises(s):
            raise KeyError("x")

        def permanent(s):
            raise mwpslot.PermanentError("bad input")
        for name, handler, want in (
                ("returns", returns, {"type": "fail", "reason": "the handler returned without a final message", "permanent": True}),
                ("raises", raises, {"type": "fail", "reason": "KeyError: 'x'"}),
                ("permanent", permanent, {"type": "fail", "reason": "bad input", "permanent": True}),
                ("result", lambda s: s.result(evidence=mwpslot.evidence_for(s.contract, "wi-1", {"kind": "agent", "id": "w"}, CHECKS)), None)):
            with self.subTest(name):
                h = Host()
                t = h.run(handler)
                got = h.recv()
                if want is None:
                    ev = got["evidence"]
                    self.assertEqual([(e["criteria"], e["result"], e["artifacts"]) for e in ev], [
                        (["ac-1"], "pass", ["sha256:a"]),
                        (["ac-2"], "fail", ["sha256:a", "sha256:b"]),
                        (["ac-3"], "inconclusive", ["sha256:a"])])
                    self.assertEqual(ev[1]["method"], "notes: listed (2 files); findings: rules")
                else:
                    self.assertEqual(got, want)
                t.join(10)
                with self.assertRaises(EOFError):
                    h.recv()  # nothing after the final message

    def test_clarify(self):
        offer = {"groupId": "grp-a", "missionId": "mis-a", "workItemId": "wi-1", "offerId": "off-1"}
        msg = {"type": "clarify", "protocol": mwpslot.PROTOCOL, "offer": offer,
               "contract": {"goal": "fix it"}}

        def clarify(contract, got_offer, extensions):
            self.assertEqual((got_offer, extensions), (offer, {}))
            return [] if "branch" in contract["goal"] else ["which branch?"]
        for goal, want in (("fix it", ["which branch?"]), ("fix it on branch main", [])):
            with self.subTest(goal):
                h = Host(start=dict(msg, contract={"goal": goal}))
                ran = []
                t = h.run_with(lambda s: ran.append(s), clarify)
                self.assertEqual(h.recv(), {"type": "clarification", "questions": want})
                t.join(10)
                with self.assertRaises(EOFError):
                    h.recv()  # one line, then the program is done
                self.assertEqual(ran, [])  # never a run

    def test_clarify_without_a_function_exits_1(self):
        h = Host(start={"type": "clarify", "protocol": mwpslot.PROTOCOL, "offer": {}, "contract": {}})
        codes = []
        t = h.run_with(lambda s: None, None, codes)
        t.join(10)
        self.assertEqual(codes, [1])
        with self.assertRaises(EOFError):
            h.recv()

    def test_closed_stdin_ends_quietly(self):
        h = Host()
        t = h.run(lambda s: s.checkpoint(b"1"))
        h.recv()
        h.close()
        t.join(10)
        with self.assertRaises(EOFError):
            h.recv()


if __name__ == "__main__":
    unittest.main()
