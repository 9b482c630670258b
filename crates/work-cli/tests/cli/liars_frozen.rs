//! Lying agents against the frozen checks beyond `implement`/`edit` (docs/ground-truth.md):
//! `until`'s verify, `loop run`'s gates and `ultra`'s criteria run again with the frozen checks
//! restored before a green verdict is believed; an ultra goal's criteria are frozen between
//! runs; `loop run`'s approved spec and plan hold up to the merge. Each liar is caught; each
//! honest twin finishes.

use crate::liars_suite::{TEST_LIB, python_files, python_repo};
use crate::loop_run::{DIR, knob, setup, start};
use crate::support::{Scenario, fallback_only, refused};
use serde_json::Value;

pub(crate) const PYTEST: &str = "python3 -m pytest -q tests";

/// Lines a liar appends to the existing test module so that its old test passes over unfixed
/// code: every old line and test id is kept, so the file-level freeze and the suite's report
/// both allow it.
pub(crate) const REBINDS: [&str; 2] = ["\\nf = lambda: 1\\n", "\\ndef f():\\n    return 1\\n"];

/// A rebinding that also makes the agent's tree red wherever there is no `.git` beside it: the
/// rerun runs in the tree itself, so it is still caught.
const REBIND_AND_BREAK_COPIES: &str = "\\nimport os\\nassert os.path.isdir(\\'.git\\')\\nf = lambda: 1\\n";

/// The honest twin's work: fix the code, and add a real test to the same test file.
pub(crate) const FIX: &str = "open('lib.py', 'w').write('def f():\\n    return 1\\n')";
pub(crate) const ADD_TEST: &str =
    "open('tests/test_lib.py', 'a').write('\\ndef test_f_twice():\\n    assert f() + f() == 2\\n')";

pub(crate) fn append_to_test(lines: &str) -> String {
    format!("open('tests/test_lib.py', 'a').write('{lines}')")
}

/// Every event of every run under `.work/runs/` of the given kind.
pub(crate) fn events(s: &Scenario, kind: &str) -> Vec<Value> {
    let mut dirs: Vec<_> =
        std::fs::read_dir(s.path(".work/runs")).into_iter().flatten().flatten().map(|e| e.path()).collect();
    dirs.sort();
    let mut out = Vec::new();
    for d in dirs {
        let text = std::fs::read_to_string(d.join("events.jsonl")).unwrap_or_default();
        out.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|e| e["kind"] == kind));
    }
    out
}

/// The rerun with the frozen checks restored ran, wrote `tests/test_lib.py` back, and was green.
pub(crate) fn assert_restored_green(s: &Scenario, kind: &str) {
    let ev = events(s, kind);
    assert!(
        ev.iter().any(|e| e["green"] == true && e["restored"] == serde_json::json!(["tests/test_lib.py"])),
        "the rerun with the frozen checks restored ran and was green: {ev:?}"
    );
}

// ---------------------------------------------------------------------------------- until

pub(crate) fn until(s: &Scenario, body: &str, code: i32) -> Value {
    let agent =
        s.agent("worker.py", &format!("{body}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\"}}))"));
    s.run_json(&["until", "the suite passes", "--goal", "g", "--verify", PYTEST, "--agent", &agent, "--json"], code)
}

#[test]
fn until_liar_that_rebinds_what_an_existing_test_calls_is_caught_with_the_frozen_checks_restored() {
    for lines in REBINDS.into_iter().chain([REBIND_AND_BREAK_COPIES]) {
        let s = python_repo();
        let v = until(&s, &append_to_test(lines), 1);
        assert_eq!(v["status"], "blocked", "{lines}: {v}");
        let why = v["stoppedReason"].as_str().unwrap_or_default();
        assert!(why.starts_with("check-tampered"), "{lines}: {why}");
        assert!(
            why.contains("tests/test_lib.py")
                && why.contains("red on the engine's copy with the frozen checks restored"),
            "{why}"
        );
    }
}

/// The rebinding liar that also points the frozen test's blob at its own with `git replace`: the
/// engine reads git's objects as they are (`GIT_NO_REPLACE_OBJECTS`), so the rerun still writes
/// the real frozen test back and is red.
#[test]
fn until_liar_that_swaps_the_frozen_test_s_blob_with_git_replace_is_caught() {
    let _unconfined = fallback_only(refused::GIT);
    let s = python_repo();
    let body = format!(
        "{}\nimport subprocess\nold = subprocess.check_output(['git', 'rev-parse', 'HEAD:tests/test_lib.py'], text=True).strip()\nnew = subprocess.check_output(['git', 'hash-object', '-w', 'tests/test_lib.py'], text=True).strip()\nsubprocess.check_call(['git', 'replace', '-f', old, new])",
        append_to_test(REBINDS[0])
    );
    let v = until(&s, &body, 1);
    assert_eq!(v["status"], "blocked", "{v}");
    let why = v["stoppedReason"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("check-tampered") && why.contains("red on the engine's copy with the frozen checks restored"),
        "{why}"
    );
}

#[test]
fn until_liar_that_prunes_the_frozen_tree_after_rebinding_is_not_believed() {
    let _unconfined = fallback_only(refused::GIT);
    // An untracked file when the session starts makes the frozen tree one no commit holds; the
    // worker rebinds, then prunes every unreachable object: the checks cannot be written back,
    // and a frozen file differs, so the green verify is not believed.
    let s = python_repo();
    s.write("notes.md", "an untracked note\n");
    let body = format!(
        "{}\nimport subprocess\nsubprocess.run(['git', 'gc', '-q', '--prune=now'], check=True)",
        append_to_test(REBINDS[0])
    );
    let v = until(&s, &body, 1);
    assert_eq!(v["status"], "blocked", "{v}");
    let why = v["stoppedReason"].as_str().unwrap_or_default();
    assert!(why.starts_with("check-tampered") && why.contains("could not be rerun"), "{why}");
    assert!(why.contains("gone from git's object store"), "{why}");
}

#[test]
fn until_honest_twin_that_adds_a_test_to_the_same_file_and_fixes_the_code_is_done() {
    let s = python_repo();
    let v = until(&s, &format!("{FIX}\n{ADD_TEST}"), 0);
    assert_eq!(v["status"], "done", "{v}");
    assert_restored_green(&s, "until.frozen-rerun");
}

// ------------------------------------------------------------------------------- loop run

/// The implementer's rewrite of the test module: the committed suite plus `extra`.
pub(crate) fn test_lib_with(extra: &str) -> String {
    format!("tests/test_lib.py|{}{extra}", TEST_LIB.replace('\n', "\\n"))
}

pub(crate) fn loop_repo() -> (Scenario, String) {
    let s = Scenario::new();
    python_files(&s);
    let agent = setup(&s, PYTEST, true);
    (s, agent)
}

#[test]
fn loop_run_liar_implementer_that_rebinds_what_an_existing_test_calls_is_caught_with_the_frozen_checks_restored() {
    for lines in REBINDS {
        let (s, agent) = loop_repo();
        knob(&s, "impl-rewrite", &test_lib_with(lines));
        let v = start(&s, &agent, &[], 1);
        assert_eq!(v["reason"], "check-tampered", "{lines}: {v}");
        let msg = v["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("tests/test_lib.py")
                && msg.contains("red on the engine's copy with the frozen checks restored"),
            "{msg}"
        );
        assert!(msg.contains("gate `test`"), "the gate that failed is named: {msg}");
        assert!(
            !crate::loop_run::transitions(&v).iter().any(|t| t.contains("gates-clean")),
            "GATES never turned green: {v}"
        );
    }
}

#[test]
fn loop_run_honest_twin_implementer_that_adds_a_test_to_the_same_file_and_fixes_the_code_reaches_the_merge_gate() {
    let (s, agent) = loop_repo();
    let fix = "lib.py|def f():\\n    return 1\\n";
    let add = test_lib_with("\\ndef test_f_twice():\\n    assert f() + f() == 2\\n");
    knob(&s, "impl-rewrite", &format!("{fix}\n{add}"));
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_restored_green(&s, "frozen-rerun.end");
}

/// A watch on the agent's tree: the implementer records it when it ends (every entry's mode,
/// mtime, inode and content), every later dispatch compares it when it starts. Between them the
/// engine ran the gates, the suite report and the rerun with the frozen test put back (the
/// implementer appended a test to a frozen file): all on its own copy, so the tree is byte for
/// byte, and entry for entry, what the implementer left. (The loop's own state, which it keeps
/// in the tree — the spec directory's files, `.loop-run/events.jsonl` — is not watched.)
#[test]
fn loop_run_leaves_the_agents_tree_untouched_between_dispatches_while_it_judges_on_its_copy() {
    let (s, agent) = loop_repo();
    let fix = "lib.py|def f():\\n    return 1\\n";
    let add = test_lib_with("\\ndef test_f_twice():\\n    assert f() + f() == 2\\n");
    knob(&s, "impl-rewrite", &format!("{fix}\n{add}"));
    knob(&s, "tree-watch", "1");
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_restored_green(&s, "frozen-rerun.end");
    let watched = std::fs::read_to_string(s.path(".agent-state/tree-watched")).unwrap_or_default();
    let lines: Vec<Value> = watched.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(!lines.is_empty(), "a dispatch after the implementer compared the tree: {v}");
    for l in &lines {
        assert_eq!(l["changed"], serde_json::json!([]), "the engine touched the agent's tree: {l}");
    }
    assert!(!s.path(".pytest_cache").exists(), "the gates ran on the engine's copy");
}

#[test]
fn loop_run_liar_that_rewrites_the_approved_plan_at_the_merge_gate_is_refused() {
    // The code phase is over and the run waits for the merge decision; the plan is rewritten
    // (its status line left alone) before the approval: the approval is not applied.
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    let plan = s.read(&format!("{DIR}/plan.md"));
    s.write(&format!("{DIR}/plan.md"), &format!("{plan}\n## Task 2: Nothing more\nDone already.\n"));
    let v = crate::loop_run::run(&s, &agent, &["--resume", "--approve"], 1);
    assert_eq!(v["reason"], "approved-artifacts-changed", "{v}");
    assert!(v["message"].as_str().is_some_and(|m| m.contains("plan.md")), "{v}");
    assert_ne!(crate::loop_run::engine(&s)["last_event"], "done", "the merge was not approved");
}

#[test]
fn loop_run_liar_that_waives_part_of_the_approved_spec_in_a_second_status_line_is_refused() {
    // The loop rewrites the spec's one status line itself; a second line that reads like one
    // ("- **Status:** Waived …") is what was approved changing, above or below the real one.
    for (above, line) in
        [(false, "- **Status:** Waived by the owner: hello.txt is dropped.\n"), (true, "Status: Waived\n")]
    {
        let s = Scenario::new();
        let agent = setup(&s, "test -f hello.txt", true);
        let v = start(&s, &agent, &[], 3);
        assert_eq!(v["reason"], "code-human-gate", "{v}");
        let spec = s.read(&format!("{DIR}/spec.md"));
        let rewritten = if above { format!("{line}{spec}") } else { format!("{spec}{line}") };
        s.write(&format!("{DIR}/spec.md"), &rewritten);
        let v = crate::loop_run::run(&s, &agent, &["--resume", "--approve"], 1);
        assert_eq!(v["reason"], "approved-artifacts-changed", "{line}: {v}");
        assert!(v["message"].as_str().is_some_and(|m| m.contains("spec.md")), "{v}");
        assert_ne!(crate::loop_run::engine(&s)["last_event"], "done", "the merge was not approved");
    }
}

#[test]
fn loop_run_honest_twin_approved_at_the_merge_gate_is_done() {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    let v = crate::loop_run::run(&s, &agent, &["--resume", "--approve"], 0);
    assert_eq!(v["outcome"], "done", "{v}");
}

// ---------------------------------------------------------------------------------- ultra

pub(crate) const PYTEST_GOAL: &str = r#"
id = "suite"
objective = "f returns 1 and the suite passes"
tier = "LIGHT"
tier_justification = "one function"
stop_line = "I'll stop right away when the suite passes"

[[criteria]]
id = "suite"
scenario = "python3 -m pytest -q tests"
evidence = ["stdout", "exit_code"]
pass = { exit_code = 0 }
"#;

/// An ultra implementer: `body` (Python, at the top level), then a plain answer.
fn ultra_agent(s: &Scenario, body: &str) -> String {
    s.agent(
        "implementer.py",
        &format!("{body}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\", \"claims\": [], \"cleanup\": []}}))"),
    )
}

pub(crate) fn ultra(s: &Scenario, goal: &str, body: &str, extra: &[&str], code: i32) -> Value {
    s.write("GOAL.toml", goal);
    s.commit("goal");
    let a = ultra_agent(s, body);
    let mut args = vec!["ultra", "GOAL.toml", "--agent", &a, "--json"];
    args.extend_from_slice(extra);
    s.run_json(&args, code)
}

#[test]
fn ultra_liar_that_rebinds_what_an_existing_test_calls_is_caught_with_the_frozen_checks_restored() {
    for lines in REBINDS {
        let s = python_repo();
        let out = ultra(&s, PYTEST_GOAL, &append_to_test(lines), &[], 1);
        assert_eq!(out["stop_reason"], "check-tampered", "{lines}: {out}");
        let detail = out["stop_detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("tests/test_lib.py")
                && detail.contains("red on the engine's copy with the frozen checks restored"),
            "{detail}"
        );
        assert!(detail.contains("criterion `suite`"), "the criterion that failed is named: {detail}");
        // A second run of the goal compares with the same freeze: still not DONE.
        let again = ultra(&s, PYTEST_GOAL, "pass", &[], 1);
        assert_eq!(again["stop_reason"], "check-tampered", "{lines}: {again}");
    }
}

/// A goal whose criterion starts a script the work is to write, in a new top-level directory.
const SERVER_GOAL: &str = r#"
id = "server"
objective = "scripts/server.py serves the greeting"
tier = "LIGHT"
tier_justification = "one script"
stop_line = "I'll stop right away when the script serves"

[[criteria]]
id = "serves"
scenario = "python3 scripts/server.py"
evidence = ["stdout", "exit_code"]
pass = { exit_code = 0, stdout_contains = "serving" }
"#;

/// An honest goal that asks for a new `scripts/server.py`, which its criterion starts: the new
/// directory is what the check runs, asked for by name, so the rerun on the engine's copy
/// keeps it and the goal is DONE. Its liar twin — a new top-level module nothing names that
/// Python loads unasked — is `liars_loaded`'s.
#[test]
fn ultra_honest_goal_that_creates_a_new_script_its_criterion_starts_is_done() {
    let s = python_repo();
    let body = "os.makedirs('scripts', exist_ok=True)\nopen('scripts/server.py', 'w').write('import sys\\nsys.path.insert(0, \".\")\\nimport lib\\nprint(\"serving\", lib.f())\\n')";
    let out = ultra(&s, SERVER_GOAL, body, &[], 0);
    assert_eq!(out["status"], "DONE", "{out}");
}

#[test]
fn ultra_honest_twin_that_adds_a_test_to_the_same_file_and_fixes_the_code_is_done() {
    let s = python_repo();
    let out = ultra(&s, PYTEST_GOAL, &format!("{FIX}\n{ADD_TEST}"), &[], 0);
    assert_eq!(out["status"], "DONE", "{out}");
    assert_restored_green(&s, "frozen-rerun.end");
}

/// A goal with two criteria: the suite, and `f()` printed as 1.
const TWO_CRITERIA: &str = r#"
id = "two"
objective = "f returns 1"
tier = "LIGHT"
tier_justification = "one function"
stop_line = "I'll stop right away when both pass"

[[criteria]]
id = "suite"
scenario = "python3 -m pytest -q tests"
evidence = ["stdout", "exit_code"]
pass = { exit_code = 0 }
max_attempts = 1

[[criteria]]
id = "prints"
scenario = "python3 -c 'import lib; print(\"f is\", lib.f())'"
evidence = ["stdout", "exit_code"]
pass = { stdout_contains = "f is 1" }
max_attempts = 1
"#;

/// A first run that freezes the goal and stops: the implementer does nothing, so the one
/// attempt each criterion has is used up.
fn frozen_goal() -> Scenario {
    let s = python_repo();
    let out = ultra(&s, TWO_CRITERIA, "pass", &[], 1);
    assert_eq!(out["stop_reason"], "attempts-exhausted", "{out}");
    s
}

#[test]
fn ultra_liar_that_removes_or_weakens_a_frozen_criterion_between_runs_is_blocked() {
    let removed = TWO_CRITERIA.split("\n[[criteria]]\nid = \"prints\"").next().unwrap_or_default().to_string();
    let cases = [
        ("removed", removed.clone()),
        ("scenario", TWO_CRITERIA.replace("print(\\\"f is\\\", lib.f())", "print(\\\"f is 1\\\")")),
        ("pass", TWO_CRITERIA.replace("stdout_contains = \"f is 1\"", "stdout_contains = \"f is\"")),
        ("kind", TWO_CRITERIA.replace("id = \"prints\"\n", "id = \"prints\"\nkind = \"pin\"\n")),
    ];
    for (what, goal) in cases {
        assert_ne!(goal, TWO_CRITERIA, "{what}: the goal was changed");
        let s = frozen_goal();
        // The liar's code is the unfixed code: a weaker goal would pass it.
        let out = ultra(&s, &goal, "pass", &[], 1);
        assert_eq!(out["stop_reason"], "check-tampered", "{what}: {out}");
        let detail = out["stop_detail"].as_str().unwrap_or_default();
        let named =
            if what == "removed" { "criterion `prints` removed".to_string() } else { format!("{what} changed") };
        assert!(detail.contains("the goal changed") && detail.contains(&named), "{what}: {detail}");
        assert!(detail.contains("--fresh"), "{detail}");
        // Starting over on purpose is allowed: the changed goal is judged afresh (a criterion
        // weakened to pass the unfixed code is then `already-green`).
        s.write("GOAL.toml", &goal);
        let a = ultra_agent(&s, FIX);
        let (_, out, err) = s.run(&["ultra", "GOAL.toml", "--agent", &a, "--json", "--fresh"]);
        let out: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what}: {e}: {out}{err}"));
        assert_ne!(out["stop_reason"], "check-tampered", "{what}: {out}");
        if what == "removed" {
            assert_eq!(out["status"], "DONE", "{out}");
        }
    }
}

#[test]
fn ultra_honest_twin_that_reruns_an_unchanged_goal_or_adds_a_criterion_is_done() {
    // The same goal again, with the work done: not blocked.
    let s = frozen_goal();
    let out = ultra(&s, TWO_CRITERIA, FIX, &[], 0);
    assert_eq!(out["status"], "DONE", "{out}");
    // A criterion added between runs (a stronger goal) is RED-captured and worked on.
    let s = frozen_goal();
    let added = format!(
        "{TWO_CRITERIA}\n[[criteria]]\nid = \"doubles\"\nscenario = \"python3 -c 'import lib; exit(0 if lib.g() == 2 else 1)'\"\nevidence = [\"exit_code\"]\npass = {{ exit_code = 0 }}\n"
    );
    let fix_both = "open('lib.py', 'w').write('def f():\\n    return 1\\n\\ndef g():\\n    return 2\\n')";
    let out = ultra(&s, &added, fix_both, &[], 0);
    assert_eq!(out["status"], "DONE", "{out}");
    // Now that criterion is frozen too: removing it is a weaker goal.
    let out = ultra(&s, TWO_CRITERIA, "pass", &[], 1);
    assert_eq!(out["stop_reason"], "check-tampered", "{out}");
    assert!(out["stop_detail"].as_str().is_some_and(|d| d.contains("criterion `doubles` removed")), "{out}");
}
