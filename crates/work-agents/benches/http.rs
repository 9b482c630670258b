//! HTTP dispatch benchmark (`cargo bench -p work-agents --bench http`): the dispatch phase of
//! the `openai:` backend against a raw async client, at wave caps 16, 64 and 256.
//!
//! A loopback HTTP/1.1 keep-alive server answers every POST with one chat completion after
//! `WORK_BENCH_HTTP_DELAY_MS` (default 100: a model's latency, so that the figures measure how
//! the client uses its slots, not the server). `WORK_BENCH_HTTP_N` requests (default 1,000)
//! are sent at each cap (`WORK_BENCH_HTTP_CAPS`, default `16,64,256`):
//!
//! - **raw**: `cap` tasks, each on one connection of its own (hyper's connection API), sending
//!   the same body and parsing each answer as JSON until N are done — the floor;
//! - **work**: `Dispatcher::dispatch_waves` over an `OpenAiAgent`, with the real event log and
//!   dispatch records in a scratch run directory, schema validation included.
//!
//! Each side runs 3 times on a fresh server (median reported) on one multi-threaded runtime;
//! the server counts the TCP connections it accepted, and listens with a backlog above the
//! largest cap (a wave of 256 connects overflows the default 128, and the kernel retries a
//! dropped SYN a second later). The CPU columns are the process's CPU time per run of each
//! side (the server's included; 10 ms resolution): on a loaded machine the wall times follow
//! the CPU a side needs more than its design.

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use work_runtime::dispatch::{Access, DispatchSpec, Dispatcher};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn answer() -> Vec<u8> {
    let doc = json!({"angle": "a", "items": [{"id": "x", "title": "t", "location": "a.rs:1"}]});
    let body = json!({"choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": doc.to_string()}}],
                      "usage": {"prompt_tokens": 100, "completion_tokens": 20}})
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A loopback keep-alive server; returns its port and its accepted-connection counter.
async fn server(delay: Duration) -> (u16, Arc<AtomicUsize>) {
    // A backlog above the largest cap: with the default (128), a wave of 256 connects
    // overflows the accept queue and the dropped SYNs are retried a second later, which
    // measures the kernel's retransmit timer, not the client.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(4096).unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    let reply: Arc<[u8]> = answer().into();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let reply = reply.clone();
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = Vec::with_capacity(16 * 1024);
                loop {
                    // One request: headers up to the blank line, then content-length bytes.
                    let (head_end, len) = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                            let len = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            break (i + 4, len);
                        }
                        let mut chunk = [0u8; 16 * 1024];
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    while buf.len() < head_end + len {
                        let mut chunk = [0u8; 16 * 1024];
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + len);
                    tokio::time::sleep(delay).await;
                    if s.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, count)
}

fn spec(i: usize) -> DispatchSpec {
    DispatchSpec {
        role: "finder".into(),
        model: "m".into(),
        effort: "high".into(),
        access: Access::ReadOnly,
        prompt: "Find things through this angle and answer with one JSON object.".repeat(8),
        schema: Some(json!({"type": "object", "required": ["angle", "items"],
                            "properties": {"angle": {"type": "string"}, "items": {"type": "array"}}})),
        context: json!({"angle": format!("a{i}"), "round": 1}),
        label: format!("a{i}"),
    }
}

/// The request body the backend sends for [`spec`] (near enough: the same size and shape).
fn raw_body() -> Bytes {
    let s = spec(0);
    Bytes::from(
        json!({"model": "m", "messages": [{"role": "user", "content": s.prompt}],
               "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": s.schema}}})
        .to_string(),
    )
}

/// The floor: `cap` connections, each sending requests back to back until `n` are done.
async fn raw(port: u16, n: usize, cap: usize) -> Duration {
    let left = Arc::new(AtomicUsize::new(n));
    let body = raw_body();
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..cap.min(n) {
        let (left, body) = (left.clone(), body.clone());
        set.spawn(async move {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            let (mut tx, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await.unwrap();
            tokio::spawn(conn);
            while left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| l.checked_sub(1)).is_ok() {
                tx.ready().await.unwrap();
                let req = hyper::Request::post("/v1/chat/completions")
                    .header("host", format!("127.0.0.1:{port}"))
                    .header("content-type", "application/json")
                    .body(Full::new(body.clone()))
                    .unwrap();
                let resp = tx.send_request(req).await.unwrap();
                let bytes = resp.into_body().collect().await.unwrap().to_bytes();
                let v: Value = serde_json::from_slice(&bytes).unwrap();
                let content = v["choices"][0]["message"]["content"].as_str().unwrap();
                let _: Value = serde_json::from_str(content).unwrap();
            }
        });
    }
    while set.join_next().await.is_some() {}
    t.elapsed()
}

/// The dispatch phase: the real dispatcher over the `openai:` backend.
async fn work(port: u16, n: usize, cap: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let def = work_config::AgentDef { base_url: Some(format!("http://127.0.0.1:{port}/v1")), ..Default::default() };
    let agent = Arc::new(work_agents::openai::OpenAiAgent::new("m", &def).unwrap());
    let clock = Arc::new(work_runtime::clock::SystemClock);
    let events =
        Arc::new(work_runtime::events::EventLog::open(dir.path(), "bench", clock, Default::default()).unwrap());
    let budget = Arc::new(work_runtime::budget::BudgetTracker::new(Default::default(), Default::default()));
    let d = Dispatcher::new(agent, events, budget, "bench", dir.path().to_path_buf(), Duration::from_secs(60));
    let specs: Vec<DispatchSpec> = (0..n).map(spec).collect();
    let t = Instant::now();
    let outcomes = d.dispatch_waves(specs, cap).await;
    let e = t.elapsed();
    let ok = outcomes.iter().filter(|o| o.output().is_some()).count();
    assert_eq!(ok, n, "every dispatch answered");
    e
}

/// The CPU time this process used so far (user + system, all threads, the server's
/// included), in clock ticks; 0 where `/proc` is missing.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // utime and stime: the 14th and 15th fields, the 12th and 13th after the command's `)`.
    let after: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let field = |i: usize| after.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

/// Linux's USER_HZ, the unit of [`cpu_ticks`].
fn clock_ticks_per_sec() -> f64 {
    100.0
}

fn median(mut v: Vec<(Duration, usize)>) -> (Duration, usize) {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = env_or("WORK_BENCH_HTTP_N", 1000);
    let delay = Duration::from_millis(env_or("WORK_BENCH_HTTP_DELAY_MS", 100));
    let caps: Vec<usize> = std::env::var("WORK_BENCH_HTTP_CAPS")
        .unwrap_or_else(|_| "16,64,256".into())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!("{n} requests, server delay {} ms", delay.as_millis());
    println!(
        "{:>5} {:>9} {:>9} {:>8} {:>10} {:>10} {:>9} {:>11} {:>12}",
        "cap", "raw ms", "work ms", "work/raw", "raw conns", "work conns", "ideal ms", "raw cpu ms", "work cpu ms"
    );
    for cap in caps {
        let mut raws = Vec::new();
        let mut works = Vec::new();
        let (mut raw_cpu, mut work_cpu) = (0, 0);
        for _ in 0..3 {
            let (port, count) = rt.block_on(server(delay));
            let c = cpu_ticks();
            raws.push((rt.block_on(raw(port, n, cap)), count.load(Ordering::SeqCst)));
            raw_cpu += cpu_ticks() - c;
            let (port, count) = rt.block_on(server(delay));
            let c = cpu_ticks();
            works.push((rt.block_on(work(port, n, cap)), count.load(Ordering::SeqCst)));
            work_cpu += cpu_ticks() - c;
        }
        let ((r, rc), (w, wc)) = (median(raws), median(works));
        let ideal = n.div_ceil(cap) as f64 * delay.as_secs_f64() * 1000.0;
        let per_run = |ticks: u64| ticks as f64 * 1000.0 / clock_ticks_per_sec() / 3.0;
        println!(
            "{cap:>5} {:>9.1} {:>9.1} {:>8.3} {rc:>10} {wc:>10} {ideal:>9.1} {:>11.0} {:>12.0}",
            r.as_secs_f64() * 1000.0,
            w.as_secs_f64() * 1000.0,
            w.as_secs_f64() / r.as_secs_f64(),
            per_run(raw_cpu),
            per_run(work_cpu)
        );
    }
}
