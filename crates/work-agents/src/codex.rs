//! `codex[:MODEL]`: the Codex CLI, non-interactive.
//!
//! One attempt is one `codex exec` run, the brief on stdin (`-`):
//!
//! ```text
//! codex exec --json --skip-git-repo-check -C ROOT --sandbox read-only|workspace-write
//!            [-m MODEL] -c model_reasoning_effort="EFFORT" [--output-schema FILE]
//!            [--ignore-rules] [extra_args…] -
//! ```
//!
//! - Model: the role's pin when concrete, else the spec's model, else no `-m` (the CLI's own
//!   default): the code's tier pins (`opus`, `sonnet`) mean nothing to Codex.
//! - Effort: `model_reasoning_effort` with the pin ([`effort_value`]): `max` is sent as
//!   `xhigh`, and `xhigh` only to Codex 0.60.0 or later (older releases refuse the whole config
//!   with ``unknown variant `xhigh` ``); below that, or when `codex --version` cannot be read,
//!   both are sent as `high`. The version is read once (preflight, else the first attempt).
//! - Access: `--sandbox read-only` or `--sandbox workspace-write` (exec never asks for approval).
//! - The schema is written to a temporary file for `--output-schema` in OpenAI's strict form
//!   ([`crate::schema::openai_strict`]: Codex always sends it with `strict: true`), and removed
//!   afterwards; a schema whose root is not an object can never be sent that way and is
//!   refused ([`schema_refusal`]) before the first dispatch (`Agent::schema_refusal`) and,
//!   should one reach a dispatch, before Codex runs; nulls the model wrote for properties the original schema made optional are
//!   dropped from the answer ([`crate::schema::drop_optional_nulls`]) before the engine
//!   validates it against the original schema.
//! - Cost: Codex reports tokens only; with `input_usd_per_mtok` and `output_usd_per_mtok` set
//!   the cost is priced, without them it is unknown ([`Agent::reports_cost`] is false).
//! - stdout is JSONL: the last completed `agent_message` item is the answer (a JSON string when
//!   a schema is given); `turn.completed` carries usage, summed over turns unless the numbers
//!   only grow (then they are cumulative and the last one is the total); `turn.failed` and a
//!   non-zero exit fail the attempt; no agent message, or one that is not JSON, is malformed.

use async_trait::async_trait;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use work_config::AgentDef;
use work_runtime::budget::Usage;
use work_runtime::dispatch::{Access, Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};
use work_runtime::spawn::{ProcessSpec, Spawner};

mod session;
pub(crate) use session::credential_source;

/// The Codex backend.
#[derive(Debug, Clone)]
pub struct CodexAgent {
    program: String,
    spec_model: Option<String>,
    def_model: Option<String>,
    root: PathBuf,
    extra_args: Vec<String>,
    prices: (Option<f64>, Option<f64>),
    /// `codex --version`, read once: `Some(None)` when it could not be read.
    version: Arc<OnceLock<Option<crate::claude::Version>>>,
    /// The stdout cap of one run.
    output_cap: usize,
    /// Environment names beyond what Codex needs (`[agents.X].env`).
    env: Vec<String>,
    /// Read the repository's own Codex configuration (`[agents.X].project_config`).
    project_config: bool,
    /// Runs inside `work`'s kernel sandbox, which confines it as its role's access says: Codex's
    /// own sandbox (which cannot set itself up inside another) is then not used.
    outer_sandbox: bool,
}

/// The first Codex CLI taking `model_reasoning_effort = "xhigh"` (it arrived with
/// gpt-5.1-codex-max in November 2025; 0.60 is the first release SDKs required for it).
pub const XHIGH_SINCE: crate::claude::Version = (0, 60, 0);

/// The `model_reasoning_effort` value for a role's effort on Codex `version` (`None`: unknown).
pub fn effort_value(effort: &str, version: Option<crate::claude::Version>) -> String {
    let xhigh = version.is_some_and(|v| v >= XHIGH_SINCE);
    match effort.trim().to_ascii_lowercase().as_str() {
        "max" | "xhigh" if xhigh => "xhigh".into(),
        "max" | "xhigh" => "high".into(),
        other => other.to_string(),
    }
}

/// One line on how efforts are sent to Codex `version` (for `work agents check`).
pub fn effort_note(version: Option<crate::claude::Version>) -> String {
    match version {
        None => "version unknown: xhigh and max sent as high".into(),
        Some(v) if v < XHIGH_SINCE => "xhigh and max sent as high (before 0.60.0)".into(),
        Some(_) => "max sent as xhigh".into(),
    }
}

impl CodexAgent {
    /// The backend for `codex[:MODEL]` with a named agent's settings, run in `root`.
    pub fn new(spec_model: Option<String>, def: &AgentDef, root: &Path) -> Self {
        Self {
            program: "codex".into(),
            spec_model,
            def_model: def.model.clone(),
            root: root.to_path_buf(),
            extra_args: def.extra_args.clone(),
            prices: (def.input_usd_per_mtok, def.output_usd_per_mtok),
            version: Arc::new(OnceLock::new()),
            output_cap: crate::CLI_OUTPUT_CAP,
            env: def.env.clone(),
            project_config: def.project_config.unwrap_or(false),
            outer_sandbox: false,
        }
    }

    /// Runs inside `work`'s kernel sandbox (see `work_runtime::sandbox`): Codex gets
    /// `--sandbox danger-full-access`, and the kernel holds it to its role's access.
    pub fn with_outer_sandbox(mut self, outer: bool) -> Self {
        self.outer_sandbox = outer;
        self
    }

    /// Caps one run's stdout at `cap` bytes instead of [`crate::CLI_OUTPUT_CAP`] (tests).
    pub fn with_output_cap(mut self, cap: usize) -> Self {
        self.output_cap = cap;
        self
    }

    /// Uses `version` instead of asking the CLI (tests).
    pub fn with_version(self, version: Option<crate::claude::Version>) -> Self {
        let _ = self.version.set(version);
        self
    }

    /// The installed version, once read.
    pub fn version(&self) -> Option<crate::claude::Version> {
        self.version.get().copied().flatten()
    }

    /// Runs `program` instead of `codex` from PATH.
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// The arguments for one attempt; `schema_file` is where the schema was written.
    pub fn args(&self, request: &DispatchRequest, schema_file: Option<&Path>) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "exec".into(),
            "--json".into(),
            "--skip-git-repo-check".into(),
            "-C".into(),
            self.root.display().to_string(),
            "--sandbox".into(),
            match request.access {
                _ if self.outer_sandbox => "danger-full-access".into(),
                Access::ReadOnly => "read-only".into(),
                Access::WorkspaceWrite => "workspace-write".into(),
            },
        ];
        let fallback = self.spec_model.as_deref().or(self.def_model.as_deref());
        if let Some(m) = crate::concrete_model(&request.model, fallback) {
            a.extend(["-m".into(), m]);
        }
        if !request.effort.trim().is_empty() {
            a.extend([
                "-c".into(),
                format!("model_reasoning_effort=\"{}\"", effort_value(&request.effort, self.version())),
            ]);
        }
        if let Some(f) = schema_file {
            a.extend(["--output-schema".into(), f.display().to_string()]);
        }
        if !self.project_config {
            // The repository's execpolicy rules are not the user's (its project config is read
            // only for a project the private home trusts, and it trusts none).
            a.push("--ignore-rules".into());
        }
        a.extend(self.extra_args.iter().cloned());
        a.push("-".into());
        a
    }

    /// Classifies one finished run (pure, for tests). `end` is how a failed run ended.
    pub fn classify(&self, stdout: String, stderr: &str, end: Option<String>) -> Result<AgentReply, AgentError> {
        let events = Events::read(&stdout);
        let mut usage = events.usage();
        usage.cost_usd = crate::priced(&usage, self.prices.0, self.prices.1);
        let failed = |reason: String, raw: String| Err(AgentError::Failed { reason, raw, usage });
        let malformed = |reason: String, raw: String| Err(AgentError::Malformed { reason, raw, usage });
        if let Some(end) = end {
            let why =
                events.failure.clone().or(events.errors.last().cloned()).unwrap_or_else(|| crate::tail(stderr, 400));
            return failed(if why.is_empty() { end } else { format!("{end}: {}", crate::head(&why, 300)) }, stdout);
        }
        if let Some(f) = &events.failure {
            return failed(format!("turn.failed: {}", crate::head(f, 300)), stdout);
        }
        let Some(text) = events.message.clone() else {
            if let Some(e) = events.errors.last() {
                return failed(format!("error: {}", crate::head(e, 300)), stdout);
            }
            return malformed("no agent_message item was completed".into(), stdout);
        };
        match crate::json_from_text(&text) {
            Some(document) => Ok(AgentReply { document, usage, raw: stdout }),
            None => malformed(format!("the agent message is not JSON: {}", crate::head(&text, 120)), stdout),
        }
    }
}

/// Why Codex can never answer `schema`: it sends `--output-schema` in OpenAI's strict mode,
/// whose root must be an object schema (`"type": "object"`, or `properties` without a type).
pub fn schema_refusal(schema: &Value) -> Option<String> {
    if crate::schema::openai_strict(schema).is_some() {
        return None;
    }
    let root = match schema.get("type") {
        Some(t) => format!("`\"type\": {t}`"),
        None => "no `type` and no `properties`".to_string(),
    };
    Some(format!(
        "Codex sends --output-schema in strict mode, which needs an object at the root (`\"type\": \"object\"`), and this schema's root has {root}: wrap the value in an object property"
    ))
}

/// What a `codex exec --json` stream said.
#[derive(Debug, Default)]
struct Events {
    message: Option<String>,
    usages: Vec<(u64, u64)>,
    failure: Option<String>,
    errors: Vec<String>,
}

impl Events {
    fn read(stdout: &str) -> Self {
        let mut e = Events::default();
        for line in stdout.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line.trim()) else { continue };
            let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
            match v.get("type").and_then(Value::as_str) {
                Some("item.completed") if v.pointer("/item/type").and_then(Value::as_str) == Some("agent_message") => {
                    e.message = v.pointer("/item/text").and_then(Value::as_str).map(str::to_string);
                }
                Some("turn.completed") => e.usages.push((n("/usage/input_tokens"), n("/usage/output_tokens"))),
                Some("turn.failed") => {
                    e.failure = Some(v.pointer("/error/message").and_then(Value::as_str).unwrap_or("unknown").into());
                }
                Some("error") => e.errors.push(v.get("message").and_then(Value::as_str).unwrap_or("unknown").into()),
                _ => {}
            }
        }
        e
    }

    /// Summed over turns, unless every turn's numbers are at least the previous turn's
    /// (cumulative reports): then the last.
    fn usage(&self) -> Usage {
        let cumulative = self.usages.len() > 1 && self.usages.windows(2).all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1);
        let (input, output) = if cumulative {
            self.usages.last().copied().unwrap_or_default()
        } else {
            self.usages.iter().fold((0, 0), |(a, b), (i, o)| (a + i, b + o))
        };
        Usage { input_tokens: input, output_tokens: output, cost_usd: 0.0 }
    }
}

#[async_trait]
impl Agent for CodexAgent {
    fn describe(&self) -> String {
        self.spec_model.as_ref().map_or("codex".into(), |m| format!("codex:{m}"))
    }

    fn reports_cost(&self) -> bool {
        crate::has_prices(self.prices)
    }

    fn preflight(&self) -> Result<(), String> {
        crate::preflight_cli(&self.program, &self.root, "Codex: npm install -g @openai/codex", &self.version)
    }

    fn schema_refusal(&self, schema: &Value) -> Option<String> {
        schema_refusal(schema)
    }

    async fn invoke(&self, request: &DispatchRequest, options: InvokeOptions) -> Result<AgentReply, AgentError> {
        if self.version.get().is_none() {
            let v = crate::version_async(&self.program, &self.root).await;
            let _ = self.version.set(v);
        }
        let failed = |reason: String| AgentError::Failed { reason, raw: String::new(), usage: Usage::default() };
        session::sweep_stale_schema_files();
        // Codex sends the schema in strict mode: write the strict form (an object root is
        // required: any other is refused before Codex runs, as it is before the first dispatch).
        if let Some(why) = request.schema.as_ref().and_then(schema_refusal) {
            return Err(failed(why));
        }
        let strict = request.schema.as_ref().and_then(crate::schema::openai_strict);
        let home = crate::confine::codex_home(self.project_config.then_some(self.root.as_path()))
            .map_err(|e| failed(format!("create Codex's private home: {e}")))?;
        let home_dir = home.as_ref().map(|h| h.path().to_path_buf());
        let schema_file = match strict.as_ref().or(request.schema.as_ref()) {
            Some(schema) => Some(session::SchemaFile::write(request, schema, home_dir.as_deref()).map_err(failed)?),
            None => None,
        };
        let mut extra_env = self.env.clone();
        extra_env.extend(crate::confine::codex_provider_keys());
        let mut confine = crate::confine::cli(request, &self.root, crate::confine::CODEX_ENV, &extra_env);
        let mut spec = ProcessSpec::new(
            self.program.clone(),
            self.args(request, schema_file.as_ref().map(session::SchemaFile::path)),
            &self.root,
        )
        .with_stdin(crate::brief(request).into_bytes())
        .with_timeout(Some(options.timeout));
        if let Some(h) = &home_dir {
            confine.private.push(h.clone());
            spec = spec.with_env("CODEX_HOME", h.display().to_string());
        }
        spec = spec.confined(confine);
        spec.output_cap = self.output_cap;
        let out = Spawner.run(&spec).await;
        drop(schema_file);
        let out = out.map_err(|e| failed(e.to_string()))?;
        let stdout = out.stdout_text();
        let billed = session::thread_id(&stdout).and_then(|t| session::rollout_usage(&t, home_dir.as_deref()));
        drop(home);
        let secrets = session::secrets();
        let mut result = if out.stdout_truncated {
            Err(crate::truncated_output(stdout, None, self.output_cap))
        } else {
            let end = (!out.success()).then(|| out.describe_end());
            self.classify(stdout, &out.stderr_text(), end)
        };
        if let Some(floor) = billed {
            session::raise_usage(&mut result, floor, self.prices);
        }
        let mut reply = result.map_err(|e| session::scrub_error(e, &secrets))?;
        if let (Some(original), Some(_)) = (&request.schema, &strict) {
            reply.document = crate::schema::drop_optional_nulls(original, reply.document);
        }
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agent() -> CodexAgent {
        CodexAgent::new(None, &AgentDef::default(), Path::new("/repo")).with_version(Some((0, 98, 0)))
    }

    fn stream(lines: &[Value]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    fn msg(text: &str) -> Value {
        json!({"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": text}})
    }

    fn turn(i: u64, o: u64) -> Value {
        json!({"type": "turn.completed", "usage": {"input_tokens": i, "cached_input_tokens": 0, "output_tokens": o}})
    }

    #[test]
    fn maps_pins_and_access_to_flags() {
        let mut req = crate::test_request(Access::ReadOnly);
        let args = agent().args(&req, Some(Path::new("/tmp/s.json"))).join(" ");
        assert_eq!(
            args,
            "exec --json --skip-git-repo-check -C /repo --sandbox read-only -c model_reasoning_effort=\"xhigh\" --output-schema /tmp/s.json --ignore-rules -"
        );
        req.access = Access::WorkspaceWrite;
        req.model = "gpt-5-codex".into();
        req.effort = "max".into();
        let a = agent().args(&req, None).join(" ");
        assert!(a.contains("--sandbox workspace-write -m gpt-5-codex -c model_reasoning_effort=\"xhigh\""), "{a}");
        let a = CodexAgent::new(Some("gpt-5".into()), &AgentDef::default(), Path::new("/r"));
        req.model = "sonnet".into();
        assert!(a.args(&req, None).join(" ").contains("-m gpt-5"), "a tier pin falls back to the spec's model");
    }

    #[test]
    fn efforts_are_lowered_for_older_codex() {
        assert_eq!(effort_value("xhigh", Some((0, 98, 0))), "xhigh");
        assert_eq!(effort_value("max", Some((0, 60, 0))), "xhigh");
        assert_eq!(effort_value("xhigh", Some((0, 39, 0))), "high", "0.39 refuses xhigh");
        assert_eq!(effort_value("max", None), "high");
        assert_eq!(effort_value("Medium", None), "medium");
        let old = CodexAgent::new(None, &AgentDef::default(), Path::new("/r")).with_version(Some((0, 39, 0)));
        let args = old.args(&crate::test_request(Access::ReadOnly), None).join(" ");
        assert!(args.contains("model_reasoning_effort=\"high\""), "{args}");
        assert!(effort_note(Some((0, 39, 0))).contains("before 0.60.0"));
        assert!(!old.reports_cost(), "no prices, no cost");
        let priced = AgentDef { input_usd_per_mtok: Some(1.0), output_usd_per_mtok: Some(4.0), ..Default::default() };
        assert!(CodexAgent::new(None, &priced, Path::new("/r")).reports_cost());
    }

    #[test]
    fn the_last_agent_message_is_the_answer() {
        let out = stream(&[
            json!({"type": "thread.started", "thread_id": "t"}),
            json!({"type": "turn.started"}),
            msg("thinking out loud"),
            json!({"type": "item.completed", "item": {"id": "c", "type": "command_execution", "command": "ls",
                   "aggregated_output": "", "exit_code": 0, "status": "completed"}}),
            msg(r#"{"items": [1]}"#),
            turn(100, 20),
        ]);
        let r = agent().classify(out, "", None).expect("ok");
        assert_eq!(r.document, json!({"items": [1]}));
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (100, 20));
    }

    #[test]
    fn usage_is_cumulative_when_it_only_grows() {
        let e = Events::read(&stream(&[turn(100, 10), turn(250, 30)]));
        assert_eq!((e.usage().input_tokens, e.usage().output_tokens), (250, 30));
        let e = Events::read(&stream(&[turn(100, 10), turn(50, 30)]));
        assert_eq!((e.usage().input_tokens, e.usage().output_tokens), (150, 40));
    }

    #[test]
    fn failures_and_malformed_answers() {
        let a = agent();
        let failed = stream(&[json!({"type": "turn.failed", "error": {"message": "usage limit reached"}})]);
        assert!(
            matches!(a.classify(failed.clone(), "", None), Err(AgentError::Failed { reason, .. }) if reason.contains("usage limit"))
        );
        assert!(matches!(a.classify(failed, "", Some("exit code 1".into())),
            Err(AgentError::Failed { reason, .. }) if reason == "exit code 1: usage limit reached"));
        assert!(matches!(a.classify(String::new(), "boom\n", Some("exit code 2".into())),
            Err(AgentError::Failed { reason, .. }) if reason == "exit code 2: boom"));
        assert!(matches!(a.classify(stream(&[turn(1, 1)]), "", None), Err(AgentError::Malformed { .. })));
        assert!(matches!(a.classify(stream(&[msg("Done!"), turn(1, 1)]), "", None),
            Err(AgentError::Malformed { reason, usage, .. }) if reason.contains("not JSON") && usage.input_tokens == 1));
        assert!(matches!(a.classify(stream(&[json!({"type": "error", "message": "stream disconnected"})]), "", None),
            Err(AgentError::Failed { reason, .. }) if reason.contains("disconnected")));
    }
    /// A fake `codex` that refuses a schema file outside OpenAI's strict subset (as the real
    /// API does) and answers with nulls for the optional properties, as strict models do.
    const FAKE_CODEX: &str = r#"#!/usr/bin/env python3
import json, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("codex-cli 0.98.0")
    sys.exit(0)
STRICT
schema = json.load(open(args[args.index("--output-schema") + 1]))
err = check_strict(schema)
if err:
    print(json.dumps({"type": "error", "message": "Invalid schema for response_format 'codex_output_schema': " + err}))
    print(json.dumps({"type": "turn.failed", "error": {"message": "invalid_json_schema"}}))
    sys.exit(1)
answer = {"angle": "a", "roundNotes": None, "items": [{"id": "x", "title": "t", "location": "a.rs:1",
          "description": None, "evidence": None, "severity": None}]}
print(json.dumps({"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": json.dumps(answer)}}))
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 2}}))
"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_schema_file_is_strict_and_optional_nulls_are_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = dir.path().join("codex");
        std::fs::write(&program, FAKE_CODEX.replace("STRICT", STRICT_PY)).expect("write");
        let mut perm = std::fs::metadata(&program).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&program, perm).expect("chmod");
        let a = CodexAgent::new(None, &AgentDef::default(), dir.path()).with_program(program.display().to_string());
        assert_eq!(a.preflight(), Ok(()));
        assert_eq!(a.version(), Some((0, 98, 0)), "read once at preflight");
        let mut req = crate::test_request(Access::ReadOnly);
        let original = crate::schema::tests::finder();
        req.schema = Some(original.clone());
        let reply =
            a.invoke(&req, InvokeOptions { timeout: std::time::Duration::from_secs(30) }).await.expect("answers");
        assert_eq!(reply.document["items"][0], json!({"id": "x", "title": "t", "location": "a.rs:1"}));
        assert_eq!(work_runtime::dispatch::validate(&original, &reply.document), Ok(()));
    }

    /// A fake `codex` whose stream carries a 10 MiB command output before the answer (what a
    /// few large command outputs add up to).
    const BIG_CODEX: &str = r#"
if sys.argv[1:] == ["--version"]:
    print("codex-cli 0.171.0")
    sys.exit(0)
print(json.dumps({"type": "thread.started", "thread_id": "no-such-thread"}))
print(json.dumps({"type": "item.completed", "item": {"id": "c", "type": "command_execution", "aggregated_output": "x" * (10 << 20)}}))
print(json.dumps({"type": "item.completed", "item": {"id": "m", "type": "agent_message", "text": "{\"items\": []}"}}))
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 2}}))
"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_stream_keeps_its_answer_and_a_cut_one_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = crate::fake_program(dir.path(), "codex", BIG_CODEX).display().to_string();
        let opts = InvokeOptions { timeout: std::time::Duration::from_secs(60) };
        let req = crate::test_request(Access::ReadOnly);
        let a = CodexAgent::new(None, &AgentDef::default(), dir.path()).with_program(program.clone());
        let reply = a.invoke(&req, opts).await.expect("10 MiB of tool output do not lose the answer");
        assert_eq!(reply.document, json!({"items": []}));
        let cut =
            CodexAgent::new(None, &AgentDef::default(), dir.path()).with_program(program).with_output_cap(1 << 20);
        match cut.invoke(&req, opts).await {
            Err(AgentError::Failed { reason, .. }) => assert!(reason.contains("stdout exceeded"), "{reason}"),
            other => panic!("a cut stream fails (not retried as malformed): {other:?}"),
        }
    }

    /// The strict-mode check the fake CLIs in tests run on a schema (Python), shared with the
    /// CLI's end-to-end tests.
    const STRICT_PY: &str = include_str!("../testdata/strict_schema_check.py");
}
