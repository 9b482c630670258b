#!/usr/bin/env python3
"""An offline example worker for `work until` (the work.dispatch.v1 command protocol).

It reads one dispatch request on stdin and answers with one worker report (docs/protocol.md,
role `worker`) on stdout. It understands one kind of condition: UNTIL (context.until) of the
form "file PATH exists". It writes PATH with the goal's text (context.goal) and reports `done`,
naming the file it changed; the engine then checks the condition itself. Any other condition
it reports `blocked`, saying why. A recon dispatch (context.recon) gets a one-line map.
"""
import json
import os
import re
import sys


def main():
    req = json.load(sys.stdin)
    ctx = req.get("context") or {}
    root = req.get("cwd") or "."
    if ctx.get("recon"):
        print(json.dumps({"summary": "a scratch repository", "map": sorted(os.listdir(root)),
                          "risks": [], "recommended_next": ["write the file UNTIL names"]}))
        return
    m = re.search(r"file\s+`?([A-Za-z0-9_./-]+)`?\s+exists", ctx.get("until", ""))
    if m is None:
        print(json.dumps({"status": "blocked", "summary": "",
                          "blocker": "this example worker only knows conditions of the form 'file PATH exists'"}))
        return
    path = m.group(1)
    target = os.path.join(root, path)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(ctx.get("goal", "") + "\n")
    print(json.dumps({"status": "done", "summary": f"wrote {path}", "changes_claimed": [path],
                      "blocker": None, "next_steps": [], "decisions": [], "evidence": [], "notes": None}))


if __name__ == "__main__":
    main()
