//! `work ultra` across runs: the goal's check surface is frozen before its first
//! implementation dispatch and kept in `state.json`, so a check an implementer changed before
//! the run was interrupted is caught when the goal runs again — it never becomes the resumed
//! run's baseline — while a resume with nothing changed finishes DONE.

use crate::support::{KILL_WORK, Scenario, fallback_only, refused};

/// A goal whose check script runs a test of the test tree.
const GOAL: &str = r#"
id = "greet"
objective = "greet.sh prints hello, world"
tier = "LIGHT"
tier_justification = "one script"
stop_line = "I'll stop right away when sh check.sh passes"

[[criteria]]
id = "happy"
scenario = "sh check.sh"
evidence = ["stdout", "exit_code"]
pass = { exit_code = 0 }
"#;

fn indent(code: &str) -> String {
    code.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

fn repo() -> Scenario {
    let s = Scenario::new();
    s.write("GOAL.toml", GOAL);
    s.write("check.sh", "sh tests/test_greet.sh\n");
    s.write("tests/test_greet.sh", "test \"$(sh greet.sh 2>/dev/null)\" = 'hello, world'\n");
    s.commit("goal and its checks");
    s
}

fn calls(s: &Scenario) -> String {
    s.read(".agent-state/calls")
}

/// The first attempt runs `first` and interrupts the run; later attempts run `later`.
fn interrupted(s: &Scenario, first: &str, later: &str) -> String {
    let body = format!(
        "n = bump('calls')\nif n == 1:\n{}\n{}\n{later}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"wrote greet.sh\", \"claims\": [], \"cleanup\": []}}))",
        indent(first),
        indent(KILL_WORK)
    );
    let agent = s.agent("implementer.py", &body);
    let (code, out, err) = s.run_killable(&["ultra", "GOAL.toml", "--agent", &agent, "--json"]);
    assert_eq!(code, -1, "the first run is killed mid-attempt: {out}\n{err}");
    agent
}

const FIX: &str = "open('greet.sh', 'w').write('echo \"hello, world\"\\n')";

#[test]
fn an_implementer_that_changes_a_check_and_is_interrupted_is_blocked_when_the_goal_resumes() {
    for (edit, path) in [
        // The test the check script runs, weakened: the resumed run would freeze it as the baseline
        // and the goal would pass with no greeting at all.
        ("open('tests/test_greet.sh', 'w').write('true\\n')", "tests/test_greet.sh"),
        // The check script itself, rewritten.
        ("open('check.sh', 'w').write('exit 0\\n')", "check.sh"),
        // The test deleted.
        ("os.remove('tests/test_greet.sh')", "tests/test_greet.sh"),
    ] {
        // A write to the check script the sandbox refuses (its tests stay writable).
        let _unconfined = (path == "check.sh").then(|| fallback_only(refused::FROZEN));
        let s = repo();
        let agent = interrupted(&s, edit, "pass");
        let before = calls(&s);
        let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 1);
        assert_eq!(
            (out["status"].as_str(), out["stop_reason"].as_str()),
            (Some("BLOCKED"), Some("check-tampered")),
            "{edit}: {out}"
        );
        let detail = out["stop_detail"].as_str().unwrap_or_default();
        assert!(detail.contains(path) && detail.contains("first run"), "{edit}: {detail}");
        assert_eq!(calls(&s), before, "{edit}: nothing was dispatched");
        assert_eq!(out["dispatched"], false, "{out}");
        // And again: the freeze is the first run's, whatever the resumed runs saw.
        let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 1);
        assert_eq!(out["stop_reason"], "check-tampered", "{edit}: {out}");
    }
}

#[test]
fn a_resume_with_nothing_changed_finishes_done_and_an_added_test_is_allowed() {
    // Interrupted before it changed anything.
    let s = repo();
    let agent = interrupted(&s, "pass", FIX);
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 0);
    assert_eq!((out["status"].as_str(), out["stop_reason"].as_str()), (Some("DONE"), Some("all-green")), "{out}");
    assert_eq!(out["runs"], 2, "{out}");

    // Interrupted after it added a test (the only change to the check surface allowed).
    let s = repo();
    let agent = interrupted(&s, "open('tests/test_greet.sh', 'a').write('grep -q hello greet.sh\\n')", FIX);
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 0);
    assert_eq!(out["stop_reason"], "all-green", "{out}");
}

#[test]
fn a_run_killed_between_two_failing_attempts_stops_on_the_same_failure_after_as_many_attempts() {
    // An implementer that never fixes anything: uninterrupted, the second attempt fails as the
    // first did and the goal stops BLOCKED same-failure-repeated after two attempts.
    let answer = "print(json.dumps({\"status\": \"done\", \"summary\": \"tried\", \"claims\": [], \"cleanup\": []}))";
    let s = repo();
    let agent = s.agent("implementer.py", &format!("bump('calls')\n{answer}"));
    let whole = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 1);
    assert_eq!(whole["stop_reason"], "same-failure-repeated", "{whole}");
    assert_eq!(whole["attempts"], 2, "{whole}");

    // Killed as its second attempt starts (before any answer): the resumed run makes that
    // attempt again and stops on the same failure — it does not start the count anew.
    let s = repo();
    let agent = s.agent("implementer.py", &format!("if bump('calls') == 2:\n{}\n{answer}", indent(KILL_WORK)));
    let (code, out, err) = s.run_killable(&["ultra", "GOAL.toml", "--agent", &agent, "--json"]);
    assert_eq!(code, -1, "the first run is killed as its second attempt starts: {out}\n{err}");
    let resumed = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 1);
    assert_eq!(resumed["stop_reason"], "same-failure-repeated", "{resumed}");
    assert_eq!(resumed["attempts"], whole["attempts"], "{resumed}");
    assert_eq!(calls(&s), "3", "two attempts, the killed one made again");
}
