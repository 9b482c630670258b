//! Engine benchmarks through the real binary (`cargo bench -p work-cli --bench engine`).
//!
//! 1. Overhead per dispatch: N finder dispatches at cap 1 with a trivial command agent, minus
//!    N × the agent's own run time (measured by spawning it directly), median of 5 runs; with
//!    the kernel sandbox (`--isolation required`) and without it (`--isolation none`).
//! 2. Fan-out: 1,000 angles in one round at cap 16, agents sleeping 50 ms, against the ideal
//!    ceil(1000/16) × 50 ms and against `xargs -P16` running the same agent; with and without
//!    the sandbox.
//! 3. Resume: loading a finished journal of 10,000 seen items (whole process, and the
//!    in-process parse + dedup-set build).

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::disallowed_methods, reason = "the benchmark drives the binary and its fixtures directly")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WORK: &str = env!("CARGO_BIN_EXE_work");

fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
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

fn run_work(root: &Path, args: &[&str]) -> Duration {
    let t = Instant::now();
    let st =
        Command::new(WORK).args(args).current_dir(root).stderr(Stdio::null()).stdout(Stdio::null()).status().unwrap();
    let e = t.elapsed();
    assert!(st.code().is_some_and(|c| c == 0 || c == 1), "work failed: {st}");
    e
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn overhead_per_dispatch(isolation: &str) {
    const N: usize = 200;
    let mut per = Vec::new();
    for _ in 0..5 {
        let r = repo();
        let agent = write_agent(r.path(), "agent.sh", "cat >/dev/null");
        // The agent's own cost: spawn it N times directly with the same stdin size.
        let t = Instant::now();
        for _ in 0..N {
            let mut c = Command::new(&agent).stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
            use std::io::Write;
            c.stdin.take().unwrap().write_all(&[b' '; 2048]).unwrap();
            c.wait().unwrap();
        }
        let own = t.elapsed();
        let a = angles(N);
        let spec = format!("command:{agent}");
        let total = run_work(
            r.path(),
            &[
                "--isolation",
                isolation,
                "exhaust",
                "bench",
                "-k",
                "2",
                "--angles",
                &a,
                "--angles-per-round",
                &N.to_string(),
                "--concurrency",
                "1",
                "--agent",
                &spec,
            ],
        );
        per.push((total.as_secs_f64() - own.as_secs_f64()) / N as f64 * 1000.0);
    }
    println!("overhead per dispatch, --isolation {isolation} (cap 1, N=200, median of 5): {:.2} ms", median(per));
}

/// `xargs -P16` running `agent` 1,000 times (stdin from /dev/null): the floor for a fan-out.
fn xargs_fan_out(agent: &str) -> f64 {
    let t = Instant::now();
    let st = Command::new("sh")
        .args(["-c", &format!("seq 1000 | xargs -P16 -I{{}} sh -c '{agent} </dev/null >/dev/null'")])
        .status()
        .unwrap();
    assert!(st.success());
    t.elapsed().as_secs_f64()
}

fn fan_out(isolation: &str) {
    let r = repo();
    let agent = write_agent(r.path(), "sleepy.sh", "sleep 0.05");
    let a = angles(1000);
    let spec = format!("command:{agent}");
    let (mut times, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let _ = std::fs::remove_dir_all(r.path().join(".work"));
        let t = run_work(
            r.path(),
            &[
                "--isolation",
                isolation,
                "exhaust",
                "bench",
                "-k",
                "2",
                "--angles",
                &a,
                "--angles-per-round",
                "1000",
                "--concurrency",
                "16",
                "--agent",
                &spec,
            ],
        );
        times.push(t.as_secs_f64());
        floor.push(xargs_fan_out(&agent));
    }
    let ideal = 1000usize.div_ceil(16) as f64 * 0.05;
    let (m, x) = (median(times), median(floor));
    println!(
        "fan-out 1000 angles at cap 16, 50 ms agents, --isolation {isolation}: {m:.3} s (ideal {ideal:.3} s, {:+.1}%; xargs -P16 {x:.3} s, {:.3}×)",
        (m / ideal - 1.0) * 100.0,
        m / x
    );
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
        whole.push(run_work(r.path(), &["exhaust", "big", "--task", "big", "--agent", &spec]).as_secs_f64() * 1000.0);
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

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    for isolation in ["none", "required"] {
        overhead_per_dispatch(isolation);
    }
    for isolation in ["none", "required"] {
        fan_out(isolation);
    }
    resume_10k();
}
