//! A scripted model server on loopback, for running the real agent CLIs in tests.
//!
//! It speaks the three wire formats the agents use — the Anthropic Messages API
//! (`POST /v1/messages`, streaming SSE, as Claude Code calls it), the OpenAI Responses API
//! (`POST /v1/responses`, SSE from `response.created` to `response.completed` with usage, as
//! Codex calls it) and Chat Completions (`POST /v1/chat/completions`) — and answers from a
//! [`Script`]: per-role [`Rule`]s chosen by the brief, whose step is derived from the request
//! alone (the number of tool results already in the conversation), so that any number of
//! clients and retries can run at once. Steps include tool calls the CLI executes (commands,
//! writes, edits), the final answer (a `StructuredOutput` tool call for Claude Code), and
//! faults: HTTP errors, hangs, streams cut half-way. Every request is recorded for assertions.
//!
//! Like the real APIs, it refuses (400) a tool `input_schema` with a root `anyOf`/`oneOf`/
//! `allOf` or a non-object root (Messages), and a strict `text.format` schema whose objects are
//! not closed or do not require every property (Responses).
//!
//! The server binds 127.0.0.1 only and stops when the [`ModelServer`] is dropped.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

mod anthropic;
pub mod hosted;
mod http;
mod openai;
pub mod script;

pub use script::{LAST_TOOL_OUTPUT, Rule, Script, Step, ToolCall};

use serde_json::Value;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which API a request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/messages`.
    Messages,
    /// `/v1/responses`.
    Responses,
    /// `/v1/chat/completions`.
    Chat,
    /// Anything else (answered 404).
    Other,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Which API.
    pub api: Api,
    /// Method.
    pub method: String,
    /// Path with query.
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body (`Null` when not JSON).
    pub body: Value,
    /// The user's text (the brief and what followed).
    pub brief: String,
    /// Tool results already in the conversation.
    pub tool_results: usize,
    /// The rule that matched.
    pub rule: Option<usize>,
    /// The step played.
    pub step: Option<Step>,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

struct Shared {
    script: Mutex<Script>,
    requests: Mutex<Vec<Recorded>>,
    stop: AtomicBool,
}

/// A running server; stops when dropped.
pub struct ModelServer {
    port: u16,
    shared: Arc<Shared>,
}

impl ModelServer {
    /// Starts a server on 127.0.0.1 (a free port) playing `script`.
    pub fn start(script: Script) -> std::io::Result<Self> {
        Self::start_on(0, script)
    }

    /// Starts a server on 127.0.0.1:`port` (0: any free port).
    pub fn start_on(port: u16, script: Script) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        std::thread::spawn(move || accept_loop(listener, s));
        Ok(Self { port, shared })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT` (Claude Code's `ANTHROPIC_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT/v1` (an OpenAI-style `base_url`).
    pub fn v1_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// Replaces the script (for the requests that follow).
    pub fn set_script(&self, script: Script) {
        if let Ok(mut s) = self.shared.script.lock() {
            *s = script;
        }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The model-API requests whose rule is `rule`.
    pub fn requests_for(&self, rule: usize) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.rule == Some(rule)).collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let s = shared.clone();
                std::thread::spawn(move || serve(stream, &s));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn api_of(path: &str) -> Api {
    let p = path.split('?').next().unwrap_or("");
    if p.ends_with("/messages") {
        Api::Messages
    } else if p.ends_with("/responses") {
        Api::Responses
    } else if p.ends_with("/chat/completions") {
        Api::Chat
    } else {
        Api::Other
    }
}

fn serve(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nonblocking(false);
    let Some(req) = http::read_request(&stream) else { return };
    let api = api_of(&req.path);
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let (brief, tool_results, extra) = match api {
        Api::Messages => (anthropic::brief(&body), anthropic::tool_results(&body), anthropic::extra_calls(&body)),
        Api::Responses => (openai::responses_brief(&body), openai::responses_tool_results(&body), 0),
        Api::Chat => (openai::chat_brief(&body), openai::chat_tool_results(&body), openai::chat_extra_calls(&body)),
        Api::Other => (String::new(), 0, 0),
    };
    // The step: the tool results so far, one per turn (a turn's parallel calls count once).
    let (script_usage, (rule, step)) = match shared.script.lock() {
        Ok(s) => ((s.input_tokens, s.output_tokens), s.pick(&brief, tool_results.saturating_sub(extra))),
        Err(_) => ((0, 0), (None, None)),
    };
    let played = match step.clone() {
        Some(Step::Answer(doc)) if doc.to_string().contains(script::LAST_TOOL_OUTPUT) => {
            let last = hosted::tool_outputs(api, &body).pop().unwrap_or_default();
            Step::Answer(script::quote_tool_output(&doc, last.trim()))
        }
        Some(s) => s,
        None => Step::Text("done".into()),
    };
    if let Ok(mut r) = shared.requests.lock() {
        r.push(Recorded {
            api,
            method: req.method.clone(),
            path: req.path.clone(),
            headers: req.headers.clone(),
            body: body.clone(),
            brief,
            tool_results,
            rule,
            step: step.clone(),
        });
    }
    if api == Api::Other {
        let body = openai::error_body("not_found", &format!("no such endpoint: {} {}", req.method, req.path));
        return http::respond(&mut stream, 404, "application/json", &body);
    }
    let refused = match api {
        Api::Messages => anthropic::refusal(&body).map(|m| anthropic::error_body("invalid_request_error", &m)),
        Api::Responses => openai::refusal(&body).map(|m| openai::error_body("invalid_request_error", &m)),
        _ => None,
    };
    if let Some(body) = refused {
        return http::respond(&mut stream, 400, "application/json", &body);
    }
    match &played {
        Step::Error { status, body: text } => {
            let body = if serde_json::from_str::<Value>(text).is_ok() {
                text.clone()
            } else if api == Api::Messages {
                anthropic::error_body("api_error", text)
            } else {
                openai::error_body("server_error", text)
            };
            http::respond(&mut stream, *status, "application/json", &body)
        }
        Step::Hang => hang(&mut stream, shared),
        _ => {
            let cut = played == Step::Cut;
            match api {
                Api::Messages => anthropic::answer(&mut stream, &body, &played, script_usage, cut),
                Api::Responses => openai::answer_responses(&mut stream, &body, &played, script_usage, cut),
                Api::Chat => openai::answer_chat(&mut stream, &body, &played, script_usage, cut),
                Api::Other => {}
            }
        }
    }
}

/// Holds the connection open without answering until the client closes it or the server
/// stops.
fn hang(stream: &mut TcpStream, shared: &Shared) {
    use std::io::Read;
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 256];
    while !shared.stop.load(Ordering::SeqCst) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}
