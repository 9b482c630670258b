//! `--dry-run` on every workflow: the plan is printed (each role's backend, what would be worked
//! through, the budget; the first brief with `-v`; one document with `--json`), the agent never
//! runs, and nothing is written — no state directory, no lock, the tree as it was. Bad input is
//! still refused with exit 2.

use crate::support::{Scenario, assert_one_line_error};
use serde_json::Value;

/// An agent that would leave a mark if it ever ran.
const MARKER: &str = "open(state_path('ran'), 'w').write('yes')\nprint('{}')";

fn scenario() -> (Scenario, String) {
    let s = Scenario::new();
    s.write("src/lib.py", "def add(a, b):\n    return a + b\n");
    s.write(
        "PLAN.md",
        "# Plan\n\n## Task 1: Add plus\n\nAdd `plus` to src/lib.py.\n\n## Task 2: Document it\n\nSay so.\n",
    );
    s.write("GOAL.toml", crate::ultra::LIGHT);
    std::fs::create_dir_all(s.path("docs/specs/feature")).expect("mkdir");
    s.write("docs/specs/feature/.keep", "");
    s.commit("base");
    let agent = s.agent("marker.py", MARKER);
    (s, agent)
}

/// Every workflow's dry run, with the rows its plan must show.
fn cases(agent: &str) -> Vec<(Vec<String>, Vec<&'static str>)> {
    let a = |v: &[&str]| v.iter().map(|s| s.to_string()).chain(["--agent".into(), agent.into()]).collect::<Vec<_>>();
    vec![
        (
            a(&["exhaust", "unwrap calls", "--angles", "one,two", "--budget-dispatches", "9"]),
            vec!["finder", "round        1: angle(s) one", "budget       9 dispatch(es)"],
        ),
        (
            a(&["until", "the suite passes", "--goal", "add plus", "--verify", "true"]),
            vec!["worker", "verify      true (--verify)"],
        ),
        (
            a(&["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--test-cmd", "true"]),
            vec!["implementer", "tester", "task 1", "1: Add plus", "task 2"],
        ),
        (
            a(&["edit", "--description", "Rename `add` to `plus`", "--def-site", "src/lib.py:1", "--test-cmd", "true"]),
            vec!["editor", "definition site"],
        ),
        (a(&["ultra", "GOAL.toml"]), vec!["implementer", "criterion happy", "sh greet.sh"]),
        (
            a(&["loop", "run", "docs/specs/feature", "--test-cmd", "true"]),
            vec!["spec-drafter", "implementer", "no run yet"],
        ),
    ]
}

#[test]
fn every_workflow_prints_its_plan_and_runs_and_writes_nothing() {
    let (s, agent) = scenario();
    for (mut args, rows) in cases(&agent) {
        args.push("--dry-run".into());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = s.run(&argv);
        assert_eq!(code, 0, "{argv:?}\n{out}\n{err}");
        let first = out.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("dry run of work ") && first.ends_with("nothing was dispatched, locked or written"),
            "{out}"
        );
        for row in rows {
            assert!(out.contains(row), "{argv:?}: no `{row}` in\n{out}");
        }
        assert!(out.contains(&format!("command:python3 {}", s.path(".agents/marker.py").display())), "{out}");
        assert!(!s.path(".agent-state/ran").exists(), "{argv:?}: the agent ran");
        assert!(!s.path(".work").exists(), "{argv:?}: the state directory was written");
        assert_eq!(s.git(&["status", "--porcelain", "--untracked-files=all"]), "", "{argv:?}: the tree changed");
    }
}

#[test]
fn verbose_shows_the_first_brief_and_json_is_one_document() {
    let (s, agent) = scenario();
    let (code, out, _) =
        s.run(&["-v", "exhaust", "unwrap calls", "--angles", "one,two", "--agent", &agent, "--dry-run"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("----- brief: finder, angle one -----\nYou are one finder"), "{out}");
    assert!(out.contains("YOUR ANGLE: one"), "{out}");
    let (_, quiet, _) = s.run(&["exhaust", "unwrap calls", "--agent", &agent, "--dry-run"]);
    assert!(!quiet.contains("You are one finder") && quiet.contains("(-v shows the first brief)"), "{quiet}");
    // The editor's brief is the one the run sends: a recognised rename carries its rule.
    let edit = ["-v", "edit", "--description", "Rename `add` to `plus`", "--def-site", "src/lib.py:1"];
    let (code, out, _) = s.run(&[&edit[..], &["--test-cmd", "true", "--agent", &agent, "--dry-run"]].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("----- brief: editor -----") && out.contains("one may change only by this rename"), "{out}");
    let (code, out, _) = s.run(&[
        "implement",
        "--plan",
        "PLAN.md",
        "--iter-id",
        "it-1",
        "--test-cmd",
        "true",
        "--agent",
        &agent,
        "--dry-run",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}");
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("one JSON document: {e}\n{out}"));
    assert_eq!(doc["dry_run"], true);
    assert_eq!(doc["workflow"], "implement");
    let roles: Vec<&str> = doc["roles"].as_array().into_iter().flatten().filter_map(|r| r["role"].as_str()).collect();
    assert_eq!(roles, ["implementer", "spec-reviewer", "quality-reviewer", "tester"]);
    assert_eq!(doc["plan"]["task 1"], "1: Add plus");
    assert!(doc["prompts"][0]["text"].as_str().unwrap_or_default().contains("Add `plus` to src/lib.py"), "{doc}");
    assert!(!s.path(".work").exists() && !s.path(".agent-state/ran").exists());
}

#[test]
fn a_dry_run_refuses_bad_input_like_the_run_itself() {
    let (s, agent) = scenario();
    let (code, _, err) = s.run(&["exhaust", "x", "--agent", "cluade", "--dry-run"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    let (code, _, err) = s.run(&["until", "something nice", "--goal", "g", "--agent", &agent, "--dry-run"]);
    assert_eq!(code, 2, "a vague until-clause is refused: {err}");
    let (code, _, err) =
        s.run(&["implement", "--plan", "MISSING.md", "--test-cmd", "true", "--agent", &agent, "--dry-run"]);
    assert_eq!(code, 2, "{err}");
    assert!(!s.path(".work").exists() && !s.path(".agent-state/ran").exists());
}

#[test]
fn a_dry_run_over_a_finished_iteration_says_the_run_would_print_its_report_again() {
    let s = crate::implement::repo_with_plan(&[("1", "Edit shared", "Append a line to shared.txt.")]);
    let a = crate::implement::agent(
        &s,
        "if role == 'implementer':\n    write('shared.txt', 'base\\nmore\\n')\n    out(DONE)",
    );
    let args =
        ["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--agent", &a, "--test-cmd", "grep -q more shared.txt"];
    let (code, _, err) = s.run(&args);
    assert_eq!(code, 0, "{err}");
    let asked = || std::fs::read_to_string(s.path(".agent-state/log")).unwrap_or_default().lines().count();
    let before = asked();
    let (code, out, err) = s.run(&[&args[..], &["--dry-run"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("finished   DONE over this very tree: the run prints its report again"), "{out}");
    assert_eq!(asked(), before, "nothing dispatched");
}
