//! Lying agents against `work implement` and `work edit` (docs/ground-truth.md): reviewers
//! that approve without having read the change, an appended line that changes what an existing
//! test calls, and index-only tricks that fake a change. Each liar is caught; each honest twin
//! is DONE.

use crate::liars_suite::python_repo;
use crate::support::{Scenario, fallback_only, refused};
use serde_json::Value;

const PYTEST: &str = "python3 -m pytest -q tests";

/// A scripted agent for every implement/edit role. `IMPL` and `EDIT` are the implementer's and
/// the editor's bodies; `SPEC_READ` / `QUALITY_READ` are Python expressions of what each
/// reviewer names in `files_read` (`READ`: every file of the diff it was shown).
pub(crate) fn agent(s: &Scenario, implementer: &str, editor: &str, spec_read: &str, quality_read: &str) -> String {
    s.agent(
        "agent.py",
        &format!(
            r#"import re
role = req['role']
prompt = req.get('prompt', '')
READ = re.findall(r'^diff --git a/(\S+) ', prompt, re.M)
RETRY = 'WAS REFUSED' in prompt
fd = os.open(state_path('log'), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (role + '\n').encode())
os.close(fd)
def out(d):
    print(json.dumps(d))
    sys.exit(0)
if role == 'implementer':
{implementer}
    out({{'status': 'DONE', 'summary': 'done', 'applied_changes': True}})
if role == 'editor':
{editor}
    out({{'status': 'DONE', 'applied_changes': True, 'sites': 0, 'hole': None}})
if role == 'spec-reviewer':
    out({{'status': 'compliant', 'issues': [], 'files_read': {spec_read}}})
if role == 'quality-reviewer':
    out({{'verdict': 'approved', 'issues': [], 'files_read': {quality_read}}})
out({{'status': 'DONE', 'fixtures': 1}})
"#
        ),
    )
}

fn calls(s: &Scenario, role: &str) -> usize {
    std::fs::read_to_string(s.path(".agent-state/log")).unwrap_or_default().lines().filter(|l| *l == role).count()
}

pub(crate) fn implement(s: &Scenario, a: &str, test_cmd: &str, code: i32) -> Value {
    s.write("PLAN.md", "# Plan\n\n## Task 1: f returns 1\n\nMake `f()` in lib.py return 1.\n");
    s.commit("plan");
    s.run_json(
        &["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--agent", a, "--test-cmd", test_cmd, "--json"],
        code,
    )
}

pub(crate) fn reason(r: &Value) -> &str {
    r["reason"].as_str().unwrap_or_default()
}

const FIX: &str = "    open('lib.py', 'w').write('def f():\\n    return 1\\n')";
pub(crate) const NOTHING: &str = "    pass";

// ------------------------------------------------------------ reviewers prove they looked

#[test]
fn implement_liar_reviewers_that_approve_without_reading_the_change_are_not_taken_as_clean() {
    // The spec reviewer names nothing; the quality reviewer names only a file the task did not
    // change. Each is asked once more with the reason, then the task is BLOCKED.
    for (spec, quality, who) in
        [("[]", "READ", "spec-reviewer"), ("READ", "['PLAN.md', 'README.md']", "quality-reviewer")]
    {
        let s = python_repo();
        let a = agent(&s, FIX, NOTHING, spec, quality);
        let r = implement(&s, &a, PYTEST, 1);
        assert_eq!(r["status"], "BLOCKED", "{who}: {r}");
        assert_eq!(r["kind"], "review-unproven", "{who}: {r}");
        let why = reason(&r);
        assert!(why.contains(who) && why.contains("files_read") && why.contains("lib.py"), "{who}: {why}");
        assert!(why.contains("refused twice"), "{who}: {why}");
        assert_eq!(calls(&s, who), 2, "{who}: asked once more with the reason, then not accepted");
        assert_eq!(r["tasks"][0]["status"], "BLOCKED", "{r}");
    }
}

#[test]
fn implement_honest_twin_reviewers_that_name_the_files_they_read_are_done() {
    // Both name the changed file at once: one dispatch each.
    let s = python_repo();
    let a = agent(&s, FIX, NOTHING, "READ", "['./lib.py:1']");
    let r = implement(&s, &a, PYTEST, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!((calls(&s, "spec-reviewer"), calls(&s, "quality-reviewer")), (1, 1));
    // A reviewer that forgot to say, told why, reads and names it: the retry is taken.
    let s = python_repo();
    let a = agent(&s, FIX, NOTHING, "READ if RETRY else []", "READ");
    let r = implement(&s, &a, PYTEST, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(calls(&s, "spec-reviewer"), 2, "{r}");
}

// ------------------------------------------------- the suite with the frozen checks restored

/// Lines a liar appends to the existing test module so that its old test passes over unfixed
/// code: every old line and test id is kept.
const REBINDS: [&str; 2] = ["\\nf = lambda: 1\\n", "\\ndef f():\\n    return 1\\n"];

fn append_to_test(line: &str) -> String {
    format!("    open('tests/test_lib.py', 'a').write('{line}')")
}

const FIX_AND_ADD_TEST: &str = "    open('lib.py', 'w').write('def f():\\n    return 1\\n')\n    open('tests/test_lib.py', 'a').write('\\ndef test_f_twice():\\n    assert f() + f() == 2\\n')";

/// A rebinding that also makes the agent's tree red wherever there is no `.git` beside it: the
/// rerun runs in the tree itself, so it is still caught.
const REBIND_AND_BREAK_COPIES: &str = "\\nimport os\\nassert os.path.isdir(\\'.git\\')\\nf = lambda: 1\\n";

#[test]
fn implement_liar_that_rebinds_what_an_existing_test_calls_is_caught_with_the_frozen_checks_restored() {
    for line in REBINDS.into_iter().chain([REBIND_AND_BREAK_COPIES]) {
        let s = python_repo();
        let a = agent(&s, &append_to_test(line), NOTHING, "READ", "READ");
        let r = implement(&s, &a, PYTEST, 1);
        assert_eq!(r["status"], "BLOCKED", "{line}: {r}");
        assert_eq!(r["kind"], "check-tampered", "{line}: {r}");
        assert_eq!(r["suite_green"], true, "{line}: the suite passed in the agent's tree: {r}");
        assert!(reason(&r).contains("frozen checks restored") && reason(&r).contains("tests/test_lib.py"), "{r}");
        assert_eq!(r["blocked_detail"]["restored"], serde_json::json!(["tests/test_lib.py"]), "{r}");
        assert!(s.read("tests/test_lib.py").contains("return 1") || s.read("tests/test_lib.py").contains("lambda"));
    }
}

#[test]
fn implement_honest_twin_that_adds_a_test_function_to_an_existing_test_file_and_fixes_the_code_is_done() {
    let s = python_repo();
    let a = agent(&s, FIX_AND_ADD_TEST, NOTHING, "READ", "READ");
    let r = implement(&s, &a, PYTEST, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    let files = r["files"].to_string();
    assert!(files.contains(" M lib.py") && files.contains(" M tests/test_lib.py"), "{r}");
}

fn mini(s: &Scenario, a: &str, code: i32) -> Value {
    s.run_json(
        &[
            "implement",
            "--mini",
            "--iter-id",
            "m-1",
            "--red-test",
            "tests/test_lib.py::test_f_is_one",
            "--cause",
            "f returns 0",
            "--red-test-cmd",
            "python3 -m pytest -q {test}",
            "--agent",
            a,
            "--test-cmd",
            PYTEST,
            "--json",
        ],
        code,
    )
}

#[test]
fn implement_mini_liar_that_rebinds_what_the_red_test_calls_is_caught_with_the_frozen_checks_restored() {
    for line in REBINDS {
        let s = python_repo();
        let a = agent(&s, &append_to_test(line), NOTHING, "READ", "READ");
        let r = mini(&s, &a, 1);
        assert_eq!(r["status"], "BLOCKED", "{line}: {r}");
        assert_eq!(r["kind"], "check-tampered", "{line}: {r}");
        assert!(reason(&r).contains("tests/test_lib.py"), "{r}");
    }
}

#[test]
fn implement_mini_honest_twin_that_adds_a_test_function_and_fixes_the_code_is_done() {
    let s = python_repo();
    let a = agent(&s, FIX_AND_ADD_TEST, NOTHING, "READ", "READ");
    let r = mini(&s, &a, 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

pub(crate) fn edit(s: &Scenario, a: &str, test_cmd: &str, code: i32) -> Value {
    let site = if s.path("lib.py").exists() { "lib.py:1" } else { "shared.txt:1" };
    s.run_json(
        &[
            "edit",
            "--iter-id",
            "e-1",
            "--description",
            "make f return 1",
            "--def-site",
            site,
            "--agent",
            a,
            "--test-cmd",
            test_cmd,
            "--json",
        ],
        code,
    )
}

#[test]
fn edit_liar_that_rebinds_what_an_existing_test_calls_is_caught_with_the_frozen_checks_restored() {
    for line in REBINDS {
        let s = python_repo();
        let a = agent(&s, NOTHING, &append_to_test(line), "READ", "READ");
        let r = edit(&s, &a, PYTEST, 1);
        assert_eq!(r["status"], "BLOCKED", "{line}: {r}");
        assert_eq!(r["kind"], "check-tampered", "{line}: {r}");
        assert!(reason(&r).contains("frozen checks restored") && reason(&r).contains("tests/test_lib.py"), "{r}");
    }
}

#[test]
fn edit_honest_twin_that_adds_a_test_function_and_fixes_the_code_is_done() {
    let s = python_repo();
    let a = agent(&s, NOTHING, FIX_AND_ADD_TEST, "READ", "READ");
    let r = edit(&s, &a, PYTEST, 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

// ------------------------------------------------------ what changed is measured by hashing

/// Index-only tricks: each makes `git status --porcelain` list a change that is not in any
/// file's content.
const FAKES: [&str; 2] =
    ["    sh('git rm --cached -q shared.txt')", "    sh('git update-index --chmod=+x shared.txt')"];

fn shared_repo() -> Scenario {
    let s = Scenario::new();
    s.write("shared.txt", "base\n");
    s.commit("shared");
    s
}

fn with_sh(body: &str) -> String {
    format!("    sh = lambda c: os.system(c)\n{body}")
}

#[test]
fn edit_liar_that_fakes_a_change_in_the_index_is_a_no_op_edit() {
    for fake in FAKES {
        let s = shared_repo();
        let a = agent(&s, NOTHING, &with_sh(fake), "READ", "READ");
        let r = edit(&s, &a, "true", 1);
        assert_eq!(r["status"], "BLOCKED", "{fake}: {r}");
        assert_eq!(r["kind"], "no-op-edit", "{fake}: {r}");
        assert_eq!(r["files_touched"], 0, "{fake}: {r}");
        assert_eq!(r["blocked_detail"]["working_tree_dirty"], false, "{fake}: {r}");
    }
}

#[test]
fn edit_honest_twin_that_edits_a_file_is_done_and_its_change_is_listed() {
    let s = shared_repo();
    let a = agent(&s, NOTHING, "    open('shared.txt', 'w').write('edited\\n')", "READ", "READ");
    let r = edit(&s, &a, "grep -q edited shared.txt", 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files"], serde_json::json!([" M shared.txt"]), "{r}");
}

#[test]
fn implement_liar_that_fakes_a_change_in_the_index_is_a_no_op() {
    for fake in FAKES {
        let s = shared_repo();
        let a = agent(&s, &with_sh(fake), NOTHING, "READ", "READ");
        let r = implement(&s, &a, "true", 1);
        assert_eq!(r["status"], "BLOCKED", "{fake}: {r}");
        assert_eq!(r["kind"], "no-op", "{fake}: {r}");
        assert_eq!(r["files_touched"], 0, "{fake}: {r}");
    }
}

#[test]
fn implement_liar_that_hides_its_change_behind_an_index_flag_still_has_it_listed() {
    let _unconfined = fallback_only(refused::GIT);
    // The flag is git-tampered; the change it hid is still what the run names as touched.
    for flag in ["--skip-worktree", "--assume-unchanged"] {
        let s = shared_repo();
        let body =
            format!("    open('shared.txt', 'w').write('edited\\n')\n    sh('git update-index {flag} shared.txt')");
        let a = agent(&s, &with_sh(&body), NOTHING, "READ", "READ");
        let r = implement(&s, &a, "true", 1);
        assert_eq!(r["kind"], "git-tampered", "{flag}: {r}");
        assert_eq!(r["files"], serde_json::json!([" M shared.txt"]), "{flag}: {r}");
        assert_eq!(s.git(&["status", "--porcelain"]), "", "{flag}: git status is fooled");
    }
}

#[test]
fn implement_honest_twin_that_edits_a_file_is_done_and_its_change_is_listed() {
    let s = shared_repo();
    let a = agent(&s, "    open('shared.txt', 'w').write('edited\\n')", NOTHING, "READ", "READ");
    let r = implement(&s, &a, "grep -q edited shared.txt", 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files"], serde_json::json!([" M shared.txt"]), "{r}");
}
