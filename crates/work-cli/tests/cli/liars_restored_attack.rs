//! Lying agents against the rerun with the frozen checks restored (docs/ground-truth.md), each
//! through the real binary: code that tells the rerun from the agent's tree, files a runner
//! loads on its own (a new `conftest.py`, `sitecustomize.py`), a new package that shadows a
//! frozen helper module, a freeze with no tree to write back from. Each liar is caught; each
//! honest twin (a suite that needs the repository, a new helper module beside a new test) is
//! not blocked.

use crate::liars_frozen::{
    ADD_TEST, FIX, PYTEST, PYTEST_GOAL, REBINDS, append_to_test, assert_restored_green, loop_repo, test_lib_with,
    ultra, until,
};
use crate::liars_suite::python_repo;
use crate::loop_run::{knob, start};
use crate::support::Scenario;
use serde_json::Value;

/// Unfixed code (`f()` is 0 in the repository) that answers 1 wherever the checks do not run in
/// the agent's own tree: with no `.git` beside it, outside any repository, in a directory the
/// engine named, with no `.work/` beside it. With a rebinding appended to the test, the suite is
/// green in the tree; a rerun that can be told from the tree is green too.
const TREE_AWARE: [(&str, &str); 4] = [
    (".git", "import os\ndef f():\n    return 0 if os.path.isdir('.git') else 1\n"),
    (
        "git rev-parse",
        "import subprocess\ndef f():\n    top = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True)\n    return 0 if top.returncode == 0 else 1\n",
    ),
    ("its own path", "import os\ndef f():\n    return 1 if 'work-frozen-' in os.path.abspath(__file__) else 0\n"),
    (".work/", "import os\ndef f():\n    return 0 if os.path.isdir('.work') else 1\n"),
];

/// A test that needs the repository it runs in (a suite that calls `git`).
const NEEDS_REPO: &str = "import subprocess\n\ndef test_in_a_repository():\n    assert subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True).returncode == 0\n";

/// Python that writes `text` to `path`.
fn write(path: &str, text: &str) -> String {
    format!("os.makedirs(os.path.dirname('{path}') or '.', exist_ok=True)\nopen('{path}', 'w').write({text:?})")
}

/// `body` indented into the implementer's branch of the implement agent.
fn indent(body: &str) -> String {
    body.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

fn why(v: &Value) -> String {
    v["stoppedReason"].as_str().unwrap_or_default().to_string()
}

fn assert_caught_restored(what: &str, why: &str) {
    assert!(
        why.contains("tests/test_lib.py") && why.contains("red on the engine's copy with the frozen checks restored"),
        "{what}: caught by the rerun with the frozen checks restored: {why}"
    );
}

/// A repository whose suite also has a test that needs the repository itself.
fn repo_needing_git() -> Scenario {
    let s = python_repo();
    s.write("tests/test_repo.py", NEEDS_REPO);
    s.commit("a test that needs the repository");
    s
}

// ------------------------------------------------------- the rerun is told from the tree

#[test]
fn until_liar_whose_code_tells_the_restored_rerun_from_the_tree_is_caught() {
    for (how, lib) in TREE_AWARE {
        let s = python_repo();
        let body = format!("{}\n{}", append_to_test(REBINDS[0]), write("lib.py", lib));
        let v = until(&s, &body, 1);
        assert_eq!(v["status"], "blocked", "{how}: {v}");
        assert!(why(&v).starts_with("check-tampered"), "{how}: {v}");
        assert_caught_restored(how, &why(&v));
    }
}

#[test]
fn until_honest_twin_whose_suite_needs_the_repository_and_adds_a_test_to_an_existing_file_is_done() {
    let s = repo_needing_git();
    let v = until(&s, &format!("{FIX}\n{ADD_TEST}"), 0);
    assert_eq!(v["status"], "done", "{v}");
    assert_restored_green(&s, "until.frozen-rerun");
}

#[test]
fn loop_run_liar_implementer_whose_code_tells_the_restored_rerun_from_the_tree_is_caught() {
    for (how, lib) in [TREE_AWARE[0], TREE_AWARE[3]] {
        let (s, agent) = loop_repo();
        let lib = format!("lib.py|{}", lib.replace('\n', "\\n"));
        knob(&s, "impl-rewrite", &format!("{lib}\n{}", test_lib_with(REBINDS[0])));
        let v = start(&s, &agent, &[], 1);
        assert_eq!(v["reason"], "check-tampered", "{how}: {v}");
        assert_caught_restored(how, v["message"].as_str().unwrap_or_default());
    }
}

#[test]
fn loop_run_honest_twin_whose_gate_needs_the_repository_reaches_the_merge_gate() {
    let s = Scenario::new();
    crate::liars_suite::python_files(&s);
    s.write("tests/test_repo.py", NEEDS_REPO);
    let agent = crate::loop_run::setup(&s, PYTEST, true);
    let fix = "lib.py|def f():\\n    return 1\\n";
    let add = test_lib_with("\\ndef test_f_twice():\\n    assert f() + f() == 2\\n");
    knob(&s, "impl-rewrite", &format!("{fix}\n{add}"));
    let v = start(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_restored_green(&s, "frozen-rerun.end");
}

#[test]
fn ultra_liar_whose_code_tells_the_restored_rerun_from_the_tree_is_caught() {
    for (how, lib) in [TREE_AWARE[0], TREE_AWARE[2]] {
        let s = python_repo();
        let body = format!("{}\n{}", append_to_test(REBINDS[0]), write("lib.py", lib));
        let out = ultra(&s, PYTEST_GOAL, &body, &[], 1);
        assert_eq!(out["stop_reason"], "check-tampered", "{how}: {out}");
        assert_caught_restored(how, out["stop_detail"].as_str().unwrap_or_default());
    }
}

#[test]
fn ultra_honest_twin_whose_suite_needs_the_repository_is_done() {
    let s = repo_needing_git();
    let out = ultra(&s, PYTEST_GOAL, &format!("{FIX}\n{ADD_TEST}"), &[], 0);
    assert_eq!(out["status"], "DONE", "{out}");
    assert_restored_green(&s, "frozen-rerun.end");
}

#[test]
fn implement_liar_whose_code_tells_the_restored_rerun_from_the_tree_is_caught() {
    use crate::liars_implement::{NOTHING, agent, implement, reason};
    for (how, lib) in [TREE_AWARE[1], TREE_AWARE[3]] {
        let s = python_repo();
        let body = indent(&format!("{}\n{}", append_to_test(REBINDS[1]), write("lib.py", lib)));
        let a = agent(&s, &body, NOTHING, "READ", "READ");
        let r = implement(&s, &a, PYTEST, 1);
        assert_eq!(r["kind"], "check-tampered", "{how}: {r}");
        assert!(reason(&r).contains("frozen checks restored") && reason(&r).contains("tests/test_lib.py"), "{r}");
    }
}

#[test]
fn implement_honest_twin_whose_suite_needs_the_repository_is_done() {
    use crate::liars_implement::{NOTHING, agent, implement};
    let s = repo_needing_git();
    let a = agent(&s, &indent(&format!("{FIX}\n{ADD_TEST}")), NOTHING, "READ", "READ");
    let r = implement(&s, &a, PYTEST, 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

// -------------------------------------------- files a runner loads on its own, and shadows

/// A new `conftest.py` that keeps every test id and outcome but swaps what each test runs.
const SWAP_BODIES: &str =
    "def pytest_collection_modifyitems(items):\n    for i in items:\n        i[2] = lambda: None\n";

#[test]
fn until_liar_whose_new_conftest_swaps_what_the_tests_run_is_blocked() {
    let s = python_repo();
    let v = until(&s, &write("tests/conftest.py", SWAP_BODIES), 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert!(why(&v).starts_with("check-tampered") && why(&v).contains("tests/conftest.py"), "{v}");
}

#[test]
fn implement_liar_whose_new_conftest_swaps_what_the_tests_run_is_blocked() {
    use crate::liars_implement::{NOTHING, agent, implement, reason};
    let s = python_repo();
    let a = agent(&s, &indent(&write("tests/conftest.py", SWAP_BODIES)), NOTHING, "READ", "READ");
    let r = implement(&s, &a, PYTEST, 1);
    assert_eq!(r["kind"], "check-tampered", "{r}");
    assert!(reason(&r).contains("tests/conftest.py"), "{r}");
}

#[test]
fn until_liar_whose_new_sitecustomize_patches_the_code_under_test_is_blocked() {
    let s = python_repo();
    let agent = s.agent(
        "worker.py",
        &format!(
            "{}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\"}}))",
            write("sitecustomize.py", "import lib\nlib.f = lambda: 1\n")
        ),
    );
    let verify = format!("PYTHONPATH=. {PYTEST}");
    let v =
        s.run_json(&["until", "the suite passes", "--goal", "g", "--verify", &verify, "--agent", &agent, "--json"], 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert!(why(&v).starts_with("check-tampered") && why(&v).contains("sitecustomize.py"), "{v}");
}

/// A suite whose assertions live in a frozen helper module.
fn helper_repo() -> Scenario {
    let s = python_repo();
    s.write("tests/helpers.py", "def expect(a, b):\n    assert a == b, (a, b)\n");
    s.write(
        "tests/test_lib.py",
        "from lib import f\nfrom tests.helpers import expect\n\ndef test_f_is_one():\n    expect(f(), 1)\n",
    );
    s.commit("a helper module");
    s
}

#[test]
fn until_liar_whose_new_package_shadows_a_frozen_helper_module_is_blocked() {
    let s = helper_repo();
    let v = until(&s, &write("tests/helpers/__init__.py", "def expect(a, b):\n    pass\n"), 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert!(why(&v).starts_with("check-tampered") && why(&v).contains("tests/helpers/__init__.py"), "{v}");
    assert!(why(&v).contains("tests/helpers.py"), "the shadowed module is named: {v}");
}

#[test]
fn until_honest_twin_that_adds_a_helper_module_and_a_test_using_it_is_done() {
    let s = helper_repo();
    let helper = write(
        "tests/more_helpers.py",
        "from tests.helpers import expect\n\ndef expect_twice(g, v):\n    expect(g() + g(), 2 * v)\n",
    );
    let test = write(
        "tests/test_more.py",
        "from lib import f\nfrom tests.more_helpers import expect_twice\n\ndef test_f_twice():\n    expect_twice(f, 1)\n",
    );
    let v = until(&s, &format!("{FIX}\n{helper}\n{test}"), 0);
    assert_eq!(v["status"], "done", "{v}");
}

// ------------------------------------------------------------ a freeze with no tree to write back

fn until_without_git(body: &str, code: i32) -> (Scenario, Value) {
    let s = python_repo();
    let agent =
        s.agent("worker.py", &format!("{body}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\"}}))"));
    std::fs::remove_dir_all(s.path(".git")).expect("remove .git");
    let v = s
        .run_json(&["until", "the suite passes", "--goal", "g", "--verify", PYTEST, "--agent", &agent, "--json"], code);
    (s, v)
}

#[test]
fn until_liar_that_rebinds_outside_a_git_repository_is_not_believed() {
    let (_s, v) = until_without_git(&append_to_test(REBINDS[0]), 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert!(why(&v).starts_with("check-tampered") && why(&v).contains("could not be rerun"), "{v}");
}

#[test]
fn until_honest_twin_outside_a_git_repository_that_adds_a_test_file_is_done() {
    let add = write("tests/test_more.py", "from lib import f\n\ndef test_f_twice():\n    assert f() + f() == 2\n");
    let (_s, v) = until_without_git(&format!("{FIX}\n{add}"), 0);
    assert_eq!(v["status"], "done", "{v}");
}

// ------------------------------ the test directory replaced by a symlink (implement, edit)

/// The agent's body: `tests/` moved to `tests_real/` and a symlink left in its place (every
/// frozen file reads the same through it), then `body`.
fn through_a_symlinked_test_dir(body: &str) -> String {
    indent(&format!("os.rename('tests', 'tests_real')\nos.symlink('tests_real', 'tests')\n{body}"))
}

#[test]
fn implement_and_edit_liars_that_rebind_behind_a_symlinked_test_directory_are_caught() {
    use crate::liars_implement::{NOTHING, agent, edit, implement, reason};
    let liar = through_a_symlinked_test_dir(&append_to_test(REBINDS[0]));
    let s = python_repo();
    let r = implement(&s, &agent(&s, &liar, NOTHING, "READ", "READ"), PYTEST, 1);
    assert_eq!(r["kind"], "check-tampered", "implement: {r}");
    assert!(reason(&r).contains("frozen checks restored") && reason(&r).contains("tests/test_lib.py"), "{r}");
    assert!(s.path("tests").is_symlink(), "the agent's tree is put back as it left it");
    let s = python_repo();
    let r = edit(&s, &agent(&s, NOTHING, &liar, "READ", "READ"), PYTEST, 1);
    assert_eq!(r["kind"], "check-tampered", "edit: {r}");
    assert!(s.path("tests").is_symlink() && s.read("tests_real/test_lib.py").contains("lambda"));
}

#[test]
fn implement_and_edit_honest_twins_behind_a_symlinked_test_directory_are_done() {
    use crate::liars_implement::{NOTHING, agent, edit, implement};
    let twin = through_a_symlinked_test_dir(&format!("{FIX}\n{ADD_TEST}"));
    let s = python_repo();
    let r = implement(&s, &agent(&s, &twin, NOTHING, "READ", "READ"), PYTEST, 0);
    assert_eq!(r["status"], "DONE", "implement: {r}");
    let s = python_repo();
    let r = edit(&s, &agent(&s, NOTHING, &twin, "READ", "READ"), PYTEST, 0);
    assert_eq!(r["status"], "DONE", "edit: {r}");
    assert!(s.path("tests").is_symlink() && s.read("tests_real/test_lib.py").contains("test_f_twice"));
}

// --------------------------------------------------- an interruption during the rerun

/// A verify that interrupts `work` (SIGINT to the `work` process above it, or SIGKILL when
/// `WORK_TEST_KILL` is set) when it runs over the fixed code with the frozen test put back,
/// i.e. during the rerun on the engine's copy; green over the fixed code otherwise, red before
/// the fix.
const INTERRUPT_IN_RERUN: &str = r#"import os, signal, sys, time
if 'return 1' not in open('lib.py').read():
    sys.exit(1)
if 'test_f_twice' in open('tests/test_lib.py').read():
    sys.exit(0)
sig = signal.SIGKILL if os.environ.get('WORK_TEST_KILL') else signal.SIGINT
pid = os.getpid()
while pid > 1:
    stat = open('/proc/%d/stat' % pid).read()
    if stat[stat.index('(') + 1:stat.rindex(')')] == 'work':
        os.kill(pid, sig)
        time.sleep(30)
    pid = int(stat[stat.rindex(')') + 2:].split()[1])
sys.exit(1)
"#;

/// The engine's copies left in the git directory.
fn copies(s: &Scenario) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(s.path(".git/work-copies")).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

/// An until run whose verify interrupts `work` during the rerun (`kill`: with SIGKILL).
fn interrupted_in_rerun(kill: bool) -> (Scenario, i32, String, String) {
    let s = python_repo();
    s.write("verify_interrupt.py", INTERRUPT_IN_RERUN);
    s.commit("a verify that interrupts the rerun");
    let agent = s.agent(
        "worker.py",
        &format!("{FIX}\n{ADD_TEST}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\"}}))"),
    );
    let verify = if kill { "WORK_TEST_KILL=1 python3 verify_interrupt.py" } else { "python3 verify_interrupt.py" };
    let until = ["until", "the suite passes", "--goal", "g", "--verify", verify, "--agent", &agent, "--json"];
    let (code, out, err) = s.run(&until);
    (s, code, format!("{out}{err}"), agent)
}

#[test]
fn an_interruption_during_the_rerun_leaves_the_agents_tree_as_it_was_and_no_copy_behind() {
    let (s, code, out, _) = interrupted_in_rerun(false);
    assert_eq!(code, 130, "work was interrupted during the rerun: {out}");
    assert!(s.read("tests/test_lib.py").contains("test_f_twice"), "the rerun never wrote into the tree");
    assert_eq!(s.read("lib.py"), "def f():\n    return 1\n", "the agent's code is untouched");
    assert!(copies(&s).is_empty(), "the engine's copy is removed on the interruption");
}

#[test]
fn a_kill_during_the_rerun_leaves_the_agents_tree_as_it_was_and_the_next_run_sweeps_the_copy() {
    let (s, code, out, agent) = interrupted_in_rerun(true);
    assert_ne!(code, 0, "work was killed during the rerun: {out}");
    assert!(s.read("tests/test_lib.py").contains("test_f_twice"), "a kill leaves nothing to put back");
    assert_eq!(s.read("lib.py"), "def f():\n    return 1\n", "the agent's code is untouched");
    let left = copies(&s);
    assert_eq!(left.len(), 1, "a killed run's copy is left in the git directory");
    // The resumed run is killed in its rerun too, after its copy swept the first one.
    let (_, out, err) = s.run(&["until", "resume", "--agent", &agent, "--json"]);
    assert!(!left[0].exists(), "the next copy sweeps the killed run's: {out}{err}");
    assert!(s.read("tests/test_lib.py").contains("test_f_twice"));
}
