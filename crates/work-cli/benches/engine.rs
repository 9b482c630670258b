//! Engine benchmarks through the real binary (`cargo bench -p work-cli --bench engine`), each
//! with the kernel sandbox (`--isolation required`) and without it (`--isolation none`):
//!
//! 1. Overhead per dispatch: 400 finder dispatches at cap 1 of a trivial program agent (200
//!    angles, two dry rounds), against a shell loop running the same program 400 times with the
//!    same stdin; with the sandbox,
//!    also against the same loop running each under `bwrap` with the engine's arguments.
//! 2. Fan-out: 1,000 angles a round at cap 16 (two dry rounds: 2,000 dispatches), agents
//!    sleeping 50 ms, against the ideal ceil(2000/16) × 50 ms and against `xargs -P16` running
//!    the same agent 2,000 times.
//!
//! Both are run side by side with no other process started and with 500 idle `sleep`
//! processes elsewhere on the machine (`WORK_BENCH_IDLE` to change the count), interleaved
//! (each run does both variants in turn), and the ratio of the two is reported.
//! 3. Resume: loading a finished journal of 10,000 seen items (whole process, and the
//!    in-process parse + dedup-set build).
//!
//! Every run is timed by `/usr/bin/time`: wall time and CPU time (user + system of the whole
//! process tree). On a machine other work shares, CPU time is the steadier figure.
//!
//! `WORK_BENCH_BINS=name=path,name=path` compares several builds of `work`, run interleaved
//! (one run of each in turn, medians); by default the one this bench was built with.
//! `WORK_BENCH_PARTS` picks parts (`overhead,fanout,resume`; all by default),
//! `WORK_BENCH_ISOLATION` the modes (`none,required`), `WORK_BENCH_RUNS` the runs (5).

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::disallowed_methods, reason = "the benchmark drives the binary and its fixtures directly")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const WORK: &str = env!("CARGO_BIN_EXE_work");

/// A scratch repository outside `/tmp`, where a user's repository is (the sandbox replaces
/// `/tmp`, and a root under it must be bound again).
fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for args in [
        &["init", "-q"][..],
        &["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"],
    ] {
        assert!(Command::new("git").args(args).current_dir(d.path()).status().unwrap().success());
    }
    std::fs::write(d.path().join("a.txt"), "x\n").unwrap();
    d
}

fn write_agent(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\necho '{{\"angle\":\"x\",\"items\":[]}}'\n")).unwrap();
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).unwrap();
    p.display().to_string()
}

fn angles(n: usize) -> String {
    (0..n).map(|i| format!("a{i}")).collect::<Vec<_>>().join(",")
}

/// What `/usr/bin/time` measured of one run: wall and CPU (user + system) seconds.
#[derive(Debug, Clone, Copy)]
struct Cost {
    wall: f64,
    cpu: f64,
}

/// Runs `cmd` under `/usr/bin/time` in `dir`, stdin from `stdin` (or /dev/null), through this
/// benchmark's [`subreap`] mode, so that the CPU of processes orphaned inside the run counts.
fn timed(dir: &Path, cmd: &[&str], stdin: Option<&Path>) -> Cost {
    let out = dir.join(".time");
    let st = Command::new("/usr/bin/time")
        .args(["-f", "%e %U %S", "-o"])
        .arg(&out)
        .arg(std::env::current_exe().unwrap())
        .arg(SUBREAP)
        .args(cmd)
        .current_dir(dir)
        .stdin(stdin.map_or_else(Stdio::null, |p| Stdio::from(std::fs::File::open(p).unwrap())))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.code().is_some_and(|c| c == 0 || c == 1), "{cmd:?} failed: {st}");
    let text = std::fs::read_to_string(&out).unwrap();
    let f: Vec<f64> = text.lines().last().unwrap().split_whitespace().map(|x| x.parse().unwrap()).collect();
    Cost { wall: f[0], cpu: f[1] + f[2] }
}

/// The 1-minute load average (`/proc/loadavg`), noted beside every run's figures.
fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The loads seen at the start of each run, as `lo–hi`.
fn loads(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("load {lo:.1}–{hi:.1}")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The builds of `work` compared: `WORK_BENCH_BINS`, or the one built with this bench.
fn bins() -> Vec<(String, String)> {
    match std::env::var("WORK_BENCH_BINS") {
        Ok(v) => v
            .split(',')
            .map(|nb| {
                let (n, b) = nb.split_once('=').unwrap();
                (n.to_string(), b.to_string())
            })
            .collect(),
        Err(_) => vec![("work".into(), WORK.into())],
    }
}

fn wanted(var: &str, default: &str) -> Vec<String> {
    std::env::var(var).unwrap_or_else(|_| default.into()).split(',').map(str::to_string).collect()
}

fn runs() -> usize {
    std::env::var("WORK_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5)
}

fn exhaust_args<'a>(
    isolation: &'a str,
    angles: &'a str,
    per_round: &'a str,
    cap: &'a str,
    spec: &'a str,
) -> Vec<&'a str> {
    vec![
        "--isolation",
        isolation,
        "exhaust",
        "bench",
        "-k",
        "2",
        "--angles",
        angles,
        "--angles-per-round",
        per_round,
        "--concurrency",
        cap,
        "--agent",
        spec,
    ]
}

/// Idle processes outside `work`'s tree, killed when dropped.
struct Idle(Vec<std::process::Child>);

impl Idle {
    fn start(n: usize) -> Self {
        Self((0..n).map(|_| Command::new("sleep").arg("3600").stdin(Stdio::null()).spawn().unwrap()).collect())
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// 400 dispatches at cap 1 of a trivial agent against a shell loop running it 400 times:
/// per-dispatch wall and CPU above the loop, medians of interleaved runs.
fn overhead_per_dispatch(isolation: &str) {
    // 200 angles, each dispatched in both rounds `-k 2` takes to stop (two dry rounds): 400
    // dispatches, against a loop running the program 400 times.
    const ANGLES: usize = 200;
    const N: usize = 2 * ANGLES;
    let idles = [0, idle_count()];
    let r = repo();
    let agent = write_agent(r.path(), "agent.sh", "cat >/dev/null");
    let input = r.path().join("stdin.txt");
    std::fs::write(&input, [b' '; 2048]).unwrap();
    let shell_loop = format!("for i in $(seq {N}); do {agent} < {} > /dev/null; done", input.display());
    // With the sandbox, the same loop with every run under `bwrap` with the arguments the
    // engine gives a read-only finder: the sandbox's own cost.
    let sandbox_tmp = tempfile::tempdir().unwrap();
    let bwrap_loop = (isolation == "required").then(|| bwrap_loop(r.path(), sandbox_tmp.path(), &agent, &input, N));
    let (a, spec, n) = (angles(ANGLES), format!("command:{agent}"), ANGLES.to_string());
    let bins = bins();
    // Per idle variant: the shell loop's runs, and per build its whole runs.
    let mut loops: Vec<Vec<Cost>> = vec![Vec::new(); idles.len()];
    let mut bwrap_loops: Vec<Vec<Cost>> = vec![Vec::new(); idles.len()];
    let mut whole: Vec<Vec<Vec<Cost>>> = vec![vec![Vec::new(); bins.len()]; idles.len()];
    let mut seen_load = Vec::new();
    for _ in 0..runs() {
        for (v, &idle) in idles.iter().enumerate() {
            let _idle = Idle::start(idle);
            seen_load.push(load());
            loops[v].push(timed(r.path(), &["sh", "-c", &shell_loop], None));
            if let Some(b) = &bwrap_loop {
                bwrap_loops[v].push(timed(r.path(), &["sh", "-c", b], None));
            }
            for (i, (_, bin)) in bins.iter().enumerate() {
                let _ = std::fs::remove_dir_all(r.path().join(".work"));
                let mut cmd = vec![bin.as_str()];
                cmd.extend(exhaust_args(isolation, &a, &n, "1", &spec));
                whole[v][i].push(timed(r.path(), &cmd, None));
            }
        }
    }
    for (i, (name, _)) in bins.iter().enumerate() {
        let mut cpu_by_variant = Vec::new();
        for (v, &idle) in idles.iter().enumerate() {
            let lw = median(loops[v].iter().map(|c| c.wall).collect());
            let lc = median(loops[v].iter().map(|c| c.cpu).collect());
            // Per run, above the shell loop of the same run.
            let above = |f: fn(&Cost) -> f64| {
                median(loops[v].iter().zip(&whole[v][i]).map(|(l, c)| (f(c) - f(l)) / N as f64 * 1000.0).collect())
            };
            let (w, c) = (above(|c| c.wall), above(|c| c.cpu));
            let run_cpu = median(whole[v][i].iter().map(|c| c.cpu).collect());
            cpu_by_variant.push((c, run_cpu));
            println!(
                "overhead per dispatch, {name}, --isolation {isolation}, {idle} idle processes (cap 1, N={N}, median of {}, {}): \
                 {w:.2} ms wall, {c:.2} ms CPU above the shell loop (run {run_cpu:.3} s CPU; loop {lw:.3} s wall, {lc:.3} s CPU)",
                loops[v].len(),
                loads(&seen_load),
            );
            if !bwrap_loops[v].is_empty() {
                let bw = median(bwrap_loops[v].iter().map(|c| c.wall).collect());
                let bc = median(bwrap_loops[v].iter().map(|c| c.cpu).collect());
                let over = |f: fn(&Cost) -> f64| {
                    median(
                        bwrap_loops[v]
                            .iter()
                            .zip(&whole[v][i])
                            .map(|(l, c)| (f(c) - f(l)) / N as f64 * 1000.0)
                            .collect(),
                    )
                };
                let sandbox = |f: fn(&Cost) -> f64| {
                    median(
                        loops[v].iter().zip(&bwrap_loops[v]).map(|(l, b)| (f(b) - f(l)) / N as f64 * 1000.0).collect(),
                    )
                };
                println!(
                    "  the same loop under bwrap: {bw:.3} s wall, {bc:.3} s CPU ({:.2} ms wall, {:.2} ms CPU per run above the \
                     bare loop); the engine above it: {:.2} ms wall, {:.2} ms CPU per dispatch",
                    sandbox(|c| c.wall),
                    sandbox(|c| c.cpu),
                    over(|c| c.wall),
                    over(|c| c.cpu),
                );
            }
        }
        if let [(c0, r0), (c1, r1)] = cpu_by_variant[..] {
            println!(
                "  with {} idle processes against none: run CPU {:.2}×, overhead CPU {:.2}×",
                idles[1],
                r1 / r0,
                c1 / c0
            );
        }
    }
}

/// A shell loop running `agent` `n` times, each under `bwrap` with the arguments the engine
/// gives a read-only finder without network (see `work_runtime::sandbox::bwrap_args`).
fn bwrap_loop(root: &Path, tmp: &Path, agent: &str, input: &Path, n: usize) -> String {
    use work_runtime::sandbox::{Confine, Network, bwrap_args};
    let c = Confine::read_only(root, Network::None);
    let args: Vec<String> =
        bwrap_args(&c, tmp, root, [agent], None).iter().map(|a| format!("'{}'", a.to_string_lossy())).collect();
    format!("for i in $(seq {n}); do bwrap {} -- {agent} < {} > /dev/null; done", args.join(" "), input.display())
}

/// How many idle processes the second variant runs beside the benchmark (500).
fn idle_count() -> usize {
    std::env::var("WORK_BENCH_IDLE").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

/// 1,000 dispatches of a 50 ms agent at cap 16 against `xargs -P16` running it 1,000 times.
fn fan_out(isolation: &str) {
    let idles = [0, idle_count()];
    let r = repo();
    let agent = write_agent(r.path(), "sleepy.sh", "sleep 0.05");
    let (a, spec) = (angles(1000), format!("command:{agent}"));
    // Each angle is dispatched in both rounds `-k 2` takes to stop: 2,000 runs of the agent.
    let xargs = format!("seq 2000 | xargs -P16 -I{{}} sh -c '{agent} </dev/null >/dev/null'");
    let bins = bins();
    let mut floor: Vec<Vec<Cost>> = vec![Vec::new(); idles.len()];
    let mut times: Vec<Vec<Vec<Cost>>> = vec![vec![Vec::new(); bins.len()]; idles.len()];
    let mut seen_load = Vec::new();
    for _ in 0..runs().min(3) {
        for (v, &idle) in idles.iter().enumerate() {
            let _idle = Idle::start(idle);
            seen_load.push(load());
            floor[v].push(timed(r.path(), &["sh", "-c", &xargs], None));
            for (i, (_, bin)) in bins.iter().enumerate() {
                let _ = std::fs::remove_dir_all(r.path().join(".work"));
                let mut cmd = vec![bin.as_str()];
                cmd.extend(exhaust_args(isolation, &a, "1000", "16", &spec));
                times[v][i].push(timed(r.path(), &cmd, None));
            }
        }
    }
    let ideal = 2000usize.div_ceil(16) as f64 * 0.05;
    for (v, &idle) in idles.iter().enumerate() {
        let xw = median(floor[v].iter().map(|c| c.wall).collect());
        let xc = median(floor[v].iter().map(|c| c.cpu).collect());
        for ((name, _), t) in bins.iter().zip(&times[v]) {
            let w = median(t.iter().map(|c| c.wall).collect());
            let c = median(t.iter().map(|c| c.cpu).collect());
            println!(
                "fan-out 1000 angles (2000 dispatches) at cap 16, 50 ms agents, {name}, --isolation {isolation}, {idle} idle processes, {}: \
                 {w:.3} s wall, {c:.2} s CPU (ideal {ideal:.3} s; xargs -P16 {xw:.3} s wall, {xc:.2} s CPU; \
                 {:.3}× wall, {:.2}× CPU)",
                loads(&seen_load),
                w / xw,
                c / xc
            );
        }
    }
}

fn resume_10k() {
    use serde_json::json;
    let r = repo();
    let items: Vec<_> = (0..10_000)
        .map(|i| json!({"id": format!("item-{i}"), "title": "t", "location": format!("src/f{}.rs:{}", i % 97, i), "workDone": true, "reReadSources": [format!("src/f{}.rs:{}", i % 97, i)]}))
        .collect();
    let seen: Vec<_> = (0..10_000).map(|i| format!("item-{i}")).collect();
    let journal = json!({
        "version": 1, "task": "big", "what": "big", "k": 3, "rounds": [], "seen": seen, "items": items, "rejected": [],
        "stoppedReason": "k-consecutive-dry", "droppedDueToBudget": [], "completenessGaps": [], "anglesUsed": [],
        "dryCounter": 3, "pool": [], "cursor": 0, "angleFailures": {}, "givenUp": [], "retryQueue": [], "seedDone": true,
        "seeded": [], "finalOraclesRun": [], "spent": {"dispatches": 0, "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}}
    });
    let text = serde_json::to_string_pretty(&journal).unwrap();
    let dir = r.path().join(".work/quality-journals");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("work-exhaust-big.json"), &text).unwrap();
    let agent = write_agent(r.path(), "agent.sh", "cat >/dev/null");
    let spec = format!("command:{agent}");
    let mut whole = Vec::new();
    let mut inproc = Vec::new();
    for _ in 0..5 {
        whole.push(timed(r.path(), &[WORK, "exhaust", "big", "--task", "big", "--agent", &spec], None).wall * 1000.0);
        let t = Instant::now();
        let j = work_exhaust::Journal::parse(&text).unwrap();
        let set = j.dedup_set();
        assert_eq!(set.len(), 20_000);
        inproc.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "resume from a 10,000-item journal: {:.1} ms whole process, {:.1} ms parse + dedup set (median of 5)",
        median(whole),
        median(inproc)
    );
}

/// The argument that runs this benchmark as [`subreap`].
const SUBREAP: &str = "--subreap";

/// Runs `cmd` as the subreaper of everything it starts and reaps every orphan before exiting
/// with its status. `/usr/bin/time` counts the CPU of the children that were waited for: a
/// process whose parent exits without waiting for it is reaped by init, and its CPU is counted
/// nowhere. `bwrap` is such a case: its outer process returns as soon as the sandbox's PID 1
/// reports the agent's status, and PID 1 (which did the namespace and mount setup) is left to
/// whoever reaps orphans. `work` is itself a subreaper; this puts the shell loops on the same
/// footing.
fn subreap(cmd: &[String]) -> ! {
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let status = Command::new(&cmd[0]).args(&cmd[1..]).status().unwrap();
    while nix::sys::wait::wait().is_ok() {}
    std::process::exit(status.code().unwrap_or(1));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(SUBREAP) {
        subreap(&args[2..]);
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let parts = wanted("WORK_BENCH_PARTS", "overhead,fanout,resume");
    let isolations = wanted("WORK_BENCH_ISOLATION", "none,required");
    let has = |p: &str| parts.iter().any(|x| x == p);
    for isolation in &isolations {
        if has("overhead") {
            overhead_per_dispatch(isolation);
        }
    }
    if has("fanout") {
        for isolation in &isolations {
            fan_out(isolation);
        }
    }
    if has("resume") {
        resume_10k();
    }
}
