//! A confined write role's git directory is a private copy, discarded after the dispatch
//! (docs/ground-truth.md, "What a confined agent sees"): a liar that moves the user's branch,
//! deletes a ref and a tag, writes a hook, rewrites `.git/config`, checks out a branch and
//! commits does all of it — in the copy. The user's git directory is byte-for-byte what it was,
//! and the verdict is the working tree's. Without the sandbox the same liar is the fallback's
//! to catch (BLOCKED), which these tests assert too.

use crate::support::{Scenario, suite_confines};
use serde_json::Value;
use std::collections::BTreeMap;

/// What the liar does to git, confined (every command must succeed: `set -e`).
const TAMPER: &str = "set -e
exec >&2
root=$(git rev-list --max-parents=0 HEAD)
git update-ref refs/heads/main \"$root\"
git update-ref -d refs/heads/keep
git tag -d v1
g=$(git rev-parse --git-common-dir)
mkdir -p \"$g/hooks\" && printf '#!/bin/sh\\nexit 0\\n' > \"$g/hooks/pre-commit\" && chmod +x \"$g/hooks/pre-commit\"
git config alias.st '!rm -rf .'
printf '[core]\\n\\thooksPath = .\\n' >> \"$g/config\"
git checkout -q -b other
git add shared.txt
git -c user.name=a -c user.email=a@b commit -q -m 'the lie'
git stash list >/dev/null
";

/// Every file of the user's git directory but what the engine itself writes during a run (new
/// objects, the index's stat cache, its own `refs/work/`, worktrees and lock, reflogs): path →
/// bytes.
fn git_files(s: &Scenario) -> BTreeMap<String, Vec<u8>> {
    let git = s.path(".git");
    let mut out = BTreeMap::new();
    let mut todo = vec![git.clone()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).expect("read .git").flatten() {
            let path = e.path();
            let rel = path.strip_prefix(&git).expect("under .git").display().to_string();
            let engine = ["objects", "index", "refs/work", "logs", "work", "worktrees", "work-tree.lock"];
            if engine.iter().any(|x| rel.starts_with(x)) {
                continue;
            }
            let kind = e.file_type().expect("type");
            if kind.is_dir() {
                todo.push(path);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    out
}

/// The assertions after a tampering liar's run: confined, the user's git directory is as it was
/// and the run judged the tree (`done`); unconfined, the fallback caught it (`blocked`).
fn assert_untouched_or_caught(s: &Scenario, before: &BTreeMap<String, Vec<u8>>, base: &str, done: bool, v: &Value) {
    if !suite_confines() {
        assert!(!done, "without the sandbox the fallback blocks the liar: {v}");
        return;
    }
    assert!(done, "the verdict is the working tree's: {v}");
    let after = git_files(s);
    let changed: Vec<&String> = before.keys().chain(after.keys()).filter(|k| before.get(*k) != after.get(*k)).collect();
    assert!(changed.is_empty(), "the user's git directory is byte-for-byte as it was: {changed:?}");
    assert_eq!(s.git(&["rev-parse", "HEAD"]).trim(), base, "the user's branch did not move");
    assert_eq!(s.git(&["symbolic-ref", "--short", "HEAD"]).trim(), "main");
    assert_eq!(s.git(&["rev-parse", "keep"]).trim(), base, "the ref is still there");
    assert_eq!(s.git(&["rev-parse", "v1"]).trim(), base, "the tag is still there");
    assert!(!s.path(".git/hooks/pre-commit").exists(), "no hook was written");
    assert!(!s.git(&["config", "--list"]).contains("alias.st"), "the configuration is the user's");
    assert!(s.git(&["stash", "list"]).trim().is_empty());
    assert_eq!(s.read("shared.txt"), "base\nmore\n", "the change is in the working tree");
    assert!(!s.git(&["status", "--porcelain", "--", "shared.txt"]).is_empty(), "uncommitted");
}

/// A repository with `shared.txt`, a branch `keep` and a tag `v1` at the base.
fn marked(s: &Scenario) -> String {
    s.git(&["branch", "keep"]);
    s.git(&["tag", "v1"]);
    s.git(&["rev-parse", "HEAD"]).trim().to_string()
}

fn python_sh(script: &str) -> String {
    format!("import subprocess\nsubprocess.run(['sh', '-c', {script:?}], check=True)")
}

#[test]
fn implement_liar_that_rewrites_git_confined_leaves_the_users_git_untouched() {
    let s = crate::implement::repo_with_plan(&[("1", "Edit shared", "Append a line to shared.txt.")]);
    let base = marked(&s);
    let body = format!(
        "if role == 'implementer':\n    write('shared.txt', 'base\\nmore\\n')\n    {}\n    out(DONE)",
        python_sh(TAMPER).replace('\n', "\n    ")
    );
    let a = crate::implement::agent(&s, &body);
    let before = git_files(&s);
    let code = if suite_confines() { 0 } else { 1 };
    let r = crate::implement::implement(&s, &a, "grep -q more shared.txt", &[], code);
    assert_untouched_or_caught(&s, &before, &base, r["status"] == "DONE", &r);
}

#[test]
fn until_liar_that_rewrites_git_confined_leaves_the_users_git_untouched() {
    let s = Scenario::new();
    s.write("shared.txt", "base\n");
    s.write("check.sh", "grep -q more shared.txt\n");
    s.commit("shared and its check");
    let base = marked(&s);
    let agent = s.agent(
        "worker.py",
        &format!(
            "open('shared.txt', 'w').write('base\\nmore\\n')\n{}\nprint(json.dumps({{'status': 'done', 'summary': 'more'}}))",
            python_sh(TAMPER)
        ),
    );
    let before = git_files(&s);
    let code = if suite_confines() { 0 } else { 1 };
    let v = s.run_json(
        &["until", "`sh check.sh` exits 0", "--goal", "g", "--verify", "sh check.sh", "--agent", &agent, "--json"],
        code,
    );
    assert_untouched_or_caught(&s, &before, &base, v["status"] == "done", &v);
}

/// A parallel wave's task runs in a linked worktree (`.git` is a gitfile): its private git
/// directory is made from the worktree's HEAD and index and the common refs and objects, so
/// the same liar's commit, branch and ref deletions stay in it too.
#[test]
fn a_wave_task_that_rewrites_git_confined_leaves_the_users_git_untouched() {
    let s = crate::implement::repo_with_plan(&[
        ("1", "Edit shared", "Append a line to shared.txt."),
        ("2", "Add other", "Create other.txt."),
    ]);
    let base = marked(&s);
    let tamper = TAMPER.replace("git checkout -q -b other\n", "git checkout -q -b other-$$\n");
    let body = format!(
        "if role == 'implementer' and tid == '1':\n    write('shared.txt', 'base\\nmore\\n')\n    {}\n    out(DONE)\nif role == 'implementer':\n    write('other.txt', 'x\\n')\n    out(DONE)",
        python_sh(&tamper).replace('\n', "\n    ")
    );
    let a = crate::implement::agent(&s, &body);
    let before = git_files(&s);
    let code = if suite_confines() { 0 } else { 1 };
    let r = crate::implement::implement(
        &s,
        &a,
        "grep -q more shared.txt && test -f other.txt",
        &["--concurrency", "2"],
        code,
    );
    assert_untouched_or_caught(&s, &before, &base, r["status"] == "DONE", &r);
    if suite_confines() {
        assert_eq!(s.read("other.txt"), "x\n", "the sibling's result is merged");
    }
}
