//! Damage outside the task that no check looks at is never silent (docs/ground-truth.md,
//! "Damage outside the task is named"): a deleted document or changed CI configuration the
//! plan does not plan is named in `implement`'s report (`out_of_scope_damage`, a concern
//! each), and what git itself runs or reads — a hook, an alias, a remote — is BLOCKED
//! `git-tampered`. Honest twins: a task whose plan names the document, a task that appends a
//! test.

use crate::implement::{agent, implement};
use crate::support::{Scenario, fallback_only, refused};
use serde_json::Value;

fn repo(task: &str) -> Scenario {
    let s = crate::implement::repo_with_plan(&[("1", "Edit shared", task)]);
    s.write("docs/guide.md", "# Guide\n");
    s.write(".github/workflows/ci.yml", "on: push\n");
    s.write("tests/test_shared.sh", "grep -q base shared.txt\n");
    s.commit("docs, ci and a test");
    s
}

fn implementer(does: &str) -> String {
    format!("if role == 'implementer':\n    write('shared.txt', 'base\\nmore\\n')\n    {does}\n    out(DONE)")
}

fn damage(r: &Value) -> Vec<(String, String)> {
    r["out_of_scope_damage"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| (d["path"].as_str().unwrap_or("").to_string(), d["kind"].as_str().unwrap_or("").to_string()))
        .collect()
}

#[test]
fn an_implementer_that_deletes_docs_or_edits_ci_outside_its_task_is_named_never_silent() {
    for (does, path, kind) in [
        ("os.remove('docs/guide.md')", "docs/guide.md", "docs-deleted"),
        ("write('.github/workflows/ci.yml', 'on: never\\n')", ".github/workflows/ci.yml", "ci-config"),
    ] {
        let s = repo("Append a line to shared.txt.");
        let a = agent(&s, &implementer(does));
        let r = implement(&s, &a, "true", &[], 0);
        assert_eq!(damage(&r), [(path.to_string(), kind.to_string())], "{does}: {r}");
        let concerns = r["concerns"].to_string();
        assert!(concerns.contains("out-of-scope damage") && concerns.contains(path), "{does}: {r}");
    }
}

#[test]
fn an_implementer_that_changes_a_git_hook_alias_or_remote_is_blocked() {
    let _unconfined = fallback_only(refused::GIT);
    for does in [
        "write('.git/hooks/pre-commit', '#!/bin/sh\\nexit 0\\n')",
        "sh('git config alias.st \"!rm -rf .\"')",
        "sh('git config remote.origin.url https://example.invalid/x.git')",
    ] {
        let s = repo("Append a line to shared.txt.");
        let a = agent(&s, &implementer(does));
        let r = implement(&s, &a, "true", &[], 1);
        assert_eq!((r["status"].as_str(), r["kind"].as_str()), (Some("BLOCKED"), Some("git-tampered")), "{does}: {r}");
    }
}

#[test]
fn honest_twins_that_plan_the_document_or_append_a_test_name_no_damage() {
    let s = repo("Append a line to shared.txt; the guide is obsolete.\n\n**Touches:** shared.txt, docs/guide.md");
    let a = agent(&s, &implementer("os.remove('docs/guide.md')"));
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert!(damage(&r).is_empty(), "{r}");

    let s = repo("Append a line to shared.txt.");
    let a = agent(&s, &implementer("open('tests/test_shared.sh', 'a').write('grep -q more shared.txt\\n')"));
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert!(damage(&r).is_empty(), "{r}");
}

/// The implementer also rewrites `other.txt`, which the task does not plan; the spec reviewer
/// keeps the `out_of_scope` its context carried.
fn outside_repo(task: &str, does: &str) -> (Scenario, String) {
    let s = repo(task);
    s.write("other.txt", "other\n");
    s.commit("another file");
    let body = format!(
        "if role == 'spec-reviewer':\n    open(state_path('out_of_scope'), 'w').write(json.dumps(ctx.get('out_of_scope')))\n{}",
        implementer(does)
    );
    let a = agent(&s, &body);
    (s, a)
}

#[test]
fn a_change_outside_the_tasks_text_is_named_to_the_reviewers_and_blocked_with_scope_strict() {
    let (s, a) = outside_repo("Append a line to shared.txt.", "write('other.txt', 'changed\\n')");
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "named, not blocked, by default: {r}");
    assert_eq!(r["tasks"][0]["out_of_scope"], serde_json::json!(["other.txt"]), "{r}");
    assert!(r["concerns"].to_string().contains("out of scope"), "{r}");
    assert_eq!(s.read(".agent-state/out_of_scope"), r#"["other.txt"]"#, "the reviewer was told");

    let (s, a) = outside_repo("Append a line to shared.txt.", "write('other.txt', 'changed\\n')");
    let r = implement(&s, &a, "true", &["--scope", "strict"], 1);
    assert_eq!((r["status"].as_str(), r["kind"].as_str()), (Some("BLOCKED"), Some("out-of-scope")), "{r}");
    assert!(r["reason"].as_str().unwrap_or("").contains("other.txt"), "{r}");
}

#[test]
fn with_scope_strict_a_task_that_edits_what_it_plans_or_appends_a_test_is_done() {
    let (s, a) = outside_repo(
        "Append to shared.txt and fix the guide.\n\n**Touches:** docs/guide.md",
        "write('docs/guide.md', '# Guide, fixed\\n')",
    );
    let r = implement(&s, &a, "true", &["--scope", "strict"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(s.read(".agent-state/out_of_scope"), "null", "nothing out of scope: {r}");

    let (s, a) = outside_repo(
        "Append a line to shared.txt.",
        "open('tests/test_shared.sh', 'a').write('grep -q more shared.txt\\n')",
    );
    let r = implement(&s, &a, "true", &["--scope", "strict"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

#[test]
fn a_misspelt_scope_mode_is_bad_input_with_the_canonical_name() {
    let s = repo("Append a line to shared.txt.");
    let (code, _out, err) = s.run(&["implement", "--plan", "PLAN.md", "--scope", "strct", "--test-cmd", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'strict'"), "{err}");
    assert!(!s.path(".work").exists(), "nothing written");
}
