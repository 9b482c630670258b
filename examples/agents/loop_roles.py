#!/usr/bin/env python3
"""An offline example agent for every role of `work loop run` (the work.dispatch.v1 command
protocol, docs/protocol.md): spec-drafter, adversarial-reviewer, quality-reviewer,
finding-adjudicator and implementer.

- The drafter writes a missing spec.md and plan.md into `context.spec_dir`; the plan has one
  task in the task format (docs/plan-format.md): "Create `hello.txt` containing `hi`."
- The implementer writes every "Create `PATH` containing `TEXT`" file its brief names.
- The reviewers read spec.md, plan.md and every file the plan names (`files_read`), and check
  that each such file holds its text: clean, or one blocker finding per file that does not.
- The adjudicator sustains every finding it is given (it never refutes what it did not check).
"""
import json
import os
import re
import sys

CREATE = re.compile(r"Create `([^`]+)` containing `([^`]*)`")

SPEC = """# Greeting

**Status:** Draft

The repository greets its reader.

- [ ] `hello.txt` holds the greeting
"""

PLAN = """# Plan

**Status:** Drafting

## Task 1: Add the greeting
Create `hello.txt` containing `hi`.
"""


def read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None


def write(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def draft(root, ctx):
    spec_dir = os.path.join(root, ctx["spec_dir"])
    for name, text in (("spec.md", SPEC), ("plan.md", PLAN)):
        if read(os.path.join(spec_dir, name)) is None:
            write(os.path.join(spec_dir, name), text)
    return {"status": "drafted", "summary": "wrote spec.md and plan.md"}


def implement(root, prompt):
    files = CREATE.findall(prompt)
    for path, text in files:
        write(os.path.join(root, path), text + "\n")
    if not files:
        return {"status": "blocked", "summary": "no `Create PATH containing TEXT` in the task"}
    return {"status": "done", "summary": f"wrote {len(files)} file(s)", "files_changed": [p for p, _ in files]}


def review(root, ctx):
    plan_path = os.path.join(ctx["spec_dir"], "plan.md")
    plan = read(os.path.join(root, plan_path)) or ""
    files_read = [os.path.join(ctx["spec_dir"], "spec.md"), plan_path]
    findings = []
    if ctx.get("phase") == "code":
        files_read += [p for p, _ in CREATE.findall(plan)]
        for n, (path, text) in enumerate(CREATE.findall(plan), start=1):
            if (read(os.path.join(root, path)) or "").strip() != text:
                findings.append({"id": f"F{n}", "severity": "blocker", "title": f"{path} does not hold {text!r}",
                                 "file": path, "fix": f"write {text!r} to {path}"})
    return {"verdict": "findings" if findings else "clean", "findings": findings, "files_read": files_read}


def adjudicate(ctx):
    findings = (ctx.get("report") or {}).get("findings", [])
    return {"findings": [{"id": f["id"], "disposition": "sustained", "reason": "taken as reported"} for f in findings]}


def main():
    req = json.load(sys.stdin)
    role, root, ctx = req.get("role"), req.get("cwd") or ".", req.get("context") or {}
    if role == "spec-drafter":
        answer = draft(root, ctx)
    elif role == "implementer":
        answer = implement(root, req.get("prompt", ""))
    elif role in ("adversarial-reviewer", "quality-reviewer"):
        answer = review(root, ctx)
    elif role == "finding-adjudicator":
        answer = adjudicate(ctx)
    else:
        sys.stderr.write(f"loop_roles.py: no answer for role {role}\n")
        sys.exit(1)
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
