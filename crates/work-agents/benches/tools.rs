//! Tool-loop benchmark (`cargo bench -p work-agents --bench tools`): what the engine-side agent
//! loop of the `openai:` backend costs beyond the model's latency.
//!
//! A loopback HTTP/1.1 keep-alive server plays a model that asks for one `read_file` call per
//! turn until the request holds `turns - 1` tool results, then answers. Two measures:
//!
//! - **per turn**: one dispatch of `WORK_BENCH_TOOLS_TURNS` turns (default 200) against a server
//!   answering at once, against a raw async client sending the same number of requests (bodies
//!   of the same size, each answer parsed) on one connection: `(work - raw) / turns` is the
//!   loop's own cost per turn (building the growing body, reading the answer, running the tool,
//!   recording it);
//! - **fan-out**: `WORK_BENCH_TOOLS_FANOUT` dispatches (default 64) of `WORK_BENCH_TOOLS_FANOUT_TURNS`
//!   turns (default 5) at once, the server answering each request after
//!   `WORK_BENCH_TOOLS_DELAY_MS` (default 200), against the raw client doing the same turns on
//!   as many connections.
//!
//! Each side runs 3 times on a fresh server (median reported); both run on one multi-threaded
//! runtime.

#![allow(clippy::disallowed_macros, reason = "a benchmark prints its figures; it is not the product")]
#![expect(clippy::disallowed_methods, reason = "the benchmark sets up its fixtures directly")]
#![expect(clippy::unwrap_used, reason = "a benchmark aborts on any setup failure")]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use work_runtime::dispatch::{Access, Agent, DispatchRequest, InvokeOptions};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn http(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The two answers: a `read_file` call, and the final document.
fn replies() -> (Arc<[u8]>, Arc<[u8]>) {
    let call = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
        "content": null, "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\":\"src/a.rs\"}"}}]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20}});
    let doc = json!({"angle": "a", "items": [{"id": "x", "title": "t", "location": "src/a.rs:1"}]});
    let answer = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": doc.to_string()}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20}});
    (http(&call.to_string()).into(), http(&answer.to_string()).into())
}

/// Occurrences of `needle` in `hay`.
fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

/// A loopback keep-alive server: a tool call while a request holds fewer than `turns - 1`
/// tool results, else the answer, each after `delay`.
async fn server(delay: Duration, turns: usize) -> u16 {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(4096).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (call, answer) = replies();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let (call, answer) = (call.clone(), answer.clone());
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = Vec::with_capacity(64 * 1024);
                loop {
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
                    let results = count(&buf[head_end..head_end + len], b"\"tool_call_id\"");
                    buf.drain(..head_end + len);
                    tokio::time::sleep(delay).await;
                    let reply = if results + 1 >= turns { &answer } else { &call };
                    if s.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A scratch repository with the file the model reads.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "fn a() { transition(1); }\n".repeat(40)).unwrap();
    dir
}

fn request(root: &std::path::Path, i: usize) -> DispatchRequest {
    DispatchRequest {
        protocol: work_runtime::dispatch::PROTOCOL.into(),
        run_id: "bench".into(),
        dispatch_id: format!("d{i}"),
        attempt: 1,
        workflow: "exhaust".into(),
        role: "finder".into(),
        model: "m".into(),
        effort: "high".into(),
        access: Access::ReadOnly,
        cwd: root.display().to_string(),
        prompt: "Find things through this angle and answer with one JSON object.".repeat(8),
        schema: Some(json!({"type": "object", "required": ["angle", "items"],
                            "properties": {"angle": {"type": "string"}, "items": {"type": "array"}}})),
        context: json!({"angle": format!("a{i}"), "round": 1}),
    }
}

/// The raw client: `clients` connections, each sending `turns` requests whose bodies grow by
/// one assistant message and one tool result per turn (as the loop's do), parsing each answer.
async fn raw(port: u16, clients: usize, turns: usize, root: &std::path::Path) -> Duration {
    let agent = agent(port, turns);
    let first = agent.body_bytes(&request(root, 0)).0;
    let result = json!({"role": "tool", "tool_call_id": "c", "content": "1: fn a() { transition(1); }\n".repeat(40)});
    let assistant = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\":\"src/a.rs\"}"}}]});
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (first, result, assistant) = (first.clone(), result.clone(), assistant.clone());
        set.spawn(async move {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            let (mut tx, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await.unwrap();
            tokio::spawn(conn);
            let mut history: Vec<Value> = Vec::new();
            for _ in 0..turns {
                // The first body with the history spliced in before `],"tools"`.
                let at = first.windows(10).position(|w| w == b"],\"tools\":").unwrap();
                let mut body = first[..at].to_vec();
                for m in &history {
                    body.push(b',');
                    serde_json::to_writer(&mut body, m).unwrap();
                }
                body.extend_from_slice(&first[at..]);
                tx.ready().await.unwrap();
                let req = hyper::Request::post("/v1/chat/completions")
                    .header("host", format!("127.0.0.1:{port}"))
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
                    .unwrap();
                let resp = tx.send_request(req).await.unwrap();
                let bytes = resp.into_body().collect().await.unwrap().to_bytes();
                let v: Value = serde_json::from_slice(&bytes).unwrap();
                if v["choices"][0]["message"]["tool_calls"].is_array() {
                    history.push(assistant.clone());
                    history.push(result.clone());
                } else {
                    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
                    let _: Value = serde_json::from_str(content).unwrap();
                }
            }
        });
    }
    while set.join_next().await.is_some() {}
    t.elapsed()
}

fn agent(port: u16, turns: usize) -> work_agents::openai::OpenAiAgent {
    let def = work_config::AgentDef {
        base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        max_turns: Some(u32::try_from(turns).unwrap()),
        ..Default::default()
    };
    work_agents::openai::OpenAiAgent::new("m", &def).unwrap()
}

/// The loop: `clients` dispatches of `turns` turns at once through the `openai:` backend.
async fn work(port: u16, clients: usize, turns: usize, root: &std::path::Path) -> Duration {
    let agent = Arc::new(agent(port, turns));
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..clients {
        let (agent, req) = (agent.clone(), request(root, i));
        set.spawn(async move {
            let reply = agent.invoke(&req, InvokeOptions { timeout: Duration::from_secs(600) }).await.unwrap();
            let raw: Value = serde_json::from_str(&reply.raw).unwrap();
            assert_eq!(raw["turns"], turns, "every turn ran");
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let turns: usize = env_or("WORK_BENCH_TOOLS_TURNS", 200);
    let fanout: usize = env_or("WORK_BENCH_TOOLS_FANOUT", 64);
    let fanout_turns: usize = env_or("WORK_BENCH_TOOLS_FANOUT_TURNS", 5);
    let delay = Duration::from_millis(env_or("WORK_BENCH_TOOLS_DELAY_MS", 200));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = repo();
    let root = dir.path();
    let run = |delay: Duration, clients: usize, turns: usize| {
        let (mut raws, mut works) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let port = rt.block_on(server(delay, turns));
            raws.push(rt.block_on(raw(port, clients, turns, root)));
            let port = rt.block_on(server(delay, turns));
            works.push(rt.block_on(work(port, clients, turns, root)));
        }
        (median(raws), median(works))
    };
    let (r, w) = run(Duration::ZERO, 1, turns);
    let per_turn = (w.as_secs_f64() - r.as_secs_f64()) / turns as f64 * 1000.0;
    println!(
        "per turn: 1 dispatch x {turns} turns, no model latency: raw {:.1} ms, work {:.1} ms, loop overhead {per_turn:.3} ms per turn (goal <= 1 ms: {})",
        r.as_secs_f64() * 1000.0,
        w.as_secs_f64() * 1000.0,
        if per_turn <= 1.0 { "met" } else { "MISSED" }
    );
    let (r, w) = run(delay, fanout, fanout_turns);
    let ratio = w.as_secs_f64() / r.as_secs_f64();
    println!(
        "fan-out: {fanout} dispatches x {fanout_turns} turns, {} ms per answer: raw {:.1} ms, work {:.1} ms, work/raw {ratio:.3} (goal <= 1.05: {}; ideal {} ms)",
        delay.as_millis(),
        r.as_secs_f64() * 1000.0,
        w.as_secs_f64() * 1000.0,
        if ratio <= 1.05 { "met" } else { "MISSED" },
        delay.as_millis() * fanout_turns as u128
    );
}
