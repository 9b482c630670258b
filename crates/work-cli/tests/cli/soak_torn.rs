//! The torn-write soak: at every append of a state log (`fsx::append_line`) `work` writes only
//! the first half of the line, no newline, and dies (SIGKILL, through the test-only
//! `WORK_TEST_TEAR_AT=<n>` hook of the runtime) — the write a power loss cuts. The same
//! command again (`resume` for until) must end as the uninterrupted run: the torn last line is
//! dropped on read and cut away before the next append. Which calls are appends is learnt from
//! one uninterrupted run (`WORK_TEST_FAULT_TRACE`); the other calls, whole-file writes and
//! dispatches, are kill points the crash soaks already cover (a tear there is a kill).

use crate::soak::{self, End, assert_soak, run};
use crate::support::Scenario;
use std::path::Path;

/// The call numbers of the appends a run of `args` made (its trace), and how it ended.
fn traced(s: &Scenario, args: &[String], trace: &Path) -> (End, Vec<u64>) {
    let out = s.work().args(args).env("WORK_TEST_FAULT_TRACE", trace).output().expect("run work");
    let end = match out.status.code() {
        Some(c) => End::Exited(c, String::from_utf8_lossy(&out.stdout).into_owned()),
        None => End::Killed,
    };
    (end, appends(trace))
}

fn appends(trace: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    let _ = std::fs::remove_file(trace);
    text.lines().filter_map(|l| l.strip_suffix(" append")).filter_map(|n| n.parse().ok()).collect()
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

/// `args` run in `s` with its `n`-th call torn: `Ok` when it died leaving a torn log.
fn tear(s: &Scenario, args: &[String], n: u64) -> Result<(), String> {
    let out = s.work().args(args).env("WORK_TEST_TEAR_AT", n.to_string()).output().expect("run work");
    if out.status.code().is_some() {
        return Err(format!("tear at {n}: the run was not killed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    if !torn(s) {
        return Err(format!("tear at {n}: no log was left with a torn last line"));
    }
    Ok(())
}

/// Tears each append of a one-command workflow once, then reruns it clean: (trials, failures).
fn one_command<E: PartialEq + std::fmt::Debug + Sync>(
    scenario: fn() -> (Scenario, Vec<String>),
    rerun: fn(&Scenario, &[String]) -> Vec<String>,
    end: fn(&Scenario, End) -> E,
) -> (usize, Vec<String>) {
    let (s, args) = scenario();
    let (ended, calls) = traced(&s, &args, &s.path(".agent-state/fault-trace"));
    let baseline = end(&s, ended);
    each(&calls, |n| {
        let (s, args) = scenario();
        tear(&s, &args, n)?;
        let got = end(&s, run(&s, &rerun(&s, &args), None));
        if got == baseline {
            Ok(())
        } else {
            Err(format!("tear at {n}: the rerun ended with\n{got:#?}\ninstead of\n{baseline:#?}"))
        }
    })
}

/// Every append of exhaust, until, implement and edit torn once: each rerun ends as the
/// uninterrupted run, and each of them must tear at least once. `ultra` and `loop run` are not
/// here: what they append (`dispatches.jsonl`, loop run's transition log) goes through the
/// dispatch record log, which the fault hook does not count, so a tear could never land in
/// them — a trial here would pass without tearing anything.
#[test]
fn every_workflow_survives_a_torn_append_at_every_append() {
    let same = |_: &Scenario, a: &[String]| a.to_vec();
    let runs: Vec<(&str, (usize, Vec<String>))> = vec![
        ("exhaust", one_command(soak::exhaust_scenario, same, soak::exhaust_end)),
        ("until", one_command(soak::until_scenario, soak::until_rerun, soak::until_end)),
        ("implement", one_command(soak::implement_scenario, same, soak::implement_end)),
        ("edit", one_command(soak::edit_scenario, same, soak::implement_end)),
    ];
    let mut failures = Vec::new();
    for (name, (trials, f)) in &runs {
        eprintln!("torn appends, {name}: {} failure(s) in {trials} trials", f.len());
        failures.extend(f.iter().map(|f| format!("{name}: {f}")));
    }
    let trials = |w: &str| runs.iter().find(|r| r.0 == w).map_or(0, |r| r.1.0);
    for w in ["exhaust", "until", "implement", "edit"] {
        assert!(trials(w) > 0, "{w}: no append was torn");
    }
    assert_soak("torn appends", runs.iter().map(|r| r.1.0).sum(), 10, &failures);
}
