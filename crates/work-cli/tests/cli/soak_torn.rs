//! The torn-write soak: at every append of a state log (`fsx::append_line`) `work` writes only
//! the first half of the line, no newline, and dies (SIGKILL, through the test-only
//! `WORK_TEST_TEAR_AT=<n>` hook of the runtime) — the write a power loss cuts. The same
//! command again (`resume` for until) must end as the uninterrupted run: the torn last line is
//! dropped on read and cut away before the next append. Which calls are appends is learnt from
//! one uninterrupted run (`WORK_TEST_FAULT_TRACE`); the other calls, whole-file writes and
//! dispatches, are kill points the crash soaks already cover (a tear there is a kill).
//!
//! `ultra` and `loop run` keep no state log of their own; what they resume a cut-off dispatch
//! from is its record in `dispatches.jsonl`, torn the same way (`WORK_TEST_TEAR_RECORD_AT=<k>`):
//! the rerun must drop the torn record, dispatch again what it held, and end as the
//! uninterrupted run.

use crate::soak::{self, End, assert_soak, run};
use crate::soak_loop_run;
use crate::support::Scenario;
use std::path::Path;

/// What a trial tears: a state log's append (its call number) or a dispatch record (its number).
#[derive(Clone, Copy)]
enum Tear {
    Append,
    Record,
}

impl Tear {
    /// The variable that names the one to tear.
    fn var(self) -> &'static str {
        match self {
            Tear::Append => "WORK_TEST_TEAR_AT",
            Tear::Record => "WORK_TEST_TEAR_RECORD_AT",
        }
    }

    /// The kind the fault trace names it by.
    fn traced_as(self) -> &'static str {
        match self {
            Tear::Append => " append",
            Tear::Record => " record",
        }
    }
}

/// The numbers of the `what` a run of `args` made (its trace), and how it ended.
fn traced(s: &Scenario, args: &[String], what: Tear) -> (End, Vec<u64>) {
    let trace = s.path(".agent-state/fault-trace");
    let out = s.work().args(args).env("WORK_TEST_FAULT_TRACE", &trace).output().expect("run work");
    let end = match out.status.code() {
        Some(c) => End::Exited(c, String::from_utf8_lossy(&out.stdout).into_owned()),
        None => End::Killed,
    };
    (end, numbers(&trace, what))
}

fn numbers(trace: &Path, what: Tear) -> Vec<u64> {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    let _ = std::fs::remove_file(trace);
    text.lines().filter_map(|l| l.strip_suffix(what.traced_as())).filter_map(|n| n.parse().ok()).collect()
}

/// Whether some `.jsonl` log under the scenario ends without a newline (a torn last line).
fn torn(s: &Scenario) -> bool {
    soak::files(s.root(), &[".git"])
        .iter()
        .any(|(name, text)| name.ends_with(".jsonl") && !text.is_empty() && !text.ends_with('\n'))
}

/// Runs `trial` for each of `calls`, three at a time; the trial count and the failures.
fn each(calls: &[u64], trial: impl Fn(u64) -> Result<(), String> + Sync) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    for chunk in calls.chunks(3) {
        let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
            let t = &trial;
            let hs: Vec<_> = chunk.iter().map(|&n| sc.spawn(move || t(n))).collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a trial panicked".into()))).collect()
        });
        failures.extend(results.into_iter().filter_map(Result::err));
    }
    (calls.len(), failures)
}

/// `args` run in `s` with its `n`-th append or record torn: `Ok` when it died leaving a torn log.
fn tear(s: &Scenario, args: &[String], what: Tear, n: u64) -> Result<(), String> {
    let out = s.work().args(args).env(what.var(), n.to_string()).output().expect("run work");
    if out.status.code().is_some() {
        return Err(format!("tear at {n}: the run was not killed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    if !torn(s) {
        return Err(format!("tear at {n}: no log was left with a torn last line"));
    }
    Ok(())
}

/// Tears each append (or record) of a one-command workflow once, then reruns it clean:
/// (trials, failures).
fn one_command<E: PartialEq + std::fmt::Debug + Sync>(
    scenario: fn() -> (Scenario, Vec<String>),
    rerun: fn(&Scenario, &[String]) -> Vec<String>,
    end: fn(&Scenario, End) -> E,
    what: Tear,
) -> (usize, Vec<String>) {
    let (s, args) = scenario();
    let (ended, calls) = traced(&s, &args, what);
    let baseline = end(&s, ended);
    each(&calls, |n| {
        let (s, args) = scenario();
        tear(&s, &args, what, n)?;
        let got = end(&s, run(&s, &rerun(&s, &args), None));
        if got == baseline {
            Ok(())
        } else {
            Err(format!("tear at {n}: the rerun ended with\n{got:#?}\ninstead of\n{baseline:#?}"))
        }
    })
}

/// Each invocation of a `loop run` from the spec gate to DONE with each of its dispatch records
/// torn once: the rerun a person makes, then `--resume --approve` while it pauses, ends as the
/// uninterrupted run.
fn loop_run_records() -> (usize, Vec<String>) {
    let baseline = soak_loop_run::uninterrupted();
    let mut trials = 0;
    let mut failures = Vec::new();
    for step in 0..soak_loop_run::invocations("").len() {
        let before = |s: &Scenario, agent: &str| {
            let calls = soak_loop_run::invocations(agent);
            calls[..step].iter().for_each(|args| drop(run(s, args, None)));
            calls[step].clone()
        };
        let (s, agent) = soak_loop_run::scenario();
        let args = before(&s, &agent);
        let (_, records) = traced(&s, &args, Tear::Record);
        let (t, f) = each(&records, |k| {
            let (s, agent) = soak_loop_run::scenario();
            let args = before(&s, &agent);
            tear(&s, &args, Tear::Record, k)?;
            soak_loop_run::rerun_to_end(&s, &agent, &args, &baseline)
                .map_err(|e| format!("step {step}, record {k} torn: {e}"))
        });
        trials += t;
        failures.extend(f);
    }
    (trials, failures)
}

/// Every append of exhaust, until, implement and edit torn once, and every dispatch record of
/// ultra and loop run: each rerun ends as the uninterrupted run, and each workflow must tear
/// at least once.
#[test]
fn every_workflow_survives_a_torn_append_at_every_append() {
    let same = |_: &Scenario, a: &[String]| a.to_vec();
    let runs: Vec<(&str, (usize, Vec<String>))> = vec![
        ("exhaust", one_command(soak::exhaust_scenario, same, soak::exhaust_end, Tear::Append)),
        ("until", one_command(soak::until_scenario, soak::until_rerun, soak::until_end, Tear::Append)),
        ("implement", one_command(soak::implement_scenario, same, soak::implement_end, Tear::Append)),
        ("edit", one_command(soak::edit_scenario, same, soak::implement_end, Tear::Append)),
        ("ultra", one_command(crate::soak_ultra::scenario, same, crate::soak_ultra::ultra_end, Tear::Record)),
        ("loop run", loop_run_records()),
    ];
    let mut failures = Vec::new();
    for (name, (trials, f)) in &runs {
        eprintln!("torn appends, {name}: {} failure(s) in {trials} trials", f.len());
        failures.extend(f.iter().map(|f| format!("{name}: {f}")));
    }
    for (name, (trials, _)) in &runs {
        assert!(*trials > 0, "{name}: nothing was torn");
    }
    assert_soak("torn appends", runs.iter().map(|r| r.1.0).sum(), 10, &failures);
}
