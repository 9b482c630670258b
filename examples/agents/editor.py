#!/usr/bin/env python3
"""An offline example agent for the `editor` role of `work edit` (the work.dispatch.v1 command
protocol, docs/protocol.md).

It understands an edit description of the form "Rename `OLD` to `NEW`": it renames the word
OLD at the definition site (`context.def_site`, `PATH:LINE`) and at every use in the files git
tracks, and answers with the canonical fields of the editor's schema — `sites` counts the
files it changed besides the definition site.
"""
import json
import os
import re
import subprocess
import sys

RENAME = re.compile(r"Rename `([^`]+)` to `([^`]+)`")


def tracked_files(root):
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    return [p for p in out.stdout.decode("utf-8").split("\0") if p]


def rename_in(path, old, new):
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError):
        return False
    changed = re.sub(r"\b%s\b" % re.escape(old), new, text)
    if changed == text:
        return False
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(changed)
    return True


def main():
    req = json.load(sys.stdin)
    root, prompt = req.get("cwd") or ".", req.get("prompt", "")
    def_site = (req.get("context") or {}).get("def_site", "")
    found = RENAME.search(prompt)
    if not found:
        print(json.dumps({"status": "BLOCKED", "applied_changes": False, "sites": 0, "hole": None,
                          "summary": None, "reason": "no `Rename OLD to NEW` in the description"}))
        return
    old, new = found.groups()
    site_path = def_site.rsplit(":", 1)[0]
    if not rename_in(os.path.join(root, site_path), old, new):
        print(json.dumps({"status": "BLOCKED", "applied_changes": False, "sites": 0, "hole": None,
                          "summary": None, "reason": f"`{old}` is not at {def_site}"}))
        return
    sites = sum(rename_in(os.path.join(root, p), old, new) for p in tracked_files(root) if p != site_path)
    print(json.dumps({"status": "DONE", "applied_changes": True, "sites": sites, "hole": None,
                      "summary": f"renamed {old} to {new} at the definition and in {sites} file(s)", "reason": None}))


if __name__ == "__main__":
    main()
