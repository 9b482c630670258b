//! `anthropic:MODEL`: the Anthropic Messages API.
//!
//! - Endpoint: `[agents.X].base_url`, else `ANTHROPIC_BASE_URL`, else `https://api.anthropic.com`;
//!   `POST {base}/v1/messages` with `anthropic-version: 2023-06-01`.
//! - Key: the variable named by `api_key_env` (default `ANTHROPIC_API_KEY`), sent as `x-api-key`;
//!   always required.
//! - Structured output (`structured_output`): `output_config` (default: native structured
//!   output, `output_config.format = {"type": "json_schema", "schema": …}`), `output_format`
//!   (the earlier beta parameter with its `anthropic-beta` header), or `tool` (one tool whose
//!   `input_schema` is the schema, forced with `tool_choice`). Native structured output (both
//!   `output_config` and `output_format`) gets the schema in the form it accepts
//!   ([`crate::schema::anthropic`]): every object closed, and the keywords it answers with a 400
//!   (`minLength`, `maxLength`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
//!   `multipleOf`, `pattern`, `minItems` above 1, `maxItems`, unsupported `format`s, …) moved
//!   into descriptions, as Anthropic's SDKs do; the engine still validates the answer against
//!   the full schema. Forced tool use sends the schema as it is (`input_schema` is not strict).
//! - Model: the role's pin when concrete, else the spec's model. `max_tokens` is required by the
//!   API: `[agents.X].max_tokens`, default [`DEFAULT_MAX_TOKENS`].
//! - Effort: `output_config.effort` only with `send_effort = true` (not every model takes it).
//! - Classification as for `openai:`; a `refusal` or `max_tokens` stop reason is malformed.
//! - Cost: priced from `input_usd_per_mtok` / `output_usd_per_mtok`; without both, unknown
//!   ([`Agent::reports_cost`] is false).
//! - Tools: every request offers the role's tools (`tools`); an answer with `tool_use` blocks
//!   is run by the engine's loop ([`crate::tools::turns`]) and answered with one user message of
//!   `tool_result` blocks, until the model answers without a tool call (at most `max_turns`
//!   turns). In `tool` mode `work_result` is offered beside them and `tool_choice` is `any`:
//!   a call of `work_result` is the answer. The last turn allowed sends `tool_choice` `none`
//!   (in `tool` mode: the `work_result` tool), so that the model answers there.

use crate::http::{self, Post};
use crate::openai::put_str;
use crate::per_schema::PerSchema;
use crate::tools::Outcome;
use crate::tools::turns::{Call, Turn, Wire};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;
use work_config::AgentDef;
use work_runtime::budget::Usage;
use work_runtime::dispatch::{Access, Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};

/// The API's own endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The default key variable.
pub const DEFAULT_KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The API version header sent.
pub const API_VERSION: &str = "2023-06-01";
/// The beta header for the legacy `output_format` parameter.
pub const STRUCTURED_OUTPUTS_BETA: &str = "structured-outputs-2025-11-13";
/// `max_tokens` when the agent sets none.
pub const DEFAULT_MAX_TOKENS: u64 = 16_000;
/// The forced tool's name in `tool` mode.
pub const TOOL_NAME: &str = "work_result";

/// How the schema is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructuredOutput {
    /// `output_config.format` (default).
    OutputConfig,
    /// The beta `output_format` parameter.
    OutputFormat,
    /// Forced tool use.
    Tool,
}

/// The Anthropic Messages backend.
#[derive(Debug, Clone)]
pub struct AnthropicAgent {
    model: String,
    base_url: String,
    key_var: String,
    mode: StructuredOutput,
    send_effort: bool,
    max_tokens: u64,
    prices: (Option<f64>, Option<f64>),
    /// The most model calls (turns) of one attempt.
    max_turns: u32,
    fixed_key: Option<Option<String>>,
    /// The one HTTP client every request of this backend goes through (connections reused).
    client: http::Client,
    /// The last schema's [`Prepared`] parts (a wave's dispatches share one schema).
    prepared_memo: PerSchema<Prepared>,
}

/// The `tool_choice` of tool mode's turns: some tool (the engine's or `work_result`) is called.
const ANY_TOOL: &str = ",\"tool_choice\":{\"type\":\"any\"}";

/// What a request body carries for one schema, written out once ([`AnthropicAgent::prepared`]).
#[derive(Debug)]
struct Prepared {
    /// The system prompt, as a JSON string (quoted and escaped).
    system: String,
    /// The structured-output object (`{"type":"json_schema",…}`) in the two native modes, as
    /// JSON text; `None` without a schema or in tool mode.
    format: Option<String>,
    /// `,"tools":[…]` (and `,"tool_choice":{"type":"any"}` in tool mode) for a read-only and
    /// for a write role.
    tools: [String; 2],
}

/// The schema sent for native structured output ([`crate::schema::anthropic`]).
pub fn closed_objects(schema: &Value) -> Value {
    crate::schema::anthropic(schema)
}

impl AnthropicAgent {
    /// The backend for `anthropic:MODEL` with a named agent's settings.
    pub fn new(model: &str, def: &AgentDef) -> Result<Self, String> {
        let mode = match def.structured_output.as_deref().map(str::trim) {
            None | Some("output_config") => StructuredOutput::OutputConfig,
            Some("output_format") => StructuredOutput::OutputFormat,
            Some("tool") => StructuredOutput::Tool,
            Some(other) => {
                return Err(format!(
                    "structured_output `{other}` is not one of `output_config`, `output_format`, `tool`"
                ));
            }
        };
        let env_base = std::env::var("ANTHROPIC_BASE_URL").ok().filter(|b| !b.trim().is_empty());
        let base_url = def.base_url.clone().or(env_base).unwrap_or_else(|| DEFAULT_BASE_URL.into());
        http::check_base_url(&base_url)?;
        Ok(Self {
            model: model.to_string(),
            base_url,
            key_var: def.api_key_env.clone().unwrap_or_else(|| DEFAULT_KEY_VAR.into()),
            mode,
            send_effort: def.send_effort.unwrap_or(false),
            max_tokens: match def.max_tokens {
                Some(0) => return Err("max_tokens must be at least 1".into()),
                Some(n) => n,
                None => DEFAULT_MAX_TOKENS,
            },
            prices: (def.input_usd_per_mtok, def.output_usd_per_mtok),
            max_turns: def.max_turns.unwrap_or(crate::tools::DEFAULT_MAX_TURNS),
            fixed_key: None,
            client: http::Client::new(),
            prepared_memo: PerSchema::default(),
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

    /// The system prompt and the schema's part of a body for `schema`, remembered for the next
    /// dispatch with the same schema (the conversion and the writing out are done once).
    fn prepared(&self, schema: Option<&Value>) -> Arc<Prepared> {
        self.prepared_memo.get_or_make(schema, || {
            let format = schema
                .filter(|_| self.mode != StructuredOutput::Tool)
                .map(|s| json!({"type": "json_schema", "schema": closed_objects(s)}).to_string());
            let tools = [Access::ReadOnly, Access::WorkspaceWrite].map(|access| {
                let mut defs = crate::tools::anthropic_definitions(access);
                match schema.filter(|_| self.mode == StructuredOutput::Tool) {
                    Some(s) => {
                        defs.push(json!({"name": TOOL_NAME,
                            "description": "Record your answer. Call this exactly once, alone, with the complete answer, when you are done.",
                            "input_schema": crate::schema::tool_input(s)}));
                        format!(",\"tools\":{}{ANY_TOOL}", Value::Array(defs))
                    }
                    None => format!(",\"tools\":{}", Value::Array(defs)),
                }
            });
            let system = Value::String(crate::openai::system_prompt(schema, false)).to_string();
            Prepared { system, format, tools }
        })
    }

    /// The request body for one dispatch, as JSON text. Written straight out (no JSON tree is
    /// built): the same document [`Self::body`] reads back.
    pub fn body_bytes(&self, request: &DispatchRequest) -> Vec<u8> {
        self.body_bytes_with(request, &[], false)
    }

    /// The request body of a later turn: the brief followed by `history` (the assistant's tool
    /// calls and the tool results so far). On the last turn `max_turns` allows (`last`), the
    /// model is told to answer: `tool_choice` `none`, or in tool mode the `work_result` tool.
    pub fn body_bytes_with(&self, request: &DispatchRequest, history: &[Value], last: bool) -> Vec<u8> {
        let model = crate::concrete_model(&request.model, Some(&self.model));
        let model = model.as_deref().unwrap_or(&self.model);
        let prepared = self.prepared(request.schema.as_ref());
        let brief = crate::brief(request);
        let tools = &prepared.tools[usize::from(request.access == Access::WorkspaceWrite)];
        let format = prepared.format.as_deref();
        let mut out =
            Vec::with_capacity(brief.len() + prepared.system.len() + format.map_or(0, str::len) + tools.len() + 200);
        out.extend_from_slice(b"{\"model\":");
        put_str(&mut out, model);
        out.extend_from_slice(b",\"max_tokens\":");
        out.extend_from_slice(self.max_tokens.to_string().as_bytes());
        out.extend_from_slice(b",\"system\":");
        out.extend_from_slice(prepared.system.as_bytes());
        out.extend_from_slice(b",\"messages\":[{\"role\":\"user\",\"content\":");
        put_str(&mut out, &brief);
        out.push(b'}');
        for message in history {
            out.push(b',');
            let _ = serde_json::to_writer(&mut out, message);
        }
        out.push(b']');
        match (last, tools.strip_suffix(ANY_TOOL)) {
            (false, _) => out.extend_from_slice(tools.as_bytes()),
            (true, Some(offered)) => {
                out.extend_from_slice(offered.as_bytes());
                out.extend_from_slice(b",\"tool_choice\":{\"type\":\"tool\",\"name\":\"");
                out.extend_from_slice(TOOL_NAME.as_bytes());
                out.extend_from_slice(b"\"}");
            }
            (true, None) => {
                out.extend_from_slice(tools.as_bytes());
                out.extend_from_slice(b",\"tool_choice\":{\"type\":\"none\"}");
            }
        }
        let mut config_format = None;
        if let Some(part) = format {
            match self.mode {
                StructuredOutput::OutputConfig => config_format = Some(part),
                StructuredOutput::OutputFormat => {
                    out.extend_from_slice(b",\"output_format\":");
                    out.extend_from_slice(part.as_bytes());
                }
                StructuredOutput::Tool => {}
            }
        }
        let effort = Some(request.effort.trim()).filter(|e| self.send_effort && !e.is_empty());
        if config_format.is_some() || effort.is_some() {
            out.extend_from_slice(b",\"output_config\":{");
            if let Some(format) = config_format {
                out.extend_from_slice(b"\"format\":");
                out.extend_from_slice(format.as_bytes());
            }
            if let Some(effort) = effort {
                if config_format.is_some() {
                    out.push(b',');
                }
                out.extend_from_slice(b"\"effort\":");
                put_str(&mut out, &effort.to_ascii_lowercase());
            }
            out.push(b'}');
        }
        out.push(b'}');
        out
    }

    /// The request body for one dispatch, as a JSON document ([`Self::body_bytes`] read back).
    pub fn body(&self, request: &DispatchRequest) -> Value {
        serde_json::from_slice(&self.body_bytes(request)).unwrap_or(Value::Null)
    }

    /// Reads a Messages response into a reply or a malformed answer.
    pub fn parse(&self, raw: String, with_schema: bool) -> Result<AgentReply, AgentError> {
        let malformed = |reason: String, raw: String, usage: Usage| Err(AgentError::Malformed { reason, raw, usage });
        let Ok(v) = serde_json::from_str::<Value>(&raw) else {
            return malformed(
                format!("the response body is not JSON: {}", crate::head(&raw, 120)),
                raw,
                Usage::default(),
            );
        };
        let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        let mut usage = Usage {
            input_tokens: n("/usage/input_tokens")
                + n("/usage/cache_creation_input_tokens")
                + n("/usage/cache_read_input_tokens"),
            output_tokens: n("/usage/output_tokens"),
            cost_usd: 0.0,
        };
        usage.cost_usd = crate::priced(&usage, self.prices.0, self.prices.1);
        let Some(blocks) = v.get("content").and_then(Value::as_array) else {
            return malformed("the response has no content".into(), raw, usage);
        };
        let text: String = blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("");
        match v.get("stop_reason").and_then(Value::as_str) {
            Some("refusal") => {
                return malformed(format!("the model refused: {}", crate::head(&text, 200)), raw, usage);
            }
            Some("max_tokens") => return malformed("the answer was cut at max_tokens".into(), raw, usage),
            _ => {}
        }
        if with_schema && self.mode == StructuredOutput::Tool {
            let input =
                blocks.iter().find(|b| b["type"] == "tool_use" && b["name"] == TOOL_NAME).map(|b| b["input"].clone());
            return match input {
                Some(document) if !document.is_null() => Ok(AgentReply { document, usage, raw }),
                _ => malformed(format!("the model did not call `{TOOL_NAME}`"), raw, usage),
            };
        }
        if text.trim().is_empty() {
            return malformed("the answer is empty".into(), raw, usage);
        }
        match crate::json_from_text(&text) {
            Some(document) => Ok(AgentReply { document, usage, raw }),
            None => malformed(format!("the answer is not JSON: {}", crate::head(&text, 120)), raw, usage),
        }
    }
}

#[async_trait]
impl Agent for AnthropicAgent {
    fn describe(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    fn reports_cost(&self) -> bool {
        crate::has_prices(self.prices)
    }

    fn preflight(&self) -> Result<(), String> {
        match self.key() {
            Some(_) => Ok(()),
            None => Err(format!("{} is not set", self.key_var)),
        }
    }

    async fn invoke(&self, request: &DispatchRequest, options: InvokeOptions) -> Result<AgentReply, AgentError> {
        // The key is read again for each turn's request ([`Wire::post`]).
        crate::tools::turns::run(self, request, options.timeout, self.max_turns).await
    }
}

impl Wire for AnthropicAgent {
    fn body(&self, request: &DispatchRequest, history: &[Value], last: bool) -> Vec<u8> {
        self.body_bytes_with(request, history, last)
    }

    fn post(&self, request: &DispatchRequest, body: Vec<u8>) -> Result<Post, AgentError> {
        let Some(key) = self.key() else {
            return Err(AgentError::Failed {
                reason: format!("{} is not set", self.key_var),
                raw: String::new(),
                usage: Usage::default(),
            });
        };
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("anthropic-version".to_string(), API_VERSION.to_string()),
            ("x-api-key".to_string(), key.clone()),
        ];
        if self.mode == StructuredOutput::OutputFormat && request.schema.is_some() {
            headers.push(("anthropic-beta".into(), STRUCTURED_OUTPUTS_BETA.into()));
        }
        Ok(Post {
            url: http::join(&self.base_url, "v1/messages"),
            headers,
            body,
            secret: Some(key),
            key_var: Some(self.key_var.clone()),
        })
    }

    fn client(&self) -> &http::Client {
        &self.client
    }

    fn read(&self, request: &DispatchRequest, raw: String) -> Turn {
        if let Some((assistant, calls, usage)) = self.tool_calls(&raw, request.schema.is_some()) {
            return Turn::Calls { assistant, calls, usage };
        }
        Turn::Done(self.parse(raw, request.schema.is_some()))
    }

    fn answers(&self, calls: &[Call], outcomes: &[Outcome]) -> Vec<Value> {
        let results: Vec<Value> = calls
            .iter()
            .zip(outcomes)
            .map(
                |(c, o)| json!({"type": "tool_result", "tool_use_id": c.id, "content": o.text, "is_error": o.is_error}),
            )
            .collect();
        vec![json!({"role": "user", "content": results})]
    }
}

impl AnthropicAgent {
    /// The tool calls of a response (the assistant message to send back, the calls, the turn's
    /// usage), or `None` when it asks for none, was cut, or (in tool mode) calls `work_result`.
    fn tool_calls(&self, raw: &str, with_schema: bool) -> Option<(Value, Vec<Call>, Usage)> {
        let v: Value = serde_json::from_str(raw).ok()?;
        if matches!(v.get("stop_reason").and_then(Value::as_str), Some("max_tokens" | "refusal")) {
            return None;
        }
        let blocks = v.get("content")?.as_array()?;
        let uses: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
        let answering =
            with_schema && self.mode == StructuredOutput::Tool && uses.iter().any(|b| b["name"] == TOOL_NAME);
        if uses.is_empty() || answering {
            return None;
        }
        let calls = uses
            .iter()
            .enumerate()
            .map(|(i, b)| Call {
                id: b["id"].as_str().map_or_else(|| format!("toolu_{i}"), str::to_string),
                name: b["name"].as_str().unwrap_or("").to_string(),
                input: b.get("input").cloned().unwrap_or(json!({})),
            })
            .collect();
        let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        let mut usage = Usage {
            input_tokens: n("/usage/input_tokens")
                + n("/usage/cache_creation_input_tokens")
                + n("/usage/cache_read_input_tokens"),
            output_tokens: n("/usage/output_tokens"),
            cost_usd: 0.0,
        };
        usage.cost_usd = crate::priced(&usage, self.prices.0, self.prices.1);
        Some((json!({"role": "assistant", "content": blocks}), calls, usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testserver::{Reply, TestServer};
    use std::time::Duration;
    use work_runtime::dispatch::Access;

    const CANARY: &str = "sk-ant-canary-1234567890";

    fn request(model: &str, effort: &str) -> DispatchRequest {
        let mut r = crate::test_request(Access::ReadOnly);
        r.dispatch_id = "d1".into();
        r.model = model.into();
        r.effort = effort.into();
        r.schema = Some(json!({"type": "object", "properties": {"items": {"type": "array",
                "items": {"type": "object", "properties": {"t": {"type": "string"}}}}}, "required": ["items"]}));
        r.context = json!({});
        r
    }

    fn message(blocks: Value, stop: &str) -> Value {
        json!({"type": "message", "role": "assistant", "content": blocks, "stop_reason": stop,
               "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 4}})
    }

    fn agent(server: &TestServer, extra: impl FnOnce(&mut AgentDef)) -> AnthropicAgent {
        let mut def =
            AgentDef { base_url: Some(server.url().trim_end_matches("/v1").to_string()), ..Default::default() };
        extra(&mut def);
        AnthropicAgent::new("claude-sonnet-4-5", &def).expect("builds").with_fixed_key(Some(CANARY))
    }

    fn reason(e: &AgentError) -> String {
        match e {
            AgentError::Failed { reason, raw, .. } | AgentError::Malformed { reason, raw, .. } => {
                assert!(!raw.contains(CANARY) && !reason.contains(CANARY), "the key leaked: {reason} {raw}");
                reason.clone()
            }
        }
    }

    async fn invoke(a: &AnthropicAgent, req: &DispatchRequest) -> Result<AgentReply, AgentError> {
        a.invoke(req, InvokeOptions { timeout: Duration::from_secs(10) }).await
    }

    /// The body as a JSON tree, built the way the backend built it before it wrote bytes: the
    /// oracle the bytes are held to.
    fn tree_body(a: &AnthropicAgent, request: &DispatchRequest) -> Value {
        let model = crate::concrete_model(&request.model, Some(&a.model)).unwrap_or_else(|| a.model.clone());
        let mut body = json!({
            "model": model,
            "max_tokens": a.max_tokens,
            "system": crate::openai::system_prompt(request.schema.as_ref(), false),
            "messages": [{"role": "user", "content": crate::brief(request)}],
            "tools": crate::tools::anthropic_definitions(request.access),
        });
        let mut output_config = serde_json::Map::new();
        if let Some(s) = &request.schema {
            let format = json!({"type": "json_schema", "schema": closed_objects(s)});
            match a.mode {
                StructuredOutput::OutputConfig => {
                    output_config.insert("format".into(), format);
                }
                StructuredOutput::OutputFormat => body["output_format"] = format,
                StructuredOutput::Tool => {
                    if let Some(tools) = body["tools"].as_array_mut() {
                        tools.push(json!({"name": TOOL_NAME,
                            "description": "Record your answer. Call this exactly once, alone, with the complete answer, when you are done.",
                            "input_schema": crate::schema::tool_input(s)}));
                    }
                    body["tool_choice"] = json!({"type": "any"});
                }
            }
        }
        if a.send_effort && !request.effort.trim().is_empty() {
            output_config.insert("effort".into(), json!(request.effort.trim().to_ascii_lowercase()));
        }
        if !output_config.is_empty() {
            body["output_config"] = Value::Object(output_config);
        }
        body
    }

    #[test]
    fn the_body_is_written_byte_for_byte_as_its_json_tree() {
        let mut req = request("opus", " XHigh ");
        req.prompt = "find \"quoted\" things\n\twith ünïcode and \u{1}".into();
        req.context = json!({"angle": "a\"b"});
        for mode in ["output_config", "output_format", "tool"] {
            for send_effort in [false, true] {
                let def = AgentDef {
                    base_url: Some("http://127.0.0.1:9".into()),
                    structured_output: Some(mode.into()),
                    send_effort: Some(send_effort),
                    max_tokens: Some(77),
                    ..Default::default()
                };
                let a = AnthropicAgent::new("claude-x", &def).expect("builds");
                for schema in [req.schema.clone(), None, req.schema.clone()] {
                    // With, without, and with again (from the remembered parts).
                    let mut r = req.clone();
                    r.schema = schema;
                    for effort in [" XHigh ", ""] {
                        r.effort = effort.into();
                        let bytes = String::from_utf8(a.body_bytes(&r)).expect("utf-8");
                        assert_eq!(bytes, tree_body(&a, &r).to_string(), "{mode} effort {send_effort} {effort:?}");
                    }
                }
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sequential_requests_reuse_one_connection() {
        let n = 6;
        let answer = || message(json!([{"type": "text", "text": "{\"items\": []}"}]), "end_turn");
        let server = TestServer::start_keep_alive((0..n).map(|_| Reply::json(200, answer())).collect());
        let a = agent(&server, |_| {});
        for _ in 0..n {
            assert_eq!(invoke(&a, &request("opus", "xhigh")).await.expect("ok").document, json!({"items": []}));
        }
        assert_eq!(server.requests().len(), n);
        assert_eq!(server.connections(), 1, "{n} sequential requests over one kept-alive connection");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn native_structured_output() {
        let server = TestServer::start(vec![Reply::json(
            200,
            message(json!([{"type": "text", "text": "{\"items\": []}"}]), "end_turn"),
        )]);
        let a = agent(&server, |_| {});
        let reply = invoke(&a, &request("opus", "xhigh")).await.expect("ok");
        assert_eq!(reply.document, json!({"items": []}));
        assert_eq!((reply.usage.input_tokens, reply.usage.output_tokens), (15, 4));
        let sent = &server.requests()[0];
        assert_eq!(sent.path, "/v1/messages");
        assert_eq!(sent.header("x-api-key"), Some(CANARY));
        assert_eq!(sent.header("anthropic-version"), Some(API_VERSION));
        assert_eq!(sent.header("anthropic-beta"), None);
        let body = sent.json();
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        let format = &body["output_config"]["format"];
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format["schema"]["additionalProperties"], false);
        assert_eq!(format["schema"]["properties"]["items"]["items"]["additionalProperties"], false);
        assert!(body["output_config"].get("effort").is_none(), "effort is opt-in");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keywords_the_api_rejects_are_not_sent() {
        let answer = json!({"angle": "a", "items": [{"id": "x", "title": "t", "location": "a.rs:1"}]});
        let server = TestServer::start(vec![Reply::json(
            200,
            message(json!([{"type": "text", "text": answer.to_string()}]), "end_turn"),
        )]);
        let a = agent(&server, |_| {});
        let mut req = request("opus", "high");
        req.schema = Some(crate::schema::tests::implement_like());
        let _ = invoke(&a, &req).await;
        let server2 = TestServer::start(vec![Reply::json(
            200,
            message(json!([{"type": "text", "text": answer.to_string()}]), "end_turn"),
        )]);
        let a2 = agent(&server2, |d| d.structured_output = Some("output_format".into()));
        let mut req2 = request("opus", "high");
        req2.schema = Some(crate::schema::tests::finder());
        let reply = invoke(&a2, &req2).await.expect("ok");
        assert_eq!(reply.document, answer);
        let sent = [
            server.requests()[0].json()["output_config"]["format"]["schema"].clone(),
            server2.requests()[0].json()["output_format"]["schema"].clone(),
        ];
        for schema in sent {
            let mut keys = Vec::new();
            crate::schema::tests::keys_anywhere(&schema, &mut keys);
            for k in ["minLength", "maxLength", "minimum", "pattern", "maxItems", "oneOf"] {
                assert!(!keys.iter().any(|x| x == k), "{k} was sent: {schema:#}");
            }
            assert!(!schema.to_string().contains("\"type\":["), "type lists become anyOf: {schema}");
            assert_eq!(schema["additionalProperties"], false);
        }
        assert!(AnthropicAgent::new("m", &AgentDef { max_tokens: Some(0), ..Default::default() }).is_err());
        assert!(!a.reports_cost() && !AnthropicAgent::new("m", &AgentDef::default()).expect("ok").reports_cost());
        let priced = AgentDef { input_usd_per_mtok: Some(3.0), output_usd_per_mtok: Some(15.0), ..Default::default() };
        assert!(AnthropicAgent::new("m", &priced).expect("ok").reports_cost());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forced_tool_use_and_beta_format_and_effort() {
        let server = TestServer::start(vec![Reply::json(
            200,
            message(
                json!([{"type": "tool_use", "id": "t1", "name": TOOL_NAME, "input": {"items": [{"t": "x"}]}}]),
                "tool_use",
            ),
        )]);
        let a = agent(&server, |d| {
            d.structured_output = Some("tool".into());
            d.send_effort = Some(true);
        });
        let reply = invoke(&a, &request("claude-opus-4-7", "xhigh")).await.expect("ok");
        assert_eq!(reply.document, json!({"items": [{"t": "x"}]}));
        let body = server.requests()[0].json();
        assert_eq!(body["tool_choice"], json!({"type": "any"}), "a tool call is forced, the engine's tools beside");
        let names: Vec<&str> =
            body["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names, ["read_file", "list_dir", "search", TOOL_NAME], "a read-only role's tools and the answer");
        assert_eq!(body["model"], "claude-opus-4-7");
        assert_eq!(body["output_config"], json!({"effort": "xhigh"}));
        let req = request("claude-opus-4-7", "high");
        let last: Value = serde_json::from_slice(&a.body_bytes_with(&req, &[], true)).expect("json");
        assert_eq!(last["tool_choice"], json!({"type": "tool", "name": TOOL_NAME}), "the last turn: answer now");
        assert_eq!(last["tools"], body["tools"]);
        let native = agent(&server, |_| {});
        let last: Value = serde_json::from_slice(&native.body_bytes_with(&req, &[], true)).expect("json");
        assert_eq!(last["tool_choice"], json!({"type": "none"}), "native structured output: no more tools");
        let first: Value = serde_json::from_slice(&native.body_bytes_with(&req, &[], false)).expect("json");
        assert!(first.get("tool_choice").is_none(), "{first}");

        let server =
            TestServer::start(vec![Reply::json(200, message(json!([{"type": "text", "text": "{}"}]), "end_turn"))]);
        let a = agent(&server, |d| d.structured_output = Some("output_format".into()));
        invoke(&a, &request("sonnet", "high")).await.expect("ok");
        let sent = &server.requests()[0];
        assert_eq!(sent.header("anthropic-beta"), Some(STRUCTURED_OUTPUTS_BETA));
        assert_eq!(sent.json()["output_format"]["type"], "json_schema");
        assert!(
            AnthropicAgent::new("m", &AgentDef { structured_output: Some("x".into()), ..Default::default() }).is_err()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refusals_truncation_and_errors() {
        let cases = [
            (Reply::json(200, message(json!([{"type": "text", "text": "I won't."}]), "refusal")), "refused", true),
            (
                Reply::json(200, message(json!([{"type": "text", "text": "{\"items\": ["}]), "max_tokens")),
                "max_tokens",
                true,
            ),
            (Reply::json(200, message(json!([{"type": "text", "text": "hello"}]), "end_turn")), "not JSON", true),
            (Reply::text(200, "{"), "not JSON", true),
            (
                Reply::json(
                    400,
                    json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad schema"}}),
                ),
                "HTTP 400: bad schema",
                false,
            ),
            (
                Reply::json(401, json!({"type": "error", "error": {"message": format!("invalid x-api-key {CANARY}")}})),
                "refused the credentials",
                false,
            ),
            (
                Reply::json(529, json!({"type": "error", "error": {"message": "Overloaded"}}))
                    .header("retry-after", "9999"),
                "529",
                false,
            ),
        ];
        for (reply, want, is_malformed) in cases {
            let server = TestServer::start(vec![reply]);
            let a = agent(&server, |_| {});
            let e = invoke(&a, &request("m", "high")).await.expect_err("unusable");
            let r = reason(&e);
            assert!(r.contains(want), "{want}: {r}");
            assert_eq!(matches!(e, AgentError::Malformed { .. }), is_malformed, "{want}: {r}");
        }
        let a = AnthropicAgent::new("m", &AgentDef::default()).expect("builds").with_fixed_key(None);
        assert_eq!(a.preflight(), Err("ANTHROPIC_API_KEY is not set".into()));
    }
}
