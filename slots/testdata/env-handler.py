# Test helper: reports its environment, working directory and a child
# process id, then waits for "preempt" (or ignores it when told to).
import base64, json, os, subprocess, sys

def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()

start = json.loads(sys.stdin.readline())
ctx = start["context"] or {}
mode = next((c[5:] for c in ctx.get("constraints", []) if c.startswith("mode=")), "report")
if mode == "report":
    info = {"env": dict(os.environ), "cwd": os.getcwd()}
    send({"type": "artifact", "id": "a", "mediaType": "application/json",
          "data": base64.b64encode(json.dumps(info).encode()).decode()})
    json.loads(sys.stdin.readline())
    send({"type": "result"})
elif mode == "stubborn":
    child = subprocess.Popen(["/bin/sleep", "1000"])
    send({"type": "progress", "progress": {"phase": "child-%d" % child.pid, "milestonesCompleted": [],
          "nextCheckpoint": "never", "blockers": [], "evidenceRefs": [],
          "revisedEstimate": {"completionAt": "2026-12-01T00:00:00Z", "confidence": 0.1}}})
    for line in sys.stdin:  # ignores preempt
        pass
    child.wait()
