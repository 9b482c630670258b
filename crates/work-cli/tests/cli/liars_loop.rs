//! Lying reviewers and adjudicators against `work loop run`'s mechanical backstops on review
//! judgement (docs/ground-truth.md, "Reviewers prove they looked"): each liar is caught, each
//! honest twin is not.

use crate::loop_run::{DIR, knob, log, run, setup, start};
use crate::support::Scenario;
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
