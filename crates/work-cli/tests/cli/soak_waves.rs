//! A parallel wave killed at every state-changing call: `work implement --concurrency 3` over a
//! plan whose tasks 1 and 2 edit the same line (the second conflicts) and task 3 adds a file.
//! Whatever call the kill lands on (every fourth call by default, every call with
//! `WORK_TEST_SOAK_EVERY_CALL=1`; and a second kill during the recovery), the same command
//! run again ends as the uninterrupted run does, with every task's work either merged into the
//! tree or on its named ref: nothing lost, nothing merged twice, no finished task dispatched
//! again.

use crate::implement::{agent, repo_with_plan};
use crate::soak::{End, assert_soak, done_tasks, run, soak_sampled};
use crate::support::Scenario;
use serde_json::Value;

fn scenario() -> (Scenario, Vec<String>) {
    let s = repo_with_plan(&[
        ("1", "One", "Change `shared.txt` to say one."),
        ("2", "Two", "Change `shared.txt` to say two."),
        ("3", "Three", "Create `t3.txt`."),
    ]);
    let a = agent(
        &s,
        "if role == 'implementer':\n    write({'1': 'shared.txt', '2': 'shared.txt', '3': 't3.txt'}[tid], {'1': 'one\\n', '2': 'two\\n', '3': 'three\\n'}[tid])\n    out(DONE)",
    );
    let args = [
        "implement",
        "--plan",
        "PLAN.md",
        "--iter-id",
        "it-1",
        "--test-cmd",
        "true",
        "--json",
        "--concurrency",
        "3",
        "--agent",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([a])
    .collect();
    (s, args)
}

/// The implementer dispatches so far, per task, from the agents' append-only log.
fn implementers(s: &Scenario) -> Vec<String> {
    std::fs::read_to_string(s.path(".agent-state/log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["role"] == "implementer")
        .map(|l| l["task"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Every task's work is where it must be: 1 and 3 merged (exactly once), 2 on its ref only.
fn where_the_work_is(s: &Scenario, report: &Value) -> Result<(), String> {
    let statuses: Vec<(&str, &str)> = report["tasks"]
        .as_array()
        .map(|ts| ts.iter().map(|t| (t["status"].as_str().unwrap_or(""), t["kind"].as_str().unwrap_or(""))).collect())
        .unwrap_or_default();
    if statuses.iter().map(|(st, _)| *st).collect::<Vec<_>>() != ["DONE", "BLOCKED", "DONE"]
        || statuses[1].1 != "merge-conflict"
    {
        let reasons: Vec<&str> =
            report["tasks"].as_array().into_iter().flatten().filter_map(|t| t["reason"].as_str()).collect();
        return Err(format!("tasks ended {statuses:?}: {reasons:?}"));
    }
    let tree = (s.read("shared.txt"), std::fs::read_to_string(s.path("t3.txt")).unwrap_or_default());
    if tree != ("one\n".to_string(), "three\n".to_string()) {
        return Err(format!("the tree holds {tree:?}"));
    }
    let refs = s.git(&["for-each-ref", "--format=%(refname)", "refs/work/"]);
    let two: Vec<&str> = refs.lines().filter(|r| r.ends_with("/2")).collect();
    match two.as_slice() {
        [r] if s.git(&["show", &format!("{r}:shared.txt")]) == "two\n" => Ok(()),
        _ => Err(format!("task 2's work is on no ref: {refs}")),
    }
}

fn trial(n: u64, twice: bool) -> Option<Result<(), String>> {
    let (s, args) = scenario();
    if let End::Exited(..) = run(&s, &args, Some(n)) {
        return None;
    }
    // DONE in a wave: its result is kept on its ref.
    let kept_before = done_tasks(&s);
    let dispatched_before = implementers(&s).len();
    let end = match twice.then(|| run(&s, &args, Some(n))) {
        Some(e @ End::Exited(..)) => e,
        _ => run(&s, &args, None),
    };
    let End::Exited(code, stdout) = end else { return Some(Err(format!("kill at {n}: the rerun was killed"))) };
    let again: Vec<String> =
        implementers(&s)[dispatched_before..].iter().filter(|t| kept_before.contains(t)).cloned().collect();
    let report: Value = match serde_json::from_str(&stdout) {
        Ok(v) => v,
        Err(e) => return Some(Err(format!("kill at {n} (twice: {twice}): stdout is no report ({e}): {stdout}"))),
    };
    Some(if code != 1 {
        Err(format!("kill at {n} (twice: {twice}): exit {code}: {report}"))
    } else if !again.is_empty() {
        Err(format!("kill at {n} (twice: {twice}): kept task(s) dispatched again: {again:?}"))
    } else {
        where_the_work_is(&s, &report).map_err(|e| format!("kill at {n} (twice: {twice}): {e}"))
    })
}

#[test]
fn a_parallel_wave_survives_a_kill_at_every_state_changing_call() {
    let (s, args) = scenario();
    let End::Exited(code, stdout) = run(&s, &args, None) else { panic!("the uninterrupted run was killed") };
    let report: Value = serde_json::from_str(&stdout).expect("report");
    assert_eq!(code, 1, "{report}");
    where_the_work_is(&s, &report).expect("the uninterrupted run");
    // Every fourth call by default (each trial runs a wave of three tasks two or three times);
    // every call with WORK_TEST_SOAK_EVERY_CALL=1.
    let (trials, failures) = soak_sampled(4, trial);
    assert_soak("wave soak", trials, 10, &failures);
}
