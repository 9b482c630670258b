#!/usr/bin/env python3
"""An offline example finder for `work exhaust` (the work.dispatch.v1 command protocol).

It reads one dispatch request on stdin and answers with one JSON object on stdout. It is a
real, if simple, agent: it derives search terms from WHAT (context.what), and each angle
sweeps a different slice of the repository's tracked files, so that a discovery run has
several angles to rotate through and really goes dry. Every location it reports is a real
PATH:LINE, which the engine re-reads itself (gate 2).

Replace it with a real model by setting `agent` in work.toml (e.g. `agent = "claude"`).
"""
import json
import os
import re
import subprocess
import sys

# A finder answers with everything its angle sees (a real model would cap itself; the engine
# would then need more rounds, which the journal's seen set makes cheap).
MAX_ITEMS = 5000

STOPWORDS = {
    "all", "and", "any", "are", "code", "every", "find", "for", "from", "in", "into", "list",
    "marker", "markers", "of", "or", "places", "that", "the", "their", "this", "where", "which",
    "with", "calls", "call", "sites", "site", "uses", "use", "usages",
}

# Each angle looks at a different slice of the tree (by path) or of the lines (by nearby words).
ANGLE_PATHS = {
    "tests-and-fixtures": r"(^|/)(tests?|fixtures?)/|_test\.|test_",
    "docs-drift": r"\.(md|txt|rst)$",
    "build-and-tooling": r"(^|/)(Cargo\.toml|Makefile|\.ci/|scripts/|build\.rs)",
    "cli-and-user-interface": r"(^|/)(cli|cmd|bin)/|main\.rs$",
    "configuration": r"config|\.toml$|\.ya?ml$|\.json$",
}
ANGLE_WORDS = {
    "error-paths": r"err|fail|panic|unwrap|expect|except|raise|bail",
    "edge-cases": r"empty|zero|none|null|max|min|overflow|limit",
    "input-validation": r"valid|parse|check|refuse|reject",
    "concurrency-races": r"lock|mutex|thread|spawn|async|await|atomic",
    "state-transitions": r"state|transition|status",
    "resource-lifecycle": r"open|close|drop|kill|cleanup|remove",
    "persistence-and-migrations": r"write|save|journal|rename|fsync",
    "security-boundaries": r"secret|key|token|confine|escape|path",
}


def tracked_files(root):
    try:
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
        return [f for f in out.splitlines() if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, _, names in os.walk(root):
            if "/." in d or "/target" in d:
                continue
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def terms_of(what):
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", what)
    return [w for w in words if w.lower() not in STOPWORDS] or words[:1]


def main():
    req = json.load(sys.stdin)
    ctx = req.get("context") or {}
    angle = ctx.get("angle", "direct-search")
    root = req.get("cwd") or "."
    terms = terms_of(ctx.get("what", ""))
    seen = {s.get("location") for s in ctx.get("seen", []) if isinstance(s, dict)}
    term_re = re.compile("|".join(re.escape(t) for t in terms), 0 if any(t.isupper() for t in terms) else re.I)
    path_re = re.compile(ANGLE_PATHS[angle]) if angle in ANGLE_PATHS else None
    word_re = re.compile(ANGLE_WORDS[angle], re.I) if angle in ANGLE_WORDS else None
    if angle != "direct-search" and path_re is None and word_re is None:
        print(json.dumps({"angle": angle, "items": [], "roundNotes": "no slice defined for this angle"}))
        return
    items = []
    for f in tracked_files(root):
        if path_re is not None and not path_re.search(f):
            continue
        if angle == "direct-search" and not re.search(r"\.(rs|py|sh|toml)$", f):
            continue
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for n, line in enumerate(lines, 1):
            if not term_re.search(line):
                continue
            if word_re is not None and not word_re.search(line):
                continue
            loc = f"{f}:{n}"
            if loc in seen:
                continue
            items.append({
                "id": f"{f}:{n}",
                "title": line.strip()[:120],
                "location": loc,
                "evidence": line.strip()[:200],
                "severity": "low",
            })
            if len(items) >= MAX_ITEMS:
                break
        if len(items) >= MAX_ITEMS:
            break
    notes = f"searched {', '.join(terms)} through angle {angle}; {len(items)} hit(s)"
    print(json.dumps({"angle": angle, "items": items, "roundNotes": notes}))


if __name__ == "__main__":
    main()
