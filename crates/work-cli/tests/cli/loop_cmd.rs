//! `work loop` end to end: the engine and cohort through a whole code-mode run, refusals that
//! change nothing, confinement, a multi-process race, the lint, the workspace preflight and
//! the base-freshness check.

use crate::support::Scenario;
use serde_json::Value;

const DIR: &str = "docs/specs/feat";

fn spec(s: &Scenario, status: &str) {
    s.write(
        &format!("{DIR}/spec.md"),
        &format!("# Feat\n\n**Status:** {status}\n\n## Acceptance criteria\n- [x] works\n"),
    );
}

fn plan(s: &Scenario, status: &str) {
    s.write(
        &format!("{DIR}/plan.md"),
        &format!("# Plan\n\n**Status:** {status}\n\n## Task 1: base\n\n## Task 2: top\nDepends on: 1\n"),
    );
}

/// A failed `work loop` call printed one line: a refusal in the scripts' voice
/// (`loop-engine: stop — …`, `loop-cohort: stop — …`), or the project's `error: …` for a
/// malformed command line and the verbs outside the engine and cohort.
fn assert_one_line_error(stderr: &str) {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("  ")).collect();
    assert_eq!(lines.len(), 1, "expected a one-line error, got:\n{stderr}");
    let voiced = ["error: ", "loop-engine: stop — ", "loop-cohort: stop — "];
    assert!(voiced.iter().any(|p| lines[0].starts_with(p)), "expected a refusal line, got {:?}", lines[0]);
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
}

fn ok(s: &Scenario, args: &[&str]) -> Value {
    let mut a = vec!["loop"];
    a.extend_from_slice(args);
    a.push("--json");
    s.run_json(&a, 0)
}

fn refused(s: &Scenario, args: &[&str], code: i32) -> String {
    let before = std::fs::read(s.path(&format!("{DIR}/engine-state.json"))).ok();
    let before_c = std::fs::read(s.path(&format!("{DIR}/state.json"))).ok();
    let mut a = vec!["loop"];
    a.extend_from_slice(args);
    let (c, out, err) = s.run(&a);
    assert_eq!(c, code, "work {a:?}\nstdout: {out}\nstderr: {err}");
    assert_one_line_error(&err);
    assert_eq!(std::fs::read(s.path(&format!("{DIR}/engine-state.json"))).ok(), before, "engine state changed");
    assert_eq!(std::fs::read(s.path(&format!("{DIR}/state.json"))).ok(), before_c, "cohort state changed");
    err
}

#[test]
fn a_code_mode_run_end_to_end() {
    let s = Scenario::new();
    spec(&s, "Draft");
    plan(&s, "Drafting");
    let init = ok(&s, &["engine", "init", DIR, "--mode", "code"]);
    let run = init["run_id"].as_str().expect("run_id").to_string();
    assert_eq!(init["state"], "SPEC-PLAN-DRAFTING");
    // Plain init prints just the run id; a second init is refused.
    refused(&s, &["engine", "init", DIR, "--mode", "code"], 1);
    ok(&s, &["cohort", "init", DIR, "--run-id", &run]);
    ok(&s, &["cohort", "identity", DIR, "--expect-run-id", &run]);
    refused(&s, &["cohort", "identity", DIR, "--expect-run-id", "nope"], 1);
    ok(&s, &["engine", "transition", DIR, "spec-ready"]);
    let pc = s.run_json(&["loop", "cohort", "plan", "check-current", DIR, "--json"], 1);
    assert_eq!(pc["plan_review_status"], "pending");
    ok(&s, &["engine", "transition", DIR, "reviewers-clean"]);
    // The spec gate refuses until spec.md says Approved.
    let err = refused(&s, &["engine", "transition", DIR, "spec-approved"], 1);
    assert!(err.contains("spec.md Status is Draft"), "{err}");
    spec(&s, "Approved");
    let st = ok(&s, &["engine", "transition", DIR, "spec-approved"]);
    assert_eq!((st["state"].as_str(), st["pending_human_wait"].as_bool()), (Some("PLAN-HUMAN-GATE"), Some(true)));
    refused(&s, &["engine", "transition", DIR, "plan-approved"], 1);
    plan(&s, "Approved");
    ok(&s, &["engine", "transition", DIR, "plan-approved"]);
    refused(&s, &["engine", "transition", DIR, "plan-locked"], 1);
    refused(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", "other"], 1);
    assert_eq!(ok(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run])["changed"], true);
    assert_eq!(ok(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run])["changed"], false);
    let sched = ok(&s, &["cohort", "schedule", DIR, "--expect-run-id", &run]);
    assert_eq!(sched["schedule_waves"], serde_json::json!([["1"], ["2"]]));
    ok(&s, &["engine", "transition", DIR, "plan-locked"]);
    spec(&s, "Implementing");
    ok(&s, &["engine", "transition", DIR, "wave-complete"]);
    s.run_json(&["loop", "cohort", "wave", "check", DIR, "--expect", "more", "--json"], 0);
    s.run_json(&["loop", "cohort", "wave", "check", DIR, "--expect", "last", "--json"], 1);
    refused(&s, &["engine", "transition", DIR, "gates-clean"], 1);
    // Gates fail once: record-attempt is idempotent per cycle id.
    let gf = ok(&s, &["engine", "transition", DIR, "gates-failed"]);
    let cycle = gf["last_event_context"]["cycle_id"].as_str().expect("cycle").to_string();
    assert_eq!(cycle, format!("{run}:{}", gf["transition_sequence"]));
    for _ in 0..2 {
        ok(
            &s,
            &["cohort", "record-attempt", DIR, "--phase", "implement", "--cycle-id", &cycle, "--expect-run-id", &run],
        );
    }
    assert_eq!(ok(&s, &["cohort", "status", DIR])["implementation_retry_count"], 1);
    ok(&s, &["engine", "transition", DIR, "wave-complete"]);
    let wp = ok(&s, &["engine", "transition", DIR, "wave-passed", "--wave-index", "0"]);
    assert_eq!(wp["last_event_context"]["completed_wave_index"], 0);
    for _ in 0..2 {
        ok(&s, &["cohort", "wave", "advance", DIR, "--from-index", "0", "--expect-run-id", &run]);
    }
    assert_eq!(ok(&s, &["cohort", "status", DIR])["current_wave_index"], 1);
    ok(&s, &["engine", "transition", DIR, "wave-complete"]);
    ok(&s, &["engine", "transition", DIR, "gates-clean"]);
    // Review: findings, then the same findings again (stasis).
    s.write(
        "review/adj-1.json",
        r#"{"findings": [{"id": "F1", "severity": "blocker", "disposition": "sustained", "title": "Leak", "file": "a.rs"}]}"#,
    );
    let insp = ok(&s, &["cohort", "review", "inspect", DIR, "--adjudication", "review/adj-1.json"]);
    assert_eq!(
        (insp["classification"].as_str(), insp["matches_previous_round"].as_bool()),
        (Some("findings"), Some(false))
    );
    let fp = insp["fingerprints"][0].as_str().expect("fp").to_string();
    ok(&s, &["engine", "transition", DIR, "findings-remain"]);
    ok(&s, &["cohort", "review", "record", DIR, "--fingerprint", &fp, "--expect-run-id", &run]);
    let again = ok(&s, &["cohort", "review", "inspect", DIR, "--adjudication", "review/adj-1.json"]);
    assert_eq!(again["matches_previous_round"], true);
    ok(&s, &["engine", "transition", DIR, "wave-complete"]);
    ok(&s, &["engine", "transition", DIR, "gates-clean"]);
    // reviewers-clean needs Shipped (or Implementing with --intent-incomplete).
    refused(&s, &["engine", "transition", DIR, "reviewers-clean"], 1);
    spec(&s, "Shipped");
    ok(&s, &["engine", "transition", DIR, "reviewers-clean"]);
    s.write("review/adj-2.json", r#"{"findings": [{"disposition": "refuted", "title": "noise"}]}"#);
    let rec = ok(
        &s,
        &[
            "cohort",
            "review",
            "record",
            DIR,
            "--report",
            "review/adj-2.json",
            "--adjudication",
            "--expect-run-id",
            &run,
        ],
    );
    assert_eq!(rec["review_round_count"], 2);
    ok(&s, &["engine", "transition", DIR, "done"]);
    let st = ok(&s, &["engine", "status", DIR]);
    for k in
        ["state", "mode", "run_id", "last_event", "last_event_context", "pending_human_wait", "transition_sequence"]
    {
        assert!(st.get(k).is_some(), "engine status lacks {k}");
    }
    assert_eq!((st["state"].as_str(), st["last_event"].as_str()), (Some("DONE"), Some("done")));
    let c = ok(&s, &["cohort", "status", DIR]);
    for k in [
        "current_wave_index",
        "schedule_waves",
        "review_retry_count",
        "implementation_retry_count",
        "review_round_count",
    ] {
        assert!(c.get(k).is_some(), "cohort status lacks {k}");
    }
    assert_eq!(ok(&s, &["engine", "resume", DIR])["route"]["action"], "terminal");
    // Every event is now illegal; reset removes both files.
    refused(&s, &["engine", "transition", DIR, "spec-ready"], 1);
    ok(&s, &["cohort", "reset", DIR]);
    ok(&s, &["engine", "reset", DIR]);
    assert!(!s.path(&format!("{DIR}/engine-state.json")).exists());
    // A missing state file stops with exit 1, as the scripts do.
    let (code, _, err) = s.run(&["loop", "engine", "status", DIR, "--json"]);
    assert_eq!(code, 1);
    assert_one_line_error(&err);
    assert!(s.path(&format!("{DIR}/spec.md")).exists(), "reset keeps spec.md");
}

#[test]
fn init_prints_the_run_id_and_a_legacy_state_refuses_everything() {
    let s = Scenario::new();
    let (code, out, _) = s.run(&["loop", "engine", "init", DIR, "--mode", "spec-plan"]);
    assert_eq!(code, 0);
    let run = out.trim();
    assert!(run.starts_with("loop-") && !run.contains(char::is_whitespace), "{out}");
    let p = s.path(&format!("{DIR}/engine-state.json"));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
    v["state"] = Value::from("SPEC-PLAN-HUMAN-GATE");
    std::fs::write(&p, v.to_string()).expect("write");
    for e in ["spec-ready", "spec-approved", "plan-approved", "reviewers-clean", "done"] {
        let err = refused(&s, &["engine", "transition", DIR, e], 1);
        assert!(err.contains("illegal transition"), "{err}");
    }
    let (code, out, _) = s.run(&["loop", "engine", "transition", DIR, "spec-ready", "--json"]);
    assert_eq!(code, 1);
    let doc: Value = serde_json::from_str(&out).expect("one JSON document on refusal");
    assert_eq!(doc["reason"], "illegal_transition");
}

#[test]
fn bad_input_touches_nothing() {
    let s = Scenario::new();
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), s.path("link-out")).expect("symlink");
    let abs = outside.path().display().to_string();
    for p in
        [abs.as_str(), "../x", "docs/./specs", "docs//specs", "docs\\specs", "C:/x", "", "link-out", "link-out/feat"]
    {
        // The engine and cohort stop with exit 1 on a path they will not use (the scripts' code).
        let (code, out, err) = s.run(&["loop", "engine", "init", p, "--mode", "code"]);
        assert_eq!(code, 1, "{p:?}: {out} {err}");
        assert_one_line_error(&err);
        let (code, _, err) = s.run(&["loop", "cohort", "status", p]);
        assert_eq!(code, 1, "{p:?}");
        assert_one_line_error(&err);
    }
    assert!(outside.path().read_dir().expect("ls").next().is_none(), "wrote outside the repository");
    s.run(&["loop", "engine", "init", DIR, "--mode", "code"]);
    // What the scripts check after parsing stops with exit 1; a malformed command line is 2.
    refused(&s, &["engine", "transition", DIR, "not-an-event"], 1);
    refused(&s, &["engine", "transition", DIR, "spec-ready", "--wave-index", "0"], 1);
    refused(&s, &["engine", "init", DIR, "--mode", "light"], 2);
    refused(&s, &["cohort", "review", "classify", "../adj.json"], 1);
    s.write("bad.json", "{not json");
    refused(&s, &["cohort", "review", "classify", "bad.json"], 1);
    let (code, _, err) = s.run(&["loop", "cohort", "review", "record", DIR, "--all-skipped", "--fingerprint", "x"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
}

#[test]
fn racing_processes_cannot_both_transition() {
    let s = Scenario::new();
    let init = s.run_json(&["loop", "engine", "init", DIR, "--mode", "code", "--json"], 0);
    let run = init["run_id"].as_str().expect("run id").to_string();
    // Every transition first checks that the cohort belongs to the engine's run.
    s.run_json(&["loop", "cohort", "init", DIR, "--run-id", &run, "--json"], 0);
    let bin = assert_cmd::cargo::cargo_bin("work");
    let children: Vec<_> = (0..6)
        .map(|_| {
            #[expect(clippy::disallowed_methods, reason = "the race needs several real processes at once")]
            let mut c = std::process::Command::new(&bin);
            c.args(["loop", "engine", "transition", DIR, "spec-ready"])
                .current_dir(s.root())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut wins = 0;
    for c in children {
        let out = c.wait_with_output().expect("wait");
        if out.status.success() {
            wins += 1;
        } else {
            assert_eq!(out.status.code(), Some(1));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_one_line_error(&err);
            // A loser waited its turn and then found the event illegal: never a lock refusal.
            assert!(err.contains("illegal transition"), "{err}");
        }
    }
    assert_eq!(wins, 1);
    let st = s.run_json(&["loop", "engine", "status", DIR, "--json"], 0);
    assert_eq!((st["transition_sequence"].as_u64(), st["state"].as_str()), (Some(1), Some("SPEC-PLAN-REVIEW")));
    // The winner's release removed the lock file, as the scripts' release does.
    assert!(!s.path(&format!("{DIR}/engine-state.json.lock")).exists());
    ok(&s, &["engine", "transition", DIR, "findings-remain"]);
}

#[test]
fn the_state_table_doc_is_what_the_binary_prints() {
    let s = Scenario::new();
    let (code, out, _) = s.run(&["loop", "engine", "table"]);
    assert_eq!(code, 0);
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/loop-state-table.md")).expect("doc");
    assert_eq!(out, doc);
}

#[test]
fn lint_and_workspace_status_through_the_binary() {
    let s = Scenario::new();
    s.write("workspace.toml", "[backlog]\nopen = [{ slug = \"later\" }]\n[work]\nqueue = [\"feat\"]\n");
    s.write(&format!("{DIR}/spec.md"), "Status: Shipped\n## Acceptance criteria\n- [ ] a (deferred: later)\n- [ ] b\n");
    s.write(&format!("{DIR}/plan.md"), "Status: Done\n## Task 1: a\n");
    // The spec is new since the base: its move to Shipped is checked.
    let lint = s.run_json(&["loop", "lint-spec-status", "--root", ".", "--base-ref", "HEAD", "--json"], 1);
    assert_eq!(lint["errors"], 1);
    assert_eq!(lint["findings"][0]["code"], "unchecked_acceptance_criterion");
    let ws = s.run_json(&["loop", "workspace-status", "--json"], 0);
    assert_eq!(ws["canonical"]["findings"][0]["code"], "stale_queue");
    assert_eq!(ws["canonical"]["ready"], serde_json::json!([]));
    s.write(&format!("{DIR}/spec.md"), "Status: Approved\n## Acceptance criteria\n- [ ] a\n");
    s.write(&format!("{DIR}/plan.md"), "Status: Approved\n## Task 1: a\n");
    s.run_json(&["loop", "lint-spec-status", "--json"], 0);
    let ws = s.run_json(&["loop", "workspace-status", "--spec", "docs/specs/feat/", "--json"], 0);
    assert_eq!(ws["canonical"]["ready"][0]["path"], DIR);
    s.write("workspace.toml", "[work\n");
    let (code, _, err) = s.run(&["loop", "workspace-status"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
}

// ---- review fixes ----------------------------------------------------------------------

const EVENTS: [&str; 14] = [
    "spec-ready",
    "findings-remain",
    "reviewers-clean",
    "spec-approved",
    "spec-rejected",
    "plan-approved",
    "plan-rejected",
    "plan-locked",
    "wave-complete",
    "wave-passed",
    "gates-clean",
    "gates-failed",
    "blocker-applied",
    "done",
];

#[test]
fn a_hand_written_legacy_state_refuses_every_event_with_exit_1() {
    let s = Scenario::new();
    s.write(&format!("{DIR}/engine-state.json"), r#"{"state":"SPEC-PLAN-HUMAN-GATE"}"#);
    for e in EVENTS {
        let err = refused(&s, &["engine", "transition", DIR, e], 1);
        // wave-passed without --wave-index is refused before the state is read, as the
        // scripts do.
        let want = if e == "wave-passed" { "--wave-index" } else { "illegal transition" };
        assert!(err.contains(want), "{e}: {err}");
    }
    // An older cohort without schema, created_at or caps loads too.
    s.write(&format!("{DIR}/state.json"), r#"{"run_id":"r1","current_wave_index":0,"schedule_waves":[["1"],["2"]]}"#);
    let c = ok(&s, &["cohort", "status", DIR]);
    assert_eq!((c["max_implementation_retries"].as_u64(), c["wave_count"].as_u64()), (Some(5), Some(2)));
    ok(&s, &["cohort", "wave", "advance", DIR, "--from-index", "0", "--expect-run-id", "r1"]);
}

#[test]
fn lint_root_accepts_an_absolute_path_inside_the_repository() {
    let s = Scenario::new();
    s.write(&format!("{DIR}/spec.md"), "Status: Executing\n");
    let abs = std::fs::canonicalize(s.root()).expect("canon").display().to_string();
    let doc = s.run_json(&["loop", "lint-spec-status", "--root", &abs, "--json"], 1);
    assert_eq!(doc["findings"][0]["code"], "plan_vocabulary_in_spec");
    let doc = s.run_json(&["loop", "lint-spec-status", "--root", &format!("{abs}/docs"), "--json"], 0);
    assert_eq!(doc["root"], "docs");
    let outside = tempfile::tempdir().expect("outside");
    // As the scripts take it, a directory outside the repository is linted as its own root;
    // one that does not exist is bad input.
    let (code, out, _) = s.run(&["loop", "lint-spec-status", "--root", &outside.path().display().to_string()]);
    assert_eq!(code, 0, "{out}");
    let missing = outside.path().join("nope").display().to_string();
    let (code, _, err) = s.run(&["loop", "lint-spec-status", "--root", &missing]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
}

/// A run sealed with plan-locked (plan.md Approved), at CODE-IMPLEMENTATION.
fn sealed(s: &Scenario) -> String {
    spec(s, "Approved");
    plan(s, "Approved");
    let run = ok(s, &["engine", "init", DIR, "--mode", "code"])["run_id"].as_str().expect("run").to_string();
    ok(s, &["cohort", "init", DIR, "--run-id", &run]);
    for e in ["spec-ready", "reviewers-clean", "spec-approved", "plan-approved"] {
        ok(s, &["engine", "transition", DIR, e]);
    }
    ok(s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]);
    ok(s, &["cohort", "schedule", DIR, "--expect-run-id", &run]);
    ok(s, &["engine", "transition", DIR, "plan-locked"]);
    run
}

#[test]
fn check_does_not_fail_on_plan_edits_after_the_seal() {
    let s = Scenario::new();
    spec(&s, "Draft");
    plan(&s, "Drafting");
    let run = ok(&s, &["engine", "init", DIR, "--mode", "code"])["run_id"].as_str().expect("run").to_string();
    ok(&s, &["cohort", "init", DIR, "--run-id", &run]);
    // Planning: the pending plan review fails bare check (the cue for pre-EXECUTE review).
    let (code, out, err) = s.run(&["loop", "cohort", "check", DIR]);
    assert_eq!(
        (code, out.trim(), err.trim()),
        (1, "", "loop-cohort: stop — plan_review_status: pending"),
        "a refusal's reason is on stderr"
    );
    s.run(&["loop", "engine", "reset", DIR]);
    s.run(&["loop", "cohort", "reset", DIR]);
    let run = sealed(&s);
    // The finish: plan.md Status: Done. Bare check still passes in CODE-*.
    plan(&s, "Done");
    let c = s.run_json(&["loop", "cohort", "check", DIR, "--expect-run-id", &run, "--json"], 0);
    assert_eq!(
        (c["plan_review_status"].as_str(), c["engine_state"].as_str()),
        (Some("approved"), Some("CODE-IMPLEMENTATION")),
        "a status bump is bookkeeping: the canonical hash still matches the approval"
    );
}

#[test]
fn review_inspect_says_matches_previous_round_in_plain_output() {
    let s = Scenario::new();
    let run = sealed(&s);
    s.write("review/adj.json", r#"{"findings": [{"disposition": "sustained", "title": "Leak", "file": "a.rs"}]}"#);
    let (code, out, _) = s.run(&["loop", "cohort", "review", "inspect", DIR, "--adjudication", "review/adj.json"]);
    assert_eq!(code, 0);
    assert!(out.lines().any(|l| l == "matches_previous_round: false"), "{out}");
    let fp = ok(&s, &["cohort", "review", "inspect", DIR, "--adjudication", "review/adj.json"])["fingerprints"][0]
        .as_str()
        .expect("fp")
        .to_string();
    ok(&s, &["cohort", "review", "record", DIR, "--fingerprint", &fp, "--expect-run-id", &run]);
    let (_, out, _) = s.run(&["loop", "cohort", "review", "inspect", DIR, "--adjudication", "review/adj.json"]);
    assert!(out.lines().any(|l| l == "matches_previous_round: true"), "{out}");
}

#[test]
fn spec_dir_flag_and_the_only_spec_dir_with_state() {
    let s = Scenario::new();
    // Nothing has state yet: exit 1, saying where it looked.
    let (code, _, err) = s.run(&["loop", "engine", "status"]);
    assert_eq!(code, 1);
    assert!(err.contains("docs/specs/*/"), "{err}");
    spec(&s, "Draft");
    plan(&s, "Drafting");
    let run = s.run_json(&["loop", "engine", "init", "--spec-dir", DIR, "--mode", "code", "--json"], 0)["run_id"]
        .as_str()
        .expect("run")
        .to_string();
    s.run_json(&["loop", "cohort", "init", "--spec-dir", DIR, "--run-id", &run, "--json"], 0);
    // The prose forms, without a spec directory.
    let (code, out, err) = s.run(&["loop", "engine", "transition", "spec-ready"]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(err.contains(&format!("using spec directory `{DIR}`")), "{err}");
    s.run_json(&["loop", "cohort", "check", "--phase", "gates-failed", "--json"], 0);
    s.run_json(&["loop", "cohort", "check", "--phase", "review", "--json"], 0);
    s.run_json(&["loop", "cohort", "wave", "check", "--expect", "last", "--json"], 0);
    s.run_json(&["loop", "engine", "transition", "--spec-dir", DIR, "findings-remain", "--json"], 0);
    let st = s.run_json(&["loop", "engine", "status", "--spec-dir", DIR, "--json"], 0);
    assert_eq!((st["state"].as_str(), st["transition_sequence"].as_u64()), (Some("SPEC-PLAN-DRAFTING"), Some(2)));
    // Both forms at once is a malformed command line (2); an unconfined --spec-dir is
    // refused with exit 1, as the scripts stop.
    let (code, _, _) = s.run(&["loop", "cohort", "status", DIR, "--spec-dir", DIR]);
    assert_eq!(code, 2);
    let (code, _, err) = s.run(&["loop", "cohort", "status", "--spec-dir", "../x"]);
    assert_eq!(code, 1);
    assert_one_line_error(&err);
    // A second spec directory with state: ambiguous, naming both.
    s.write("docs/specs/other/state.json", "{}");
    let (code, _, err) = s.run(&["loop", "cohort", "status"]);
    assert_eq!(code, 1);
    assert_one_line_error(&err);
    assert!(err.contains("docs/specs/feat, docs/specs/other"), "{err}");
}

#[test]
fn approve_plan_refuses_changed_files_unless_rebaseline() {
    let s = Scenario::new();
    let run = sealed(&s);
    s.write(&format!("{DIR}/plan.md"), "# Plan\n\n**Status:** Approved\n\n## Task 1: base\nedited\n");
    let err = refused(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run], 1);
    assert!(err.contains("plan_changed=True") && err.contains("spec_changed=False"), "{err}");
    let doc = ok(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run, "--rebaseline"]);
    assert_eq!((doc["changed"].as_bool(), doc["rebaselined"].as_bool()), (Some(true), Some(true)));
    assert_eq!(ok(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run])["changed"], false);
}

#[test]
fn reset_of_a_missing_spec_dir_is_a_no_op_and_still_confined() {
    let s = Scenario::new();
    for verb in ["engine", "cohort"] {
        let (code, out, err) = s.run(&["loop", verb, "reset", "docs/specs/nope"]);
        assert_eq!(code, 0, "{verb}: {out} {err}");
        let (code, _, err) = s.run(&["loop", verb, "reset", "../outside"]);
        assert_eq!(code, 1, "{verb}");
        assert_one_line_error(&err);
    }
    assert!(!s.path("docs/specs/nope").exists(), "reset created the directory");
    // A transition there is exit 1 naming the missing state, and creates nothing.
    let (code, _, err) = s.run(&["loop", "engine", "transition", "docs/specs/nope", "spec-ready"]);
    assert_eq!(code, 1);
    assert!(err.contains("no such file"), "{err}");
    assert!(!s.path("docs/specs/nope").exists());
}

#[test]
fn record_attempt_refuses_an_odd_cycle_id() {
    let s = Scenario::new();
    let run = sealed(&s);
    let long = "x".repeat(201);
    for bad in ["", "a b", "r;1", "r/1", long.as_str()] {
        refused(
            &s,
            &["cohort", "record-attempt", DIR, "--phase", "implement", "--cycle-id", bad, "--expect-run-id", &run],
            1,
        );
    }
    let id = format!("{run}:9");
    let doc =
        ok(&s, &["cohort", "record-attempt", DIR, "--phase", "implement", "--cycle-id", &id, "--expect-run-id", &run]);
    assert_eq!(doc["implementation_retry_count"], 1);
}
