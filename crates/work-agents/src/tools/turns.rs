//! The engine-side agent loop of the HTTP backends: send the conversation, run the tool calls
//! the model asks for (all the calls of one turn together), send their results back, until the
//! model answers without a tool call. That answer goes the backend's usual way (read as the
//! structured output, validated by the dispatcher, retried once, dropped).
//!
//! Bounded and accounted:
//! - at most `max_turns` model calls per attempt (`[agents.X].max_turns`, default
//!   [`super::DEFAULT_MAX_TURNS`]); a model still calling tools on the last one fails the
//!   attempt, saying so;
//! - the dispatch timeout covers every turn and every command together;
//! - each tool result is capped ([`super::RESULT_CAP`]);
//! - usage is summed over all turns (and charged when a later turn fails);
//! - the attempt's `raw` (its dispatch record) is the last response body when no tool ran, else
//!   `{"final": BODY, "turns": N, "transcript": [...], "refused": [...]}`: every call with its
//!   input and its result (cut at [`RECORD_RESULT_CAP`]); the record is redacted as any is;
//! - a call refused by the role's access is also logged as a note of the dispatch
//!   ([`work_runtime::dispatch::note`]), which the run shows.

use super::{Outcome, Workspace};
use crate::http::{self, Post};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use work_runtime::budget::Usage;
use work_runtime::dispatch::{AgentError, AgentReply, DispatchRequest};

/// The largest tool result kept in a dispatch record (bytes).
pub const RECORD_RESULT_CAP: usize = 4 * 1024;

/// One tool call a model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The API's id for the call, echoed with its result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments (`Null` when they were not JSON: the call then fails at the tool).
    pub input: Value,
}

/// What one response asks for.
#[derive(Debug)]
pub enum Turn {
    /// Tool calls: the assistant message to keep in the conversation, the calls, the turn's usage.
    Calls {
        /// The assistant's message, as the API wants it back.
        assistant: Value,
        /// The calls, in order.
        calls: Vec<Call>,
        /// What the turn cost.
        usage: Usage,
    },
    /// The final answer (or why there is none), read the backend's usual way.
    Done(Result<AgentReply, AgentError>),
}

/// One API's side of the loop.
pub(crate) trait Wire: Sync {
    /// The request body for `request` with the turns so far (`history`, after the brief);
    /// `last` on the last turn `max_turns` allows.
    fn body(&self, request: &DispatchRequest, history: &[Value], last: bool) -> Vec<u8>;
    /// The POST for a body (URL, headers, key), or why it cannot be made.
    fn post(&self, request: &DispatchRequest, body: Vec<u8>) -> Result<Post, AgentError>;
    /// The client every request goes through.
    fn client(&self) -> &http::Client;
    /// Reads a 2xx body.
    fn read(&self, request: &DispatchRequest, raw: String) -> Turn;
    /// The messages that answer `calls` with their outcomes.
    fn answers(&self, calls: &[Call], outcomes: &[Outcome]) -> Vec<Value>;
}

fn failed(reason: String, raw: String, usage: Usage) -> AgentError {
    AgentError::Failed { reason, raw, usage }
}

/// What the loop has seen so far, for the record.
#[derive(Default)]
struct Log {
    transcript: Vec<Value>,
    refused: Vec<String>,
}

impl Log {
    /// `raw` as the attempt's record: the body alone when no tool ran.
    fn raw(&self, last: String, turns: u32) -> String {
        if self.transcript.is_empty() {
            return last;
        }
        let final_body = serde_json::from_str::<Value>(&last).unwrap_or(Value::String(last));
        json!({"final": final_body, "turns": turns, "transcript": self.transcript, "refused": self.refused}).to_string()
    }
}

/// Adds the earlier turns' usage (and the transcript) to the final answer or error.
fn settle(
    result: Result<AgentReply, AgentError>,
    spent: &Usage,
    log: &Log,
    turns: u32,
) -> Result<AgentReply, AgentError> {
    match result {
        Ok(mut r) => {
            r.usage.add(spent);
            r.raw = log.raw(std::mem::take(&mut r.raw), turns);
            Ok(r)
        }
        Err(AgentError::Failed { reason, raw, mut usage }) => {
            usage.add(spent);
            Err(AgentError::Failed { reason, raw: log.raw(raw, turns), usage })
        }
        Err(AgentError::Malformed { reason, raw, mut usage }) => {
            usage.add(spent);
            Err(AgentError::Malformed { reason, raw: log.raw(raw, turns), usage })
        }
    }
}

/// Runs the loop for one attempt, within `timeout` and `max_turns`.
pub(crate) async fn run(
    wire: &impl Wire,
    request: &DispatchRequest,
    timeout: Duration,
    max_turns: u32,
) -> Result<AgentReply, AgentError> {
    let timeout = timeout.min(Duration::from_secs(work_config::MAX_TIMEOUT_SECS));
    let deadline = Instant::now() + timeout;
    let ws = Workspace::of(request);
    let max_turns = max_turns.max(1);
    let mut history: Vec<Value> = Vec::new();
    let mut spent = Usage::default();
    let mut log = Log::default();
    for turn in 1..=max_turns {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let why = format!("timed out after {:.1}s (turn {turn})", timeout.as_secs_f64());
            return settle(Err(failed(why, String::new(), Usage::default())), &spent, &log, turn - 1);
        }
        let post = wire.post(request, wire.body(request, &history, turn == max_turns))?;
        let raw = match http::post(wire.client(), post, left).await {
            Ok(raw) => raw,
            Err(f) => {
                let reason = if turn == 1 { f.reason } else { format!("turn {turn}: {}", f.reason) };
                return settle(Err(failed(reason, f.raw, Usage::default())), &spent, &log, turn);
            }
        };
        let (assistant, calls, usage) = match wire.read(request, raw) {
            Turn::Done(result) => return settle(result, &spent, &log, turn),
            Turn::Calls { assistant, calls, usage } => (assistant, calls, usage),
        };
        spent.add(&usage);
        if turn == max_turns {
            let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
            let why = format!(
                "the model was still calling tools ({}) at the turn cap: max_turns = {max_turns} reached without an answer",
                names.join(", ")
            );
            log.transcript.push(json!({"turn": turn, "calls": calls.iter().map(|c| json!({"id": c.id, "name": c.name,
                "input": c.input, "result": null})).collect::<Vec<_>>()}));
            return settle(Err(failed(why, String::new(), Usage::default())), &spent, &log, turn);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let outcomes: Vec<Outcome> =
            futures_util::future::join_all(calls.iter().map(|c| super::call(request, &ws, &c.name, &c.input, left)))
                .await;
        record(&mut log, turn, &calls, &outcomes);
        history.push(assistant);
        history.extend(wire.answers(&calls, &outcomes));
    }
    // The loop returns on its last turn; this is never reached.
    Err(failed(format!("max_turns = {max_turns} reached without an answer"), String::new(), spent))
}

/// Records one turn's calls and results; a refusal becomes a note of the dispatch too.
fn record(log: &mut Log, turn: u32, calls: &[Call], outcomes: &[Outcome]) {
    let mut entries = Vec::with_capacity(calls.len());
    for (c, o) in calls.iter().zip(outcomes) {
        if let Some(why) = &o.refused {
            log.refused.push(why.clone());
            work_runtime::dispatch::note(format!("tool call {why}"));
        }
        entries.push(json!({"id": c.id, "name": c.name, "input": c.input, "error": o.is_error,
            "refused": o.refused.is_some(), "result": super::cut(o.text.clone(), RECORD_RESULT_CAP)}));
    }
    log.transcript.push(json!({"turn": turn, "calls": entries}));
}

/// A call's arguments from a JSON text (Chat Completions sends them as a string); `Null` when
/// they are not JSON.
pub(crate) fn arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(text).unwrap_or(Value::Null)
}
