#!/usr/bin/env python3
"""A test program for the clarify exchange of mwp-slot/1: what it answers
is chosen by the offered contract's notes."""
import json
import os
import sys
import time

msg = json.loads(sys.stdin.readline())
mode = msg["contract"].get("notes", "")
out = sys.stdout


def answer(questions):
    out.write(json.dumps({"type": "clarification", "questions": questions}) + "\n")
    out.flush()


if mode == "ask":
    answer(["which branch, for " + msg["offer"]["workItemId"] + " (" + msg["offer"]["offerId"] + ")?"])
elif mode == "none":
    answer([])
elif mode == "env":
    names = sorted(k for k in os.environ if k.startswith("MWP_"))
    answer([" ".join(names), "cwd-private" if os.getcwd() == os.environ["MWP_WORKDIR"] else "cwd-shared"])
elif mode == "bad":
    out.write(json.dumps({"type": "clarification", "questions": ["x"], "extra": 1}) + "\n")
elif mode == "wrong-type":
    out.write(json.dumps({"type": "result"}) + "\n")
elif mode == "missing":
    out.write(json.dumps({"type": "clarification"}) + "\n")
elif mode == "two-lines":
    answer([])
    answer([])
elif mode == "exit1":
    answer([])
    sys.exit(1)
elif mode == "silent":
    sys.stderr.write("cannot read contracts\n")
    sys.exit(0)
elif mode == "hang":
    time.sleep(60)
elif mode == "linger":
    answer([])
    time.sleep(60)
