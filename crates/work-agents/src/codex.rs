//! `codex[:MODEL]`: the Codex CLI, non-interactive.
//!
//! One attempt is one `codex exec` run, the brief on stdin (`-`):
//!
//! ```text
//! codex exec --json --skip-git-repo-check -C ROOT --sandbox read-only|workspace-write
//!            [-m MODEL] -c model_reasoning_effort="EFFORT" [--output-schema FILE] [extra_args…] -
//! ```
//!
//! - Model: the role's pin when concrete, else the spec's model, else no `-m` (the CLI's own
//!   default): the code's tier pins (`opus`, `sonnet`) mean nothing to Codex.
//! - Effort: `model_reasoning_effort` with the pin (`max` is sent as `xhigh`; Codex maps an
//!   effort a model lacks to the nearest it has).
//! - Access: `--sandbox read-only` or `--sandbox workspace-write` (exec never asks for approval).
//! - The schema is written to a temporary file for `--output-schema` and removed afterwards.
//! - stdout is JSONL: the last completed `agent_message` item is the answer (a JSON string when
//!   a schema is given); `turn.completed` carries usage, summed over turns unless the numbers
//!   only grow (then they are cumulative and the last one is the total); `turn.failed` and a
//!   non-zero exit fail the attempt; no agent message, or one that is not JSON, is malformed.

use crate::command::on_path;
use async_trait::async_trait;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use work_config::AgentDef;
use work_runtime::budget::Usage;
use work_runtime::dispatch::{Access, Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};
use work_runtime::spawn::{ProcessSpec, Spawner};

static SCHEMA_FILES: AtomicU64 = AtomicU64::new(0);

/// The Codex backend.
#[derive(Debug, Clone)]
pub struct CodexAgent {
    program: String,
    spec_model: Option<String>,
    def_model: Option<String>,
    root: PathBuf,
    extra_args: Vec<String>,
    prices: (Option<f64>, Option<f64>),
}

/// The `model_reasoning_effort` value for a role's effort.
pub fn effort_value(effort: &str) -> String {
    match effort.trim().to_ascii_lowercase().as_str() {
        "max" => "xhigh".into(),
        other => other.to_string(),
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
        }
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
                Access::ReadOnly => "read-only".into(),
                Access::WorkspaceWrite => "workspace-write".into(),
            },
        ];
        let fallback = self.spec_model.as_deref().or(self.def_model.as_deref());
        if let Some(m) = crate::concrete_model(&request.model, fallback) {
            a.extend(["-m".into(), m]);
        }
        if !request.effort.trim().is_empty() {
            a.extend(["-c".into(), format!("model_reasoning_effort=\"{}\"", effort_value(&request.effort))]);
        }
        if let Some(f) = schema_file {
            a.extend(["--output-schema".into(), f.display().to_string()]);
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

    fn preflight(&self) -> Result<(), String> {
        if self.program.contains('/') {
            if !Path::new(&self.program).exists() {
                return Err(format!("`{}` does not exist", self.program));
            }
        } else if !on_path(&self.program) {
            return Err(format!(
                "the `{}` CLI is not on PATH (install Codex: npm install -g @openai/codex)",
                self.program
            ));
        }
        Ok(())
    }

    async fn invoke(&self, request: &DispatchRequest, options: InvokeOptions) -> Result<AgentReply, AgentError> {
        let failed = |reason: String| AgentError::Failed { reason, raw: String::new(), usage: Usage::default() };
        let schema_file = match &request.schema {
            Some(schema) => {
                let n = SCHEMA_FILES.fetch_add(1, Ordering::SeqCst);
                let safe: String = request
                    .dispatch_id
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                    .take(60)
                    .collect();
                let path = std::env::temp_dir().join(format!(
                    "work-codex-schema-{}-{safe}-a{}-{n}.json",
                    std::process::id(),
                    request.attempt
                ));
                work_runtime::fsx::write_json_atomic(&path, schema)
                    .map_err(|e| failed(format!("write the output schema to {}: {e}", path.display())))?;
                Some(path)
            }
            None => None,
        };
        let spec = ProcessSpec::new(self.program.clone(), self.args(request, schema_file.as_deref()), &self.root)
            .with_stdin(request.prompt.clone().into_bytes())
            .with_timeout(Some(options.timeout));
        let out = Spawner.run(&spec).await;
        if let Some(p) = &schema_file {
            let _ = std::fs::remove_file(p);
        }
        let out = out.map_err(|e| failed(e.to_string()))?;
        let end = (!out.success()).then(|| out.describe_end());
        self.classify(out.stdout_text(), &out.stderr_text(), end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agent() -> CodexAgent {
        CodexAgent::new(None, &AgentDef::default(), Path::new("/repo"))
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
            "exec --json --skip-git-repo-check -C /repo --sandbox read-only -c model_reasoning_effort=\"xhigh\" --output-schema /tmp/s.json -"
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
}
