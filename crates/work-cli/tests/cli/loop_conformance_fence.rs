//! `--expect-run-id` is the fence against changing an orphaned run's cohort: required on every
//! mutating cohort verb, with the work-loop scripts' exit codes when it is missing (a malformed
//! command line, exit 2; `schedule`'s own refusal, exit 1) or names another run (exit 1), and
//! nothing written either way.

use crate::loop_conformance::{DIR, init_pair, lp};
use crate::support::Scenario;

#[test]
fn every_mutating_cohort_verb_requires_the_run_id_and_refuses_another() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let fp = "a".repeat(64);
    let cycle = format!("{run}:1");
    let verbs: [(&[&str], i32); 6] = [
        (&["cohort", "approve-plan", DIR], 2),
        (&["cohort", "schedule", DIR], 1),
        (&["cohort", "wave", "advance", DIR, "--from-index", "0"], 2),
        (&["cohort", "record-attempt", DIR, "--phase", "implement", "--cycle-id", &cycle], 2),
        (&["cohort", "review", "record", DIR, "--fingerprint", &fp], 2),
        (&["cohort", "plan", "mark-reviewed", DIR], 2),
    ];
    let state = format!("{DIR}/state.json");
    for (args, missing_exit) in verbs {
        let before = s.read(&state);
        let (code, out, err) = lp(&s, args);
        assert_eq!(code, missing_exit, "{args:?} without --expect-run-id: {out}{err}");
        assert!(err.contains("--expect-run-id"), "{args:?}: the refusal names the flag: {err}");
        assert_eq!(s.read(&state), before, "{args:?} wrote without the fence");
        let mut wrong = args.to_vec();
        wrong.extend_from_slice(&["--expect-run-id", "another-run"]);
        let (code, out, err) = lp(&s, &wrong);
        assert_eq!(code, 1, "{wrong:?}: {out}{err}");
        assert!(err.contains("--expect-run-id mismatch") && err.contains("another-run"), "{wrong:?}: {err}");
        assert_eq!(s.read(&state), before, "{wrong:?} wrote for another run");
    }
    // The honest twin: with the run's own id each verb runs.
    let (code, _, err) = lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = lp(&s, &["cohort", "schedule", DIR, "--expect-run-id", &run]);
    assert_eq!(code, 0, "{err}");
    // `schedule check-current` only reads: no fence needed.
    let (code, _, err) = lp(&s, &["cohort", "schedule", "check-current", DIR]);
    assert_eq!(code, 0, "{err}");
}
