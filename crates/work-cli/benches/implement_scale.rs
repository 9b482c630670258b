//! Implement scaling benchmark (`cargo bench -p work-cli --bench implement_scale`): does a
//! plan's per-task cost grow with the plan?
//!
//! Plans of 4, 16 and 64 tasks (`WORK_BENCH_TASKS=4,16` to choose), each task adding one
//! file, run by the real `work` binary with a scripted `sh` agent (implementer writes the file,
//! the spec reviewer answers compliant, the quality reviewer approved: three dispatches a task)
//! and `--test-cmd true`. Reported per size: the wall time per task (engine, git snapshots and
//! the three agent processes), the agent's own share of it (its three processes run by hand;
//! the rest is the engine's per-task overhead), the state under `.work/` per task, and the bytes the progress
//! record costs per task — as `work` writes it (an append-only log with a snapshot now and
//! then, replayed in process through `work_implement::progress` from the run's own record)
//! and as a whole rewrite at every task boundary would.

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::disallowed_methods, reason = "the benchmark drives the binary and its fixtures directly")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;
use work_implement::progress::{self, InProgress, Progress};

fn work_bin() -> String {
    std::env::var("WORK_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_work").to_string())
}

const AGENT: &str = r#"#!/bin/sh
req=$(cat)
role=$(printf '%s' "$req" | grep -o '"role":"[^"]*"' | head -1 | cut -d'"' -f4)
case "$role" in
implementer)
  tid=$(printf '%s' "$req" | grep -o '"task_id":"[^"]*"' | tail -1 | cut -d'"' -f4)
  echo "task $tid" > "src/t$tid.txt"
  echo '{"status":"DONE","summary":"done","applied_changes":true}';;
spec-reviewer) echo '{"status":"compliant","issues":[]}';;
quality-reviewer) echo '{"verdict":"approved","issues":[]}';;
*) exit 3;;
esac
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

fn repo(dir: &Path, tasks: usize) {
    git(dir, &["init", "-q"]);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/keep.txt"), "keep\n").unwrap();
    let mut plan = String::from("# Plan\n");
    for t in 1..=tasks {
        plan.push_str(&format!("\n## Task {t}: Add t{t}\n\nCreate src/t{t}.txt.\n"));
    }
    std::fs::write(dir.join("PLAN.md"), plan).unwrap();
    std::fs::write(dir.join(".gitignore"), ".work/\nagent.sh\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "plan"]);
    std::fs::write(dir.join("agent.sh"), AGENT).unwrap();
}

fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return 0 };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path).unwrap().map(|e| du(&e.unwrap().path())).sum()
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// Replays the run's record task by task through `progress::save` (what `work implement`
/// does at every boundary) and returns (bytes the append-only format wrote, bytes a whole
/// rewrite at every save would have written).
fn progress_bytes(finished: &Progress) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let run = work_runtime::run::RunContext::start(
        work_runtime::run::RunOptions {
            root: dir.path().to_path_buf(),
            state_dir: dir.path().join(".work"),
            clock: Arc::new(work_runtime::clock::SystemClock),
            redactor: Default::default(),
            budget: Default::default(),
            already_spent: Default::default(),
            already_by_role: Default::default(),
            progress: work_runtime::run::ProgressSink::Silent,
        },
        "bench",
    )
    .unwrap();
    let (snap, log) = (progress::path(&run.state_dir, "it-1"), progress::log_path(&run.state_dir, "it-1"));
    let mut p = Progress::new("it-1", finished.head.clone(), finished.preflight.clone(), finished.tree.clone());
    p.check_surface = finished.check_surface.clone();
    p.git_seal = finished.git_seal.clone();
    p.byproducts = finished.byproducts.clone();
    let (mut appended, mut whole) = (0u64, 0u64);
    let mut save = |p: &mut Progress| {
        let (s0, l0) = (std::fs::read(&snap).unwrap_or_default(), std::fs::read(&log).unwrap_or_default());
        progress::save(&run, p).unwrap();
        let (s1, l1) = (std::fs::read(&snap).unwrap_or_default(), std::fs::read(&log).unwrap_or_default());
        if s1 != s0 {
            appended += s1.len() as u64;
        }
        appended += if l1.starts_with(&l0) { l1.len() - l0.len() } else { l1.len() } as u64;
        whole += serde_json::to_vec_pretty(&*p).unwrap().len() as u64 + 1;
    };
    save(&mut p);
    for (i, outcome) in finished.ended.iter().enumerate() {
        p.start_task(InProgress { task_id: outcome.id.clone(), start: p.tree.clone() });
        save(&mut p);
        p.end_task(outcome, finished.snapshots.get(i), finished.tree.clone());
        save(&mut p);
    }
    p.finished = true;
    save(&mut p);
    (appended, whole)
}

/// The agent's own cost per task: its three dispatches' processes run by hand (median of 5
/// rounds), so that what is left of a task's wall time is the engine's.
fn agent_ms_per_task(dir: &Path) -> f64 {
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        for role in ["implementer", "spec-reviewer", "quality-reviewer"] {
            let req = format!(r#"{{"role":"{role}","prompt":"p","context":{{"task_id":"bench"}}}}"#);
            let mut c = Command::new("sh")
                .arg("agent.sh")
                .current_dir(dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            std::io::Write::write_all(&mut c.stdin.take().unwrap(), req.as_bytes()).unwrap();
            assert!(c.wait().unwrap().success());
        }
        rounds.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let _ = std::fs::remove_file(dir.join("src/tbench.txt"));
    rounds.sort_by(|a, b| a.total_cmp(b));
    rounds[rounds.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<usize> = std::env::var("WORK_BENCH_TASKS")
        .unwrap_or_else(|_| "4,16,64".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!(
        "{:>6} {:>9} {:>9} {:>10} {:>13} {:>15} {:>16} {:>17}",
        "tasks", "wall s", "ms/task", "agent ms", "state B/task", "progress B/task", "written B/task", "rewrite B/task"
    );
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        repo(dir.path(), n);
        let t = Instant::now();
        let out = Command::new(work_bin())
            .args(["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--test-cmd", "true", "--json"])
            .args(["--agent", "command:sh agent.sh"])
            .current_dir(dir.path())
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let wall = t.elapsed().as_secs_f64();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(report["status"], "DONE", "the plan of {n} tasks: {report}");
        let finished = progress::read(&dir.path().join(".work"), "it-1").unwrap().unwrap();
        assert_eq!(finished.ended.len(), n);
        let (written, rewrite) = progress_bytes(&finished);
        let it = dir.path().join(".work/iterations/it-1");
        let per = |b: u64| b as f64 / n as f64;
        println!(
            "{:>6} {:>9.2} {:>9.1} {:>10.1} {:>13.0} {:>15.0} {:>16.0} {:>17.0}",
            n,
            wall,
            wall * 1000.0 / n as f64,
            agent_ms_per_task(dir.path()),
            per(du(&dir.path().join(".work"))),
            per(file_len(&it.join("progress.json")) + file_len(&it.join("progress.jsonl"))),
            per(written),
            per(rewrite),
        );
    }
}
