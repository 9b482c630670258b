//! `claude[:MODEL]`: the Claude Code CLI, headless.
//!
//! One attempt is one `claude -p` run in the repository root, the brief on stdin:
//!
//! ```text
//! claude -p --output-format json --model MODEL --effort EFFORT [--json-schema SCHEMA]
//!        --permission-mode default|acceptEdits --allowedTools … [--disallowedTools …]
//!        [--max-turns N] [--max-budget-usd X] [extra_args…]
//! ```
//!
//! - Model: the role's pin as is (Claude Code takes the tier aliases `opus`, `sonnet`, `haiku`
//!   as well as full model names).
//! - Effort: `--effort` with the pin, lowered to what the installed Claude Code accepts
//!   ([`effort_for`]): `claude --version` is read once (at preflight, else before the first
//!   attempt) and cached. `xhigh` needs 2.1.111, `max` 2.1.76, `--effort` itself 2.1.69 (older
//!   versions get no `--effort`); when the version cannot be read, `xhigh` and `max` are sent
//!   as `high`.
//! - Access: `read-only` runs in the `default` permission mode (in `-p` mode anything that would
//!   ask is denied) with the read tools allowed and the edit tools disallowed; `workspace-write`
//!   runs in `acceptEdits` with the edit tools and `Bash` allowed.
//! - The answer is the result object's `structured_output` (with a schema) or its `result` text
//!   read as JSON (without). Usage is the object's `usage` (cache reads and writes counted as
//!   input) and `total_cost_usd`. A run that printed no result object (killed at its timeout)
//!   is charged the assistant messages of its session transcripts ([`transcript`]; tokens
//!   only, the cost unknown): those in its private state directory, or, not confined, those of
//!   the session `work` named it (`--session-id`, from 2.0.0) in the user's own.
//! - Classification: a timeout, a non-zero exit, an error subtype (`error_max_turns`,
//!   `error_during_execution`, `error_max_budget_usd`, …) or `is_error` fails the attempt;
//!   `error_max_structured_output_retries`, a null `structured_output` or stdout without a
//!   result object is malformed.

use async_trait::async_trait;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use work_config::AgentDef;
use work_runtime::budget::Usage;
use work_runtime::dispatch::{Access, Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};
use work_runtime::spawn::{ProcessSpec, Spawner};

mod transcript;

/// Tools a read-only dispatch may use without asking. No `Bash(…)` rule: a prefix rule such
/// as `Bash(git log:*)` also allows `git log --output=FILE`, which writes anywhere; without
/// one, Claude Code still runs the commands it classifies as read-only (`git log`, `git diff`,
/// `ls`, `grep` …) and refuses the rest, `--output` included.
pub const READ_TOOLS: &str = "Read,Grep,Glob";
/// Tools a read-only dispatch may never use.
pub const EDIT_TOOLS: &str = "Edit,Write,NotebookEdit";
/// Tools a workspace-write dispatch may use without asking.
pub const WRITE_TOOLS: &str = "Read,Grep,Glob,Edit,Write,NotebookEdit,Bash";
/// The earliest Claude Code we found listing `manual` among its permission modes (what
/// `default` was; `default` is a hidden alias there). Older or unknown versions get `default`.
pub const MANUAL_MODE_SINCE: Version = (2, 1, 328);

/// The permission mode of a read-only dispatch on Claude Code `version`: in `-p` mode anything
/// that would ask is denied.
pub fn read_only_mode(version: Option<Version>) -> &'static str {
    if version.is_some_and(|v| v >= MANUAL_MODE_SINCE) { "manual" } else { "default" }
}

pub use crate::Version;
/// The first Claude Code with `--effort` we found evidence of (its `--help` lists
/// `low, medium, high`).
pub const EFFORT_FLAG_SINCE: Version = (2, 1, 69);
/// The first Claude Code whose `--effort` takes `max` (2.1.76 validates `low, medium, high, max`).
pub const MAX_SINCE: Version = (2, 1, 76);
/// The first Claude Code whose `--effort` takes `xhigh` (CHANGELOG 2.1.111: "Added `xhigh`
/// effort level for Opus 4.7 … Available via `/effort`, `--effort`").
pub const XHIGH_SINCE: Version = (2, 1, 111);
/// The first Claude Code `work` names a session of (`--session-id`): a run not confined writes
/// its transcripts among the user's other sessions, and only its own are read.
pub const SESSION_ID_SINCE: Version = (2, 0, 0);

/// A fresh session id (a version-4 UUID) for one attempt.
fn session_id(request: &DispatchRequest) -> String {
    let nanos = work_runtime::clock::nonce_nanos();
    let seed = format!("{}/{}/{}/{}/{nanos}", request.run_id, request.dispatch_id, request.attempt, std::process::id());
    let h = work_runtime::fsx::sha256_hex(seed.as_bytes());
    let variant = ["8", "9", "a", "b"][usize::from(h.as_bytes()[16] % 4)];
    format!("{}-{}-4{}-{variant}{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// The `--effort` value for a role's effort on Claude Code `version` (`None`: unknown), or
/// `None` when no `--effort` should be sent (an empty pin, or a version without the flag).
pub fn effort_for(version: Option<Version>, effort: &str) -> Option<String> {
    let e = effort.trim().to_ascii_lowercase();
    if e.is_empty() {
        return None;
    }
    let (xhigh, max) = match version {
        None => (false, false),
        Some(v) if v < EFFORT_FLAG_SINCE => return None,
        Some(v) => (v >= XHIGH_SINCE, v >= MAX_SINCE),
    };
    Some(match e.as_str() {
        "xhigh" if !xhigh => "high".into(),
        "max" if !max => "high".into(),
        _ => e,
    })
}

/// One line on how efforts are sent to Claude Code `version` (for `work agents check`).
pub fn effort_note(version: Option<Version>) -> String {
    match version {
        None => "version unknown: xhigh and max sent as high".into(),
        Some(v) if v < EFFORT_FLAG_SINCE => "no --effort before 2.1.69: efforts not sent".into(),
        Some(v) if v < MAX_SINCE => "xhigh and max sent as high (before 2.1.76)".into(),
        Some(v) if v < XHIGH_SINCE => "xhigh sent as high (before 2.1.111)".into(),
        Some(_) => "efforts sent as pinned".into(),
    }
}

/// The Claude Code backend.
#[derive(Debug, Clone)]
pub struct ClaudeAgent {
    program: String,
    spec_model: Option<String>,
    root: PathBuf,
    extra_args: Vec<String>,
    max_turns: Option<u32>,
    max_budget_usd: Option<f64>,
    /// Environment names beyond what Claude Code needs (`[agents.X].env`).
    env: Vec<String>,
    /// Read the repository's own settings and `.mcp.json` (`[agents.X].project_config`).
    project_config: bool,
    /// `claude --version`, read once: `Some(None)` when it could not be read.
    version: Arc<OnceLock<Option<Version>>>,
    /// The stdout cap of one run.
    output_cap: usize,
}

impl ClaudeAgent {
    /// The backend for `claude[:MODEL]` with a named agent's settings, run in `root`.
    pub fn new(spec_model: Option<String>, def: &AgentDef, root: &Path) -> Self {
        Self {
            program: "claude".into(),
            spec_model,
            root: root.to_path_buf(),
            extra_args: def.extra_args.clone(),
            max_turns: def.max_turns,
            max_budget_usd: def.max_budget_usd,
            env: def.env.clone(),
            project_config: def.project_config.unwrap_or(false),
            version: Arc::new(OnceLock::new()),
            output_cap: crate::CLI_OUTPUT_CAP,
        }
    }

    /// Caps one run's stdout at `cap` bytes instead of [`crate::CLI_OUTPUT_CAP`] (tests).
    pub fn with_output_cap(mut self, cap: usize) -> Self {
        self.output_cap = cap;
        self
    }

    /// Uses `version` instead of asking the CLI (tests).
    pub fn with_version(self, version: Option<Version>) -> Self {
        let _ = self.version.set(version);
        self
    }

    /// The installed version, once read (`None` before, or when it could not be read).
    pub fn version(&self) -> Option<Version> {
        self.version.get().copied().flatten()
    }

    /// Runs `program` instead of `claude` from PATH.
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// The arguments for one attempt (the brief goes on stdin).
    pub fn args(&self, request: &DispatchRequest) -> Vec<String> {
        let mut a: Vec<String> = vec!["-p".into(), "--output-format".into(), "json".into()];
        let model =
            Some(request.model.trim()).filter(|m| !m.is_empty()).map(str::to_string).or(self.spec_model.clone());
        if let Some(m) = model {
            a.extend(["--model".into(), m]);
        }
        if let Some(effort) = effort_for(self.version(), &request.effort) {
            a.extend(["--effort".into(), effort]);
        }
        if let Some(schema) = &request.schema {
            a.extend(["--json-schema".into(), crate::schema::tool_input(schema).to_string()]);
        }
        match request.access {
            Access::ReadOnly => a.extend([
                "--permission-mode".into(),
                read_only_mode(self.version()).into(),
                "--allowedTools".into(),
                READ_TOOLS.into(),
                "--disallowedTools".into(),
                EDIT_TOOLS.into(),
            ]),
            Access::WorkspaceWrite => a.extend([
                "--permission-mode".into(),
                "acceptEdits".into(),
                "--allowedTools".into(),
                WRITE_TOOLS.into(),
            ]),
        }
        if !self.project_config {
            // The repository's own hooks, `env`, permissions and MCP servers are not the user's.
            a.extend(["--setting-sources".into(), "user".into(), "--strict-mcp-config".into()]);
        }
        if let Some(n) = self.max_turns {
            a.extend(["--max-turns".into(), n.to_string()]);
        }
        if let Some(usd) = self.max_budget_usd {
            a.extend(["--max-budget-usd".into(), usd.to_string()]);
        }
        a.extend(self.extra_args.iter().cloned());
        a
    }
}

/// The result object in Claude Code's stdout: the one JSON object, the last `result` element
/// of a JSON array (`--verbose`), or the last `result` line of a stream.
pub fn result_object(stdout: &str) -> Option<Value> {
    let is_result = |v: &Value| v.get("type").and_then(Value::as_str) == Some("result");
    match serde_json::from_str::<Value>(stdout.trim()) {
        Ok(v) if is_result(&v) => return Some(v),
        Ok(Value::Array(items)) => return items.into_iter().rev().find(is_result),
        _ => {}
    }
    stdout.lines().rev().filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok()).find(is_result)
}

/// Usage from a result object: the sum of `modelUsage` over every model (it counts subagents,
/// structured-output retries and the calls before a budget error, which the top-level `usage`
/// misses), else `usage`; cache reads and writes count as input. Cost is `total_cost_usd`,
/// else the models' `costUSD`.
pub fn result_usage(result: &Value) -> Usage {
    let n = |k: &str| result.get("usage").and_then(|u| u.get(k)).and_then(Value::as_u64).unwrap_or(0);
    let top = Usage {
        input_tokens: n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"),
        output_tokens: n("output_tokens"),
        cost_usd: 0.0,
    };
    let mut models = Usage::default();
    let mut model_cost = 0.0;
    if let Some(Value::Object(per_model)) = result.get("modelUsage") {
        for m in per_model.values() {
            let k = |key: &str| m.get(key).and_then(Value::as_u64).unwrap_or(0);
            models.input_tokens += k("inputTokens") + k("cacheReadInputTokens") + k("cacheCreationInputTokens");
            models.output_tokens += k("outputTokens");
            model_cost +=
                m.get("costUSD").and_then(Value::as_f64).filter(|c| c.is_finite() && *c >= 0.0).unwrap_or(0.0);
        }
    }
    let mut u = if models.total_tokens() >= top.total_tokens() { models } else { top };
    u.cost_usd = result
        .get("total_cost_usd")
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c > 0.0)
        .unwrap_or(model_cost);
    u
}

/// What went wrong, from a result object: its subtype, then its `errors` or `result` text (a
/// `success` subtype with `is_error`, an API error, is the text alone).
fn result_detail(result: &Value) -> String {
    let subtype = result.get("subtype").and_then(Value::as_str).unwrap_or("unknown");
    let subtype = if subtype == "success" { "" } else { subtype };
    let detail = match result.get("errors") {
        Some(Value::Array(e)) if !e.is_empty() => {
            e.iter().map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string)).collect::<Vec<_>>().join("; ")
        }
        _ => result.get("result").and_then(Value::as_str).unwrap_or("").to_string(),
    };
    let detail = crate::head(&detail, 300);
    match (subtype.is_empty(), detail.is_empty()) {
        (true, true) => "is_error without a message".into(),
        (true, false) => detail,
        (false, true) => subtype.to_string(),
        (false, false) => format!("{subtype}: {detail}"),
    }
}

/// Classifies one finished run of `claude -p` (pure, for tests).
pub fn classify(
    stdout: String,
    stderr: &str,
    end: Option<String>,
    with_schema: bool,
) -> Result<AgentReply, AgentError> {
    let result = result_object(&stdout);
    let usage = result.as_ref().map(result_usage).unwrap_or_default();
    let subtype = result.as_ref().and_then(|r| r.get("subtype")).and_then(Value::as_str).unwrap_or("").to_string();
    let malformed = |reason: String, raw: String| Err(AgentError::Malformed { reason, raw, usage });
    let failed = |reason: String, raw: String| Err(AgentError::Failed { reason, raw, usage });
    if subtype == "error_max_structured_output_retries" {
        let detail = result.as_ref().map(result_detail).unwrap_or_default();
        return malformed(format!("no valid structured output: {detail}"), stdout);
    }
    if let Some(end) = end {
        let why = match &result {
            Some(r) => result_detail(r),
            None => crate::tail(stderr, 400),
        };
        return failed(if why.is_empty() { end } else { format!("{end}: {why}") }, stdout);
    }
    let Some(result) = result else {
        return malformed(
            if stdout.trim().is_empty() {
                "empty stdout".into()
            } else {
                format!("stdout holds no result object: {}", crate::head(&stdout, 120))
            },
            stdout,
        );
    };
    if subtype != "success" {
        return failed(result_detail(&result), stdout);
    }
    if result.get("is_error").and_then(Value::as_bool) == Some(true) {
        return failed(result_detail(&result), stdout);
    }
    if with_schema {
        return match result.get("structured_output") {
            Some(v) if !v.is_null() => Ok(AgentReply { document: v.clone(), usage, raw: stdout }),
            _ => malformed("structured_output is null".into(), stdout),
        };
    }
    let text = result.get("result").and_then(Value::as_str).unwrap_or("");
    match crate::json_from_text(text) {
        Some(document) => Ok(AgentReply { document, usage, raw: stdout }),
        None => malformed(format!("the result text is not JSON: {}", crate::head(text, 120)), stdout),
    }
}

#[async_trait]
impl Agent for ClaudeAgent {
    fn describe(&self) -> String {
        self.spec_model.as_ref().map_or("claude".into(), |m| format!("claude:{m}"))
    }

    fn preflight(&self) -> Result<(), String> {
        crate::preflight_cli(
            &self.program,
            &self.root,
            "Claude Code: npm install -g @anthropic-ai/claude-code",
            &self.version,
        )
    }

    async fn invoke(&self, request: &DispatchRequest, options: InvokeOptions) -> Result<AgentReply, AgentError> {
        if self.version.get().is_none() {
            let v = crate::version_async(&self.program, &self.root).await;
            let _ = self.version.set(v);
        }
        let home = crate::confine::claude_home().map_err(|e| AgentError::Failed {
            reason: format!("create Claude Code's private state directory: {e}"),
            raw: String::new(),
            usage: Usage::default(),
        })?;
        let mut confine = crate::confine::cli(request, &self.root, crate::confine::CLAUDE_ENV, &self.env);
        // Not confined: the run is named, so that its transcripts can be told from the user's.
        let own_session = ["--session-id", "--resume", "-r", "--continue", "-c"];
        let session = (home.is_none()
            && self.version().is_some_and(|v| v >= SESSION_ID_SINCE)
            && !self.extra_args.iter().any(|a| own_session.contains(&a.as_str())))
        .then(|| session_id(request));
        let mut args = self.args(request);
        if let Some(id) = &session {
            args.extend(["--session-id".into(), id.clone()]);
        }
        let mut spec = ProcessSpec::new(self.program.clone(), args, &self.root)
            .with_stdin(crate::brief(request).into_bytes())
            .with_timeout(Some(options.timeout));
        if let Some(h) = &home {
            confine.private.push(h.path().to_path_buf());
            spec = spec.with_env("CLAUDE_CONFIG_DIR", h.path().display().to_string());
        }
        spec = spec.confined(confine);
        spec.output_cap = self.output_cap;
        let out = Spawner.run(&spec).await.map_err(|e| AgentError::Failed {
            reason: e.to_string(),
            raw: String::new(),
            usage: Usage::default(),
        })?;
        if out.stdout_truncated {
            return Err(crate::truncated_output(
                out.stdout_text(),
                result_object(&out.stdout_text()).as_ref().map(result_usage),
                self.output_cap,
            ));
        }
        let end = (!out.success()).then(|| out.describe_end());
        let mut result = classify(out.stdout_text(), &out.stderr_text(), end, request.schema.is_some());
        // No result object (killed at the timeout, crashed): what the transcripts say was billed.
        let billed = || match (&home, &session) {
            (Some(h), _) => transcript::billed(h.path()),
            (None, Some(id)) => crate::confine::claude_user_dir().and_then(|d| transcript::billed_session(&d, id)),
            (None, None) => None,
        };
        if result_object(&out.stdout_text()).is_none()
            && let Some(billed) = billed()
            && let Err(AgentError::Failed { usage, .. } | AgentError::Malformed { usage, .. }) = &mut result
            && billed.total_tokens() > usage.total_tokens()
        {
            *usage = billed;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(extra: Value) -> String {
        let mut r = json!({"type": "result", "subtype": "success", "is_error": false, "result": "",
            "total_cost_usd": 0.25, "usage": {"input_tokens": 3, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20, "output_tokens": 9}});
        if let (Value::Object(r), Value::Object(e)) = (&mut r, extra) {
            r.extend(e);
        }
        r.to_string()
    }

    fn kind(r: &Result<AgentReply, AgentError>) -> (&'static str, String) {
        match r {
            Ok(_) => ("ok", String::new()),
            Err(AgentError::Failed { reason, .. }) => ("failed", reason.clone()),
            Err(AgentError::Malformed { reason, .. }) => ("malformed", reason.clone()),
        }
    }

    #[test]
    fn reads_structured_output_and_usage() {
        let r = classify(result(json!({"structured_output": {"items": []}})), "", None, true).expect("ok");
        assert_eq!(r.document, json!({"items": []}));
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens, r.usage.cost_usd), (123, 9, 0.25));
        let r = classify(result(json!({"result": "```json\n{\"a\": 1}\n```"})), "", None, false).expect("ok");
        assert_eq!(r.document, json!({"a": 1}));
        // --verbose prints an array of messages; the result is the last.
        let arr = format!("[{{\"type\": \"system\"}}, {}]", result(json!({"structured_output": {"b": 2}})));
        assert_eq!(classify(arr, "", None, true).expect("ok").document, json!({"b": 2}));
    }

    #[test]
    fn classifies_error_subtypes_and_nulls() {
        let cases = [
            (result(json!({"structured_output": null})), None, "malformed", "structured_output is null"),
            (result(json!({})), None, "malformed", "structured_output is null"),
            (result(json!({"subtype": "error_max_turns", "is_error": true})), None, "failed", "error_max_turns"),
            (
                result(json!({"subtype": "error_max_budget_usd", "errors": ["budget reached"]})),
                Some("exit code 1"),
                "failed",
                "exit code 1: error_max_budget_usd: budget reached",
            ),
            (
                result(json!({"subtype": "error_max_structured_output_retries"})),
                Some("exit code 1"),
                "malformed",
                "no valid",
            ),
            (result(json!({"is_error": true, "result": "API Error: 529 overloaded"})), None, "failed", "529"),
            ("not json".into(), None, "malformed", "no result object"),
            (String::new(), Some("timed out after 5.0s"), "failed", "timed out"),
        ];
        for (stdout, end, want_kind, want) in cases {
            let r = classify(stdout, "", end.map(str::to_string), true);
            let (k, reason) = kind(&r);
            assert_eq!(k, want_kind, "{want}: {reason}");
            assert!(reason.contains(want), "{want}: {reason}");
        }
        let r = classify(String::new(), "Error: Invalid API key\n", Some("exit code 1".into()), true);
        assert_eq!(kind(&r), ("failed", "exit code 1: Error: Invalid API key".into()));
    }

    #[test]
    fn efforts_are_lowered_to_what_the_installed_version_takes() {
        let e = |v: Option<Version>, effort: &str| effort_for(v, effort);
        let new = Some((2, 1, 240));
        assert_eq!((e(new, "xhigh"), e(new, "max")), (Some("xhigh".into()), Some("max".into())));
        let v2_1_104 = Some((2, 1, 104));
        assert_eq!((e(v2_1_104, "xhigh"), e(v2_1_104, "max")), (Some("high".into()), Some("max".into())));
        let v2_1_70 = Some((2, 1, 70));
        assert_eq!((e(v2_1_70, "xhigh"), e(v2_1_70, "max")), (Some("high".into()), Some("high".into())));
        assert_eq!(e(v2_1_70, "Medium"), Some("medium".into()));
        assert_eq!(e(Some((2, 0, 30)), "high"), None, "no --effort flag before 2.1.69");
        assert_eq!(
            (e(None, "xhigh"), e(None, "max"), e(None, "low")),
            (Some("high".into()), Some("high".into()), Some("low".into()))
        );
        assert_eq!(e(new, " "), None);
        assert!(effort_note(v2_1_104).contains("xhigh sent as high"));
        let a = ClaudeAgent::new(None, &AgentDef::default(), Path::new("/")).with_version(v2_1_104);
        let args = a.args(&crate::test_request(Access::ReadOnly)).join(" ");
        assert!(args.contains("--model opus --effort high "), "{args}");
    }

    #[test]
    fn read_only_tools_hold_no_bash_rule_and_only_real_tools() {
        for tools in [READ_TOOLS, EDIT_TOOLS, WRITE_TOOLS] {
            for t in tools.split(',') {
                assert!(!["LS", "MultiEdit"].contains(&t), "{t} is not a tool in Claude Code 2.1");
            }
        }
        assert!(!READ_TOOLS.contains("Bash"), "a Bash prefix rule allows `git log --output=FILE`");
        let a = ClaudeAgent::new(None, &AgentDef::default(), Path::new("/")).with_version(Some((2, 1, 332)));
        let args = a.args(&crate::test_request(Access::ReadOnly)).join(" ");
        assert!(args.contains("--permission-mode manual "), "no hidden `default` alias: {args}");
        let old = ClaudeAgent::new(None, &AgentDef::default(), Path::new("/")).with_version(Some((2, 1, 104)));
        assert!(old.args(&crate::test_request(Access::ReadOnly)).join(" ").contains("--permission-mode default "));
    }

    #[test]
    fn the_schema_sent_has_no_dialect_and_no_root_combinator() {
        let a = ClaudeAgent::new(None, &AgentDef::default(), Path::new("/")).with_version(Some((2, 1, 332)));
        let mut req = crate::test_request(Access::ReadOnly);
        req.schema = Some(json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}));
        let args = a.args(&req);
        let i = args.iter().position(|x| x == "--json-schema").expect("sent");
        let sent: Value = serde_json::from_str(&args[i + 1]).expect("json");
        assert_eq!(crate::schema::tool_input_violation(&sent), None, "{sent}");
        assert!(sent.get("$schema").is_none());
    }

    #[test]
    fn tokens_come_from_model_usage() {
        // A subagent on haiku and a structured-output retry: the top-level usage has one call.
        let r = json!({"type": "result", "subtype": "error_max_budget_usd", "is_error": true, "total_cost_usd": 0,
            "usage": {"input_tokens": 0, "output_tokens": 0},
            "modelUsage": {"claude-opus": {"inputTokens": 300, "outputTokens": 30, "cacheReadInputTokens": 50,
                "cacheCreationInputTokens": 5, "costUSD": 0.5},
                "claude-haiku": {"inputTokens": 40, "outputTokens": 4, "costUSD": 0.01}}});
        let u = result_usage(&r);
        assert_eq!((u.input_tokens, u.output_tokens), (395, 34));
        assert!((u.cost_usd - 0.51).abs() < 1e-9, "{}", u.cost_usd);
        let r = classify(r.to_string(), "", Some("exit code 1".into()), true);
        match r {
            Err(AgentError::Failed { usage, .. }) => assert_eq!(usage.total_tokens(), 429, "a budget error is billed"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn api_errors_read_cleanly() {
        let out = result(json!({"is_error": true, "result": "API Error: 401 invalid x-api-key"}));
        let (k, reason) = kind(&classify(out, "", Some("exit code 1".into()), true));
        assert_eq!((k, reason.as_str()), ("failed", "exit code 1: API Error: 401 invalid x-api-key"));
    }

    /// A fake `claude` whose result object is 10 MiB long (a long result text).
    const BIG_CLAUDE: &str = r#"
if sys.argv[1:] == ["--version"]:
    print("2.1.332 (Claude Code)")
    sys.exit(0)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "x" * (10 << 20),
                  "structured_output": {"items": []}, "usage": {"input_tokens": 5, "output_tokens": 2}}))
"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_result_keeps_its_answer_and_a_cut_one_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = crate::fake_program(dir.path(), "claude", BIG_CLAUDE).display().to_string();
        let opts = InvokeOptions { timeout: std::time::Duration::from_secs(60) };
        let req = crate::test_request(Access::ReadOnly);
        let a = ClaudeAgent::new(None, &AgentDef::default(), dir.path()).with_program(program.clone());
        assert_eq!(a.invoke(&req, opts).await.expect("answers").document, json!({"items": []}));
        let cut =
            ClaudeAgent::new(None, &AgentDef::default(), dir.path()).with_program(program).with_output_cap(1 << 20);
        match cut.invoke(&req, opts).await {
            Err(AgentError::Failed { reason, .. }) => assert!(reason.contains("stdout exceeded"), "{reason}"),
            other => panic!("a cut result fails (not retried as malformed): {other:?}"),
        }
    }

    #[test]
    fn maps_pins_and_access_to_flags() {
        let a = ClaudeAgent::new(None, &AgentDef { max_turns: Some(30), ..Default::default() }, Path::new("/"))
            .with_version(Some((2, 1, 240)));
        let mut req = crate::test_request(Access::ReadOnly);
        let args = a.args(&req).join(" ");
        assert!(args.starts_with("-p --output-format json --model opus --effort xhigh --json-schema {"), "{args}");
        assert!(
            args.contains("--permission-mode default --allowedTools Read,") && args.contains("--disallowedTools Edit")
        );
        assert!(args.ends_with("--max-turns 30"), "{args}");
        req.access = Access::WorkspaceWrite;
        req.schema = None;
        let args = a.args(&req).join(" ");
        assert!(args.contains("--permission-mode acceptEdits") && !args.contains("--json-schema"), "{args}");
        assert!(!args.contains("--disallowedTools"));
    }
}
