//! Scaling benchmark (`cargo bench -p work-cli --bench scale`): does the cost of an exhaust grow
//! with the work, or with its square?
//!
//! An exhaust where every finder adds one new item, 16 finders a round at cap 16, run to its
//! end (`angles-and-oracles-exhausted`) at 1,000, 10,000 and 100,000 dispatches
//! (`WORK_BENCH_SIZES=1000,10000` to choose). The finders are an in-process scripted agent (the
//! real `Engine`, `Dispatcher`, event log, dispatch records, read-only tree guard and journal,
//! only the agent's process is left out: spawning 100,000 processes would measure `fork`). Each
//! size runs in a child process of its own, so its peak memory (`VmHWM`) is its own.
//!
//! Reported per size: the wall time per dispatch, the state under `.work/` per item (all of
//! it, and the journal files alone), peak memory; then the resume of the finished journal by
//! the real `work` binary (process wall time, median of 5, and its peak RSS from GNU
//! `time`), which is what a rerun of a finished task costs.

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::disallowed_methods, reason = "the benchmark drives the binary and its fixtures directly")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]

use async_trait::async_trait;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;
use work_runtime::dispatch::{AgentError, AgentReply, DispatchRequest, InvokeOptions};

/// The `work` binary: `WORK_BENCH_BIN` when set (to measure a saved build), else this build's.
fn work_bin() -> String {
    std::env::var("WORK_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_work").to_string())
}
const LINES_PER_FILE: usize = 1000;
const PER_ROUND: usize = 16;

/// Answers every finder with one new item: angle `aN` finds `src/f<N/1000>.txt:<N%1000+1>`.
struct Scripted;

#[async_trait]
impl work_runtime::dispatch::Agent for Scripted {
    fn describe(&self) -> String {
        "scripted:bench".into()
    }

    async fn invoke(&self, req: &DispatchRequest, _: InvokeOptions) -> Result<AgentReply, AgentError> {
        let angle = req.context["angle"].as_str().unwrap_or("a0").to_string();
        let n: usize = angle.trim_start_matches('a').parse().unwrap_or(0);
        let doc = json!({"angle": angle, "items": [{
            "id": format!("item-{n}"),
            "title": format!("finding {n}"),
            "location": location(n),
            "evidence": format!("`line {n}`"),
            "severity": "low",
        }]});
        Ok(AgentReply { raw: doc.to_string(), document: doc, usage: Default::default() })
    }
}

fn location(n: usize) -> String {
    format!("src/f{}.txt:{}", n / LINES_PER_FILE, n % LINES_PER_FILE + 1)
}

fn repo(dir: &Path, items: usize) {
    for args in [
        &["init", "-q"][..],
        &["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"],
    ] {
        assert!(Command::new("git").args(args).current_dir(dir).status().unwrap().success());
    }
    std::fs::create_dir_all(dir.join("src")).unwrap();
    for f in 0..items.div_ceil(LINES_PER_FILE) {
        let text: String = (0..LINES_PER_FILE).map(|l| format!("line {}\n", f * LINES_PER_FILE + l)).collect();
        std::fs::write(dir.join(format!("src/f{f}.txt")), text).unwrap();
    }
}

fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return 0 };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path).unwrap().map(|e| du(&e.unwrap().path())).sum()
}

fn vm_hwm_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The child: one size, in process. Prints one JSON line of figures.
fn one(n: usize, dir: &Path) {
    repo(dir, n);
    let angles: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
    let run = work_runtime::run::RunContext::start(
        work_runtime::run::RunOptions {
            root: dir.to_path_buf(),
            state_dir: dir.join(".work"),
            clock: Arc::new(work_runtime::clock::SystemClock),
            redactor: Default::default(),
            budget: Default::default(),
            already_spent: Default::default(),
            already_by_role: Default::default(),
            progress: work_runtime::run::ProgressSink::Silent,
        },
        "exhaust",
    )
    .unwrap();
    let d = work_runtime::dispatch::Dispatcher::new(
        Arc::new(Scripted),
        run.events.clone(),
        run.budget.clone(),
        "exhaust",
        dir.to_path_buf(),
        std::time::Duration::from_secs(60),
    );
    let journal_path = dir.join(".work/quality-journals/work-exhaust-bench.json");
    let params = work_exhaust::Params {
        what: "bench".into(),
        context: None,
        k: 2,
        angles_per_round: PER_ROUND,
        seed_oracles: Vec::new(),
        final_oracles: Vec::new(),
        max_rounds: None,
        concurrency: PER_ROUND,
        model: "m".into(),
        effort: "e".into(),
        oracle_timeout: std::time::Duration::from_secs(60),
        journal_path: journal_path.clone(),
        scope: Vec::new(),
    };
    let journal = work_exhaust::Journal::new("bench", "bench", 2, angles);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let t = Instant::now();
    let j = rt.block_on(work_exhaust::Engine::new(&run, &d, &params, journal).drive()).unwrap();
    let wall = t.elapsed().as_secs_f64();
    run.finish(j.stopped_reason.as_deref().unwrap_or(""), json!({"seen": j.seen.len()}));
    assert_eq!(j.seen.len(), n, "every finder adds one item");
    let journals = du(&dir.join(".work/quality-journals"));
    let state = du(&dir.join(".work"));
    println!(
        "{}",
        json!({"n": n, "wall_s": wall, "rounds": j.rounds.len(), "state": state, "journals": journals,
               "runs": du(&dir.join(".work/runs")), "hwm_kb": vm_hwm_kb()})
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The real binary resumes the finished journal: process wall time (median of 5) and the
/// largest child's peak RSS.
fn resume(dir: &Path) -> (f64, i64) {
    let agent = dir.join("agent.sh");
    std::fs::write(&agent, "#!/bin/sh\necho '{\"angle\":\"x\",\"items\":[]}'\n").unwrap();
    let mut perm = std::fs::metadata(&agent).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&agent, perm).unwrap();
    let spec = format!("command:{}", agent.display());
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let st = Command::new(work_bin())
            .args(["exhaust", "bench", "--task", "bench", "--agent", &spec])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(st.code().is_some_and(|c| c == 0 || c == 1), "resume failed: {st}");
    }
    // Peak RSS of one more resume, from GNU time (`%M`, kB); 0 when it is not installed.
    let rss = Command::new("/usr/bin/time")
        .args(["-f", "%M", &work_bin(), "exhaust", "bench", "--task", "bench", "--agent", &spec])
        .current_dir(dir)
        .stdout(Stdio::null())
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stderr).lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    (median(times), rss)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--one") {
        one(args[i + 1].parse().unwrap(), Path::new(&args[i + 2]));
        return;
    }
    let sizes: Vec<usize> = std::env::var("WORK_BENCH_SIZES")
        .unwrap_or_else(|_| "1000,10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!(
        "{:>8} {:>6} {:>10} {:>12} {:>14} {:>14} {:>9} {:>11} {:>10}",
        "dispatch",
        "rounds",
        "wall s",
        "µs/dispatch",
        "state B/item",
        "journal B/item",
        "peak MB",
        "resume ms",
        "resume MB"
    );
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        let root: PathBuf = dir.path().to_path_buf();
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--one", &n.to_string(), &root.display().to_string()])
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "size {n} failed");
        let line = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(line.trim()).unwrap();
        let (resume_ms, resume_kb) = resume(&root);
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        println!(
            "{:>8} {:>6} {:>10.2} {:>12.1} {:>14.0} {:>14.0} {:>9.1} {:>11.1} {:>10.1}",
            n,
            f("rounds"),
            f("wall_s"),
            f("wall_s") / n as f64 * 1e6,
            f("state") / n as f64,
            f("journals") / n as f64,
            f("hwm_kb") / 1024.0,
            resume_ms,
            resume_kb as f64 / 1024.0,
        );
    }
}
