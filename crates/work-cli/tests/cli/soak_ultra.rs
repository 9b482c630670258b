//! The crash soak of `work ultra` (see `soak.rs` for the hook and the rules): a LIGHT goal of
//! one criterion — RED captured, one implementation attempt, GREEN — is killed at every
//! state-changing call and run again with the same command. The end must be the uninterrupted
//! run's: exit code, the result (timestamps, run ids and paths set aside), the goal's
//! `state.json` and `receipts.json`, the evidence files, and the tree; a goal already DONE is
//! never dispatched again. Set aside, as the record of the recovery (like the `Incidents` of
//! until's ledger): the notepad, and the check a resumed run makes of the criteria whose RED an
//! earlier run captured (its `check-N` evidence and receipts, and the receipt counts of the
//! result, which count them).

use crate::soak::{End, assert_soak, files, normalize, run, soak};
use crate::support::Scenario;
use serde_json::Value;
use std::collections::BTreeMap;

const GOAL: &str = r#"
id = "greet"
objective = "greet.sh prints hello, world"
tier = "LIGHT"
tier_justification = "one script following a known pattern"
stop_line = "I'll stop right away when sh greet.sh prints hello, world"

[[criteria]]
id = "happy"
scenario = "sh greet.sh"
evidence = ["stdout", "stderr", "exit_code"]
pass = { exit_code = 0, stdout_contains = "hello, world" }
"#;

fn scenario() -> (Scenario, Vec<String>) {
    let s = Scenario::new();
    s.write("GOAL.toml", GOAL);
    s.commit("goal");
    let agent = s.agent(
        "fixer.py",
        r#"
open(state_path('log'), 'a').write('%s\n' % ctx.get('attempt'))
open('greet.sh', 'w').write('echo "hello, world"\n')
print(json.dumps({"status": "done", "summary": "wrote greet.sh", "claims": [{"criterion": "happy", "claim": "greet.sh prints the greeting"}], "cleanup": []}))
"#,
    );
    let args = ["ultra", "GOAL.toml", "--json", "--agent"].iter().map(|a| a.to_string()).chain([agent]).collect();
    (s, args)
}

/// What an ultra trial ended with.
#[derive(Debug, PartialEq)]
struct UltraEnd {
    code: i32,
    result: Value,
    state: BTreeMap<String, String>,
    tree: BTreeMap<String, String>,
}

/// Drops what differs between two scenarios: run ids (and the runs a goal lists: a killed run
/// is one more), commit ids, and the count of committed receipts (it counts the recovery's).
fn scrub(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for k in ["run_id", "runs", "head", "sha", "commit", "receipts_committed"] {
                o.remove(k);
            }
            o.values_mut().for_each(scrub);
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        Value::String(s) => *s = normalize(s),
        _ => {}
    }
}

fn ultra_end(s: &Scenario, end: End) -> UltraEnd {
    let End::Exited(code, stdout) = end else { panic!("the clean rerun was killed") };
    let root = s.root().display().to_string();
    let mut result: Value = serde_json::from_str(&stdout.replace(&root, "<root>")).unwrap_or(Value::String(stdout));
    scrub(&mut result);
    if let Value::Object(o) = &mut result {
        o.remove("receipts");
    }
    let dir = s.path(".work/goals/greet");
    // The notepad is a journal of the runs (a resumed run says so in it); the lock names a pid.
    let mut state = files(&dir, &["notepad.md", "lock"]);
    state.retain(|name, _| !name.rsplit('/').next().is_some_and(|f| f.starts_with("check-")));
    for (name, text) in state.iter_mut() {
        let mut v: Value = serde_json::from_str(&text.replace(&root, "<root>")).unwrap_or(Value::String(text.clone()));
        if name == "receipts.json"
            && let Some(list) = v["receipts"].as_array_mut()
        {
            list.retain(|r| !r["during"].as_str().is_some_and(|d| d.starts_with("check-")));
            list.iter_mut().filter_map(Value::as_object_mut).for_each(|r| {
                r.remove("seq");
            });
        }
        scrub(&mut v);
        *text = v.to_string();
    }
    UltraEnd { code, result, state, tree: files(s.root(), &[".git", ".work", ".agents", ".agent-state"]) }
}

fn log_lines(s: &Scenario) -> usize {
    std::fs::read_to_string(s.path(".agent-state/log")).map(|t| t.lines().count()).unwrap_or(0)
}

fn done(s: &Scenario) -> bool {
    let text = std::fs::read_to_string(s.path(".work/goals/greet/state.json")).unwrap_or_default();
    serde_json::from_str::<Value>(&text).is_ok_and(|v| v["status"] == "DONE")
}

fn trial(n: u64, twice: bool, baseline: &UltraEnd) -> Option<Result<(), String>> {
    let (s, args) = scenario();
    if let End::Exited(..) = run(&s, &args, Some(n)) {
        return None;
    }
    if twice {
        let _ = run(&s, &args, Some(n));
    }
    let (was_done, logged) = (done(&s), log_lines(&s));
    let end = ultra_end(&s, run(&s, &args, None));
    Some(if was_done && log_lines(&s) > logged {
        Err(format!("kill at {n} (twice: {twice}): the goal was DONE and was dispatched again"))
    } else if &end != baseline {
        Err(format!("kill at {n} (twice: {twice}): ended with\n{end:#?}\ninstead of\n{baseline:#?}"))
    } else {
        Ok(())
    })
}

/// Ignored until `work ultra` keeps an attempt a kill cuts off after its answer: 16 of 29 trials
/// fail, every one killed between the implementer's answer and the attempt's record in
/// `state.json` (its evidence, receipts and notepad writes): the rerun's check finds the
/// criterion green and ends DONE with 0 attempts, the attempt's evidence and its `attempt_log`
/// entry lost (the answer is in the killed run's `dispatches.jsonl`; the rerun should take it
/// from there). Every kill before the answer ends exact. Run it with
/// `cargo nextest run -p work-cli --run-ignored all -E 'test(/soak_ultra/)'`.
#[test]
#[ignore = "ultra loses an attempt killed after its answer (issue 29); see the doc comment"]
fn ultra_survives_a_kill_at_every_state_changing_call() {
    let (s, args) = scenario();
    let baseline = ultra_end(&s, run(&s, &args, None));
    assert_eq!((baseline.code, &baseline.result["status"]), (0, &Value::from("DONE")), "{baseline:#?}");
    assert_eq!(log_lines(&s), 1, "one attempt");
    let (trials, failures) = soak(|n, twice| trial(n, twice, &baseline));
    assert_soak("ultra soak", trials, 10, &failures);
}

/// The RED step's receipt survives a kill at every state-changing call before the first
/// dispatch: the goal's run ends with exactly one `red` receipt, as the uninterrupted run does.
/// (`receipts.json` was written after `state.json`: a kill between the two left a state holding
/// the RED and no receipt of it, and the rerun, keeping the RED, never receipted it.)
#[test]
fn ultra_killed_before_its_first_dispatch_keeps_one_red_receipt() {
    let red_receipts = |s: &Scenario| {
        let text = std::fs::read_to_string(s.path(".work/goals/greet/receipts.json")).unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        v["receipts"].as_array().map(|l| l.iter().filter(|r| r["during"] == "red").count()).unwrap_or(0)
    };
    let mut failures = Vec::new();
    for n in 1..=12 {
        let (s, args) = scenario();
        if let End::Exited(..) = run(&s, &args, Some(n)) {
            break;
        }
        if log_lines(&s) > 0 {
            break;
        }
        let End::Exited(code, _) = run(&s, &args, None) else { panic!("the clean rerun was killed") };
        if (code, red_receipts(&s)) != (0, 1) {
            failures.push(format!("kill at {n}: exit {code}, {} red receipt(s)", red_receipts(&s)));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
