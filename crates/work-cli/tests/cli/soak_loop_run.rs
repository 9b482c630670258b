//! The crash soak of `work loop run` (see `soak.rs` for the hook and the rules): a short run —
//! the spec gate and the plan gate approved, then execute, gates, one light review round, the
//! merge gate, and `--resume --approve` to DONE — is killed at every state-changing call of each
//! of its invocations in turn, rerun the way a person would (the killed command again, with
//! `--resume` once the run exists; once killed again at the same call, then clean), and taken on
//! with `--resume --approve` to its end. The end must be the uninterrupted run's: exit code,
//! state and reason, the verdict records, plan.md and spec.md, the tree, and per role as many
//! recorded answers (`dispatches.jsonl`, every run) as the uninterrupted run made: an answer
//! already recorded is never asked for again.

use crate::loop_run::{DIR, setup};
use crate::soak::{End, assert_soak, files, normalize, run, soak, soak_calls, write_fault};
use crate::support::Scenario;
use serde_json::Value;
use std::collections::BTreeMap;

/// The first invocation, then `--resume --approve` until the run ends (at most this many).
const MAX_INVOCATIONS: usize = 8;

fn first_args(agent: &str) -> Vec<String> {
    ["loop", "run", DIR, "--light", "--json", "--agent", agent].iter().map(|a| a.to_string()).collect()
}

pub(crate) fn resumed(args: &[String]) -> Vec<String> {
    let mut a = args.to_vec();
    if !a.iter().any(|x| x == "--resume") {
        a.push("--resume".into());
    }
    a
}

pub(crate) fn approve_args(agent: &str) -> Vec<String> {
    let mut a = resumed(&first_args(agent));
    a.push("--approve".into());
    a
}

pub(crate) fn scenario() -> (Scenario, String) {
    let s = Scenario::new();
    let agent = setup(&s, "test -f hello.txt", true);
    (s, agent)
}

/// What a loop run ended with.
#[derive(Debug, PartialEq)]
pub(crate) struct LoopEnd {
    code: i32,
    outcome: String,
    state: String,
    reason: String,
    verdicts: Vec<String>,
    verdict_files: BTreeMap<String, Value>,
    spec_files: BTreeMap<String, String>,
    tree: BTreeMap<String, String>,
    /// Role ⇒ recorded answers (attempts) over every run's `dispatches.jsonl`.
    recorded: BTreeMap<String, usize>,
}

/// Drops what differs between two scenarios: run ids and commit ids.
fn scrub(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for k in ["run_id", "base", "head", "commit", "tree", "sha", "snapshot", "recorded_at"] {
                o.remove(k);
            }
            o.values_mut().for_each(scrub);
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        Value::String(s) => *s = normalize(s),
        _ => {}
    }
}

fn recorded(s: &Scenario) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let Ok(runs) = std::fs::read_dir(s.path(".work/runs")) else { return out };
    for r in runs.flatten() {
        for rec in work_runtime::events::read_records(&r.path()).unwrap_or_default() {
            let role = rec["request"]["role"].as_str().unwrap_or("?").to_string();
            *out.entry(role).or_default() += 1;
        }
    }
    out
}

pub(crate) fn loop_end(s: &Scenario, code: i32, stdout: &str) -> LoopEnd {
    let v: Value = serde_json::from_str(stdout).unwrap_or(Value::Null);
    let text = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    let verdicts: Vec<String> = v["verdicts"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let mut verdict_files = BTreeMap::new();
    for (name, body) in files(&s.path(DIR), &[]) {
        if name.ends_with("review-verdict.json") {
            let mut j: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            scrub(&mut j);
            verdict_files.insert(name, j);
        }
    }
    let spec_files = ["spec.md", "plan.md"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read_to_string(s.path(&format!("{DIR}/{f}"))).unwrap_or_default()))
        .collect();
    LoopEnd {
        code,
        outcome: text("outcome"),
        state: text("state"),
        reason: text("reason"),
        verdicts,
        verdict_files,
        spec_files,
        tree: files(s.root(), &[".git", ".work", ".agents", ".agent-state", "docs"]),
        recorded: recorded(s),
    }
}

/// The fields in which two ends differ (named in a failure's first line).
pub(crate) fn differing(a: &LoopEnd, b: &LoopEnd) -> Vec<String> {
    let checks = [
        ("code", a.code == b.code),
        ("outcome", a.outcome == b.outcome),
        ("state", a.state == b.state),
        ("verdicts", a.verdicts == b.verdicts),
        ("spec files", a.spec_files == b.spec_files),
        ("tree", a.tree == b.tree),
    ];
    let mut out: Vec<String> = checks.iter().filter(|c| !c.1).map(|c| c.0.to_string()).collect();
    if a.reason != b.reason {
        out.push(format!("reason ({} at {}, exit {})", a.reason, a.state, a.code));
    }
    if a.recorded != b.recorded {
        out.push(format!("recorded answers ({:?})", a.recorded));
    }
    for (name, v) in &b.verdict_files {
        if let Some(w) = a.verdict_files.get(name)
            && v != w
        {
            let keys =
                v.as_object().map(|o| o.keys().filter(|k| v[k.as_str()] != w[k.as_str()]).cloned().collect::<Vec<_>>());
            out.push(format!("{name} {keys:?}"));
        }
    }
    if !a.verdict_files.keys().eq(b.verdict_files.keys()) {
        out.push("verdict files".into());
    }
    out
}

/// Runs `args`, then `--resume --approve` while the run pauses; the end of the last one.
pub(crate) fn run_on(s: &Scenario, agent: &str, args: &[String]) -> Result<(i32, String), String> {
    let mut args = args.to_vec();
    for _ in 0..MAX_INVOCATIONS {
        match run(s, &args, None) {
            End::Killed => return Err("a clean run was killed".into()),
            End::Exited(3, _) => args = approve_args(agent),
            End::Exited(2, _) => {
                let again = s.work().args(&args).output().map(|o| String::from_utf8_lossy(&o.stderr).into_owned());
                return Err(format!("refused (exit 2): {}", again.unwrap_or_default().trim()));
            }
            End::Exited(code, out) => return Ok((code, out)),
        }
    }
    Err(format!("still paused after {MAX_INVOCATIONS} invocations"))
}

/// The invocations of the uninterrupted run, each as it was called.
pub(crate) fn invocations(agent: &str) -> Vec<Vec<String>> {
    let mut all = vec![first_args(agent)];
    all.extend(std::iter::repeat_with(|| approve_args(agent)).take(3));
    all
}

/// One trial: the invocations before `step` clean, `step` killed at `n` (its rerun killed at
/// `n` too when `twice`), then on to the end. `None` when `step` was not killed.
fn trial(step: usize, n: u64, twice: bool, baseline: &LoopEnd) -> Option<Result<(), String>> {
    let (s, agent) = scenario();
    let calls = invocations(&agent);
    for args in &calls[..step] {
        if let End::Killed = run(&s, args, None) {
            return Some(Err("a clean run was killed".into()));
        }
    }
    let args = &calls[step];
    if let End::Exited(..) = run(&s, args, Some(n)) {
        return None;
    }
    let exists = || s.path(&format!("{DIR}/engine-state.json")).exists();
    let again = || if exists() { resumed(args) } else { args.clone() };
    // A rerun killed again at the same call, unless it ends first (then it is the person's
    // last command, or it paused and the next one approves).
    let recovered = if twice { run(&s, &again(), Some(n)) } else { End::Killed };
    let ended = match recovered {
        End::Killed => run_on(&s, &agent, &again()),
        End::Exited(3, _) => run_on(&s, &agent, &approve_args(&agent)),
        End::Exited(2, _) => Err("the rerun was refused (exit 2)".into()),
        End::Exited(code, out) => Ok((code, out)),
    };
    Some(match ended {
        Err(e) => Err(format!("step {step}, kill at {n} (twice: {twice}): {e}")),
        Ok((code, out)) => {
            let end = loop_end(&s, code, &out);
            if &end == baseline {
                Ok(())
            } else {
                Err(format!(
                    "step {step}, kill at {n} (twice: {twice}): {} differ; ended with\n{end:#?}\ninstead of\n{baseline:#?}",
                    differing(&end, baseline).join(", ")
                ))
            }
        }
    })
}

/// The uninterrupted run's end, its invocations each as it was called.
pub(crate) fn uninterrupted() -> LoopEnd {
    let (s, agent) = scenario();
    let mut ends = Vec::new();
    for args in invocations(&agent) {
        let out = s.work().args(&args).output().expect("run work");
        let code = out.status.code().expect("the uninterrupted run was killed");
        ends.push((code, String::from_utf8_lossy(&out.stdout).into_owned()));
    }
    let codes: Vec<i32> = ends.iter().map(|e| e.0).collect();
    assert_eq!(codes, [3, 3, 3, 0], "spec gate, plan gate, merge gate, DONE: {ends:#?}");
    let (code, out) = ends.pop().unwrap_or_default();
    loop_end(&s, code, &out)
}

/// After a fault in invocation `step` left the scenario `s`: the rerun a person makes (the
/// same command, `--resume` once the run exists), then `--resume --approve` to the end,
/// compared with `baseline`.
pub(crate) fn rerun_to_end(s: &Scenario, agent: &str, args: &[String], baseline: &LoopEnd) -> Result<(), String> {
    let again = if s.path(&format!("{DIR}/engine-state.json")).exists() { resumed(args) } else { args.to_vec() };
    let (code, out) = run_on(s, agent, &again)?;
    let end = loop_end(s, code, &out);
    if &end == baseline {
        Ok(())
    } else {
        Err(format!("{} differ; ended with\n{end:#?}\ninstead of\n{baseline:#?}", differing(&end, baseline).join(", ")))
    }
}

/// A full disk from each odd state-changing call of each invocation in turn (every call with
/// `WORK_TEST_SOAK_EVERY_CALL=1`) stops `loop run` at once, BLOCKED (exit 1) with the message
/// naming the error — loop run's ending for a failed step; the same command
/// once the disk has room, then `--resume --approve` while it pauses, ends as the
/// uninterrupted run.
#[test]
fn loop_run_stops_at_a_full_disk_and_resumes_once_it_has_room() {
    let baseline = uninterrupted();
    let trial = |step: usize, n: u64| -> Option<Result<(), String>> {
        let (s, agent) = scenario();
        let calls = invocations(&agent);
        for args in &calls[..step] {
            if let End::Killed = run(&s, args, None) {
                return Some(Err("a clean run was killed".into()));
            }
        }
        let args = &calls[step];
        let (vars, text) = write_fault(n);
        let out = s.work().args(args).envs(vars).output().expect("run work");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if matches!(out.status.code(), Some(0 | 3)) && !stdout.contains(text) {
            return None;
        }
        // Loop run's ending for a failed step: BLOCKED (exit 1), the message naming the error.
        let v: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        let named = v["message"].as_str().is_some_and(|m| m.contains(text));
        if out.status.code() != Some(1) || v["outcome"] != "blocked" || !named {
            return Some(Err(format!(
                "step {step}, disk full from call {n}: exit {:?} (wanted exit 1, blocked, the message naming the error):\n{stdout}\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Some(
            rerun_to_end(&s, &agent, args, &baseline).map_err(|e| format!("step {step}, disk full from call {n}: {e}")),
        )
    };
    let mut total = 0;
    let mut failures = Vec::new();
    for step in 0..4 {
        let (trials, f) = soak_calls(|n| trial(step, n));
        eprintln!("loop run full disk, invocation {step}: {} failure(s) in {trials} trials", f.len());
        total += trials;
        failures.extend(f);
    }
    assert_soak("loop run full disk", total, 20, &failures);
}

#[test]
fn loop_run_survives_a_kill_at_every_state_changing_call() {
    let (s, agent) = scenario();
    let mut ends = Vec::new();
    for args in invocations(&agent) {
        match run(&s, &args, None) {
            End::Exited(code, out) => ends.push((code, out)),
            End::Killed => panic!("the uninterrupted run was killed"),
        }
    }
    let codes: Vec<i32> = ends.iter().map(|e| e.0).collect();
    assert_eq!(codes, [3, 3, 3, 0], "spec gate, plan gate, merge gate, DONE: {ends:#?}");
    let (code, out) = ends.pop().unwrap_or_default();
    let baseline = loop_end(&s, code, &out);
    assert_eq!((baseline.state.as_str(), baseline.verdicts.len()), ("DONE", 1), "{baseline:#?}");
    eprintln!("loop run soak: the uninterrupted run recorded {:?}", baseline.recorded);
    assert!(baseline.spec_files["plan.md"].contains("**Status:** Done"), "{baseline:#?}");
    let mut total = 0;
    let mut failures = Vec::new();
    for step in 0..4 {
        let (trials, f) = soak(|n, twice| trial(step, n, twice, &baseline));
        eprintln!("loop run soak, invocation {step}: {} failure(s) in {trials} trials", f.len());
        total += trials;
        failures.extend(f);
    }
    assert_soak("loop run soak", total, 40, &failures);
}
