//! `openai:MODEL`: an OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, llama.cpp's
//! `llama-server`, Ollama, llama-cpp-python's server).
//!
//! - Endpoint: `[agents.X].base_url`, else `OPENAI_BASE_URL`, else `https://api.openai.com/v1`;
//!   `POST {base}/chat/completions`.
//! - Key: the variable named by `api_key_env` (default `OPENAI_API_KEY`), sent as
//!   `Authorization: Bearer …` to whatever base URL is configured (as OpenAI's SDKs do).
//!   Required for OpenAI's own endpoint and whenever `api_key_env` is set; optional for other
//!   endpoints (local servers take none).
//! - Structured output: `response_format: {"type": "json_schema", "json_schema": {"name",
//!   "schema", "strict": true}}` with the schema in OpenAI's strict form
//!   ([`crate::schema::openai_strict`]; nulls for optional properties are dropped from the
//!   answer); a schema whose root is not an object goes as it is with `strict: false`. With
//!   `response_format = "json_object"`, `{"type": "json_object", "schema": …}` with the original
//!   schema, for servers that reject `json_schema` (llama-cpp-python answers 422).
//! - Cost: priced from `input_usd_per_mtok` / `output_usd_per_mtok`; without both, unknown
//!   ([`Agent::reports_cost`] is false).
//! - Model: the role's pin when it is concrete, else the spec's model (tier names such as
//!   `opus` mean nothing to these servers).
//! - Effort: `reasoning_effort` (`xhigh`/`max` sent as `high`) only for OpenAI reasoning models
//!   (`o1`, `o3`, `o4`, `gpt-5` families) or when `send_effort = true`.
//! - Classification: HTTP errors, timeouts and transport errors fail the dispatch; a body that
//!   is not a completion, a refusal, a truncated or filtered answer, or content that is not
//!   JSON is malformed.
//! - Tools: every request offers the role's tools as `tools` (functions); an answer with
//!   `tool_calls` is run by the engine's loop ([`crate::tools::turns`]) and answered with one
//!   `tool` message per call, until the model answers with content (at most `max_turns` turns).
//!   `tool_choice` is `auto` (llama-cpp-python's server offers no tools without it), and `none`
//!   on the last turn allowed, so that the model answers there.

use crate::http::{self, Post};
use crate::per_schema::PerSchema;
use crate::tools::Outcome;
use crate::tools::turns::{Call, Turn, Wire};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;
use work_config::AgentDef;
use work_runtime::budget::Usage;
use work_runtime::dispatch::{Access, Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};

/// OpenAI's own endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The default key variable.
pub const DEFAULT_KEY_VAR: &str = "OPENAI_API_KEY";

/// How the schema is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFormat {
    /// `{"type": "json_schema", "json_schema": {...}}` (the default).
    JsonSchema,
    /// `{"type": "json_object", "schema": ...}`.
    JsonObject,
}

/// The OpenAI-compatible backend.
#[derive(Debug, Clone)]
pub struct OpenAiAgent {
    model: String,
    base_url: String,
    key_var: String,
    key_required: bool,
    format: ResponseFormat,
    send_effort: Option<bool>,
    max_tokens: Option<u64>,
    prices: (Option<f64>, Option<f64>),
    /// The most model calls (turns) of one attempt.
    max_turns: u32,
    /// A key given directly (tests), instead of the environment.
    fixed_key: Option<Option<String>>,
    /// The one HTTP client every request of this backend goes through (connections reused).
    client: http::Client,
    /// The last schema sent, with its `response_format` and system message already written
    /// out: a workflow sends the same schema with every dispatch of a wave.
    format_memo: PerSchema<Format>,
}

/// What a request body carries for one schema, written out once ([`OpenAiAgent::format`]).
#[derive(Debug)]
struct Format {
    /// The `response_format` object, as JSON text.
    response_format: String,
    /// The system message's content, as a JSON string (quoted and escaped).
    system: String,
    /// True when the schema went in OpenAI's strict form.
    strict: bool,
}

/// True for OpenAI model families that take `reasoning_effort`.
pub fn is_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|p| m == *p || m.starts_with(&format!("{p}-")) || m.starts_with(&format!("{p}.")))
}

/// The `reasoning_effort` value for a role's effort.
pub fn effort_value(effort: &str) -> String {
    match effort.trim().to_ascii_lowercase().as_str() {
        "xhigh" | "max" => "high".into(),
        other => other.to_string(),
    }
}

/// True when `schema` is already in OpenAI's strict form
/// ([`crate::schema::openai_strict_violation`] finds nothing).
pub fn strict_compatible(schema: &Value) -> bool {
    crate::schema::openai_strict_violation(schema).is_none()
}

/// Writes `s` as a JSON string (quoted and escaped) at the end of `out`.
pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The instructions sent as the system message.
pub(crate) fn system_prompt(schema: Option<&Value>, include_schema: bool) -> String {
    let mut s = String::from(
        "You are an agent dispatched by `work`, working in a repository (the current directory). \
         Use the tools you are given to read the repository (and, when your role may, to change it and run \
         commands) before you answer: paths are relative to the repository root, and a tool your role may \
         not use is refused. When you are done, stop calling tools and answer with exactly one JSON document \
         and nothing else",
    );
    match schema {
        Some(schema) if include_schema => {
            s.push_str(" that validates against this JSON Schema:\n");
            s.push_str(&schema.to_string());
        }
        Some(_) => s.push_str(" that validates against the given JSON Schema."),
        None => s.push('.'),
    }
    s
}

/// The tool definitions (`tools`) for each access, written out once.
fn tool_definitions(access: Access) -> &'static str {
    static DEFS: std::sync::OnceLock<[String; 2]> = std::sync::OnceLock::new();
    let defs = DEFS.get_or_init(|| {
        [crate::tools::openai_definitions(Access::ReadOnly), crate::tools::openai_definitions(Access::WorkspaceWrite)]
    });
    match access {
        Access::ReadOnly => &defs[0],
        Access::WorkspaceWrite => &defs[1],
    }
}

impl OpenAiAgent {
    /// The backend for `openai:MODEL` with a named agent's settings.
    pub fn new(model: &str, def: &AgentDef) -> Result<Self, String> {
        let format = match def.response_format.as_deref().map(str::trim) {
            None | Some("json_schema") => ResponseFormat::JsonSchema,
            Some("json_object") => ResponseFormat::JsonObject,
            Some(other) => {
                return Err(format!("response_format `{other}` is not one of `json_schema`, `json_object`"));
            }
        };
        let env_base = std::env::var("OPENAI_BASE_URL").ok().filter(|b| !b.trim().is_empty());
        let base_url = def.base_url.clone().or(env_base).unwrap_or_else(|| DEFAULT_BASE_URL.into());
        http::check_base_url(&base_url)?;
        let key_required = def.api_key_env.is_some() || http::endpoint_of(&base_url) == "https://api.openai.com";
        Ok(Self {
            model: model.to_string(),
            key_var: def.api_key_env.clone().unwrap_or_else(|| DEFAULT_KEY_VAR.into()),
            key_required,
            base_url,
            format,
            send_effort: def.send_effort,
            max_tokens: def.max_tokens,
            prices: (def.input_usd_per_mtok, def.output_usd_per_mtok),
            max_turns: def.max_turns.unwrap_or(crate::tools::DEFAULT_MAX_TURNS),
            fixed_key: None,
            client: http::Client::new(),
            format_memo: PerSchema::default(),
        })
    }

    /// Uses `key` instead of reading the environment (tests).
    #[cfg(test)]
    pub(crate) fn with_fixed_key(mut self, key: Option<&str>) -> Self {
        self.fixed_key = Some(key.map(str::to_string));
        self
    }

    fn key(&self) -> Option<String> {
        match &self.fixed_key {
            Some(k) => k.clone(),
            None => std::env::var(&self.key_var).ok(),
        }
        .filter(|k| !k.trim().is_empty())
    }

    /// The `response_format` and system message for `schema`, remembered for the next
    /// dispatch with the same schema (the strict conversion and the writing out are done once).
    fn format(&self, schema: Option<&Value>) -> Arc<Format> {
        self.format_memo.get_or_make(schema, || {
            let include_schema = self.format == ResponseFormat::JsonObject;
            let (response_format, strict) = match (schema, self.format) {
                (Some(s), ResponseFormat::JsonSchema) => match crate::schema::openai_strict(s) {
                    Some(strict) => (
                        json!({"type": "json_schema", "json_schema": {
                            "name": "work_result", "schema": strict, "strict": true}}),
                        true,
                    ),
                    None => (
                        json!({"type": "json_schema", "json_schema": {
                            "name": "work_result", "schema": s, "strict": false}}),
                        false,
                    ),
                },
                (Some(s), ResponseFormat::JsonObject) => (json!({"type": "json_object", "schema": s}), false),
                (None, _) => (json!({"type": "json_object"}), false),
            };
            Format {
                response_format: response_format.to_string(),
                system: Value::String(system_prompt(schema, include_schema)).to_string(),
                strict,
            }
        })
    }

    /// The request body for one dispatch, as JSON text, and whether its schema went strict.
    /// Written straight out (no JSON tree is built): the same document [`Self::body`] reads back.
    pub fn body_bytes(&self, request: &DispatchRequest) -> (Vec<u8>, bool) {
        self.body_bytes_with(request, &[], false)
    }

    /// The request body of a later turn: the first one's messages followed by `history` (the
    /// assistant's tool calls and the tool results so far). `tool_choice` is `auto`, or `none`
    /// on the last turn `max_turns` allows (`last`), so that a model that follows it answers
    /// there instead of calling a tool it will never see the result of.
    pub fn body_bytes_with(&self, request: &DispatchRequest, history: &[Value], last: bool) -> (Vec<u8>, bool) {
        let model = crate::concrete_model(&request.model, Some(&self.model));
        let model = model.as_deref().unwrap_or(&self.model);
        let format = self.format(request.schema.as_ref());
        let brief = crate::brief(request);
        let mut out = Vec::with_capacity(brief.len() + format.response_format.len() + format.system.len() + 160);
        out.extend_from_slice(b"{\"model\":");
        put_str(&mut out, model);
        out.extend_from_slice(b",\"messages\":[{\"role\":\"system\",\"content\":");
        out.extend_from_slice(format.system.as_bytes());
        out.extend_from_slice(b"},{\"role\":\"user\",\"content\":");
        put_str(&mut out, &brief);
        out.push(b'}');
        for message in history {
            out.push(b',');
            let _ = serde_json::to_writer(&mut out, message);
        }
        out.extend_from_slice(b"],\"tools\":");
        out.extend_from_slice(tool_definitions(request.access).as_bytes());
        let choice: &[u8] = if last { b",\"tool_choice\":\"none\"" } else { b",\"tool_choice\":\"auto\"" };
        out.extend_from_slice(choice);
        out.extend_from_slice(b",\"response_format\":");
        out.extend_from_slice(format.response_format.as_bytes());
        let reasoning = is_reasoning_model(model);
        if let Some(n) = self.max_tokens {
            let key: &[u8] = if reasoning { b",\"max_completion_tokens\":" } else { b",\"max_tokens\":" };
            out.extend_from_slice(key);
            out.extend_from_slice(n.to_string().as_bytes());
        }
        if self.send_effort.unwrap_or(reasoning) && !request.effort.trim().is_empty() {
            out.extend_from_slice(b",\"reasoning_effort\":");
            put_str(&mut out, &effort_value(&request.effort));
        }
        out.push(b'}');
        (out, format.strict)
    }

    /// The request body for one dispatch, as a JSON document ([`Self::body_bytes`] read back).
    pub fn body(&self, request: &DispatchRequest) -> Value {
        serde_json::from_slice(&self.body_bytes(request).0).unwrap_or(Value::Null)
    }

    /// Reads a completion body into a reply or a malformed answer.
    pub fn parse(&self, raw: String) -> Result<AgentReply, AgentError> {
        let malformed = |reason: String, raw: String, usage: Usage| Err(AgentError::Malformed { reason, raw, usage });
        // Only the two fields read are built (a completion's other fields are skipped).
        let Ok(v) = serde_json::from_str::<Completion>(&raw) else {
            if serde_json::from_str::<serde::de::IgnoredAny>(&raw).is_ok() {
                return malformed("the response has no choices".into(), raw, Usage::default());
            }
            return malformed(
                format!("the response body is not JSON: {}", crate::head(&raw, 120)),
                raw,
                Usage::default(),
            );
        };
        let tokens = |k: &str| v.usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        let mut usage =
            Usage { input_tokens: tokens("prompt_tokens"), output_tokens: tokens("completion_tokens"), cost_usd: 0.0 };
        usage.cost_usd = crate::priced(&usage, self.prices.0, self.prices.1);
        let Some(choice) = v.choices.get(0) else {
            return malformed("the response has no choices".into(), raw, usage);
        };
        let message = choice.get("message").unwrap_or(&Value::Null);
        if let Some(refusal) = message.get("refusal").and_then(Value::as_str).filter(|r| !r.trim().is_empty()) {
            return malformed(format!("the model refused: {}", crate::head(refusal, 200)), raw, usage);
        }
        match choice.get("finish_reason").and_then(Value::as_str) {
            Some("length") => return malformed("the answer was cut at the token limit".into(), raw, usage),
            Some("content_filter") => {
                return malformed("the answer was withheld by a content filter".into(), raw, usage);
            }
            _ => {}
        }
        let content: std::borrow::Cow<'_, str> = match message.get("content") {
            Some(Value::String(s)) => s.as_str().into(),
            Some(Value::Array(parts)) => {
                parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<String>().into()
            }
            _ => "".into(),
        };
        if content.trim().is_empty() {
            return malformed("the answer is empty".into(), raw, usage);
        }
        match crate::json_from_text(&content) {
            Some(document) => Ok(AgentReply { document, usage, raw }),
            None => malformed(format!("the answer is not JSON: {}", crate::head(&content, 120)), raw, usage),
        }
    }
}

/// The parts of a completion body that are read.
#[derive(serde::Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Value,
    #[serde(default)]
    usage: Value,
}

#[async_trait]
impl Agent for OpenAiAgent {
    fn describe(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn reports_cost(&self) -> bool {
        crate::has_prices(self.prices)
    }

    fn preflight(&self) -> Result<(), String> {
        if self.key_required && self.key().is_none() {
            return Err(format!("{} is not set (the key for {})", self.key_var, http::endpoint_of(&self.base_url)));
        }
        Ok(())
    }

    async fn invoke(&self, request: &DispatchRequest, options: InvokeOptions) -> Result<AgentReply, AgentError> {
        if self.key_required && self.key().is_none() {
            return Err(AgentError::Failed {
                reason: format!("{} is not set", self.key_var),
                raw: String::new(),
                usage: Usage::default(),
            });
        }
        crate::tools::turns::run(self, request, options.timeout, self.max_turns).await
    }
}

impl Wire for OpenAiAgent {
    fn body(&self, request: &DispatchRequest, history: &[Value], last: bool) -> Vec<u8> {
        self.body_bytes_with(request, history, last).0
    }

    fn post(&self, _request: &DispatchRequest, body: Vec<u8>) -> Result<Post, AgentError> {
        let key = self.key();
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if let Some(k) = &key {
            headers.push(("authorization".into(), format!("Bearer {k}")));
        }
        Ok(Post {
            url: http::join(&self.base_url, "chat/completions"),
            headers,
            body,
            secret: key,
            key_var: Some(self.key_var.clone()),
        })
    }

    fn client(&self) -> &http::Client {
        &self.client
    }

    fn read(&self, request: &DispatchRequest, raw: String) -> Turn {
        if let Some((assistant, calls, usage)) = self.tool_calls(&raw) {
            return Turn::Calls { assistant, calls, usage };
        }
        let strict_sent = self.format(request.schema.as_ref()).strict;
        Turn::Done(self.parse(raw).map(|mut reply| {
            if let (true, Some(original)) = (strict_sent, &request.schema) {
                reply.document = crate::schema::drop_optional_nulls(original, reply.document);
            }
            reply
        }))
    }

    fn answers(&self, calls: &[Call], outcomes: &[Outcome]) -> Vec<Value> {
        calls
            .iter()
            .zip(outcomes)
            .map(|(c, o)| json!({"role": "tool", "tool_call_id": c.id, "content": o.text}))
            .collect()
    }
}

impl OpenAiAgent {
    /// The tool calls of a completion (the assistant message to send back, the calls, the
    /// turn's usage), or `None` when it asks for none (or was cut: then it is malformed).
    fn tool_calls(&self, raw: &str) -> Option<(Value, Vec<Call>, Usage)> {
        let v: Completion = serde_json::from_str(raw).ok()?;
        let choice = v.choices.get(0)?;
        if choice.get("finish_reason").and_then(Value::as_str) == Some("length") {
            return None;
        }
        let message = choice.get("message")?;
        let list = message.get("tool_calls")?.as_array().filter(|l| !l.is_empty())?;
        let calls: Vec<Call> = list
            .iter()
            .enumerate()
            .map(|(i, c)| Call {
                id: c.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{i}"), str::to_string),
                name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or("").to_string(),
                input: match c.pointer("/function/arguments") {
                    Some(Value::String(text)) => crate::tools::turns::arguments(text),
                    Some(other) => other.clone(),
                    None => json!({}),
                },
            })
            .collect();
        // The calls go back as they came, with the ids the tool messages answer.
        let echoed: Vec<Value> = list
            .iter()
            .zip(&calls)
            .map(|(c, call)| {
                let mut c = c.clone();
                c["id"] = Value::String(call.id.clone());
                c["type"] = Value::String("function".into());
                c
            })
            .collect();
        // A null content goes back as "" (OpenAI takes either; llama-cpp-python's server refuses
        // null, and its templates fail on a message without content).
        let content = message.get("content").filter(|c| !c.is_null()).cloned().unwrap_or_else(|| json!(""));
        let assistant = json!({"role": "assistant", "content": content, "tool_calls": echoed});
        let tokens = |k: &str| v.usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        let mut usage =
            Usage { input_tokens: tokens("prompt_tokens"), output_tokens: tokens("completion_tokens"), cost_usd: 0.0 };
        usage.cost_usd = crate::priced(&usage, self.prices.0, self.prices.1);
        Some((assistant, calls, usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testserver::{Reply, TestServer};
    use std::time::Duration;
    use work_runtime::dispatch::Access;

    const CANARY: &str = "sk-canary-1234567890";

    fn request(model: &str, effort: &str) -> DispatchRequest {
        let mut r = crate::test_request(Access::ReadOnly);
        r.dispatch_id = "d1".into();
        r.model = model.into();
        r.effort = effort.into();
        r.schema = Some(json!({"type": "object", "properties": {"items": {"type": "array"}},
                                "required": ["items"], "additionalProperties": false}));
        r.context = json!({});
        r
    }

    fn completion(content: &str) -> Value {
        json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
               "usage": {"prompt_tokens": 11, "completion_tokens": 7}})
    }

    fn agent(server: &TestServer, extra: impl FnOnce(&mut AgentDef)) -> OpenAiAgent {
        let mut def = AgentDef {
            base_url: Some(server.url()),
            api_key_env: Some("WORK_TEST_OPENAI_KEY".into()),
            input_usd_per_mtok: Some(1.0),
            output_usd_per_mtok: Some(2.0),
            ..Default::default()
        };
        extra(&mut def);
        OpenAiAgent::new("qwen-test", &def).expect("builds").with_fixed_key(Some(CANARY))
    }

    async fn invoke(a: &OpenAiAgent, req: &DispatchRequest, secs: u64) -> Result<AgentReply, AgentError> {
        a.invoke(req, InvokeOptions { timeout: Duration::from_secs(secs) }).await
    }

    fn reason(e: &AgentError) -> String {
        match e {
            AgentError::Failed { reason, raw, .. } | AgentError::Malformed { reason, raw, .. } => {
                assert!(!raw.contains(CANARY), "the key leaked into raw: {raw}");
                reason.clone()
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sequential_requests_reuse_one_connection() {
        let n = 8;
        let replies = (0..n).map(|i| Reply::json(200, completion(&format!(r#"{{"items": [{i}]}}"#)))).collect();
        let server = TestServer::start_keep_alive(replies);
        let a = agent(&server, |_| {});
        for i in 0..n {
            let reply = invoke(&a, &request("opus", "xhigh"), 10).await.expect("ok");
            assert_eq!(reply.document, json!({"items": [i]}));
        }
        assert_eq!(server.requests().len(), n);
        assert_eq!(server.connections(), 1, "{n} sequential requests over one kept-alive connection");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_waves_open_at_most_one_connection_per_slot() {
        let (slots, waves) = (4, 3);
        let replies = (0..slots * waves).map(|_| Reply::json(200, completion(r#"{"items": []}"#))).collect();
        let server = TestServer::start_keep_alive(replies);
        let a = agent(&server, |_| {});
        for _ in 0..waves {
            let mut wave = tokio::task::JoinSet::new();
            for _ in 0..slots {
                let a = a.clone();
                wave.spawn(async move { invoke(&a, &request("opus", "xhigh"), 10).await });
            }
            while let Some(r) = wave.join_next().await {
                assert_eq!(r.expect("joined").expect("ok").document, json!({"items": []}));
            }
        }
        assert_eq!(server.requests().len(), slots * waves);
        let opened = server.connections();
        assert!((1..=slots).contains(&opened), "{opened} connections for {waves} waves of {slots}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sends_the_schema_and_reads_the_answer() {
        let server = TestServer::start(vec![Reply::json(200, completion(r#"{"items": [1]}"#))]);
        let a = agent(&server, |_| {});
        let reply = invoke(&a, &request("opus", "xhigh"), 10).await.expect("ok");
        assert_eq!(reply.document, json!({"items": [1]}));
        assert_eq!((reply.usage.input_tokens, reply.usage.output_tokens), (11, 7));
        assert!((reply.usage.cost_usd - (11.0 + 14.0) / 1e6).abs() < 1e-12);
        let sent = &server.requests()[0];
        assert_eq!(sent.path, "/v1/chat/completions");
        let body = sent.json();
        assert_eq!(body["model"], "qwen-test", "a tier pin falls back to the spec's model");
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["strict"], true);
        assert_eq!(body["response_format"]["json_schema"]["schema"]["required"], json!(["items"]));
        assert!(body.get("reasoning_effort").is_none(), "not a reasoning model");
        assert_eq!(body["messages"][1]["content"], "find things");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sends_the_key_but_never_echoes_it() {
        let server = TestServer::start(vec![Reply::json(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {CANARY}")}}),
        )]);
        let a = agent(&server, |_| {});
        let e = invoke(&a, &request("gpt-x", "high"), 10).await.expect_err("refused");
        let r = reason(&e);
        assert!(matches!(e, AgentError::Failed { .. }));
        assert!(r.contains("HTTP 401") && r.contains("WORK_TEST_OPENAI_KEY"), "{r}");
        assert!(!r.contains(CANARY), "{r}");
        assert_eq!(server.requests()[0].header("authorization"), Some(format!("Bearer {CANARY}").as_str()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn client_errors_fail_at_once_with_the_server_message() {
        let server = TestServer::start(vec![Reply::json(
            422,
            json!({"detail": [{"msg": "response_format json_schema is not supported", "key": CANARY}]}),
        )]);
        let a = agent(&server, |_| {});
        let e = invoke(&a, &request("m", "high"), 10).await.expect_err("422");
        let r = reason(&e);
        assert!(matches!(e, AgentError::Failed { .. }) && r.contains("HTTP 422") && r.contains("json_schema"), "{r}");
        assert!(!r.contains(CANARY));
        assert_eq!(server.requests().len(), 1, "a 4xx is not retried");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn server_errors_are_retried_after_retry_after() {
        let server = TestServer::start(vec![
            Reply::json(503, json!({"error": {"message": "overloaded"}})).header("retry-after", "0"),
            Reply::json(429, json!({"error": {"message": "slow down"}})).header("retry-after", "0"),
            Reply::json(200, completion(r#"{"items": []}"#)),
        ]);
        let a = agent(&server, |_| {});
        let reply = invoke(&a, &request("m", "high"), 20).await.expect("third try answers");
        assert_eq!(reply.document, json!({"items": []}));
        assert_eq!(server.requests().len(), 3);

        let server = TestServer::start(vec![
            Reply::json(500, json!({"error": {"message": "boom"}})).header("retry-after", "0"),
            Reply::json(500, json!({"error": {"message": "boom"}})).header("retry-after", "0"),
            Reply::json(500, json!({"error": {"message": "boom"}})).header("retry-after", "0"),
        ]);
        let a = agent(&server, |_| {});
        let e = invoke(&a, &request("m", "high"), 20).await.expect_err("gives up");
        assert!(reason(&e).contains("HTTP 500 after 3 tries: boom"), "{}", reason(&e));

        // A Retry-After past the dispatch timeout is not waited for.
        let server = TestServer::start(vec![Reply::json(503, json!({})).header("retry-after", "3000")]);
        let a = agent(&server, |_| {});
        let e = invoke(&a, &request("m", "high"), 5).await.expect_err("no wait");
        assert!(reason(&e).contains("would pass the dispatch timeout"), "{}", reason(&e));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hanging_server_times_out_as_a_failure() {
        let server = TestServer::start(vec![Reply::json(200, completion("{}")).delayed(Duration::from_secs(8))]);
        let a = agent(&server, |_| {});
        let e = a
            .invoke(&request("m", "high"), InvokeOptions { timeout: Duration::from_millis(500) })
            .await
            .expect_err("times out");
        assert!(matches!(e, AgentError::Failed { .. }) && reason(&e).contains("timed out"), "{}", reason(&e));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unusable_answers_are_malformed() {
        let refusal = json!({"choices": [{"finish_reason": "stop",
            "message": {"content": null, "refusal": "I can't help with that."}}]});
        let cut = json!({"choices": [{"finish_reason": "length", "message": {"content": "{\"items\": ["}}]});
        let cases = [
            (Reply::text(200, "<html>gateway</html>"), "not JSON"),
            (Reply::json(200, json!({"object": "chat.completion"})), "no choices"),
            (Reply::json(200, refusal), "refused"),
            (Reply::json(200, cut), "token limit"),
            (Reply::json(200, completion("Sure! The items are 1 and 2.")), "answer is not JSON"),
            (Reply::json(200, completion("  ")), "empty"),
        ];
        for (reply, want) in cases {
            let server = TestServer::start(vec![reply]);
            let a = agent(&server, |_| {});
            let e = invoke(&a, &request("m", "high"), 10).await.expect_err("malformed");
            assert!(matches!(e, AgentError::Malformed { .. }) && reason(&e).contains(want), "{want}: {}", reason(&e));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn json_object_mode_and_reasoning_effort() {
        let server = TestServer::start(vec![Reply::json(200, completion("```json\n{\"items\": []}\n```"))]);
        let a = agent(&server, |d| {
            d.response_format = Some("json_object".into());
            d.max_tokens = Some(300);
        });
        invoke(&a, &request("sonnet", "high"), 10).await.expect("fenced JSON is read");
        let body = server.requests()[0].json();
        assert_eq!(body["response_format"]["type"], "json_object");
        assert_eq!(body["response_format"]["schema"]["required"], json!(["items"]));
        assert!(body["messages"][0]["content"].as_str().unwrap_or("").contains("\"items\""));
        assert_eq!(body["max_tokens"], 300);

        let server = TestServer::start(vec![Reply::json(200, completion("{}"))]);
        let a = agent(&server, |d| d.max_tokens = Some(50));
        invoke(&a, &request("gpt-5-mini", "xhigh"), 10).await.expect("ok");
        let body = server.requests()[0].json();
        assert_eq!((body["model"].as_str(), body["reasoning_effort"].as_str()), (Some("gpt-5-mini"), Some("high")));
        assert_eq!(body["max_completion_tokens"], 50);
        assert!(
            OpenAiAgent::new("m", &AgentDef { response_format: Some("xml".into()), ..Default::default() }).is_err()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn missing_key_and_unreachable_endpoint_are_one_line_reasons() {
        let def = AgentDef { base_url: Some("https://api.openai.com/v1".into()), ..Default::default() };
        let a = OpenAiAgent::new("gpt-5", &def).expect("builds").with_fixed_key(None);
        assert!(a.preflight().expect_err("no key").contains("OPENAI_API_KEY is not set"));
        // A local server needs no key.
        let def = AgentDef { base_url: Some("http://127.0.0.1:9/v1".into()), ..Default::default() };
        let a = OpenAiAgent::new("m", &def).expect("builds").with_fixed_key(None);
        assert!(a.preflight().is_ok());
        let e = invoke(&a, &request("m", "high"), 5).await.expect_err("nothing listens on port 9");
        assert!(matches!(e, AgentError::Failed { .. }) && !reason(&e).contains('\n'), "{}", reason(&e));
    }

    #[test]
    fn the_body_written_out_is_the_document_it_describes() {
        let def = |f: &dyn Fn(&mut AgentDef)| {
            let mut d = AgentDef { base_url: Some("http://127.0.0.1:9/v1".into()), ..Default::default() };
            f(&mut d);
            d
        };
        let mut req = request("gpt-5-mini", "xhigh");
        req.prompt = "find \"quoted\" things\n\twith ünïcode and \u{1}".into();
        req.context = json!({"angle": "a\"b"});
        let a = OpenAiAgent::new("m", &def(&|d| d.max_tokens = Some(50))).expect("builds");
        let tools: Value = serde_json::from_str(&crate::tools::openai_definitions(req.access)).expect("json");
        let strict = crate::schema::openai_strict(req.schema.as_ref().expect("a schema")).expect("convertible");
        let want = json!({"model": "gpt-5-mini", "messages": [
                {"role": "system", "content": system_prompt(req.schema.as_ref(), false)},
                {"role": "user", "content": crate::brief(&req)}],
            "tools": tools, "tool_choice": "auto",
            "response_format": {"type": "json_schema", "json_schema": {"name": "work_result", "schema": strict, "strict": true}},
            "max_completion_tokens": 50, "reasoning_effort": "high"});
        for _ in 0..2 {
            // The second time from the remembered format.
            let (bytes, strict_sent) = a.body_bytes(&req);
            assert_eq!(String::from_utf8(bytes).expect("utf-8"), want.to_string());
            assert!(strict_sent);
        }
        let a = OpenAiAgent::new("m", &def(&|d| d.response_format = Some("json_object".into()))).expect("builds");
        req.model = "opus".into();
        let want = json!({"model": "m", "messages": [
                {"role": "system", "content": system_prompt(req.schema.as_ref(), true)},
                {"role": "user", "content": crate::brief(&req)}],
            "tools": tools, "tool_choice": "auto",
            "response_format": {"type": "json_object", "schema": req.schema}});
        assert_eq!(a.body_bytes(&req), (want.to_string().into_bytes(), false));
        req.schema = None;
        let want = json!({"model": "m", "messages": [
                {"role": "system", "content": system_prompt(None, true)},
                {"role": "user", "content": crate::brief(&req)}],
            "tools": tools, "tool_choice": "auto",
            "response_format": {"type": "json_object"}});
        assert_eq!(a.body_bytes(&req), (want.to_string().into_bytes(), false), "no schema: not the remembered one");
        let last: Value = serde_json::from_slice(&a.body_bytes_with(&req, &[], true).0).expect("json");
        assert_eq!((&last["tool_choice"], &last["tools"]), (&json!("none"), &tools), "the last turn: answer now");
    }

    #[test]
    fn strictness_follows_the_schema() {
        assert!(strict_compatible(&json!({"type": "object", "properties": {"a": {"type": "string"}},
            "required": ["a"], "additionalProperties": false})));
        assert!(!strict_compatible(&json!({"type": "object", "properties": {"a": {}}, "required": []})));
        assert!(!strict_compatible(&json!({"type": "array", "items": {"type": "object", "properties": {"a": {}}}})));
        assert!(!strict_compatible(&json!({"type": "object", "required": ["items"]})), "no properties");
        assert!(is_reasoning_model("o3-mini") && is_reasoning_model("gpt-5") && !is_reasoning_model("gpt-4o"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn workflow_schemas_go_strict_and_optional_nulls_come_back_out() {
        let answer = json!({"angle": "a", "roundNotes": null, "items": [{"id": "x", "title": "t",
            "location": "a.rs:1", "description": null, "evidence": null, "severity": null}]});
        let server = TestServer::start(vec![Reply::json(200, completion(&answer.to_string()))]);
        let a = agent(&server, |_| {});
        let mut req = request("opus", "high");
        req.schema = Some(crate::schema::tests::finder());
        let reply = invoke(&a, &req, 10).await.expect("ok");
        assert_eq!(reply.document["items"][0], json!({"id": "x", "title": "t", "location": "a.rs:1"}));
        assert!(reply.document.get("roundNotes").is_none());
        let format = &server.requests()[0].json()["response_format"]["json_schema"];
        assert_eq!(format["strict"], true);
        assert_eq!(crate::schema::openai_strict_violation(&format["schema"]), None, "{:#}", format["schema"]);
        // A non-object root cannot be strict: it goes as it is.
        let a =
            OpenAiAgent::new("m", &AgentDef { base_url: Some("http://127.0.0.1:9/v1".into()), ..Default::default() })
                .expect("builds");
        req.schema = Some(json!({"type": "array"}));
        let body = a.body(&req);
        assert_eq!(body["response_format"]["json_schema"]["strict"], false);
        assert_eq!(body["response_format"]["json_schema"]["schema"], json!({"type": "array"}));
        assert!(!a.reports_cost(), "no prices, no cost");
    }
}
