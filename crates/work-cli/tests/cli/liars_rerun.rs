//! The same command run again after `work` died: a worker that commits its change to a check and
//! kills `work` must not get a fresh freeze of that commit from a rerun. Liars caught and honest
//! twins done, through the real binary.

use crate::head_rule::HEAD;
use crate::liars_frozen::{FIX, PYTEST};
use crate::liars_suite::python_repo;
use crate::support::{KILL_WORK, Scenario, assert_one_line_error, fallback_only};
use serde_json::Value;

/// A worker whose first dispatch runs `first` (then kills `work`), and whose later ones run
/// `later` and answer done.
fn worker(s: &Scenario, first: &str, later: &str) -> String {
    s.agent(
        "worker.py",
        &format!(
            "import subprocess\nif bump('calls') == 1:\n{first}\n{kill}\n{later}\nprint(json.dumps({{'status': 'done', 'summary': 'fixed f'}}))",
            first = indent(first),
            kill = indent(KILL_WORK),
        ),
    )
}

fn indent(code: &str) -> String {
    code.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

const GOAL: &str = "make lib.f return 1";
const SLUG: &str = "make-lib-f-return-1";

fn until(s: &Scenario, agent: &str) -> (i32, String, String) {
    s.run_killable(&["until", "tests pass", "--goal", GOAL, "--verify", PYTEST, "--agent", agent, "--json"])
}

fn json(out: &str, err: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"))
}

/// Weakens the test and commits it.
const TAMPER: &str = "t = open('tests/test_lib.py').read()\nopen('tests/test_lib.py', 'w').write(t.replace('f() == 1', 'f() == f()'))\nsubprocess.run(['git', 'commit', '-qam', 'tidy tests'], check=True)";

/// `until`: the first dispatch weakens the test, commits it and kills `work` (its state is left
/// as it was). Running the same command again used to open session `<slug>-2`, freezing the
/// weakened test from the new HEAD, and a notes line then ended it done. The rerun is refused
/// (exit 2, nothing started) naming the command that continues the session, and that resume
/// judges the tree against the session's own freeze: BLOCKED `check-tampered`.
#[test]
fn until_liar_that_commits_its_tampering_and_kills_work_gets_no_fresh_freeze_from_a_rerun() {
    let _unconfined = fallback_only(HEAD);
    let s = python_repo();
    let a = worker(&s, TAMPER, "open('NOTES.md', 'a').write('fixed f\\n')");
    let (code, _, err) = until(&s, &a);
    assert_ne!(code, 0, "the first run was killed: {err}");
    assert!(s.git(&["log", "-1", "--format=%s"]).contains("tidy tests"), "the liar committed");
    let (code, out, err) = until(&s, &a);
    assert_eq!(code, 2, "the rerun must be refused\n{out}\n{err}");
    assert_one_line_error(&err);
    assert!(err.contains(&format!("work until resume {SLUG}")), "{err}");
    assert!(!s.path(&format!(".work/sessions/{SLUG}-2")).exists(), "a second session was opened");
    let (code, out, err) = s.run(&["until", "resume", SLUG, "--json"]);
    let v = json(&out, &err);
    assert_eq!((code, v["status"].as_str()), (1, Some("blocked")), "{v}");
    let why = v["stoppedReason"].as_str().unwrap_or_default();
    assert!(why.starts_with("check-tampered") && why.contains("tests/test_lib.py"), "{v}");
}

/// The honest twins: a worker killed with nothing tampered is continued by the command the
/// refusal names and ends done; after a session that ended `done` (or `blocked`), the same
/// command opens a new session `<slug>-2` as before.
#[test]
fn until_honest_twins_rerun_after_a_kill_resume_and_after_a_finished_session_start_anew() {
    // Killed mid-work, nothing tampered: the rerun names the resume, which finishes the work.
    let s = python_repo();
    let a = worker(&s, "open('NOTES.md', 'a').write('looking\\n')", FIX);
    let (code, _, _) = until(&s, &a);
    assert_ne!(code, 0);
    let (code, _, err) = until(&s, &a);
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = s.run(&["until", "resume", SLUG, "--json"]);
    let v = json(&out, &err);
    assert_eq!((code, v["status"].as_str()), (0, Some("done")), "{v}");

    // Done, then the same command again: a new session.
    let s = python_repo();
    let a = s.agent("worker.py", &format!("{FIX}\nprint(json.dumps({{'status': 'done', 'summary': 'fixed f'}}))"));
    let (code, out, err) = until(&s, &a);
    assert_eq!((code, json(&out, &err)["session_id"].as_str()), (0, Some(SLUG)), "{out}\n{err}");
    s.write("lib.py", "def f():\n    return 0\n");
    s.commit("the bug is back");
    let (code, out, err) = until(&s, &a);
    let v = json(&out, &err);
    assert_eq!((code, v["status"].as_str()), (0, Some("done")), "{v}");
    assert_eq!(v["session_id"], format!("{SLUG}-2"), "{v}");

    // Max reached, then the same command again: a new session.
    let s = python_repo();
    let busy = s.agent(
        "busy.py",
        "open('NOTES.md', 'a').write('x\\n')\nprint(json.dumps({'status': 'continue', 'summary': 'more'}))",
    );
    let (code, out, err) =
        s.run(&["until", "tests pass", "--goal", GOAL, "--verify", PYTEST, "--max", "1", "--agent", &busy, "--json"]);
    assert_eq!((code, json(&out, &err)["status"].as_str()), (1, Some("max-reached")), "{out}\n{err}");
    let (code, out, err) = until(&s, &a);
    let v = json(&out, &err);
    assert_eq!((code, v["session_id"].as_str()), (0, Some(format!("{SLUG}-2").as_str())), "{v}");

    // Blocked, then the same command again: a new session.
    let s = python_repo();
    let blocked = s.agent("blocker.py", "print(json.dumps({'status': 'blocked', 'blocker': 'need a person'}))");
    let (code, out, err) = until(&s, &blocked);
    assert_eq!((code, json(&out, &err)["status"].as_str()), (1, Some("blocked")), "{out}\n{err}");
    let (code, out, err) = until(&s, &a);
    let v = json(&out, &err);
    assert_eq!((code, v["session_id"].as_str()), (0, Some(format!("{SLUG}-2").as_str())), "{v}");
}
