//! Parallel waves benchmark (`cargo bench -p work-cli --bench waves`): does a plan of
//! independent tasks at `--concurrency 8` take about one task's time?
//!
//! A plan of 8 independent tasks (`WORK_BENCH_WAVE_TASKS`, default 8), each adding one file,
//! run by the real `work` binary with a scripted agent whose implementer takes
//! `WORK_BENCH_WAVE_SECS` seconds (default 2; the figure the goal is stated for is 30) and
//! whose reviewers answer at once. Reported: the wall time of a plan of one such task (one
//! task's time), of the whole plan at `--concurrency 1` (one after another) and at
//! `--concurrency N` (N = the task count), and the ratios. The goal: the parallel run within
//! 1.3× one task's time.

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::disallowed_methods, reason = "the benchmark drives the binary and its fixtures directly")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn work_bin() -> String {
    std::env::var("WORK_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_work").to_string())
}

const AGENT: &str = r#"#!/usr/bin/env python3
import json, os, re, sys, time
req = json.load(sys.stdin)
ctx = req.get('context') or {}
role = req['role']
read = re.findall(r'^diff --git a/(\S+) ', req.get('prompt', ''), re.M)
def out(d):
    print(json.dumps(d))
    sys.exit(0)
if role == 'implementer':
    time.sleep(float(os.environ.get('WORK_BENCH_WAVE_SECS', '2')))
    tid = ctx['task_id']
    os.makedirs('src', exist_ok=True)
    open('src/t%s.txt' % tid, 'w').write('task %s\n' % tid)
    out({'status': 'DONE', 'summary': 'done', 'applied_changes': True})
if role == 'spec-reviewer':
    out({'status': 'compliant', 'issues': [], 'files_read': read})
if role == 'quality-reviewer':
    out({'verdict': 'approved', 'issues': [], 'files_read': read})
sys.exit(3)
"#;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.email=a@b", "-c", "user.name=a"])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// A repository with a committed plan of `tasks` independent tasks; the agent's path.
fn repo(dir: &Path, tasks: usize) -> String {
    git(dir, &["init", "-q"]);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/keep.txt"), "keep\n").unwrap();
    let mut plan = String::from("# Plan\n");
    for t in 1..=tasks {
        plan.push_str(&format!("\n## Task {t}: Add t{t}\n\nCreate `src/t{t}.txt`.\n"));
    }
    std::fs::write(dir.join("PLAN.md"), plan).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "plan"]);
    let agent = dir.join(".git").join("bench-agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    agent.display().to_string()
}

/// Seconds one `work implement` of a fresh `tasks`-task plan takes at `concurrency`.
fn run(tasks: usize, concurrency: usize, secs: f64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let agent = repo(dir.path(), tasks);
    let test = (1..=tasks).map(|t| format!("test -f src/t{t}.txt")).collect::<Vec<_>>().join(" && ");
    let started = Instant::now();
    let out = Command::new(work_bin())
        .args(["implement", "--plan", "PLAN.md", "--iter-id", "bench", "--json", "--test-cmd", &test])
        .args(["--agent", &format!("command:python3 {agent}"), "--concurrency", &concurrency.to_string()])
        .env("WORK_ISOLATION", "none")
        .env("WORK_BENCH_WAVE_SECS", secs.to_string())
        .current_dir(dir.path())
        .output()
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(report["status"], "DONE", "{}", String::from_utf8_lossy(&out.stderr));
    took
}

fn main() {
    let secs: f64 = std::env::var("WORK_BENCH_WAVE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let tasks: usize = std::env::var("WORK_BENCH_WAVE_TASKS").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    println!("waves: {tasks} independent tasks, implementer {secs} s each");
    let one = run(1, 1, secs);
    let seq = run(tasks, 1, secs);
    let par = run(tasks, tasks, secs);
    println!("  one task:               {one:>7.2} s");
    println!("  {tasks} tasks, --concurrency 1: {seq:>7.2} s ({:.2}× one task)", seq / one);
    println!("  {tasks} tasks, --concurrency {tasks}: {par:>7.2} s ({:.2}× one task; goal ≤ 1.30×)", par / one);
    println!("  speed-up: {:.2}×", seq / par);
}
