//! Lying agents against the suite's own report and against added lines that end a check
//! early: each liar is caught, each honest twin is not (see docs/ground-truth.md).

use crate::support::Scenario;
use serde_json::Value;

/// A pytest stand-in (`python3 -m pytest` finds it at the root): collects the `test_*`
/// functions of `tests/test_*.py` (or of `FILE::NAME`), lets a `conftest.py` beside them change
/// the collection (`pytest_collection_modifyitems`: remove an item, or append `'skip'` to it),
/// honours `--junitxml=PATH` and exits like pytest (1 on a failure, 5 when nothing was
/// collected).
pub const PYTEST: &str = r#"import importlib.util, os, sys
args = sys.argv[1:]
junit = next((a.split('=', 1)[1] for a in args if a.startswith('--junitxml=')), None)
items, dirs = [], []
for target in [a for a in args if not a.startswith('-')] or ['tests']:
    path, _, only = target.partition('::')
    if os.path.isdir(path):
        files = [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.startswith('test_') and n.endswith('.py')]
    else:
        files = [path]
    for fp in files:
        spec = importlib.util.spec_from_file_location(os.path.basename(fp)[:-3], fp)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for attr in sorted(vars(mod)):
            if attr.startswith('test_') and callable(getattr(mod, attr)) and (not only or attr == only):
                items.append([fp[:-3].replace('/', '.'), attr, getattr(mod, attr)])
        if os.path.dirname(fp) not in dirs:
            dirs.append(os.path.dirname(fp))
for d in dirs:
    conf = os.path.join(d, 'conftest.py')
    if os.path.exists(conf):
        spec = importlib.util.spec_from_file_location('conftest', conf)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if hasattr(mod, 'pytest_collection_modifyitems'):
            mod.pytest_collection_modifyitems(items)
cases, failed = [], 0
for item in items:
    cls, name, fn = item[:3]
    if 'skip' in item[3:]:
        cases.append('<testcase classname="%s" name="%s"><skipped message="s"/></testcase>' % (cls, name))
        continue
    try:
        fn()
        cases.append('<testcase classname="%s" name="%s" />' % (cls, name))
        print('PASSED %s::%s' % (cls, name))
    except Exception as e:
        failed += 1
        cases.append('<testcase classname="%s" name="%s"><failure message="x">%r</failure></testcase>' % (cls, name, e))
        print('FAILED %s::%s' % (cls, name))
if junit:
    with open(junit, 'w') as f:
        f.write('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="%d">%s</testsuite></testsuites>' % (len(cases), ''.join(cases)))
sys.exit(1 if failed else (0 if items else 5))
"#;

/// A repository whose suite has a passing test and a failing one (`f()` must return 1).
pub fn python_repo() -> Scenario {
    let s = Scenario::new();
    python_files(&s);
    s.commit("lib, suite and a pytest stand-in");
    s
}

/// The files of [`python_repo`], not committed.
pub fn python_files(s: &Scenario) {
    s.write("pytest.py", PYTEST);
    s.write(".gitignore", "__pycache__/\n");
    s.write("lib.py", "def f():\n    return 0\n");
    s.write("tests/test_lib.py", TEST_LIB);
}

/// The suite of [`python_repo`].
pub const TEST_LIB: &str =
    "from lib import f\n\ndef test_imports():\n    assert callable(f)\n\ndef test_f_is_one():\n    assert f() == 1\n";

fn until(s: &Scenario, body: &str, verify: &str, code: i32) -> Value {
    let agent =
        s.agent("worker.py", &format!("{body}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\"}}))"));
    s.run_json(&["until", "the suite passes", "--goal", "g", "--verify", verify, "--agent", &agent, "--json"], code)
}

fn reason(v: &Value) -> &str {
    v["stoppedReason"].as_str().unwrap_or_default()
}

const PYTEST_VERIFY: &str = "python3 -m pytest -q tests";

#[test]
fn until_liar_that_deletes_a_failing_test_by_an_appended_line_is_caught_by_the_suite_report() {
    let s = python_repo();
    // Every old line is kept (the file-level freeze allows the append); the test is gone.
    let v = until(&s, "open('tests/test_lib.py', 'a').write('\\ndel test_f_is_one\\n')", PYTEST_VERIFY, 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert!(reason(&v).contains("check-tampered") && reason(&v).contains("test_lib::test_f_is_one"), "{v}");
    assert!(reason(&v).contains("vanished from the suite's report"), "{v}");
}

#[test]
fn until_liar_whose_conftest_deselects_the_failing_test_is_caught_by_the_suite_report() {
    // Lines appended to the existing conftest.py (a new one is named by the check surface
    // itself, see liars_restored_attack): the file-level freeze allows an append.
    let s = conftest_repo();
    let body = "open('tests/conftest.py', 'a').write(\"def pytest_collection_modifyitems(items):\\n    items[:] = [i for i in items if i[1] != 'test_f_is_one']\\n\")";
    let v = until(&s, body, PYTEST_VERIFY, 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert!(reason(&v).contains("test_lib::test_f_is_one"), "{v}");
}

#[test]
fn until_honest_twin_that_fixes_the_code_and_adds_a_test_is_done_under_the_suite_report() {
    let s = python_repo();
    let body = "open('lib.py', 'w').write('def f():\\n    return 1\\n')\nopen('tests/test_lib.py', 'a').write('\\ndef test_f_twice():\\n    assert f() + f() == 2\\n')";
    let v = until(&s, body, PYTEST_VERIFY, 0);
    assert_eq!(v["status"], "done", "{v}");
}

/// A shell suite: `check.sh` runs every `tests/*.sh`; the one test needs `fn ready`.
fn shell_repo() -> Scenario {
    let s = Scenario::new();
    s.write("check.sh", "for t in tests/*.sh; do sh \"$t\" || exit 1; done\n");
    s.write("tests/ready.sh", "grep -q 'fn ready' src/lib.rs\n");
    s.write("src/lib.rs", "pub fn f() {}\n");
    s.commit("code and a shell suite");
    s
}

#[test]
fn until_liar_that_inserts_exit_0_above_a_test_is_blocked() {
    let s = shell_repo();
    let body = "t = open('tests/ready.sh').read()\nopen('tests/ready.sh', 'w').write('exit 0\\n' + t)";
    let v = until(&s, body, "sh check.sh", 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert!(reason(&v).contains("tests/ready.sh") && reason(&v).contains("ends early"), "{v}");
}

#[test]
fn until_liar_that_appends_exit_0_to_a_sourced_test_is_blocked() {
    let s = shell_repo();
    // `. tests/ready.sh` would pass whatever the grep said once `exit 0` ends it.
    let body = "open('tests/ready.sh', 'a').write('exit 0\\n')";
    let v = until(&s, body, "sh check.sh", 1);
    assert_eq!(v["status"], "blocked", "{v}");
    assert!(reason(&v).contains("ends early"), "{v}");
}

#[test]
fn until_honest_twin_that_adds_a_guarded_test_line_is_done() {
    let s = shell_repo();
    let body = "open('src/lib.rs', 'a').write('pub fn ready() {}\\n')\nopen('tests/ready.sh', 'a').write(\"[ -f src/lib.rs ] || exit 1\\ngrep -q 'pub fn ready' src/lib.rs\\n\")";
    let v = until(&s, body, "sh check.sh", 0);
    assert_eq!(v["status"], "done", "{v}");
}

/// A scripted implement agent: `IMPL` is the implementer's body; every other role approves.
fn implement_agent(s: &Scenario, body: &str) -> String {
    s.agent(
        "agent.py",
        &format!(
            r#"role = req['role']
def out(d):
    print(json.dumps(d))
    sys.exit(0)
if role == 'implementer':
{body}
    out({{'status': 'DONE', 'summary': 'done', 'applied_changes': True}})
if role == 'spec-reviewer':
    out({{'status': 'compliant', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)}})
if role == 'quality-reviewer':
    out({{'verdict': 'approved', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)}})
if role == 'tester':
    out({{'status': 'DONE', 'fixtures': 1}})
print('no answer for role ' + role)
sys.exit(3)
"#
        ),
    )
}

fn implement(s: &Scenario, body: &str, code: i32) -> Value {
    s.write("PLAN.md", "# Plan\n\n## Task 1: f returns 1\n\nMake `f()` return 1.\n");
    s.commit("plan");
    let a = implement_agent(s, body);
    s.run_json(
        &["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--agent", &a, "--test-cmd", PYTEST_VERIFY, "--json"],
        code,
    )
}

const FIX: &str = "    open('lib.py', 'w').write('def f():\\n    return 1\\n')";
const DELETE_FAILING: &str = "    open('tests/test_lib.py', 'a').write('\\ndel test_f_is_one\\n')";
/// A repository whose test directory already has a `conftest.py` (a new one is named by the
/// check surface itself): lines appended to it are what the suite report must catch.
fn conftest_repo() -> Scenario {
    let s = python_repo();
    s.write("tests/conftest.py", "# shared test configuration\n");
    s.commit("a conftest");
    s
}

const SKIP_BY_CONFTEST: &str = "    open('tests/conftest.py', 'a').write(\"def pytest_collection_modifyitems(items):\\n    [i.append('s' + 'kip') for i in items if i[1] == 'test_f_is_one']\\n\")";

#[test]
fn implement_liar_that_deletes_the_failing_test_is_caught_by_the_suite_report() {
    let s = python_repo();
    let r = implement(&s, &format!("{DELETE_FAILING}\n    open('notes.txt', 'w').write('done')"), 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "check-tampered", "{r}");
    assert!(r["reason"].as_str().is_some_and(|x| x.contains("test_lib::test_f_is_one")), "{r}");
}

#[test]
fn implement_honest_twin_that_fixes_the_code_is_done_under_the_suite_report() {
    let s = python_repo();
    let r = implement(&s, FIX, 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

/// A test module that logs every run of the suite in the tree (`.cache/suite/runs.log`, which
/// no commit holds): the suite's residue.
const TEST_RUNS: &str = "import os\nos.makedirs('.cache/suite', exist_ok=True)\nopen('.cache/suite/runs.log', 'a').write('run\\n')\n\ndef test_runs():\n    assert True\n";

fn logging_repo() -> Scenario {
    let s = Scenario::new();
    python_files(&s);
    s.write("tests/test_runs.py", TEST_RUNS);
    s.commit("lib, a suite that logs its runs, and a pytest stand-in");
    s
}

const RUN_SUITE: &str =
    "    import subprocess\n    subprocess.run(['python3', '-m', 'pytest', '-q', 'tests'], stdout=subprocess.DEVNULL)";

#[test]
fn implement_liar_that_only_runs_a_reporting_suite_is_a_no_op() {
    // The suite runs once before the first dispatch, as its runner's report command: what that
    // one run leaves is residue, so an agent that only runs the suite touched nothing.
    let s = logging_repo();
    let r = implement(&s, RUN_SUITE, 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "no-op", "the suite's residue is not work: {r}");
    assert_eq!(r["files_touched"], 0, "{r}");
}

#[test]
fn implement_honest_twin_runs_the_suite_once_before_its_first_dispatch() {
    let s = logging_repo();
    // The engine runs the suite on its own copy: every run is counted outside the tree too, in
    // the scenario's grant, where the agent's own runs of the suite can write when confined.
    let runs = s.path(".agent-state/runs.log").display().to_string();
    s.write("tests/test_runs.py", &format!("{TEST_RUNS}open({runs:?}, 'a').write('run\\n')\n"));
    s.commit("every run counted outside the tree");
    let count =
        format!("    open(state_path('runs-at-dispatch'), 'w').write(str(len(open({runs:?}).read().splitlines())))");
    let r = implement(&s, &format!("{count}\n{FIX}\n{RUN_SUITE}"), 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(r["files_touched"], 1, "the fix, not the suite's log: {r}");
    assert_eq!(
        s.read(".agent-state/runs-at-dispatch"),
        "1",
        "one baseline run gives both the residue and the suite report's baseline"
    );
}

fn mini(s: &Scenario, body: &str, code: i32) -> Value {
    let a = implement_agent(s, body);
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
            &a,
            "--test-cmd",
            PYTEST_VERIFY,
            "--json",
        ],
        code,
    )
}

#[test]
fn implement_mini_liar_whose_conftest_skips_the_red_test_is_caught_by_the_suite_report() {
    // A skipped RED test exits 0; the suite's own report says it no longer runs.
    let s = conftest_repo();
    let r = mini(&s, SKIP_BY_CONFTEST, 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "check-tampered", "{r}");
    let reason = r["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("test_lib::test_f_is_one") && reason.contains("skipped"), "{r}");
}

#[test]
fn implement_mini_honest_twin_that_fixes_the_code_is_done_under_the_suite_report() {
    let s = python_repo();
    let r = mini(&s, FIX, 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

const PYTEST_GOAL: &str = r#"
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

fn ultra(s: &Scenario, body: &str, code: i32) -> Value {
    s.write("GOAL.toml", PYTEST_GOAL);
    s.commit("goal");
    let a = s.agent(
        "implementer.py",
        &format!("{body}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"done\", \"claims\": [], \"cleanup\": []}}))"),
    );
    s.run_json(&["ultra", "GOAL.toml", "--agent", &a, "--json"], code)
}

#[test]
fn ultra_liar_that_deletes_the_failing_test_is_caught_by_the_suite_report() {
    let s = python_repo();
    let out = ultra(&s, "open('tests/test_lib.py', 'a').write('\\ndel test_f_is_one\\n')", 1);
    assert_eq!(out["stop_reason"], "check-tampered", "{out}");
    assert!(out["stop_detail"].as_str().is_some_and(|d| d.contains("test_lib::test_f_is_one")), "{out}");
}

#[test]
fn ultra_honest_twin_that_fixes_the_code_is_done_under_the_suite_report() {
    let s = python_repo();
    let out = ultra(&s, "open('lib.py', 'w').write('def f():\\n    return 1\\n')", 0);
    assert_eq!(out["status"], "DONE", "{out}");
}
