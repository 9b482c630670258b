//! The engine never writes into the agent's tree between its dispatches, in `work implement`,
//! `work edit` and `work ultra` too: every scripted agent lists the whole tree (as
//! `tree_untouched` does) when its dispatch starts and when it ends, and the end of one
//! dispatch must equal the start of the next, the last one's the tree after `work` exited.
//! Each run's checks write a log into the directory they run in (`suite.log`, `build.log`,
//! `run.log`): the engine runs them on its own copy, so the log lands there, never in the tree.

use crate::liars_suite::python_repo;
use crate::support::Scenario;
use crate::tree_untouched::{LISTING, assert_untouched, listings};

/// Every implement/edit role: the listing at the start and at the end of its dispatch. The
/// implementer fixes `f` and adds a test file (so the rerun with the frozen checks restored
/// has a file to leave out); the editor's first try leaves the build red, its second fixes it.
const ROLES: &str = r#"
import re
k = bump('dispatches')
json.dump(listing(), open(os.path.join(OUT, '%d-start.json' % k), 'w'))
role = req['role']
READ = re.findall(r'^diff --git a/(\S+) ', req.get('prompt', ''), re.M)
def out(d):
    json.dump(listing(), open(os.path.join(OUT, '%d-end.json' % k), 'w'))
    print(json.dumps(d))
    sys.exit(0)
if role == 'implementer':
    open('lib.py', 'w').write('def f():\n    return 1\n')
    open('tests/test_more.py', 'w').write('from lib import f\n\ndef test_more():\n    assert f() == 1\n')
    out({'status': 'DONE', 'summary': 'done', 'applied_changes': True})
if role == 'editor':
    open('lib.py', 'w').write('def f():\n    return %d\n' % (2 if bump('edits') == 1 else 1))
    out({'status': 'DONE', 'applied_changes': True, 'sites': 0, 'hole': None})
if role == 'spec-reviewer':
    out({'status': 'compliant', 'issues': [], 'files_read': READ})
if role == 'quality-reviewer':
    out({'verdict': 'approved', 'issues': [], 'files_read': READ})
out({'status': 'DONE', 'fixtures': 1})
"#;

/// The suite, writing its log where it runs.
const SUITE: &str = "python3 -m pytest -q tests > suite.log 2>&1";

fn roles(s: &Scenario, out: &std::path::Path) -> String {
    s.agent("roles.py", &format!("{LISTING}\nOUT = {:?}\n{ROLES}", out.display().to_string()))
}

#[test]
fn implement_leaves_the_agents_tree_untouched_between_dispatches() {
    let s = python_repo();
    s.write("PLAN.md", "# Plan\n\n## Task 1: f returns 1\n\nMake `f()` in lib.py return 1.\n");
    s.commit("plan");
    let out = listings(&s);
    let a = roles(&s, &out);
    let args = ["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--agent", &a, "--test-cmd", SUITE, "--json"];
    let r = s.run_json(&args, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    let dispatches = assert_untouched(&s, &out);
    assert!(dispatches >= 3, "the implementer and both reviewers: {dispatches}");
    assert!(!s.path("suite.log").exists(), "the suite's log stayed in the engine's copy");
}

#[test]
fn edit_leaves_the_agents_tree_untouched_between_dispatches() {
    let s = python_repo();
    let out = listings(&s);
    let a = roles(&s, &out);
    let build = "python3 -c 'import lib; assert lib.f() == 1' > build.log 2>&1";
    let args = [
        "edit",
        "--iter-id",
        "e-1",
        "--description",
        "make f return 1",
        "--def-site",
        "lib.py:1",
        "--agent",
        &a,
        "--test-cmd",
        SUITE,
        "--build-cmd",
        build,
        "--json",
    ];
    let r = s.run_json(&args, 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(assert_untouched(&s, &out), 2, "the editor, and again once its build was red");
    assert!(!s.path("build.log").exists() && !s.path("suite.log").exists(), "the logs stayed in the copy");
}

/// Ultra's one-criterion goal, its scenario writing its log where it runs.
fn goal() -> String {
    let with_log = crate::ultra::LIGHT
        .replace("scenario = \"sh greet.sh\"", "scenario = \"sh greet.sh > run.log 2>&1; cat run.log\"");
    assert_ne!(with_log, crate::ultra::LIGHT, "the goal's scenario line moved");
    with_log
}

/// The implementer: its first attempt prints the wrong line, its second the greeting.
const FIXER: &str = r#"
k = bump('dispatches')
json.dump(listing(), open(os.path.join(OUT, '%d-start.json' % k), 'w'))
open('greet.sh', 'w').write('echo "%s"\n' % ('hello' if k == 1 else 'hello, world'))
json.dump(listing(), open(os.path.join(OUT, '%d-end.json' % k), 'w'))
print(json.dumps({"status": "done", "summary": "wrote greet.sh", "claims": [], "cleanup": []}))
"#;

#[test]
fn ultra_leaves_the_agents_tree_untouched_between_dispatches() {
    let s = Scenario::new();
    s.write("GOAL.toml", &goal());
    let out = listings(&s);
    let a = s.agent("fixer.py", &format!("{LISTING}\nOUT = {:?}\n{FIXER}", out.display().to_string()));
    let r = s.run_json(&["ultra", "GOAL.toml", "--agent", &a, "--max-attempts", "3", "--json"], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    assert_eq!(assert_untouched(&s, &out), 2, "a failed attempt, then the fix");
    assert!(!s.path("run.log").exists(), "the scenario's log stayed in the engine's copy");
}
