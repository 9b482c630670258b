//! Scaling benchmark (`cargo bench -p work-cli --bench scale`): does the cost of an exhaust grow
//! with the work, or with its square?
//!
//! An exhaust where every finder adds one new item, 16 finders a round at cap 16, run to its
//! end (`angles-and-oracles-exhausted`) at 1,000, 10,000 and 100,000 dispatches
//! (`WORK_BENCH_SIZES=1000,100000` to choose; `WORK_BENCH_REPEAT=3` runs the list that many
//! times, interleaved, and reports medians). The finders are an in-process scripted agent (the
//! real `Engine`, `Dispatcher`, event log, dispatch records, read-only tree guard and journal;
//! only the agent's process is left out: spawning 100,000 processes would measure `fork`). Each
//! size runs in a child process of its own, so its peak memory (`VmHWM`) and CPU time are its
//! own. The repository is the same at every size (100 files of 1,000 lines: 100,000 citable
//! locations), so what grows is the work, not the tree the read-only guard walks.
//!
//! Reported per size: the wall time and the CPU time (user + system, all threads) per
//! dispatch, the state under `.work/` per item (all of it, and the journal files alone), peak
//! memory; then the resume of the finished journal by the real `work` binary (process wall
//! time, median of 21, and its peak RSS from GNU `time`), which is what a rerun of a finished
//! task costs. The summary gives each figure's median and its ratio to the first size's.

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::disallowed_methods, reason = "the benchmark drives the binary and its fixtures directly")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]
#![allow(unsafe_code, reason = "the benchmark counts the heap with a global allocator wrapping the system's")]

use async_trait::async_trait;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;
use work_runtime::dispatch::{AgentError, AgentReply, DispatchRequest, InvokeOptions};

/// Counts the heap: bytes live now and the most ever live (the child's figures; its peak RSS
/// also counts the allocator's free lists and the process's fixed part).
struct Counting;
static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static PEAK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn count(grown: usize, shrunk: usize) {
    use std::sync::atomic::Ordering::Relaxed;
    let now = LIVE.fetch_add(grown, Relaxed) + grown;
    LIVE.fetch_sub(shrunk, Relaxed);
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is passed to the system allocator unchanged; only the sizes are counted.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        count(l.size(), 0);
        // SAFETY: the caller's layout, passed on.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        count(0, l.size());
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        count(l.size(), 0);
        // SAFETY: the caller's layout, passed on.
        unsafe { std::alloc::System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        count(new, l.size());
        // SAFETY: `p` came from this allocator with layout `l`.
        unsafe { std::alloc::System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The `work` binary: `WORK_BENCH_BIN` when set (to measure a saved build), else this build's.
fn work_bin() -> String {
    std::env::var("WORK_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_work").to_string())
}
const LINES_PER_FILE: usize = 1000;
/// Files in the repository at every size (more only past 100,000 dispatches).
const REPO_FILES: usize = 100;
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
    for f in 0..items.div_ceil(LINES_PER_FILE).max(REPO_FILES) {
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

/// CPU time (user + system) of this process so far, all threads, in seconds.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime and stime are the 12th
    // and 13th, in clock ticks (USER_HZ, 100 on Linux).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
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
    // A user's repository is not seconds old: let git's files age past the window in which the
    // engine does not trust their timestamps (it reads git's seal again while they are racy).
    std::thread::sleep(work_git::integrity::RACY + std::time::Duration::from_millis(100));
    // The heap from here on: the angle pool (the journal's `pool`) and everything the run keeps.
    let heap0 = LIVE.load(std::sync::atomic::Ordering::Relaxed);
    PEAK.store(heap0, std::sync::atomic::Ordering::Relaxed);
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
    let (t, cpu0) = (Instant::now(), cpu_s());
    let j = rt.block_on(work_exhaust::Engine::new(&run, &d, &params, journal, Default::default()).drive()).unwrap();
    let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - cpu0);
    let heap_peak = PEAK.load(std::sync::atomic::Ordering::Relaxed) - heap0;
    let heap_live = LIVE.load(std::sync::atomic::Ordering::Relaxed).saturating_sub(heap0);
    run.finish(j.stopped_reason.as_deref().unwrap_or(""), json!({"seen": j.seen.len()}));
    assert_eq!(j.seen.len(), n, "every finder adds one item");
    let journals = du(&dir.join(".work/quality-journals"));
    let state = du(&dir.join(".work"));
    println!(
        "{}",
        json!({"n": n, "wall_s": wall, "cpu_s": cpu, "rounds": j.rounds.len(), "state": state, "journals": journals,
               "runs": du(&dir.join(".work/runs")), "hwm_kb": vm_hwm_kb(),
               "heap_peak": heap_peak, "heap_live": heap_live})
    );
}

/// The median (of an even count, the mean of the two middle values).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) { (v[m - 1] + v[m]) / 2.0 } else { v[m] }
}

/// The real binary resumes the finished journal: process wall time (median of 21, after one
/// warm-up run) and its peak RSS.
fn resume(dir: &Path) -> (f64, i64) {
    let agent = dir.join("agent.sh");
    std::fs::write(&agent, "#!/bin/sh\necho '{\"angle\":\"x\",\"items\":[]}'\n").unwrap();
    let mut perm = std::fs::metadata(&agent).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&agent, perm).unwrap();
    let spec = format!("command:{}", agent.display());
    let mut times = Vec::new();
    for i in 0..22 {
        let t = Instant::now();
        let st = Command::new(work_bin())
            .args(["exhaust", "bench", "--task", "bench", "--agent", &spec])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if i > 0 {
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
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

/// The load average over the last minute (the machine may be shared: figures are noisy).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().next().unwrap_or("?").to_string()
}

/// One run's figures, per dispatch or per item.
#[derive(Clone, Copy)]
struct Row {
    rounds: f64,
    us_wall: f64,
    us_cpu: f64,
    state: f64,
    journal: f64,
    peak_mb: f64,
    heap_peak: f64,
    heap_live: f64,
    resume_ms: f64,
    resume_mb: f64,
}

impl Row {
    fn print(&self, n: usize, label: &str) {
        println!(
            "{:>8} {:>6.0} {:>11.1} {:>11.1} {:>12.0} {:>12.0} {:>8.1} {:>11.0} {:>11.0} {:>10.1} {:>10.1}  {label}",
            n,
            self.rounds,
            self.us_wall,
            self.us_cpu,
            self.state,
            self.journal,
            self.peak_mb,
            self.heap_peak,
            self.heap_live,
            self.resume_ms,
            self.resume_mb
        );
    }

    /// The median of each figure over `rows`.
    fn median(rows: &[Row]) -> Row {
        let m = |f: fn(&Row) -> f64| median(rows.iter().map(f).collect());
        Row {
            rounds: m(|r| r.rounds),
            us_wall: m(|r| r.us_wall),
            us_cpu: m(|r| r.us_cpu),
            state: m(|r| r.state),
            journal: m(|r| r.journal),
            peak_mb: m(|r| r.peak_mb),
            heap_peak: m(|r| r.heap_peak),
            heap_live: m(|r| r.heap_live),
            resume_ms: m(|r| r.resume_ms),
            resume_mb: m(|r| r.resume_mb),
        }
    }
}

/// Runs one size in a child process, then the resume; prints and returns its row.
fn measure(n: usize) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = dir.path().to_path_buf();
    let before = load();
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
    let row = Row {
        rounds: f("rounds"),
        us_wall: f("wall_s") / n as f64 * 1e6,
        us_cpu: f("cpu_s") / n as f64 * 1e6,
        state: f("state") / n as f64,
        journal: f("journals") / n as f64,
        peak_mb: f("hwm_kb") / 1024.0,
        heap_peak: f("heap_peak") / n as f64,
        heap_live: f("heap_live") / n as f64,
        resume_ms,
        resume_mb: resume_kb as f64 / 1024.0,
    };
    row.print(n, &format!("load {before} → {}", load()));
    row
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
    let repeat: usize = std::env::var("WORK_BENCH_REPEAT").ok().and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    let header = || {
        println!(
            "{:>8} {:>6} {:>11} {:>11} {:>12} {:>12} {:>8} {:>11} {:>11} {:>10} {:>10}",
            "dispatch",
            "rounds",
            "µs/disp wall",
            "µs/disp cpu",
            "state B/item",
            "journal B/it",
            "peak MB",
            "heap pk B/it",
            "heap end B/it",
            "resume ms",
            "resume MB"
        )
    };
    header();
    let mut rows: Vec<(usize, Vec<Row>)> = sizes.iter().map(|&n| (n, Vec::new())).collect();
    for _ in 0..repeat {
        for (n, runs) in rows.iter_mut() {
            runs.push(measure(*n));
        }
    }
    println!("\nmedians over {repeat} run(s); ratio to {} dispatches in brackets", sizes.first().unwrap_or(&0));
    header();
    let base = rows.first().map(|(_, r)| Row::median(r));
    for (n, runs) in &rows {
        let m = Row::median(runs);
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let label = base.map_or(String::new(), |b| {
            format!(
                "[wall {:.2}× · cpu {:.2}× · state {:.2}×]",
                ratio(m.us_wall, b.us_wall),
                ratio(m.us_cpu, b.us_cpu),
                ratio(m.state, b.state)
            )
        });
        m.print(*n, &label);
    }
}
