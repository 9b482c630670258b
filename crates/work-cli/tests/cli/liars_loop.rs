//! Lying reviewers and adjudicators against `work loop run`'s mechanical backstops on review
//! judgement (docs/ground-truth.md, "Reviewers prove they looked"): each liar is caught, each
//! honest twin is not.

use crate::loop_run::{DIR, knob, log, run, setup, start};
use crate::support::{Scenario, fallback_only, refused};
use serde_json::Value;

fn adjudication(s: &Scenario, round: u32) -> Value {
    s.read_json(&format!("{DIR}/reviews/code-1/r{round}-adversarial-reviewer.adjudication.json"))
}

fn code_reviews(s: &Scenario) -> usize {
    log(s).iter().filter(|l| l["role"] == "adversarial-reviewer" && l["phase"] == "code").count()
}

#[test]
fn loop_run_liar_reviewer_that_answers_clean_without_reading_a_changed_file_is_dropped() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "reviewer-lazy", "always");
    let v = start(&s, &agent, &[], 1);
    assert_eq!(v["reason"], "reviewer-missing", "{v}");
    let msg = v["message"].as_str().unwrap_or_default();
    assert!(msg.contains("files_read") && msg.contains("hello.txt") && msg.contains("refused twice"), "{v}");
    assert_eq!(code_reviews(&s), 2, "asked once more with the reason, then dropped");
}

#[test]
fn loop_run_honest_twin_reviewer_that_names_the_files_it_read_is_ready() {
    // Lazy once, then names the changed file when told why: the retry is taken.
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "reviewer-lazy", "once");
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(code_reviews(&s), 2);
    let report = s.read_json(&format!("{DIR}/reviews/code-1/r1-adversarial-reviewer.report.json"));
    let read = report["files_read"].as_array().cloned().unwrap_or_default();
    assert!(read.contains(&serde_json::json!("hello.txt")), "{report}");
    let verdict = s.read_json(&format!("{DIR}/reviews/code-1/review-verdict.json"));
    assert_eq!(verdict["state"], "READY", "{verdict}");
}

#[test]
fn loop_run_liar_adjudicator_that_refutes_without_evidence_is_not_taken_at_its_word() {
    for (how, why) in [("none", "cites no evidence"), ("wrong", "is not in lines"), ("outside", "refused")] {
        let s = Scenario::new();
        let agent = setup(&s, "test -f hello.txt", true);
        knob(&s, "review-finding", "1");
        knob(&s, "adj-evidence", how);
        let v = start(&s, &agent, &[], 3);
        assert_eq!(v["reason"], "adjudication-indeterminate", "{how}: {v}");
        let adj = adjudication(&s, 1);
        assert_eq!(adj["findings"][0]["disposition"], "indeterminate", "{how}: {adj}");
        let note = adj["findings"][0]["engine"].as_str().unwrap_or_default();
        assert!(note.contains("refutation was not accepted") && note.contains(why), "{how}: {note}");
    }
}

#[test]
fn loop_run_honest_twin_adjudicator_that_quotes_the_line_it_read_refutes() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    knob(&s, "review-finding", "1");
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    let adj = adjudication(&s, 1);
    assert_eq!(adj["findings"][0]["disposition"], "refuted", "{adj}");
    assert_eq!(adj["findings"][0]["evidence"]["location"], "hello.txt:1", "{adj}");
    assert!(adj.get("engine").is_none(), "{adj}");
}

/// The gate turns red once a reviewer leaves `.agent-state/gate-red` (after GATES passed).
const FLAKY_GATE: &str = "test -f hello.txt && test ! -f .agent-state/gate-red";

#[test]
fn loop_run_liar_adjudicator_cannot_refute_a_finding_about_a_red_gate() {
    let s = Scenario::new();
    let agent = setup(&s, FLAKY_GATE, true);
    knob(&s, "review-finding", "1");
    knob(&s, "finding-gate", "test");
    knob(&s, "gate-red-by-reviewer", "1");
    let v = run(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    let v = run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "plan-human-gate", "{v}");
    let (code, out, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--json", "--resume"]);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(!out.contains("code-human-gate"), "a red gate's finding never ships: {out}");
    let adj = adjudication(&s, 1);
    assert_eq!(adj["findings"][0]["disposition"], "sustained", "{adj}");
    let note = adj["findings"][0]["engine"].as_str().unwrap_or_default();
    assert!(note.contains("gate `test` is red"), "{note}");
}

#[test]
fn loop_run_honest_twin_adjudicator_refutes_a_finding_about_a_green_gate() {
    let s = Scenario::new();
    let agent = setup(&s, FLAKY_GATE, true);
    knob(&s, "review-finding", "1");
    knob(&s, "finding-gate", "test");
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    let adj = adjudication(&s, 1);
    assert_eq!(adj["findings"][0]["disposition"], "refuted", "{adj}");
}

#[test]
fn loop_run_liar_implementer_that_deletes_a_failing_test_is_caught_by_the_suite_report() {
    let s = Scenario::new();
    crate::liars_suite::python_files(&s);
    let agent = setup(&s, "python3 -m pytest -q tests", true);
    // Every old line kept, the failing test deleted by an appended line: the gate goes green.
    let liar = format!("tests/test_lib.py|{}del test_f_is_one\\n", crate::liars_suite::TEST_LIB.replace('\n', "\\n"));
    knob(&s, "impl-rewrite", &liar);
    let v = start(&s, &agent, &[], 1);
    assert_eq!(v["reason"], "check-tampered", "{v}");
    let msg = v["message"].as_str().unwrap_or_default();
    assert!(msg.contains("test_lib::test_f_is_one") && msg.contains("vanished"), "{v}");
}

#[test]
fn loop_run_honest_twin_implementer_that_fixes_the_code_passes_the_suite_report() {
    let s = Scenario::new();
    crate::liars_suite::python_files(&s);
    let agent = setup(&s, "python3 -m pytest -q tests", true);
    knob(&s, "impl-rewrite", "lib.py|def f():\\n    return 1\\n");
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
}

// ------------------------------------------------- work lost between implementer steps

/// A two-task plan (task 2 depends on task 1: two waves, the gates between them); each task's
/// implementer runs its shell command.
/// Task 2's shell: puts README.md back as the base has it, task 1's line lost, and adds its
/// own. Read from git's objects (`git show`), as `git checkout --` would do without writing
/// `.git`: a loss the sandbox does not refuse, judged the same confined or not.
const REVERT_README: &str = "git show HEAD:README.md > README.md && printf 'task two\\n' >> README.md";

fn two_tasks(task2_body: &str, task1: &str, task2: &str) -> (Scenario, String) {
    let s = Scenario::new();
    let agent = setup(&s, "true", true);
    s.write(
        &format!("{DIR}/plan.md"),
        &format!(
            "# Plan\n\n**Status:** Approved\n\n## Task 1: Write the first part\nDo the first part.\n\n## Task 2: Write the second part\nDepends on: 1\n{task2_body}\n"
        ),
    );
    s.commit("two tasks");
    knob(&s, "impl-task-1", task1);
    knob(&s, "impl-task-2", task2);
    (s, agent)
}

/// Asserts a `snapshot-loss` stop that names `path` and `line` and the snapshot that recovers
/// `path` as `content`, kept by a ref (the tree does not show it).
fn assert_lost(s: &Scenario, v: &Value, path: &str, line: &str, content: &str) {
    assert_eq!(v["reason"], "snapshot-loss", "{v}");
    let lost = &v["lost_work"];
    assert_eq!((lost["from"].as_str(), lost["to"].as_str()), (Some("task-1"), Some("task-2")), "{v}");
    let sha = lost["snapshot"].as_str().expect("the snapshot");
    let msg = v["message"].as_str().unwrap_or_default();
    assert!(msg.contains(line) && msg.contains(path) && msg.contains(sha), "{v}");
    let named =
        lost["lines"].as_array().into_iter().flatten().any(|l| {
            l["path"] == path && l["lines"].as_array().into_iter().flatten().any(|x| x.as_str() == Some(line))
        });
    assert!(named, "{v}");
    assert!(lost["recovery"].as_array().into_iter().flatten().any(|r| r == &format!("git show {sha}:{path}")), "{v}");
    assert_eq!(s.git(&["show", &format!("{sha}:{path}")]), content, "the snapshot recovers it");
    let kept = s.git(&["rev-parse", lost["snapshot_ref"].as_str().expect("the ref")]);
    assert_eq!(kept.trim(), sha, "the ref keeps the snapshot");
    let status = s.git(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(!status.contains("refs/") && !status.contains(sha), "{status}");
    let st = s.read_json(&format!("{DIR}/loop-run.json"));
    assert_eq!(st["lost_work"], *lost, "the state records the loss");
}

#[test]
fn loop_run_liar_that_stashes_an_earlier_tasks_untracked_file_is_blocked_naming_it() {
    let _unconfined = fallback_only(refused::GIT);
    let (s, agent) = two_tasks(
        "Write hello.txt.",
        "printf 'parse the greeting\\n' > parser.txt",
        "git stash push -q -u -- parser.txt && printf 'hello\\n' > hello.txt",
    );
    let v = start(&s, &agent, &[], 1);
    assert_lost(&s, &v, "parser.txt", "parse the greeting", "parse the greeting\n");
    assert_eq!(v["lost_work"]["paths"], serde_json::json!(["parser.txt"]), "{v}");
}

#[test]
fn loop_run_liar_that_checks_out_a_file_and_re_edits_it_is_blocked_naming_the_lines() {
    let (s, agent) =
        two_tasks("Add a second line to README.md.", "printf 'usage: run hello\\n' >> README.md", REVERT_README);
    let v = start(&s, &agent, &[], 1);
    assert_lost(&s, &v, "README.md", "usage: run hello", "demo\nusage: run hello\n");
    assert_eq!(v["lost_work"]["paths"], serde_json::json!([]), "README.md is still changed: {v}");
    // A resume redoes task 2 and judges it against the same boundary; the human output names
    // the command that recovers the file.
    let sha = v["lost_work"]["snapshot"].as_str().expect("the snapshot");
    let (code, out, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--resume"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("(snapshot-loss)") && out.contains("`usage: run hello`"), "{out}");
    assert!(out.contains(&format!("recover: git show {sha}:README.md")), "{out}");
}

#[test]
fn loop_run_liar_that_deletes_an_earlier_tasks_new_file_is_blocked_naming_it() {
    let (s, agent) = two_tasks(
        "Write hello.txt.",
        "printf 'def greet():\\n    return 1\\n' > greet.py",
        "rm greet.py && printf 'hello\\n' > hello.txt",
    );
    let v = start(&s, &agent, &[], 1);
    assert_lost(&s, &v, "greet.py", "def greet():", "def greet():\n    return 1\n");
}

#[test]
fn loop_run_liar_whose_loss_comes_after_a_resume_and_a_gc_is_blocked_by_the_kept_snapshot() {
    // Task 1 runs in one invocation; the budget stops task 2; `git gc --prune=now` runs; the
    // resumed task 2 loses task 1's line: the boundary the first invocation took still names it.
    let (s, agent) =
        two_tasks("Add a second line to README.md.", "printf 'usage: run hello\\n' >> README.md", REVERT_README);
    let v = crate::loop_run::run(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    let v = crate::loop_run::run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "plan-human-gate", "{v}");
    let v = crate::loop_run::run(&s, &agent, &["--resume", "--budget-dispatches", "1"], 1);
    assert_eq!(v["reason"], "budget", "{v}");
    s.git(&["gc", "-q", "--prune=now"]);
    let v = crate::loop_run::run(&s, &agent, &["--resume"], 1);
    assert_lost(&s, &v, "README.md", "usage: run hello", "demo\nusage: run hello\n");
}

#[test]
fn loop_run_honest_twin_that_extends_an_earlier_tasks_file_is_not_blocked() {
    let (s, agent) = two_tasks(
        "Add a second line to README.md.",
        "printf 'usage: run hello\\n' >> README.md",
        "printf 'usage: run hello --loud\\n' >> README.md",
    );
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert!(v.get("lost_work").is_none(), "{v}");
    assert_eq!(s.read("README.md"), "demo\nusage: run hello\nusage: run hello --loud\n");
}

#[test]
fn loop_run_honest_twin_whose_task_says_it_replaces_the_earlier_lines_is_not_blocked() {
    let (s, agent) = two_tasks(
        "Replace the line `usage: run hello` in README.md with `usage: hello --loud`, and remove notes.txt.",
        "printf 'usage: run hello\\n' >> README.md && printf 'draft notes\\n' > notes.txt",
        "sed -i 's/usage: run hello/usage: hello --loud/' README.md && rm notes.txt",
    );
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(s.read("README.md"), "demo\nusage: hello --loud\n");
}

/// One task whose gate is red after it, so a repair round (`fix-gates`) follows.
fn task_then_repair(gate: &str, task1: &str, fix: &str) -> (Scenario, String) {
    let s = Scenario::new();
    let agent = setup(&s, gate, true);
    knob(&s, "impl-task-1", task1);
    knob(&s, "impl-task-fix-gates", fix);
    (s, agent)
}

#[test]
fn loop_run_liar_repair_round_that_stashes_the_tasks_file_away_is_blocked_naming_it() {
    let _unconfined = fallback_only(refused::GIT);
    let (s, agent) = task_then_repair(
        "test -f hello.txt",
        "printf 'parse the greeting\\n' > parser.txt",
        "git stash push -q -u -- parser.txt && printf 'hello\\n' > hello.txt",
    );
    let v = start(&s, &agent, &[], 1);
    assert_eq!(v["reason"], "snapshot-loss", "{v}");
    let lost = &v["lost_work"];
    assert_eq!((lost["from"].as_str(), lost["to"].as_str()), (Some("task-1"), Some("fix-gates")), "{v}");
    assert_eq!(lost["paths"], serde_json::json!(["parser.txt"]), "{v}");
    let sha = lost["snapshot"].as_str().expect("the snapshot");
    assert_eq!(s.git(&["show", &format!("{sha}:parser.txt")]), "parse the greeting\n");
}

#[test]
fn loop_run_honest_twin_repair_round_that_rewrites_the_tasks_line_is_not_blocked() {
    // A repair's brief is to change earlier work: a line rewritten in a file that stays
    // changed is its job (and is reviewed), not a loss.
    let (s, agent) = task_then_repair(
        "grep -q hello greeting.txt",
        "printf 'helo world\\n' > greeting.txt",
        "printf 'hello world\\n' > greeting.txt",
    );
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert!(crate::loop_run::transitions(&v).iter().any(|t| t.contains("gates-failed")), "{v}");
}

#[test]
fn loop_run_a_person_accepts_a_loss_with_approve_and_the_run_goes_on_without_another_dispatch() {
    let (s, agent) =
        two_tasks("Add a second line to README.md.", "printf 'usage: run hello\\n' >> README.md", REVERT_README);
    let v = start(&s, &agent, &[], 1);
    assert_eq!(v["reason"], "snapshot-loss", "{v}");
    // --reject has no meaning here: refused before anything runs.
    let (code, _, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--json", "--resume", "--reject", "no"]);
    assert_eq!(code, 2, "{err}");
    let implementer = crate::loop_run::calls(&s, "implementer");
    let v = crate::loop_run::run(&s, &agent, &["--resume", "--approve"], 3);
    assert_eq!(v["reason"], "code-human-gate", "the approval was taken at the loss, not at the merge gate: {v}");
    assert_eq!(crate::loop_run::calls(&s, "implementer"), implementer, "task 2 is not dispatched again");
    assert_eq!(s.read("README.md"), "demo\ntask two\n", "the tree as task 2 left it");
    let st = s.read_json(&format!("{DIR}/loop-run.json"));
    assert!(st.get("lost_work").is_none(), "{st}");
    assert_eq!(st["boundary"]["label"], "task-2", "{st}");
}
