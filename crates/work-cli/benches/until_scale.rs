//! `work until` at length (`cargo bench -p work-cli --bench until_scale`): does an iteration
//! cost the same at iteration 1,000 as at iteration 10, and does the session's state grow by
//! what each iteration adds?
//!
//! A session of N iterations (`WORK_BENCH_UNTIL_SIZES=100,1000` to choose) on a scratch git
//! repository: every worker edits one file, claims it and a file it never touched, takes one
//! decision and says `continue`, so the session ends `max-reached` at N. The real loop runs
//! (`work_until::drive`: ledger, log and snapshots, hand-off, archives, state digests, the
//! whole-tree snapshots and the git seal of every iteration); only the worker's process is
//! left out (an in-process scripted agent).
//!
//! Reported per size: the wall time per iteration (all of them, the first tenth, the last
//! tenth), the session's state bytes per iteration, and the size of `master.md` and of the
//! last hand-off (the worker's brief), which must not grow with N.

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::disallowed_methods, reason = "the benchmark sets up its fixtures directly")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]

use async_trait::async_trait;
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use work_runtime::dispatch::{AgentError, AgentReply, DispatchRequest, Dispatcher, InvokeOptions};
use work_runtime::run::{ProgressSink, RunContext, RunOptions};

/// The worker: edits `a.txt`, claims it and `ghost.rs`, one decision, `continue`.
struct Worker {
    root: std::path::PathBuf,
    starts: Mutex<Vec<Instant>>,
}

#[async_trait]
impl work_runtime::dispatch::Agent for Worker {
    fn describe(&self) -> String {
        "scripted:until-bench".into()
    }

    async fn invoke(&self, req: &DispatchRequest, _: InvokeOptions) -> Result<AgentReply, AgentError> {
        self.starts.lock().unwrap().push(Instant::now());
        let n = req.context["iteration"].as_u64().unwrap_or(0);
        std::fs::write(self.root.join("a.txt"), format!("{n}\n")).unwrap();
        let doc = json!({"status": "continue", "summary": format!("step {n}: edited a.txt"),
            "changes_claimed": ["a.txt", "ghost.rs"],
            "decisions": [format!("decision {n}: keep the format of a.txt stable")],
            "next_steps": [format!("step {}", n + 1)]});
        Ok(AgentReply { raw: doc.to_string(), document: doc, usage: Default::default() })
    }
}

fn git(dir: &Path, args: &[&str]) {
    let st = std::process::Command::new("git")
        .args(["-c", "user.email=b@b", "-c", "user.name=b"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

fn du(path: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(path).into_iter().flatten().flatten() {
        let md = e.metadata().unwrap();
        total += if md.is_dir() { du(&e.path()) } else { md.len() };
    }
    total
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

async fn one(n: u32) -> String {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    git(&root, &["init", "-q"]);
    std::fs::write(root.join(".git/info/exclude"), ".work/\n").unwrap();
    std::fs::write(root.join("a.txt"), "0\n").unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "a"]);
    let state = root.join(".work");
    work_runtime::fsx::digests::install(&state);
    let run = RunContext::start(
        RunOptions {
            root: root.clone(),
            state_dir: state.clone(),
            clock: Arc::new(work_runtime::clock::SystemClock),
            redactor: Default::default(),
            budget: Default::default(),
            already_spent: Default::default(),
            already_by_role: Default::default(),
            progress: ProgressSink::Silent,
        },
        "until",
    )
    .unwrap();
    let worker = Arc::new(Worker { root: root.clone(), starts: Mutex::new(Vec::new()) });
    let d = Dispatcher::new(
        worker.clone(),
        run.events.clone(),
        run.budget.clone(),
        "until",
        root.clone(),
        Duration::from_secs(60),
    );
    let meta = work_until::Meta {
        id: "bench".into(),
        goal: "g".into(),
        until: "`false` exits 0".into(),
        instructions: "g".into(),
        verify: Some("false".into()),
        verify_source: Some("--verify".into()),
        mode: work_until::Mode::Auto,
        max: n,
        recon: false,
        recon_done: false,
        agent: None,
        status: work_until::SessionStatus::Active,
        iteration_count: 0,
        in_progress: None,
        empty_streak: 0,
        blockers_seen: vec![],
        stopped_reason: None,
        created: "t".into(),
        updated: "t".into(),
        runs: vec![],
        budget: Default::default(),
        spent: Default::default(),
    };
    let mut session = work_until::session::init_session(&state, meta, &|p, t| run.write_text(p, t)).unwrap();
    let env = work_until::LoopEnv {
        run: &run,
        dispatcher: &d,
        model: "m".into(),
        effort: "low".into(),
        verify_timeout: Duration::from_secs(60),
    };
    let t = Instant::now();
    let out = work_until::drive(&env, &mut session).await.unwrap();
    let wall = t.elapsed().as_secs_f64();
    assert_eq!(out.iterations, n, "{}", out.stopped_reason);
    let starts = worker.starts.lock().unwrap().clone();
    let tenth = (n as usize / 10).max(2);
    let per = |w: &[Instant]| w.windows(2).map(|p| (p[1] - p[0]).as_secs_f64()).sum::<f64>() / (w.len() - 1) as f64;
    let first = per(&starts[..tenth]);
    let last = per(&starts[starts.len() - tenth..]);
    let sdir = session.dir.clone();
    format!(
        "{:>6} {:>8.2} {:>10.1} {:>10.1} {:>10.1} {:>12.0} {:>10} {:>10}",
        n,
        wall,
        wall / f64::from(n) * 1e3,
        first * 1e3,
        last * 1e3,
        du(&sdir) as f64 / f64::from(n),
        file_len(&sdir.join("master.md")),
        file_len(&sdir.join("handoff.md")),
    )
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<u32> = std::env::var("WORK_BENCH_UNTIL_SIZES")
        .unwrap_or_else(|_| "100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!(
        "{:>6} {:>8} {:>10} {:>10} {:>10} {:>12} {:>10} {:>10}",
        "iters", "wall s", "ms/iter", "first 10%", "last 10%", "state B/iter", "master B", "brief B"
    );
    for n in sizes {
        println!("{}", rt.block_on(one(n)));
    }
}
