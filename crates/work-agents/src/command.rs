//! The command backend: `work.dispatch.v1` over stdin/stdout.
//!
//! The program is started once per attempt in the repository root, receives the request as
//! one JSON object on stdin (then EOF), and answers with one JSON document on stdout and exit
//! code 0. The document may be an envelope `{"work_result": …, "usage": {…}}`.
//! Exit code ≠ 0, a kill or the timeout is a failure; stdout that is not one JSON document (or
//! overflows the cap) is malformed.

use async_trait::async_trait;
use serde_json::Value;
use std::path::{Path, PathBuf};
use work_runtime::budget::Usage;
use work_runtime::dispatch::{Access, Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};
use work_runtime::sandbox::{Confine, Network};
use work_runtime::spawn::{DEFAULT_OUTPUT_CAP, ProcessSpec, SpawnError, Spawner};

/// How much of stderr is quoted in a failure reason.
const STDERR_TAIL: usize = 400;

/// A program speaking the command protocol.
#[derive(Debug, Clone)]
pub struct CommandAgent {
    argv: Vec<String>,
    root: PathBuf,
    output_cap: usize,
    /// Environment names the program gets beyond the base allowlist (`[agents.X].env`).
    env: Vec<String>,
    /// The program reaches the network (`[agents.X].network`).
    network: bool,
}

impl CommandAgent {
    /// An agent running `argv` in `root`, confined with no network and the base environment.
    pub fn new(argv: Vec<String>, root: &Path) -> Self {
        Self { argv, root: root.to_path_buf(), output_cap: DEFAULT_OUTPUT_CAP, env: Vec::new(), network: false }
    }

    /// Takes the environment names and network setting of an `[agents.NAME]` table.
    pub fn with_def(mut self, def: &work_config::AgentDef) -> Self {
        self.env = def.env.clone();
        self.network = def.network.unwrap_or(false);
        self
    }

    /// How one attempt's process is confined: its role's access, no network unless allowed.
    fn confine(&self, request: &DispatchRequest) -> Confine {
        let network = if self.network { Network::Host } else { Network::None };
        let c = match request.access {
            Access::ReadOnly => Confine::read_only(&self.root, network),
            Access::WorkspaceWrite => Confine::write(&self.root, network),
        };
        c.allow_env(self.env.iter().cloned())
    }

    /// Sets the stdout/stderr cap.
    pub fn with_output_cap(mut self, cap: usize) -> Self {
        self.output_cap = cap;
        self
    }
}

/// Splits an answer into (document, usage): unwraps `{"work_result": …, "usage": …}`.
pub fn unwrap_envelope(doc: Value) -> (Value, Usage) {
    if let Value::Object(mut m) = doc {
        if m.contains_key("work_result") {
            let usage = m.get("usage").map(parse_usage).unwrap_or_default();
            let result = m.remove("work_result").unwrap_or(Value::Null);
            return (result, usage);
        }
        return (Value::Object(m), Usage::default());
    }
    (doc, Usage::default())
}

/// Reads `{"input_tokens": N, "output_tokens": N, "cost_usd": X}`; missing or wrong-typed
/// fields count as zero.
pub fn parse_usage(v: &Value) -> Usage {
    Usage {
        input_tokens: v.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: v.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        cost_usd: v.get("cost_usd").and_then(Value::as_f64).filter(|c| c.is_finite() && *c >= 0.0).unwrap_or(0.0),
    }
}

fn tail(s: &str, n: usize) -> String {
    let t = s.trim();
    let start = t.char_indices().rev().nth(n).map(|(i, _)| i).unwrap_or(0);
    t[start..].split_whitespace().collect::<Vec<_>>().join(" ")
}

#[async_trait]
impl Agent for CommandAgent {
    fn describe(&self) -> String {
        format!("command:{}", self.argv.join(" "))
    }

    fn preflight(&self) -> Result<(), String> {
        let program = self.argv.first().ok_or("empty command")?;
        crate::check_program(program, &self.root, None)
    }

    async fn invoke(&self, request: &DispatchRequest, options: InvokeOptions) -> Result<AgentReply, AgentError> {
        let failed = |reason: String, raw: String| AgentError::Failed { reason, raw, usage: Usage::default() };
        let Some((program, args)) = self.argv.split_first() else {
            return Err(failed("empty command".into(), String::new()));
        };
        let stdin = serde_json::to_vec(request).map_err(|e| failed(format!("encode request: {e}"), String::new()))?;
        let mut spec = ProcessSpec::new(program.clone(), args.to_vec(), &self.root)
            .with_stdin(stdin)
            .with_timeout(Some(options.timeout))
            .with_env("WORK_DISPATCH_ID", request.dispatch_id.clone())
            .with_env("WORK_ROLE", request.role.clone())
            .confined(self.confine(request));
        spec.output_cap = self.output_cap;
        let out = Spawner.run(&spec).await.map_err(|e: SpawnError| failed(e.to_string(), String::new()))?;
        let stdout = out.stdout_text();
        if !out.success() {
            let err = tail(&out.stderr_text(), STDERR_TAIL);
            let reason = if err.is_empty() { out.describe_end() } else { format!("{}: {err}", out.describe_end()) };
            return Err(failed(reason, stdout));
        }
        if out.stdout_truncated {
            return Err(AgentError::Malformed {
                reason: format!("stdout exceeded {} bytes", self.output_cap),
                raw: tail(&stdout, 2000),
                usage: Usage::default(),
            });
        }
        match serde_json::from_str::<Value>(stdout.trim()) {
            Ok(doc) => {
                let (document, usage) = unwrap_envelope(doc);
                Ok(AgentReply { document, usage, raw: stdout })
            }
            Err(e) => Err(AgentError::Malformed {
                reason: if stdout.trim().is_empty() {
                    "empty stdout".into()
                } else {
                    format!("stdout is not one JSON document: {e}")
                },
                raw: stdout,
                usage: Usage::default(),
            }),
        }
    }
}

/// True when `program` is an executable file in a PATH directory.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(program)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;
    use work_runtime::dispatch::{Access, PROTOCOL};

    fn request() -> DispatchRequest {
        DispatchRequest {
            protocol: PROTOCOL.into(),
            run_id: "r".into(),
            dispatch_id: "d1".into(),
            attempt: 1,
            workflow: "exhaust".into(),
            role: "finder".into(),
            model: "m".into(),
            effort: "e".into(),
            access: Access::ReadOnly,
            cwd: "/".into(),
            prompt: "p".into(),
            schema: None,
            context: json!({"angle": "a", "round": 1}),
        }
    }

    async fn run(script: &str) -> Result<AgentReply, AgentError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let agent = CommandAgent::new(vec!["sh".into(), "-c".into(), script.into()], dir.path());
        agent.invoke(&request(), InvokeOptions { timeout: Duration::from_secs(5) }).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_request_and_unwraps_envelope() {
        let r = run(r#"grep -q '"angle":"a"' && echo '{"work_result": {"x": 1}, "usage": {"input_tokens": 5, "output_tokens": 7, "cost_usd": 0.5}}'"#)
            .await
            .expect("ok");
        assert_eq!(r.document, json!({"x": 1}));
        assert_eq!(r.usage.total_tokens(), 12);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn classifies_failures_and_garbage() {
        assert!(
            matches!(run("echo oops >&2; exit 4").await, Err(AgentError::Failed { reason, .. }) if reason.contains("exit code 4") && reason.contains("oops"))
        );
        assert!(matches!(run("echo not json").await, Err(AgentError::Malformed { .. })));
        assert!(matches!(run("true").await, Err(AgentError::Malformed { reason, .. }) if reason == "empty stdout"));
    }
}
