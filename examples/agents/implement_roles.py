#!/usr/bin/env python3
"""An offline example agent for every role of `work implement` (the work.dispatch.v1 command
protocol): implementer, spec-reviewer, quality-reviewer and tester (docs/protocol.md).

It branches on the request's `role`. The implementer understands task text of the form
"Create `PATH` containing `TEXT`." (docs/plan-format.md shows a plan) and writes PATH; the
reviewers check that every file the task names holds its text and name the files they read
(`files_read`: a clean verdict must name a file the task changed); the tester adds no fixture.
Every answer uses the canonical fields of the role's schema.
"""
import json
import os
import re
import sys

CREATE = re.compile(r"Create `([^`]+)` containing `([^`]*)`")
DIFF_PATH = re.compile(r"^diff --git a/(\S+) ", re.M)


def wanted(prompt):
    return CREATE.findall(prompt)


def holds(root, files):
    missing = []
    for path, text in files:
        try:
            with open(os.path.join(root, path), encoding="utf-8") as fh:
                if fh.read().strip() != text:
                    missing.append(f"{path} must contain {text!r}")
        except OSError:
            missing.append(f"{path} is missing")
    return missing


def main():
    req = json.load(sys.stdin)
    role, root, prompt = req.get("role"), req.get("cwd") or ".", req.get("prompt", "")
    files = wanted(prompt)
    if role == "implementer":
        for path, text in files:
            target = os.path.join(root, path)
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        status = "DONE" if files else "NEEDS_CONTEXT"
        answer = {"status": status, "summary": f"wrote {len(files)} file(s)", "applied_changes": bool(files),
                  "concerns": [], "held": [], "reason": None if files else "no `Create PATH containing TEXT` in the task"}
    elif role == "spec-reviewer":
        issues = holds(root, files)
        answer = {"status": "non_compliant" if issues else "compliant", "issues": issues, "ambiguity": None,
                  "files_read": [path for path, _ in files]}
    elif role == "quality-reviewer":
        # It reads every file of the diff it is shown.
        answer = {"verdict": "approved", "issues": [], "files_read": DIFF_PATH.findall(prompt)}
    elif role == "tester":
        answer = {"status": "DONE", "fixtures": 0, "summary": "no end-to-end fixture needed"}
    else:
        sys.stderr.write(f"implement_roles.py: no answer for role {role}\n")
        sys.exit(1)
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
