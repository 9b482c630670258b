//! The lines the engine and cohort verbs print, byte for byte as the work-loop scripts print
//! them (a skill and the model reading it parse these lines): `loop-cohort: stop — <reason>`
//! refusals on stderr, `loop-cohort: …` answers on stdout, and `--json` as one line in the
//! scripts' JSON form, with the scripts' fields (`schema_version` in `identity --json`).

use crate::loop_conformance::{DIR, init_pair, lp};
use crate::support::Scenario;

fn abs_dir(s: &Scenario) -> String {
    std::fs::canonicalize(s.path(DIR)).expect("canonicalize").display().to_string()
}

#[test]
fn identity_answers_and_refuses_in_the_scripts_words() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let (code, out, err) = lp(&s, &["cohort", "identity", DIR, "--expect-run-id", &run]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, format!("loop-cohort: run_id={run} schema_version=1\n").as_str(), "")
    );
    let (code, out, _) = lp(&s, &["cohort", "identity", DIR, "--expect-run-id", &run, "--json"]);
    assert_eq!((code, out), (0, format!("{{\"run_id\": \"{run}\", \"schema_version\": 1}}\n")));
    let (code, out, err) = lp(&s, &["cohort", "identity", DIR, "--expect-run-id", "other"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(err, format!("loop-cohort: stop — identity: run_id mismatch (stored='{run}', expected='other')\n"));
    // A missing cohort is named by its absolute path.
    std::fs::remove_file(s.path(&format!("{DIR}/state.json"))).expect("rm");
    let (code, _, err) = lp(&s, &["cohort", "identity", DIR, "--expect-run-id", &run]);
    assert_eq!(code, 1);
    assert_eq!(err, format!("loop-cohort: stop — state.json missing at {0}/state.json\n", abs_dir(&s)));
}

#[test]
fn wave_check_check_and_plan_check_current_speak_as_the_scripts() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let (code, out, err) = lp(&s, &["cohort", "plan", "check-current", DIR]);
    assert_eq!((code, out.as_str(), err.as_str()), (1, "", "loop-cohort: stop — plan_review_status: pending\n"));
    assert_eq!(lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]).0, 0);
    assert_eq!(lp(&s, &["cohort", "schedule", DIR, "--expect-run-id", &run]).0, 0);
    let (code, out, _) = lp(&s, &["cohort", "plan", "check-current", DIR]);
    assert_eq!((code, out.as_str()), (0, "loop-cohort: plan check-current OK for feat\n"));
    let (code, out, _) = lp(&s, &["cohort", "schedule", "check-current", DIR]);
    assert_eq!((code, out.as_str()), (0, "loop-cohort: schedule check-current OK for feat\n"));
    let wave = |args: &[&str]| {
        let mut a = vec!["cohort", "wave", "check", DIR];
        a.extend_from_slice(args);
        lp(&s, &a)
    };
    let (code, out, _) = wave(&["--expect", "more"]);
    assert_eq!((code, out.as_str()), (0, "loop-cohort: wave check more — wave_index=0 has more waves (total=2)\n"));
    let (code, _, err) = wave(&["--expect", "last"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "loop-cohort: stop — wave check last: not the last wave (current=0, total=2)\n")
    );
    let (code, _, err) = wave(&["--expect", "more", "--wave-index", "1"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "loop-cohort: stop — wave check: current_wave_index=0 does not match --wave-index 1\n")
    );
    // A plan edited after scheduling: the scripts' status line, Python list and all.
    let plan = s.read(&format!("{DIR}/plan.md")).replace("Status: Approved", "Status: Drafting");
    s.write(&format!("{DIR}/plan.md"), &plan);
    let (code, _, err) = lp(&s, &["cohort", "schedule", "check-current", DIR]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "loop-cohort: stop — schedule check-current: plan.md Status is 'Drafting'; expected one of ['Approved', 'Executing', 'Done'] after approval\n"
    );
    // A retry cap reached.
    let mut st = s.read_json(&format!("{DIR}/state.json"));
    st["review_retry_count"] = serde_json::json!(5);
    s.write(&format!("{DIR}/state.json"), &st.to_string());
    let (code, out, err) = lp(&s, &["cohort", "check", DIR, "--phase", "review"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (1, "", "loop-cohort: stop — review retry cap reached (5/5); reset and start a new run\n")
    );
}
