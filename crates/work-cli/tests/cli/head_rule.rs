//! The one rule for an honest commit (docs/ground-truth.md, "One rule for HEAD"), through the
//! real binary in every workflow that lets an agent write: an agent that commits its fix on
//! top of the run's base, on the run's branch, is judged by what it changed and accepted; one
//! that resets HEAD below the base, amends the base or checks out another branch is BLOCKED
//! `head-moved` with the breach named. The engine never moves the branch either way.
//!
//! Confined, an agent's git directory is a private copy discarded after the dispatch: the honest
//! twin's commit succeeds there, the user's branch stays at the base and the fix is in the
//! working tree, uncommitted, and judged the same. The liars' moves never reach the user's
//! branch either, so they are the fallback's tests.

use crate::support::{Scenario, fallback_only, suite_confines};

/// Why these are the fallback's tests.
pub(crate) const HEAD: &str = "an agent's move of HEAD; with the sandbox its git directory is a private copy, discarded after the dispatch, and no move reaches the user's branch";
use serde_json::Value;

/// What the scripted agent does with git around writing its fix.
#[derive(Clone, Copy, Debug)]
enum Move {
    /// Commits the fix on top of the base (the honest twin).
    Commit,
    /// Writes the fix, then `git reset --soft HEAD~1`: the tree looks the same, the base's
    /// commit is gone from the branch.
    BelowBase,
    /// Checks out a new branch, then writes the fix.
    Branch,
    /// Writes the fix and amends it into the base commit.
    Amend,
}

const LIARS: [(Move, &str); 3] =
    [(Move::BelowBase, "below-base"), (Move::Branch, "branch-switched"), (Move::Amend, "history-rewritten")];

impl Move {
    /// The shell the agent runs to write `text` to `path` this way.
    fn shell(self, path: &str, text: &str) -> String {
        let write = format!("printf '{text}' > {path}");
        match self {
            Move::Commit => format!("{write} && git add {path} && git commit -q -m 'the fix'"),
            Move::BelowBase => format!("{write} && git reset -q --soft HEAD~1"),
            Move::Branch => format!("git checkout -q -b other && {write}"),
            Move::Amend => format!("{write} && git add {path} && git commit -q --amend -m 'the base, amended'"),
        }
    }

    /// The same, as a Python line for a scripted agent.
    fn python(self, path: &str, text: &str) -> String {
        format!("import subprocess\nsubprocess.run(['sh', '-c', {:?}], check=True)", self.shell(path, text))
    }
}

fn head(s: &Scenario) -> String {
    s.git(&["rev-parse", "HEAD"]).trim().to_string()
}

/// After an honest run: the agent's commit sits on the base, on `main`; the engine added none.
fn assert_branch_is_the_agents(s: &Scenario, base: &str) {
    assert_eq!(s.git(&["rev-parse", "HEAD~1"]).trim(), base, "one commit on the base: the agent's");
    assert_eq!(s.git(&["log", "-1", "--format=%s"]).trim(), "the fix");
    assert_eq!(s.git(&["symbolic-ref", "--short", "HEAD"]).trim(), "main");
}

/// After an honest run whose agent committed `path`: unconfined, its commit sits on the base
/// ([`assert_branch_is_the_agents`]); confined, the commit landed in the dispatch's private git
/// directory and was discarded: the user's branch is still `main` at the base, and the fix is in
/// the working tree, uncommitted.
pub(crate) fn assert_honest_commit(s: &Scenario, base: &str, path: &str) {
    if !suite_confines() {
        return assert_branch_is_the_agents(s, base);
    }
    assert_eq!(head(s), base, "the user's branch did not move");
    assert_eq!(s.git(&["symbolic-ref", "--short", "HEAD"]).trim(), "main", "nor did HEAD leave it");
    let status = s.git(&["status", "--porcelain", "--", path]);
    assert!(!status.trim().is_empty(), "the fix is in the working tree, uncommitted: {status:?}");
}

fn named(v: &Value, breach: &str, m: Move) {
    assert!(v.to_string().contains(breach), "{m:?}: the breach `{breach}` is named: {v}");
}

// ---------------------------------------------------------------------------- implement

fn implement(m: Move) -> (Scenario, String, Value) {
    let s = crate::implement::repo_with_plan(&[("1", "Edit shared", "Append a line to shared.txt.")]);
    let base = head(&s);
    let body = format!(
        "if role == 'implementer':\n    {}\n    out(DONE)",
        m.python("shared.txt", "base\\nmore\\n").replace('\n', "\n    ")
    );
    let a = crate::implement::agent(&s, &body);
    let code = if matches!(m, Move::Commit) { 0 } else { 1 };
    let r = crate::implement::implement(&s, &a, "grep -q more shared.txt", &[], code);
    (s, base, r)
}

#[test]
fn implement_accepts_an_implementer_that_commits_its_fix_and_blocks_every_other_move_of_head() {
    let (s, base, r) = implement(Move::Commit);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files_touched"], 1, "the committed fix is the change: {r}");
    assert_honest_commit(&s, &base, "shared.txt");
    assert_eq!(s.read("shared.txt"), "base\nmore\n");
    let _unconfined = fallback_only(HEAD);
    for (m, breach) in LIARS {
        let (_s, _base, r) = implement(m);
        assert_eq!((r["status"].as_str(), r["kind"].as_str()), (Some("BLOCKED"), Some("head-moved")), "{m:?}: {r}");
        named(&r, breach, m);
    }
}

// ---------------------------------------------------------------------------------- edit

/// A repository whose `struct Foo` an editor renames to `Bar` through `python` (a fragment
/// that writes `src/lib.txt` — and may commit it), and the `work edit` arguments that ask it.
pub(crate) fn rename_edit(python: &str) -> (Scenario, Vec<String>) {
    let s = Scenario::new();
    s.write("src/lib.txt", "struct Foo\n");
    s.commit("lib");
    let body = format!(
        "if role == 'editor':\n    {}\n    out({{'status': 'DONE', 'applied_changes': True, 'sites': 0, 'hole': None}})",
        python.replace('\n', "\n    ")
    );
    let a = crate::implement::agent(&s, &body);
    let args = [
        "edit",
        "--iter-id",
        "e-1",
        "--description",
        "rename Foo to Bar",
        "--def-site",
        "src/lib.txt:1",
        "--agent",
        &a,
        "--test-cmd",
        "grep -q Bar src/lib.txt",
        "--json",
    ];
    (s, args.iter().map(|a| a.to_string()).collect())
}

fn edit(m: Move) -> (Scenario, String, Value) {
    let (s, args) = rename_edit(&m.python("src/lib.txt", "struct Bar\\n"));
    // The base is the commit before the editor ran.
    let base = head(&s);
    let code = if matches!(m, Move::Commit) { 0 } else { 1 };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = s.run_json(&args, code);
    (s, base, r)
}

#[test]
fn edit_accepts_an_editor_that_commits_its_edit_and_blocks_every_other_move_of_head() {
    let (s, base, r) = edit(Move::Commit);
    assert_eq!(r["status"], "DONE", "a committed edit is the edit, not a no-op: {r}");
    assert_honest_commit(&s, &base, "src/lib.txt");
    assert_eq!(s.read("src/lib.txt"), "struct Bar\n");
    let _unconfined = fallback_only(HEAD);
    for (m, breach) in LIARS {
        let (_s, _base, r) = edit(m);
        assert_eq!(r["kind"], "head-moved", "{m:?}: {r}");
        named(&r, breach, m);
    }
}

// --------------------------------------------------------------------------------- until

fn until(m: Move) -> (Scenario, String, Value) {
    let s = crate::liars_matrix::until_repo();
    let base = head(&s);
    let agent = s.agent(
        "worker.py",
        &format!(
            "{}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\"}}))",
            m.python("src/lib.rs", "pub fn f() {}\\npub fn ready() {}\\n")
        ),
    );
    let code = if matches!(m, Move::Commit) { 0 } else { 1 };
    let v = s.run_json(
        &["until", "`sh check.sh` exits 0", "--goal", "g", "--verify", "sh check.sh", "--agent", &agent, "--json"],
        code,
    );
    (s, base, v)
}

#[test]
fn until_accepts_a_worker_that_commits_its_fix_and_blocks_every_other_move_of_head() {
    let (s, base, v) = until(Move::Commit);
    assert_eq!(v["status"], "done", "{v}");
    assert_honest_commit(&s, &base, "src/lib.rs");
    assert!(s.read("src/lib.rs").contains("pub fn ready() {}"));
    let _unconfined = fallback_only(HEAD);
    for (m, breach) in LIARS {
        let (_s, _base, v) = until(m);
        assert_eq!(v["status"], "blocked", "{m:?}: {v}");
        assert!(v["stoppedReason"].as_str().unwrap_or_default().starts_with("head-moved"), "{m:?}: {v}");
        named(&v, breach, m);
    }
}

// --------------------------------------------------------------------------------- ultra

pub(crate) const GOAL: &str = r#"
id = "greet"
objective = "greet.sh prints hello, world"
tier = "LIGHT"
tier_justification = "one script"
stop_line = "I'll stop right away when sh check.sh passes"

[[criteria]]
id = "happy"
scenario = "sh check.sh"
evidence = ["stdout", "exit_code"]
pass = { exit_code = 0 }
"#;

/// A repository with the goal and its check committed, and an implementer that writes
/// greet.sh through `python` (a fragment that writes `greet.sh` — and may commit it).
pub(crate) fn ultra_repo(python: &str) -> (Scenario, String) {
    let s = Scenario::new();
    s.write("GOAL.toml", GOAL);
    s.write("check.sh", "test \"$(sh greet.sh 2>/dev/null)\" = 'hello, world'\n");
    s.commit("goal and its check");
    let agent = s.agent(
        "implementer.py",
        &format!(
            "{python}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"wrote greet.sh\", \"claims\": [], \"cleanup\": []}}))"
        ),
    );
    (s, agent)
}

fn ultra(m: Move) -> (Scenario, String, Value) {
    let (s, agent) = ultra_repo(&m.python("greet.sh", "echo \"hello, world\"\\n"));
    let base = head(&s);
    let code = if matches!(m, Move::Commit) { 0 } else { 1 };
    let v = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], code);
    (s, base, v)
}

#[test]
fn ultra_accepts_an_implementer_that_commits_its_fix_and_blocks_every_other_move_of_head() {
    let (s, base, v) = ultra(Move::Commit);
    assert_eq!(v["stop_reason"], "all-green", "{v}");
    assert_honest_commit(&s, &base, "greet.sh");
    assert_eq!(s.read("greet.sh"), "echo \"hello, world\"\n");
    let _unconfined = fallback_only(HEAD);
    for (m, breach) in LIARS {
        let (_s, _base, v) = ultra(m);
        assert_eq!(
            (v["status"].as_str(), v["stop_reason"].as_str()),
            (Some("BLOCKED"), Some("head-moved")),
            "{m:?}: {v}"
        );
        named(&v, breach, m);
    }
}

// ------------------------------------------------------------------------------ loop run

fn loop_run(m: Move) -> (Scenario, String, Value) {
    use crate::loop_run::{knob, setup, start};
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    let base = head(&s);
    knob(&s, "impl-task-1", &m.shell("hello.txt", "hello\\n"));
    let code = if matches!(m, Move::Commit) { 3 } else { 1 };
    let v = start(&s, &agent, &["--light"], code);
    (s, base, v)
}

#[test]
fn loop_run_accepts_an_implementer_that_commits_its_fix_and_blocks_every_other_move_of_head() {
    let (s, base, v) = loop_run(Move::Commit);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_honest_commit(&s, &base, "hello.txt");
    assert_eq!(s.read("hello.txt"), "hello\n");
    let _unconfined = fallback_only(HEAD);
    for (m, breach) in LIARS {
        let (_s, _base, v) = loop_run(m);
        assert_eq!(v["reason"], "head-moved", "{m:?}: {v}");
        named(&v, breach, m);
    }
}
