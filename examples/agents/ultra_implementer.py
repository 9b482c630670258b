#!/usr/bin/env python3
"""An offline example implementer for `work ultra` with examples/goals/greet.toml (the
work.dispatch.v1 command protocol, role `implementer`, docs/protocol.md).

It writes scripts/greet.sh, the deliverable of the greet goal, and answers `done` with one
claim per criterion it was given (context.criteria, or context.criterion on HEAVY). The engine
never trusts the claim: it re-runs every scenario itself.
"""
import json
import os
import sys

GREET = """#!/bin/sh
if [ -z "$1" ]; then
    echo "usage: sh scripts/greet.sh NAME" >&2
    exit 2
fi
echo "hello, $1"
"""


def main():
    req = json.load(sys.stdin)
    ctx = req.get("context") or {}
    root = req.get("cwd") or "."
    os.makedirs(os.path.join(root, "scripts"), exist_ok=True)
    with open(os.path.join(root, "scripts", "greet.sh"), "w", encoding="utf-8") as fh:
        fh.write(GREET)
    ids = ctx.get("criteria") or [ctx.get("criterion")]
    claims = [{"criterion": c, "claim": "scripts/greet.sh written", "evidence": "see the scenario"} for c in ids if c]
    print(json.dumps({"status": "done", "summary": "wrote scripts/greet.sh", "claims": claims,
                      "cleanup": [], "blocker": None}))


if __name__ == "__main__":
    main()
