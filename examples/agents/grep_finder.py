#!/usr/bin/env python3
"""An offline example finder for `work exhaust` (the work.dispatch.v1 command protocol).

It reads one dispatch request on stdin and answers with one JSON object on stdout. It is a
real, if simple, agent: it derives search terms from WHAT (context.what), and each angle
sweeps a different slice of the repository's tracked files, so that a discovery run has
several angles to rotate through and really goes dry. Every location it reports is a real
PATH:LINE, which the engine re-reads itself (gate 2).

When WHAT asks for calls ("unwrap and expect calls", "spawn call sites"), each term is a
callable: the finder reports only its call sites in source files (`x.unwrap()`, `expect(`),
not longer names that start with it (`unwrap_or`), nor the term inside a comment, a string, an
attribute (`#[expect(...)]`) or a definition (`fn expect(`).

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
    "with", "calls", "call", "sites", "site", "uses", "use", "usages", "invocations", "invocation",
}

# WHAT asks for call sites when it says so.
CALLS_RE = re.compile(r"\b(calls?|call[- ]sites?|invocations?)\b", re.I)
# The source files a call can be in, and what in each is a comment or a string.
RUST_LIKE = re.compile(r'//[^\n]*|/\*.*?\*/|b?r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|\'(?:\\.|[^\\\'\n])\'', re.S)
HASH_LIKE = re.compile(r'#[^\n]*|"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
SOURCE_LEXERS = {".rs": RUST_LIKE, ".go": RUST_LIKE, ".c": RUST_LIKE, ".h": RUST_LIKE, ".cc": RUST_LIKE,
                 ".cpp": RUST_LIKE, ".java": RUST_LIKE, ".js": RUST_LIKE, ".ts": RUST_LIKE,
                 ".py": HASH_LIKE, ".sh": HASH_LIKE}

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


def blank_non_code(text, lexer):
    """The text with every comment and string blanked (newlines kept, so lines still count)."""
    return lexer.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def call_re(terms):
    """A call of one of the terms: `x.term(`, `term(`, `Type::term(` — not `term_or(`."""
    names = "|".join(re.escape(t) for t in terms)
    return re.compile(r"(?<![\w$])(" + names + r")\s*\(")


def is_call(code, m):
    """A match of call_re is a call, not a definition (`fn expect(`) or an attribute (`#[expect(`)."""
    before = code[:m.start()].rstrip()
    return not (before.endswith("[") or re.search(r"\b(fn|def|func|function)$", before))


def call_lines(text, lexer, pattern):
    """The line numbers (from 1) of the text's lines that call one of the terms."""
    lines = set()
    for n, code in enumerate(blank_non_code(text, lexer).splitlines(), 1):
        if any(is_call(code, m) for m in pattern.finditer(code)):
            lines.add(n)
    return lines


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
    calls = call_re(terms) if CALLS_RE.search(ctx.get("what", "")) else None
    items = []
    for f in tracked_files(root):
        if path_re is not None and not path_re.search(f):
            continue
        lexer = SOURCE_LEXERS.get(os.path.splitext(f)[1])
        if calls is not None and lexer is None:
            continue
        if angle == "direct-search" and calls is None and not re.search(r"\.(rs|py|sh|toml)$", f):
            continue
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError):
            continue
        wanted = call_lines(text, lexer, calls) if calls is not None else None
        for n, line in enumerate(text.splitlines(), 1):
            if wanted is not None and n not in wanted:
                continue
            if wanted is None and not term_re.search(line):
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
