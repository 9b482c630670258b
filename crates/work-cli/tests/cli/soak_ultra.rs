//! The crash soak of `work ultra` (see `soak.rs` for the hook and the rules): a LIGHT goal of
//! one criterion — RED captured, one implementation attempt, GREEN — is killed at every
//! state-changing call and run again with the same command. The end must be the uninterrupted
//! run's: exit code, the result (timestamps, run ids and paths set aside), the goal's
//! `state.json` and `receipts.json`, the evidence files, and the tree; a goal already DONE is
//! never dispatched again. Set aside, as the record of the recovery (like the `Incidents` of
//! until's ledger): the notepad, and the check a resumed run makes of the criteria whose RED an
//! earlier run captured (its `check-N` evidence and receipts, and the receipt counts of the
//! result, which count them).

use crate::soak::{End, assert_soak, files, full_disk_trial, normalize, run, soak, soak_calls};
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

pub(crate) fn scenario() -> (Scenario, Vec<String>) {
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
pub(crate) struct UltraEnd {
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

pub(crate) fn ultra_end(s: &Scenario, end: End) -> UltraEnd {
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
    let (was_done, logged) = (done(&s), log_lines(&s));
    // A rerun killed again at the same call, unless it ends first (then it is the person's
    // last command: a goal run once more after DONE says it re-verified, not what was done).
    let recovered = if twice { run(&s, &args, Some(n)) } else { End::Killed };
    let end = ultra_end(&s, if let End::Killed = recovered { run(&s, &args, None) } else { recovered });
    Some(if was_done && log_lines(&s) > logged {
        Err(format!("kill at {n} (twice: {twice}): the goal was DONE and was dispatched again"))
    } else if &end != baseline {
        Err(format!("kill at {n} (twice: {twice}): ended with\n{end:#?}\ninstead of\n{baseline:#?}"))
    } else {
        Ok(())
    })
}

/// Every call killed once (see `soak`). A kill between `receipts.json` and `state.json` leaves
/// receipts the rerun drops (the RED step's receipt is kept once); a kill between the
/// implementer's answer and the attempt's record in `state.json` is resumed with the answer the
/// killed run recorded in its `dispatches.jsonl` (the attempt was committed as in flight before
/// the dispatch), so the rerun ends with the uninterrupted run's one attempt — not DONE with
/// none, the attempt forgotten because its work made the criterion green.
#[test]
fn ultra_survives_a_kill_at_every_state_changing_call() {
    let (s, args) = scenario();
    let baseline = ultra_end(&s, run(&s, &args, None));
    assert_eq!((baseline.code, &baseline.result["status"]), (0, &Value::from("DONE")), "{baseline:#?}");
    assert_eq!(log_lines(&s), 1, "one attempt");
    let (trials, failures) = soak(|n, twice| trial(n, twice, &baseline));
    assert_soak("ultra soak", trials, 10, &failures);
}

/// A full disk at every state-changing call (each call once) stops the goal's run at once with
/// one `error:` line naming the file (exit 1), and the same command once the disk has room
/// ends as the uninterrupted run.
#[test]
fn ultra_stops_at_a_full_disk_and_resumes_once_it_has_room() {
    let (s, args) = scenario();
    let baseline = ultra_end(&s, run(&s, &args, None));
    let (trials, failures) = soak_calls(|n| full_disk_trial(n, scenario, |_, a| a.to_vec(), ultra_end, &baseline));
    assert_soak("ultra full disk", trials, 10, &failures);
}
