//! `work loop` as a drop-in for the work-loop scripts: each case pins one observable the
//! scripts have (an accepted input, a JSON field, an exit code, a stream) through the real
//! binary. The deliberate differences that remain are listed in docs/loop-interpretations.md.

use crate::support::Scenario;
use serde_json::Value;

pub(crate) const DIR: &str = "docs/specs/feat";

pub(crate) fn lp(s: &Scenario, args: &[&str]) -> (i32, String, String) {
    let mut a = vec!["loop"];
    a.extend_from_slice(args);
    s.run(&a)
}

pub(crate) fn json_of(out: &str) -> Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("one JSON document on stdout ({e}): {out}"))
}

fn canon(s: &Scenario) -> String {
    std::fs::canonicalize(s.root()).expect("canonicalize").display().to_string()
}

// ── inputs the scripts accept ────────────────────────────────────────────────────────────

#[test]
fn an_absolute_spec_dir_inside_the_repository_is_accepted_and_one_outside_refused() {
    let s = Scenario::new();
    let abs = format!("{}/{DIR}", canon(&s));
    let (code, out, err) = lp(&s, &["engine", "init", &abs, "--mode", "code", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(s.path(&format!("{DIR}/engine-state.json")).is_file());
    let (code, _, err) = lp(&s, &["engine", "status", &abs, "--json"]);
    assert_eq!(code, 0, "{err}");
    // The liar: an absolute path that leaves the repository (directly or through a symlink).
    let outside = tempfile::tempdir().expect("outside");
    let (code, _, err) = lp(&s, &["engine", "init", &outside.path().join("x").display().to_string(), "--mode", "code"]);
    assert_eq!(code, 1, "{err}");
    assert!(!outside.path().join("x").exists(), "nothing is created outside the repository");
    std::os::unix::fs::symlink(outside.path(), s.path("docs/specs/link")).expect("symlink");
    let via = format!("{}/docs/specs/link/y", canon(&s));
    let (code, _, _) = lp(&s, &["engine", "init", &via, "--mode", "code"]);
    assert_eq!(code, 1);
    assert!(!outside.path().join("y").exists());
}

// ── real bugs ────────────────────────────────────────────────────────────────────────────

#[test]
fn a_status_inside_a_multi_line_html_comment_is_not_the_live_status() {
    let s = Scenario::new();
    let commented = "# Feat\n\n<!--\nStatus: Approved\n-->\nStatus: Draft\n";
    s.write(&format!("{DIR}/spec.md"), commented);
    s.write(&format!("{DIR}/plan.md"), "# Plan\n\nStatus: Approved\n\n### T1: base\n");
    let (_, out, _) = lp(&s, &["engine", "init", DIR, "--mode", "code", "--json"]);
    let run = json_of(&out)["run_id"].as_str().expect("run_id").to_string();
    let (code, _, err) = lp(&s, &["cohort", "init", DIR, "--run-id", &run]);
    assert_eq!(code, 0, "{err}");
    let before = s.read(&format!("{DIR}/state.json"));
    let (code, _, _) = lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]);
    assert_eq!(code, 1, "a Draft spec has no baseline, whatever a comment says");
    assert_eq!(s.read(&format!("{DIR}/state.json")), before, "no baseline recorded");
    // The honest twin: the same file with the live line Approved is accepted.
    s.write(&format!("{DIR}/spec.md"), "# Feat\n\n<!--\nStatus: Draft\n-->\nStatus: Approved\n");
    let (code, _, err) = lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn the_template_deferral_placeholder_is_not_an_unanchored_deferral() {
    let s = Scenario::new();
    s.write(
        &format!("{DIR}/spec.md"),
        "# Feat\n\nStatus: Draft\n\nMark a criterion `(deferred: <anchor>)` to defer it.\n\n(deferred: nowhere)\n",
    );
    let (code, out, err) = lp(&s, &["lint-spec-status", "--root", "."]);
    assert_eq!(code, 1, "{out}{err}");
    let all = format!("{out}{err}");
    assert!(all.contains("nowhere"), "the real anchor is flagged: {all}");
    assert!(!all.contains("<anchor>"), "the placeholder is not: {all}");
}

#[test]
fn pending_human_wait_is_derived_for_a_gate_state_file_without_the_field() {
    let s = Scenario::new();
    for (state, want) in
        [("SPEC-HUMAN-GATE", true), ("PLAN-HUMAN-GATE", true), ("CODE-HUMAN-GATE", true), ("CODE-REVIEW", false)]
    {
        s.write(&format!("{DIR}/engine-state.json"), &format!("{{\"state\": \"{state}\", \"mode\": \"code\"}}"));
        let (code, out, err) = lp(&s, &["engine", "status", DIR, "--json"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(json_of(&out)["pending_human_wait"], Value::Bool(want), "{state}");
    }
    // An explicit field wins.
    s.write(&format!("{DIR}/engine-state.json"), "{\"state\": \"CODE-HUMAN-GATE\", \"pending_human_wait\": false}");
    let (_, out, _) = lp(&s, &["engine", "status", DIR, "--json"]);
    assert_eq!(json_of(&out)["pending_human_wait"], Value::Bool(false));
}

#[test]
fn code_mode_plan_locked_needs_a_schedule() {
    let s = Scenario::new();
    s.write(&format!("{DIR}/spec.md"), "# Feat\n\nStatus: Approved\n");
    s.write(&format!("{DIR}/plan.md"), "# Plan\n\nStatus: Approved\n\n## Task 1: base\n");
    let (_, out, _) = lp(&s, &["engine", "init", DIR, "--mode", "code", "--json"]);
    let run = json_of(&out)["run_id"].as_str().expect("run_id").to_string();
    assert_eq!(lp(&s, &["cohort", "init", DIR, "--run-id", &run]).0, 0);
    for e in ["spec-ready", "reviewers-clean", "spec-approved", "plan-approved"] {
        assert_eq!(lp(&s, &["engine", "transition", DIR, e]).0, 0, "{e}");
    }
    assert_eq!(lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]).0, 0);
    let before = s.read(&format!("{DIR}/engine-state.json"));
    let (code, _, _) = lp(&s, &["engine", "transition", DIR, "plan-locked"]);
    assert_eq!(code, 1, "no schedule yet");
    assert_eq!(s.read(&format!("{DIR}/engine-state.json")), before, "nothing changed");
    assert_eq!(lp(&s, &["cohort", "schedule", DIR, "--expect-run-id", &run]).0, 0);
    let (code, _, err) = lp(&s, &["engine", "transition", DIR, "plan-locked"]);
    assert_eq!(code, 0, "{err}");
}

// ── base freshness: always one JSON document, `ok` or `surface` ──────────────────────────

fn freshness(s: &Scenario, args: &[&str], want: i32) -> Value {
    let (code, out, err) = lp(s, &[&["base-freshness"], args].concat());
    assert_eq!(code, want, "{out}{err}");
    let doc = json_of(&out);
    assert_eq!(doc["status"], if want == 0 { "ok" } else { "surface" }, "{doc}");
    assert!(doc["message"].as_str().is_some_and(|m| !m.is_empty()), "{doc}");
    doc
}

fn bare_remote(s: &Scenario, name: &str) -> (tempfile::TempDir, String) {
    let remote = tempfile::tempdir().expect("remote");
    let rpath = remote.path().display().to_string();
    s.git(&["init", "-q", "--bare", "-b", "main", &rpath]);
    s.git(&["remote", "add", name, &rpath]);
    s.git(&["push", "-q", name, "main"]);
    (remote, rpath)
}

fn push_upstream(rpath: &str) -> tempfile::TempDir {
    let other = tempfile::tempdir().expect("clone");
    let opath = other.path().join("c").display().to_string();
    let s = |args: &[&str]| {
        #[expect(clippy::disallowed_methods, reason = "tests set up fixtures with git directly")]
        let o = std::process::Command::new("git").args(args).output().expect("git");
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    s(&["clone", "-q", rpath, &opath]);
    s(&["-C", &opath, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "up"]);
    s(&["-C", &opath, "push", "-q", "origin", "HEAD:main"]);
    other
}

#[test]
fn base_freshness_passes_without_a_remote_and_answers_json_without_the_flag() {
    let s = Scenario::new();
    let doc = freshness(&s, &[], 0);
    assert_eq!(doc["target"], Value::Null);
    // A --target with no remote at all surfaces.
    freshness(&s, &["--target", "origin/main"], 1);
    let (_r, _) = bare_remote(&s, "origin");
    let doc = freshness(&s, &[], 0);
    assert_eq!(doc["target"], "origin/main");
}

#[test]
fn base_freshness_behind_dirty_untracked_and_bad_targets_surface() {
    let s = Scenario::new();
    let (_r, rpath) = bare_remote(&s, "origin");
    let _up = push_upstream(&rpath);
    let doc = freshness(&s, &["--target", "origin/main"], 1);
    let m = doc["message"].as_str().expect("message");
    assert!(m.contains("behind") && m.contains("git rebase"), "{m}");
    s.write("new.txt", "untracked");
    let m = freshness(&s, &["--target=origin/main"], 1)["message"].as_str().expect("m").to_string();
    assert!(m.contains("uncommitted changes") && m.contains("git add -A") && !m.contains("git stash"), "{m}");
    std::fs::remove_file(s.path("new.txt")).expect("rm");
    // Bad target values are `surface` answers (exit 1), never a git option.
    for bad in ["notaslash", "", "origin/--upload-pack=x", "nosuch/main"] {
        freshness(&s, &[&format!("--target={bad}")], 1);
    }
    s.git(&["remote", "add", "second", &rpath]);
    let m = freshness(&s, &[], 1)["message"].as_str().expect("m").to_string();
    assert!(m.contains("multiple remotes"), "{m}");
}

#[test]
fn base_freshness_splits_the_target_at_the_configured_remote_name() {
    let s = Scenario::new();
    let (_r, rpath) = bare_remote(&s, "team/upstream");
    let doc = freshness(&s, &["--target", "team/upstream/main"], 0);
    assert_eq!(doc["target"], "team/upstream/main");
    // `team` and `team/upstream` both match `team/upstream/main`: ambiguous, surfaced.
    s.git(&["remote", "add", "team", &rpath]);
    let m = freshness(&s, &["--target", "team/upstream/main"], 1)["message"].as_str().expect("m").to_string();
    assert!(m.contains("ambiguous"), "{m}");
}

#[test]
fn base_freshness_surfaces_a_rebase_in_progress_and_unrelated_histories() {
    let s = Scenario::new();
    std::fs::create_dir_all(s.path(".git/rebase-merge")).expect("mkdir");
    let m = freshness(&s, &[], 1)["message"].as_str().expect("m").to_string();
    assert!(m.contains("in progress"), "{m}");
    std::fs::remove_dir_all(s.path(".git/rebase-merge")).expect("rm");
    let (_r, rpath) = bare_remote(&s, "origin");
    // The remote's main is replaced by an orphan history.
    let other = tempfile::tempdir().expect("orphan");
    let opath = other.path().display().to_string();
    let g = |args: &[&str]| {
        #[expect(clippy::disallowed_methods, reason = "tests set up fixtures with git directly")]
        let o = std::process::Command::new("git").args(args).output().expect("git");
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    g(&["init", "-q", "-b", "main", &opath]);
    g(&["-C", &opath, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "orphan"]);
    g(&["-C", &opath, "push", "-q", "-f", &rpath, "main"]);
    let m = freshness(&s, &["--target", "origin/main"], 1)["message"].as_str().expect("m").to_string();
    assert!(m.contains("common ancestor"), "{m}");
}

// ── state files, exit codes and verbs the scripts have ───────────────────────────────────

pub(crate) fn init_pair(s: &Scenario) -> String {
    s.write(&format!("{DIR}/spec.md"), "# Feat\n\nStatus: Approved\n");
    s.write(
        &format!("{DIR}/plan.md"),
        "# Plan\n\nStatus: Approved\n\n### T1: base\n\n### T2: top\n**Depends on:** T1\n",
    );
    let (code, out, err) = lp(s, &["engine", "init", DIR, "--mode", "code", "--json"]);
    assert_eq!(code, 0, "{err}");
    let run = json_of(&out)["run_id"].as_str().expect("run_id").to_string();
    assert_eq!(lp(s, &["cohort", "init", DIR, "--run-id", &run]).0, 0);
    run
}

#[test]
fn the_engine_state_carries_the_scripts_fields_and_the_transition_log() {
    let s = Scenario::new();
    init_pair(&s);
    let st = s.read_json(&format!("{DIR}/engine-state.json"));
    for k in [
        "schema_version",
        "run_id",
        "feature",
        "mode",
        "state",
        "last_event",
        "last_event_context",
        "transition_sequence",
        "last_transition_at",
    ] {
        assert!(st.get(k).is_some(), "engine-state.json lacks {k}: {st}");
    }
    assert_eq!((st["schema_version"].as_u64(), st["feature"].as_str()), (Some(1), Some("feat")));
    assert_eq!(s.read(".loop-run/events.jsonl"), "", "init creates the log empty");
    assert!(s.read(".gitignore").lines().any(|l| l == ".loop-run/"));
    for e in ["spec-ready", "reviewers-clean"] {
        assert_eq!(lp(&s, &["engine", "transition", DIR, e]).0, 0);
    }
    let st = s.read_json(&format!("{DIR}/engine-state.json"));
    assert_eq!(st["gate_question"], "Does this spec define the right thing to build?");
    let lines: Vec<Value> = s.read(".loop-run/events.jsonl").lines().map(json_of).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].as_object().map(|o| o.len()), Some(14), "{}", lines[0]);
    assert_eq!((lines[1]["seq"].as_u64(), lines[1]["from"].as_str()), (Some(2), Some("SPEC-PLAN-REVIEW")));
    assert_eq!((lines[0]["spec"].as_str(), lines[0]["wave_index"].clone()), (Some(DIR), Value::Null));
    // reset removes the log with the state.
    assert_eq!(lp(&s, &["engine", "reset", DIR]).0, 0);
    assert!(!s.path(".loop-run").exists());
}

#[test]
fn a_newer_schema_version_is_refused_and_a_script_written_file_loads() {
    let s = Scenario::new();
    let script_file = r#"{"schema_version": 1, "run_id": "11111111-2222-3333-4444-555555555555", "feature": "feat",
        "mode": "code", "state": "PLAN-HUMAN-GATE", "last_event": "spec-approved", "last_event_context": null,
        "gate_question": "Does this plan describe the right way to build it?", "transition_sequence": 3,
        "last_transition_at": "2026-01-01T00:00:00Z"}"#;
    s.write(&format!("{DIR}/engine-state.json"), script_file);
    let (code, out, err) = lp(&s, &["engine", "status", DIR, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_of(&out)["pending_human_wait"], true);
    s.write(
        &format!("{DIR}/engine-state.json"),
        &script_file.replace("\"schema_version\": 1", "\"schema_version\": 2"),
    );
    let before = s.read(&format!("{DIR}/engine-state.json"));
    for args in [&["engine", "status", DIR][..], &["engine", "transition", DIR, "plan-approved"][..]] {
        let (code, _, err) = lp(&s, args);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains("schema_version"), "{err}");
    }
    assert_eq!(s.read(&format!("{DIR}/engine-state.json")), before);
}

#[test]
fn refusals_and_missing_state_exit_1_and_a_malformed_command_line_exit_2() {
    let s = Scenario::new();
    for args in [
        &["engine", "status", DIR][..],
        &["engine", "transition", DIR, "spec-ready"][..],
        &["cohort", "status", DIR][..],
        &["cohort", "check", DIR, "--phase", "review"][..],
        &["engine", "transition", DIR, "no-such-event"][..],
    ] {
        let (code, _, err) = lp(&s, args);
        assert_eq!(code, 1, "{args:?}: {err}");
    }
    assert!(!s.path(DIR).exists(), "nothing is created for a missing run");
    assert_eq!(lp(&s, &["engine", "init", DIR, "--mode", "nope"]).0, 2);
    assert_eq!(lp(&s, &["cohort", "no-such-verb", DIR]).0, 2);
}

fn lock_files(s: &Scenario) -> Vec<String> {
    let dir = std::fs::read_dir(s.path(DIR)).expect("spec dir");
    dir.filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".lock"))
        .collect()
}

#[test]
fn a_verb_leaves_no_lock_file_and_a_planted_directory_refuses_at_once_and_changes_nothing() {
    let s = Scenario::new();
    let run = init_pair(&s);
    assert_eq!(lp(&s, &["engine", "transition", DIR, "spec-ready"]).0, 0);
    let cycle = format!("{run}:1");
    let attempt =
        ["cohort", "record-attempt", DIR, "--phase", "implement", "--cycle-id", &cycle, "--expect-run-id", &run];
    assert_eq!(lp(&s, &attempt).0, 0);
    assert_eq!(lock_files(&s), Vec::<String>::new(), "no lock file remains after a verb");
    let cases: [(&str, &[&str]); 4] = [
        ("engine-state.json", &["engine", "transition", DIR, "findings-remain", "--json"]),
        ("engine-state.json", &["engine", "reset", DIR, "--json"]),
        ("state.json", &["cohort", "reset", DIR, "--json"]),
        ("state.json", &["cohort", "approve-plan", DIR, "--expect-run-id", &run, "--json"]),
    ];
    for (state, args) in cases {
        let lock = s.path(&format!("{DIR}/{state}.lock"));
        let before = s.read(&format!("{DIR}/{state}"));
        // A directory can never be taken: refused at once, never waited for.
        std::fs::create_dir(&lock).expect("plant a directory");
        let (code, out, err) = lp(&s, args);
        assert_eq!(code, 1, "{args:?} against a held lock: {out}{err}");
        let doc = json_of(&out);
        assert_eq!(doc["reason"], "lock_unusable", "{out}");
        assert_eq!(doc["holder_pid"], Value::Null, "{out}");
        assert_eq!(s.read(&format!("{DIR}/{state}")), before, "{args:?} changed {state}");
        assert!(lock.is_dir());
        std::fs::remove_dir(&lock).expect("rmdir");
    }
    // The honest twin: once the directory is gone the same verb runs, and again leaves no lock file.
    assert_eq!(lp(&s, &["engine", "transition", DIR, "findings-remain"]).0, 0);
    assert_eq!(lock_files(&s), Vec::<String>::new());
}

#[test]
fn the_disabled_verbs_exist_and_refuse() {
    let s = Scenario::new();
    for args in [
        &["cohort", "dispatch-decision", "--category", "x"][..],
        &["cohort", "auto-parallel", DIR, "--off"][..],
        &["cohort", "worktree", "add", DIR][..],
    ] {
        let (code, _, err) = lp(&s, args);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains("disabled in Phase 1"), "{err}");
    }
}

#[test]
fn identity_without_expect_run_id_checks_the_pair() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let (code, out, err) = lp(&s, &["cohort", "identity", DIR, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_of(&out)["run_id"], run.as_str());
    // The liar: a cohort re-paired to another run.
    let mut c = s.read_json(&format!("{DIR}/state.json"));
    c["run_id"] = Value::from("someone-else");
    s.write(&format!("{DIR}/state.json"), &c.to_string());
    assert_eq!(lp(&s, &["cohort", "identity", DIR]).0, 1);
}

#[test]
fn check_phase_implement_wave_index_and_template_headings() {
    let s = Scenario::new();
    let run = init_pair(&s);
    assert_eq!(lp(&s, &["cohort", "check", DIR, "--phase", "implement"]).0, 0);
    // The template's `### T1:` headings schedule.
    let (code, out, err) = lp(&s, &["cohort", "schedule", DIR, "--expect-run-id", &run, "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc = json_of(&out);
    assert_eq!(doc["schedule_waves"], serde_json::json!([["T1"], ["T2"]]), "{doc}");
    assert_eq!(lp(&s, &["cohort", "wave", "check", DIR, "--expect", "more", "--wave-index", "0"]).0, 0);
    assert_eq!(lp(&s, &["cohort", "wave", "check", DIR, "--expect", "more", "--wave-index", "1"]).0, 1);
    let st = s.read_json(&format!("{DIR}/state.json"));
    assert_eq!(st["max_implementation_retries"], 5, "the scripts' default cap, under the scripts' name");
}

#[test]
fn schedule_check_current_require_schedule_and_the_plan_flag() {
    let s = Scenario::new();
    let run = init_pair(&s);
    assert_eq!(lp(&s, &["cohort", "schedule", "check-current", DIR]).0, 1, "nothing scheduled yet");
    // The liar: --plan naming another file is refused and changes nothing.
    s.write("other-plan.md", "### T1: other\n");
    let before = s.read(&format!("{DIR}/state.json"));
    assert_eq!(lp(&s, &["cohort", "schedule", DIR, "--plan", "other-plan.md", "--expect-run-id", &run]).0, 1);
    assert_eq!(s.read(&format!("{DIR}/state.json")), before);
    let (code, out, err) =
        lp(&s, &["cohort", "schedule", DIR, "--plan", &format!("{DIR}/plan.md"), "--expect-run-id", &run]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("wave 1: T1") && out.contains("wave 2: T2"), "{out}");
    assert_eq!(lp(&s, &["cohort", "schedule", "check-current", DIR]).0, 0);
    // The pending sentinel is on stderr with exit 1.
    let (code, out, err) = lp(&s, &["cohort", "plan", "check-current", DIR]);
    assert_eq!(code, 1);
    assert!(err.contains("plan_review_status: pending") && !out.contains("pending"), "out={out} err={err}");
    assert_eq!(lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]).0, 0);
    assert_eq!(lp(&s, &["cohort", "plan", "check-current", DIR, "--require-schedule"]).0, 0);
    s.write(&format!("{DIR}/plan.md"), &format!("{}\n\n### T3: later\n", s.read(&format!("{DIR}/plan.md"))));
    assert_eq!(lp(&s, &["cohort", "schedule", "check-current", DIR]).0, 1, "plan changed since scheduled");
}

#[test]
fn lint_findings_go_to_stderr() {
    let s = Scenario::new();
    s.write(&format!("{DIR}/spec.md"), "# Feat\n\nStatus: Executing\n");
    let (code, out, err) = lp(&s, &["lint-spec-status", "--root", "."]);
    assert_eq!(code, 1);
    assert!(out.is_empty() && err.contains("plan_vocabulary_in_spec"), "out={out} err={err}");
    // --json still puts the document on stdout.
    let (code, out, _) = lp(&s, &["lint-spec-status", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(json_of(&out)["findings"][0]["code"], "plan_vocabulary_in_spec");
}

// ── the cohort file as the scripts write it ────────────────────────────────────────────

/// The scripts' spec template: a status line with the vocabulary comment and an
/// Acceptance Criteria section.
fn template_spec(status: &str, tick: &str) -> String {
    format!(
        "# Feat\n\n- **Status:** {status} <!-- Draft | Approved | Implementing | Shipped -->\n\n## Acceptance Criteria\n\n- [{tick}] AC1 works\n\n## Boundaries\n\n- [ ] never this\n"
    )
}

fn template_plan(status: &str, extra: &str) -> String {
    format!(
        "# Plan\n\n- **Status:** {status}\n\n### T1: base\n\n- [ ] step\n\n### T2: top\n\n**Depends on:** T1\n{extra}"
    )
}

#[test]
fn a_cohort_outside_the_repository_is_used_as_given_and_dotdot_is_refused() {
    let s = Scenario::new();
    let outside = tempfile::tempdir().expect("outside");
    let dir = outside.path().join("feature");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let d = dir.display().to_string();
    let (code, _, err) = lp(&s, &["cohort", "init", &d, "--run-id", "r1"]);
    assert_eq!(code, 0, "the scripts' cohort takes any absolute spec directory: {err}");
    let st: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).expect("state")).expect("json");
    assert_eq!((st["run_id"].as_str(), st["feature"].as_str()), (Some("r1"), Some("feature")));
    // The liar: a `..` component is refused and nothing is created.
    let sneaky = format!("{}/../escaped", d);
    let (code, _, err) = lp(&s, &["cohort", "init", &sneaky, "--run-id", "r1"]);
    assert_eq!(code, 1, "{err}");
    assert!(!outside.path().join("escaped").exists());
    // The engine keeps the scripts' confinement to the repository.
    assert_eq!(lp(&s, &["engine", "init", &d, "--mode", "code"]).0, 1);
}

#[test]
fn the_cohort_file_carries_the_scripts_fields_and_canonical_hashes() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let st = s.read_json(&format!("{DIR}/state.json"));
    for k in [
        "schema_version",
        "run_id",
        "feature",
        "plan_review_status",
        "approved_spec_hash",
        "approved_plan_hash",
        "plan_hash",
        "schedule_waves",
        "current_wave_index",
        "implementation_retry_count",
        "max_implementation_retries",
        "last_record_attempt_cycle_id",
        "review_round_count",
        "review_retry_count",
        "max_review_retries",
        "finding_fingerprints",
        "previous_finding_fingerprints",
        "auto_parallel",
        "last_commit_sha",
        "worktrees",
    ] {
        assert!(st.get(k).is_some(), "state.json lacks {k}: {st}");
    }
    assert_eq!((st["plan_review_status"].as_str(), st["approved_spec_hash"].clone()), (Some("pending"), Value::Null));
    s.write(&format!("{DIR}/spec.md"), &template_spec("Approved", " "));
    s.write(&format!("{DIR}/plan.md"), &template_plan("Approved", ""));
    assert_eq!(lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]).0, 0);
    let st = s.read_json(&format!("{DIR}/state.json"));
    assert_eq!(st["plan_review_status"], "approved");
    assert_eq!(st["approved_spec_hash"].as_str().map(str::len), Some(64));
    // Bookkeeping keeps the pin: ticking a criterion, a status bump, a ticked plan step.
    s.write(&format!("{DIR}/spec.md"), &template_spec("Implementing", "x"));
    s.write(&format!("{DIR}/plan.md"), &template_plan("Executing", "").replace("[ ] step", "[x] step"));
    let (code, _, err) = lp(&s, &["cohort", "plan", "check-current", DIR]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]);
    assert_eq!(code, 0);
    assert!(out.contains("no-op"), "{out}");
    // The liar: ticking a checkbox outside the criteria is scope, and so is new text.
    s.write(&format!("{DIR}/spec.md"), &template_spec("Implementing", "x").replace("[ ] never", "[x] never"));
    let (code, _, err) = lp(&s, &["cohort", "plan", "check-current", DIR]);
    assert_eq!(code, 1);
    assert!(err.contains("no longer matches"), "{err}");
    let (code, _, err) = lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]);
    assert_eq!(code, 1);
    assert!(err.contains("spec_changed=True") && err.contains("plan_changed=False"), "{err}");
    // A status regressed after approval stops, naming it.
    s.write(&format!("{DIR}/spec.md"), &template_spec("Draft", " "));
    let (code, _, err) = lp(&s, &["cohort", "plan", "check-current", DIR]);
    assert_eq!(code, 1);
    assert!(err.contains("Status is 'Draft'"), "{err}");
}

#[test]
fn a_script_written_cohort_loads_and_foreign_schema_versions_are_refused() {
    let s = Scenario::new();
    let template = r#"{"schema_version": 1, "run_id": "11111111-2222-3333-4444-555555555555", "feature": "feat",
        "plan_review_status": "pending", "approved_spec_hash": null, "approved_plan_hash": null, "plan_hash": null,
        "schedule_waves": [], "current_wave_index": 0, "implementation_retry_count": 0,
        "max_implementation_retries": 5, "last_record_attempt_cycle_id": null, "review_round_count": 0,
        "review_retry_count": 0, "max_review_retries": 5, "finding_fingerprints": [],
        "previous_finding_fingerprints": [], "auto_parallel": false, "last_commit_sha": null, "worktrees": []}"#;
    s.write(&format!("{DIR}/state.json"), template);
    let (code, out, err) = lp(&s, &["cohort", "status", DIR, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_of(&out)["plan_review_status"], "pending");
    let run = "11111111-2222-3333-4444-555555555555";
    assert_eq!(lp(&s, &["cohort", "identity", DIR, "--expect-run-id", run]).0, 0);
    for bad in [
        template.replace("\"schema_version\": 1", "\"schema_version\": 99"),
        r#"{"feature": "x", "plan_review_status": "approved"}"#.to_string(),
    ] {
        s.write(&format!("{DIR}/state.json"), &bad);
        let (code, _, err) = lp(&s, &["cohort", "identity", DIR]);
        assert_eq!(code, 1, "{bad}");
        assert!(err.contains("schema_version"), "{err}");
    }
}

#[test]
fn managed_files_over_8_mib_symlinked_or_not_regular_are_refused() {
    let s = Scenario::new();
    init_pair(&s);
    let state = s.path(&format!("{DIR}/state.json"));
    let honest = s.read(&format!("{DIR}/state.json"));
    // The liars: a symlink (even one inside the repository), a directory, a huge file.
    s.write("elsewhere.json", &honest);
    std::fs::remove_file(&state).expect("rm");
    std::os::unix::fs::symlink(s.path("elsewhere.json"), &state).expect("symlink");
    let (code, _, err) = lp(&s, &["cohort", "status", DIR, "--json"]);
    assert_eq!(code, 1);
    assert!(err.contains("regular file"), "{err}");
    std::fs::remove_file(&state).expect("rm");
    std::fs::create_dir(&state).expect("mkdir");
    let (code, _, err) = lp(&s, &["cohort", "status", DIR]);
    assert_eq!(code, 1);
    assert!(err.contains("regular file"), "{err}");
    std::fs::remove_dir(&state).expect("rmdir");
    std::fs::write(&state, vec![b' '; 8 * 1024 * 1024 + 1]).expect("write");
    let (code, _, err) = lp(&s, &["cohort", "status", DIR]);
    assert_eq!(code, 1);
    assert!(err.contains("8 MiB"), "{err}");
    // The honest twin: the same content as a regular file reads.
    std::fs::write(&state, honest).expect("write");
    assert_eq!(lp(&s, &["cohort", "status", DIR]).0, 0);
}

// ── the engine's pre-checks ────────────────────────────────────────────────────────────

#[test]
fn every_transition_checks_the_run_id_pair_first() {
    let s = Scenario::new();
    let (code, out, _) = lp(&s, &["engine", "init", DIR, "--mode", "code", "--json"]);
    assert_eq!(code, 0);
    let run = json_of(&out)["run_id"].as_str().expect("run").to_string();
    let before = s.read(&format!("{DIR}/engine-state.json"));
    let (code, _, err) = lp(&s, &["engine", "transition", DIR, "spec-ready"]);
    assert_eq!(code, 1, "no cohort: {err}");
    assert!(err.contains("run_id preflight failed"), "{err}");
    assert_eq!(lp(&s, &["cohort", "init", DIR, "--run-id", "another-run"]).0, 0);
    let (code, _, err) = lp(&s, &["engine", "transition", DIR, "spec-ready"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(s.read(&format!("{DIR}/engine-state.json")), before, "nothing changed");
    // The honest twin: the pair of one run transitions.
    assert_eq!(lp(&s, &["cohort", "reset", DIR]).0, 0);
    assert_eq!(lp(&s, &["cohort", "init", DIR, "--run-id", &run]).0, 0);
    assert_eq!(lp(&s, &["engine", "transition", DIR, "spec-ready"]).0, 0);
}

#[test]
fn code_transitions_check_the_schedule_against_plan_md_and_wave_passed_needs_its_index() {
    let s = Scenario::new();
    let run = init_pair(&s);
    for e in ["spec-ready", "reviewers-clean", "spec-approved", "plan-approved"] {
        assert_eq!(lp(&s, &["engine", "transition", DIR, e]).0, 0, "{e}");
    }
    assert_eq!(lp(&s, &["cohort", "approve-plan", DIR, "--expect-run-id", &run]).0, 0);
    assert_eq!(lp(&s, &["cohort", "schedule", DIR, "--expect-run-id", &run]).0, 0);
    assert_eq!(lp(&s, &["engine", "transition", DIR, "plan-locked"]).0, 0);
    assert_eq!(lp(&s, &["engine", "transition", DIR, "wave-complete"]).0, 0);
    let (code, _, err) = lp(&s, &["engine", "transition", DIR, "wave-passed"]);
    assert_eq!(code, 1);
    assert!(err.contains("--wave-index"), "{err}");
    // The liar: plan.md grows a task after scheduling; no code transition goes on.
    let plan = s.read(&format!("{DIR}/plan.md"));
    s.write(&format!("{DIR}/plan.md"), &format!("{plan}\n### T3: sneaked in\n"));
    let before = s.read(&format!("{DIR}/engine-state.json"));
    let (code, _, err) = lp(&s, &["engine", "transition", DIR, "wave-passed", "--wave-index", "0"]);
    assert_eq!(code, 1);
    assert!(err.contains("schedule check-current failed"), "{err}");
    assert_eq!(s.read(&format!("{DIR}/engine-state.json")), before);
    // The honest twin: the plan as scheduled passes, and the context is the scripts' shape.
    s.write(&format!("{DIR}/plan.md"), &plan);
    let (code, _, err) = lp(&s, &["engine", "transition", DIR, "wave-passed", "--wave-index", "0"]);
    assert_eq!(code, 0, "{err}");
    let st = s.read_json(&format!("{DIR}/engine-state.json"));
    assert_eq!(st["last_event_context"], serde_json::json!({ "completed_wave_index": 0 }));
}

#[test]
fn record_attempt_takes_only_a_cycle_id_of_its_own_run() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let before = s.read(&format!("{DIR}/state.json"));
    for bad in ["other-run:3".to_string(), format!("{run}:x"), run.clone()] {
        let (code, _, err) = lp(
            &s,
            &["cohort", "record-attempt", DIR, "--phase", "implement", "--cycle-id", &bad, "--expect-run-id", &run],
        );
        assert_eq!(code, 1, "{bad}: {err}");
    }
    assert_eq!(s.read(&format!("{DIR}/state.json")), before);
    let cycle = format!("{run}:7");
    let args = ["cohort", "record-attempt", DIR, "--phase", "implement", "--cycle-id", &cycle, "--expect-run-id", &run];
    assert_eq!(lp(&s, &args).0, 0);
    assert_eq!(lp(&s, &args).0, 0, "a replay is a no-op");
    let st = s.read_json(&format!("{DIR}/state.json"));
    assert_eq!(
        (st["implementation_retry_count"].as_u64(), st["last_record_attempt_cycle_id"].as_str()),
        (Some(1), Some(cycle.as_str()))
    );
}

// ── reviewer reports ───────────────────────────────────────────────────────────────────

#[test]
fn review_inspect_report_classifies_reviewer_reports_and_detects_stasis() {
    let s = Scenario::new();
    let run = init_pair(&s);
    let inspect = |s: &Scenario, p: &str| {
        let (code, out, err) = lp(s, &["cohort", "review", "inspect", DIR, "--report", p, "--json"]);
        assert_eq!(code, 0, "every content outcome exits 0: {err}");
        json_of(&out)
    };
    s.write("clean.md", "## Verdict\n\nClean — ready to commit.\n");
    s.write("ship.md", "## Verdict\nSHIP IT\n");
    s.write("empty.md", "Nothing to say.\n");
    s.write("findings.md", "**1. Lock is racy** `src/a.rs:12`\n**2. Bad name.** src/b.rs:7.\n");
    assert_eq!(inspect(&s, "clean.md")["classification"], "clean");
    assert_eq!(inspect(&s, "ship.md")["classification"], "clean");
    assert_eq!(inspect(&s, "empty.md")["classification"], "invalid");
    assert_eq!(inspect(&s, "absent.md")["classification"], "invalid");
    let f = inspect(&s, "findings.md");
    assert_eq!((f["classification"].as_str(), f["matches_previous_round"].as_bool()), (Some("findings"), Some(false)));
    let fps: Vec<String> =
        f["fingerprints"].as_array().expect("fps").iter().filter_map(|v| v.as_str().map(str::to_string)).collect();
    assert_eq!(fps.len(), 2);
    let mut args = vec!["cohort", "review", "record", DIR, "--expect-run-id", &run];
    for fp in &fps {
        args.extend(["--fingerprint", fp.as_str()]);
    }
    assert_eq!(lp(&s, &args).0, 0);
    assert_eq!(inspect(&s, "findings.md")["matches_previous_round"], true, "the same findings again: stasis");
    // A findings report is not a clean round; a clean one is.
    assert_eq!(lp(&s, &["cohort", "review", "record", DIR, "--report", "findings.md", "--expect-run-id", &run]).0, 1);
    assert_eq!(lp(&s, &["cohort", "review", "record", DIR, "--report", "clean.md", "--expect-run-id", &run]).0, 0);
    // The liar: a fingerprint that is not a digest is refused.
    assert_eq!(lp(&s, &["cohort", "review", "record", DIR, "--fingerprint", "abc", "--expect-run-id", &run]).0, 1);
}

// ── lint at the ship transition ────────────────────────────────────────────────────────

#[test]
fn lint_checks_criteria_at_the_ship_transition_and_grandfathers_shipped_specs() {
    let s = Scenario::new();
    let unchecked = "# Old\n\n- **Status:** Shipped\n\n## Acceptance Criteria\n\n- [ ] never ticked\n";
    s.write("docs/specs/old/spec.md", unchecked);
    s.commit("old spec shipped long ago");
    // Already Shipped at the base: grandfathered.
    let (code, _, err) = lp(&s, &["lint-spec-status", "--root", ".", "--base-ref", "HEAD"]);
    assert_eq!(code, 0, "{err}");
    // The liar: a spec that moves to Shipped now with an unchecked criterion.
    s.write("docs/specs/new/spec.md", &unchecked.replace("# Old", "# New"));
    let (code, out, _) = lp(&s, &["lint-spec-status", "--root", ".", "--base-ref", "HEAD", "--json"]);
    assert_eq!(code, 1);
    let doc = json_of(&out);
    assert_eq!(doc["findings"][0]["code"], "unchecked_acceptance_criterion", "{doc}");
    assert_eq!(doc["findings"][0]["path"], "docs/specs/new/spec.md", "{doc}");
    // The honest twin: the same move with the criterion ticked passes.
    s.write("docs/specs/new/spec.md", &unchecked.replace("# Old", "# New").replace("[ ]", "[x]"));
    assert_eq!(lp(&s, &["lint-spec-status", "--base-ref", "HEAD"]).0, 0);
    // Without a base that resolves, the rule is skipped with a warning.
    s.write("docs/specs/new/spec.md", &unchecked.replace("# Old", "# New"));
    let (code, out, _) = lp(&s, &["lint-spec-status", "--json"]);
    assert_eq!(code, 0);
    assert!(json_of(&out)["findings"].as_array().is_some_and(|f| f.iter().any(|x| x["code"] == "no_base_ref")));
    // A base ref that reads as an option is bad input, never passed to git.
    assert_eq!(lp(&s, &["lint-spec-status", "--base-ref=--output=x"]).0, 2);
}
