//! Agent backends: each turns a `work.dispatch.v1` request into a JSON document.
//!
//! Backends know nothing of workflows; the runtime's [`work_runtime::dispatch::Dispatcher`]
//! validates what they return (a backend's own claim of schema conformance is never trusted).
//! Backends only classify: a transport failure, a non-zero exit, a kill or a timeout is
//! [`AgentError::Failed`](work_runtime::dispatch::AgentError::Failed); an answer that holds no
//! usable document (not JSON, a null structured output, a refusal, a truncated answer) is
//! [`AgentError::Malformed`](work_runtime::dispatch::AgentError::Malformed). Every process is
//! started through the runtime's spawner, which kills the whole process group on timeout.
//!
//! - [`command`]: any program speaking the command protocol;
//! - [`claude`]: the Claude Code CLI, headless (`claude -p --output-format json --json-schema …`);
//! - [`codex`]: the Codex CLI (`codex exec --json --output-schema FILE …`);
//! - [`openai`]: an OpenAI-compatible Chat Completions endpoint with a JSON-schema response format;
//! - [`anthropic`]: the Anthropic Messages API with native structured output or forced tool use;
//! - [`tools`]: the tools the two HTTP backends give a model, and the engine-side loop that
//!   runs the model's tool calls turn after turn;
//! - [`check`]: which backends are usable on this machine (`work agents check`).
//!
//! The versions each backend targets, and how a role's access maps to each tool's controls,
//! are recorded in `docs/agents.md`.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod anthropic;
pub mod check;
pub mod claude;
pub mod codex;
pub mod command;
mod confine;
mod http;
pub mod openai;
mod per_schema;
pub mod schema;
#[cfg(test)]
mod testserver;
pub mod tools;

use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use work_config::{AgentSpec, ResolvedRole};
use work_runtime::budget::Usage;
use work_runtime::dispatch::Agent;

/// Why a backend could not be built for a role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The backend is not available in this build.
    #[error("use agent `{0}`: this backend is not available yet")]
    Unsupported(String),
    /// The backend cannot run here (CLI missing, key absent) or is misconfigured.
    #[error("use agent `{spec}`: {reason}")]
    Unusable {
        /// The spec.
        spec: String,
        /// Why.
        reason: String,
    },
}

/// Builds the backend for a resolved role, rooted at the repository root.
pub fn build(role: &ResolvedRole, root: &Path) -> Result<Arc<dyn Agent>, BuildError> {
    let unusable = |reason: String| BuildError::Unusable { spec: describe_spec(&role.spec), reason };
    match &role.spec {
        AgentSpec::Command(argv) => Ok(Arc::new(command::CommandAgent::new(argv.clone(), root).with_def(&role.def))),
        AgentSpec::Claude(model) => Ok(Arc::new(claude::ClaudeAgent::new(model.clone(), &role.def, root))),
        AgentSpec::Codex(model) => Ok(Arc::new(
            codex::CodexAgent::new(model.clone(), &role.def, root)
                .with_outer_sandbox(work_runtime::sandbox::mode().is_kernel()),
        )),
        AgentSpec::OpenAi(model) => Ok(Arc::new(openai::OpenAiAgent::new(model, &role.def).map_err(unusable)?)),
        AgentSpec::Anthropic(model) => {
            Ok(Arc::new(anthropic::AnthropicAgent::new(model, &role.def).map_err(unusable)?))
        }
        AgentSpec::Named(_) => Err(unusable("a named agent must be resolved through work.toml first".into())),
    }
}

/// The SPEC string for a parsed spec.
pub fn describe_spec(spec: &AgentSpec) -> String {
    match spec {
        AgentSpec::Command(argv) => format!("command:{}", argv.join(" ")),
        AgentSpec::Claude(m) => m.as_ref().map_or("claude".into(), |m| format!("claude:{m}")),
        AgentSpec::Codex(m) => m.as_ref().map_or("codex".into(), |m| format!("codex:{m}")),
        AgentSpec::OpenAi(m) => format!("openai:{m}"),
        AgentSpec::Anthropic(m) => format!("anthropic:{m}"),
        AgentSpec::Named(n) => n.clone(),
    }
}

pub use work_config::{TIERS, concrete_model, is_tier};

/// A `MAJOR.MINOR.PATCH` version of a CLI.
pub type Version = (u64, u64, u64);

/// Parses the first `MAJOR.MINOR.PATCH` in a `--version` line (`2.1.104 (Claude Code)`,
/// `codex-cli 0.98.0`).
pub fn parse_version(line: &str) -> Option<Version> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.')).find_map(|w| {
        let mut parts = w.split('.').map(|p| p.parse::<u64>().ok());
        match (parts.next(), parts.next(), parts.next()) {
            (Some(Some(a)), Some(Some(b)), Some(Some(c))) => Some((a, b, c)),
            _ => None,
        }
    })
}

/// Versions already read in this process, by program: every role building its own backend
/// asks the CLI once at most.
static VERSIONS: std::sync::Mutex<std::collections::BTreeMap<String, Option<Version>>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

fn remembered_version(program: &str) -> Option<Option<Version>> {
    VERSIONS.lock().ok().and_then(|m| m.get(program).copied())
}

fn remember_version(program: &str, v: Option<Version>) {
    if let Ok(mut m) = VERSIONS.lock() {
        m.insert(program.to_string(), v);
    }
}

/// The parsed `program --version`, from synchronous code (on a helper thread with its own
/// runtime, so that it works inside and outside an async context); `None` when it cannot be
/// read. Remembered for the process.
pub(crate) fn version_blocking(program: &str, root: &Path) -> Option<Version> {
    if let Some(v) = remembered_version(program) {
        return v;
    }
    let spec = work_runtime::spawn::ProcessSpec::new(program, vec!["--version".into()], root)
        .with_timeout(Some(std::time::Duration::from_secs(10)));
    let out =
        std::thread::spawn(move || work_runtime::spawn::Spawner.run_blocking(&spec)).join().ok().and_then(Result::ok);
    let v = out
        .filter(work_runtime::spawn::ProcessOutput::success)
        .and_then(|o| o.stdout_text().lines().map(str::trim).find(|l| !l.is_empty()).and_then(parse_version));
    remember_version(program, v);
    v
}

/// Checks that `program` can be started: a path must name an executable file (relative to
/// `root`), a bare name must be an executable on PATH. `install` is a hint for a missing CLI.
pub(crate) fn check_program(program: &str, root: &Path, install: Option<&str>) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        let p = if Path::new(program).is_absolute() { std::path::PathBuf::from(program) } else { root.join(program) };
        return match std::fs::metadata(&p) {
            Err(_) => Err(format!("program `{program}` does not exist")),
            Ok(m) if !m.is_file() => Err(format!("program `{program}` is not a file")),
            Ok(m) if m.permissions().mode() & 0o111 == 0 => Err(format!("program `{program}` is not executable")),
            Ok(_) => Ok(()),
        };
    }
    if command::on_path(program) {
        return Ok(());
    }
    Err(match install {
        Some(hint) => format!("the `{program}` CLI is not on PATH (install {hint})"),
        None => format!("program `{program}` is not on PATH"),
    })
}

/// Preflight of a CLI backend: the program can start, and its version is read once.
pub(crate) fn preflight_cli(
    program: &str,
    root: &Path,
    install: &str,
    version: &std::sync::OnceLock<Option<Version>>,
) -> Result<(), String> {
    check_program(program, root, Some(install))?;
    if version.get().is_none() {
        let _ = version.set(version_blocking(program, root));
    }
    Ok(())
}

/// [`version_blocking`] from async code.
pub(crate) async fn version_async(program: &str, root: &Path) -> Option<Version> {
    if let Some(v) = remembered_version(program) {
        return v;
    }
    let v = check::version(program, root).await.and_then(|l| parse_version(&l));
    remember_version(program, v);
    v
}

/// True when both prices are set, so that cost can be accounted.
pub(crate) fn has_prices(prices: (Option<f64>, Option<f64>)) -> bool {
    prices.0.is_some() && prices.1.is_some()
}

/// Cost of `usage` at the given prices (USD per million tokens); 0 when no price is set.
pub fn priced(usage: &Usage, input_per_mtok: Option<f64>, output_per_mtok: Option<f64>) -> f64 {
    let cost = usage.input_tokens as f64 * input_per_mtok.unwrap_or(0.0) / 1e6
        + usage.output_tokens as f64 * output_per_mtok.unwrap_or(0.0) / 1e6;
    if cost.is_finite() && cost > 0.0 { cost } else { 0.0 }
}

/// Reads a JSON document out of model text: the whole text, or the body of one fenced
/// ```` ```json ```` block. `None` when neither parses.
pub fn json_from_text(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        return Some(v);
    }
    let start = t.find("```")?;
    let rest = &t[start + 3..];
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    let end = rest.find("```")?;
    serde_json::from_str(rest[..end].trim()).ok()
}

/// The stdout cap of a CLI backend's run: Claude Code and Codex print every tool output they
/// saw, so a few large command outputs must not push the answer past the cap.
pub const CLI_OUTPUT_CAP: usize = 64 * 1024 * 1024;

/// The largest rendered context in a brief (bytes); past it the context is cut, and says so.
pub const CONTEXT_CAP: usize = 256 * 1024;

/// What a model receives for a request: the prompt, then the request's `context` as a JSON
/// block (the briefs refer to it as `context.seen`, `context.diff` …). The command backend
/// sends the whole request instead.
pub fn brief(request: &work_runtime::dispatch::DispatchRequest) -> String {
    let empty = match &request.context {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    };
    if empty {
        return request.prompt.clone();
    }
    let mut text = serde_json::to_string_pretty(&request.context).unwrap_or_default();
    if text.len() > CONTEXT_CAP {
        let mut cut = CONTEXT_CAP;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(&format!("\n… (context cut at {CONTEXT_CAP} bytes)"));
    }
    format!(
        "{}\n\n## context\nWhat the brief calls `context` (`context.<field>`) is this JSON object:\n```json\n{text}\n```\n",
        request.prompt.trim_end()
    )
}

/// The failure of a run whose stdout overflowed its cap ([`CLI_OUTPUT_CAP`]): the answer is
/// lost, and the attempt fails (a failure is not retried, so the run is never paid twice
/// silently).
pub(crate) fn truncated_output(stdout: String, usage: Option<Usage>, cap: usize) -> work_runtime::dispatch::AgentError {
    work_runtime::dispatch::AgentError::Failed {
        reason: format!("stdout exceeded {cap} bytes: the answer was cut off"),
        raw: tail(&stdout, 2000),
        usage: usage.unwrap_or_default(),
    }
}

/// One line, at most `n` characters from the end of `s`, whitespace collapsed.
pub(crate) fn tail(s: &str, n: usize) -> String {
    let t = s.trim();
    let start = t.char_indices().rev().nth(n).map(|(i, _)| i).unwrap_or(0);
    t[start..].split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One line, at most `n` characters from the start of `s`, whitespace collapsed.
pub(crate) fn head(s: &str, n: usize) -> String {
    let one = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}

/// A finder request with the code's `opus`/`xhigh` pins and a small schema (tests).
#[cfg(test)]
pub(crate) fn test_request(access: work_runtime::dispatch::Access) -> work_runtime::dispatch::DispatchRequest {
    work_runtime::dispatch::DispatchRequest {
        protocol: work_runtime::dispatch::PROTOCOL.into(),
        run_id: "r".into(),
        dispatch_id: "d0001-finder-x".into(),
        attempt: 1,
        workflow: "exhaust".into(),
        role: "finder".into(),
        model: "opus".into(),
        effort: "xhigh".into(),
        access,
        cwd: "/".into(),
        prompt: "find things".into(),
        schema: Some(serde_json::json!({"type": "object", "required": ["items"]})),
        context: serde_json::json!({"angle": "a", "round": 1}),
    }
}

/// Writes an executable Python program `name` into `dir` (a fake CLI for tests).
#[cfg(test)]
pub(crate) fn fake_program(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/usr/bin/env python3\nimport json, sys\n{body}")).expect("write the fake");
    let mut perm = std::fs::metadata(&p).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).expect("chmod");
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tiers_fall_back_to_the_spec_model() {
        assert!(is_tier("opus") && is_tier("Sonnet") && !is_tier("gpt-5"));
        assert_eq!(concrete_model("opus", Some("qwen")), Some("qwen".into()));
        assert_eq!(concrete_model("gpt-5", Some("qwen")), Some("gpt-5".into()));
        assert_eq!(concrete_model("sonnet", None), None);
        assert_eq!(concrete_model("sonnet", Some("opus")), None);
    }

    #[test]
    fn versions_are_read_from_version_lines() {
        assert_eq!(parse_version("2.1.104 (Claude Code)"), Some((2, 1, 104)));
        assert_eq!(parse_version("codex-cli 0.98.0"), Some((0, 98, 0)));
        assert_eq!(parse_version("codex-cli 0.60.1-alpha.2"), Some((0, 60, 1)));
        assert_eq!(parse_version("v1.2"), None);
    }

    #[test]
    fn json_is_read_whole_or_from_one_fence() {
        assert_eq!(json_from_text(" {\"a\": 1} "), Some(json!({"a": 1})));
        assert_eq!(json_from_text("Here:\n```json\n{\"a\": 2}\n```\n"), Some(json!({"a": 2})));
        assert_eq!(json_from_text("no json here"), None);
    }

    #[test]
    fn prices_account_cost() {
        let u = Usage { input_tokens: 1_000_000, output_tokens: 500_000, cost_usd: 0.0 };
        assert!((priced(&u, Some(2.0), Some(10.0)) - 7.0).abs() < 1e-9);
        assert_eq!(priced(&u, None, None), 0.0);
    }

    #[test]
    fn the_brief_carries_the_context() {
        let mut r = test_request(work_runtime::dispatch::Access::ReadOnly);
        r.context = json!({"seen": [{"id": "known-item"}], "diff": "+added line"});
        let b = brief(&r);
        assert!(b.starts_with("find things\n\n## context\n"), "{b}");
        assert!(b.contains("known-item") && b.contains("+added line"), "{b}");
        r.context = json!({});
        assert_eq!(brief(&r), "find things");
        r.context = json!({"diff": "x".repeat(CONTEXT_CAP + 10)});
        assert!(brief(&r).contains("context cut at"));
    }

    #[test]
    fn every_model_backend_sends_the_context() {
        let cfg = work_config::Config::default();
        let mut r = test_request(work_runtime::dispatch::Access::ReadOnly);
        r.context = json!({"seen": [{"id": "known-item"}]});
        let role = |spec: &str| cfg.resolve_role("finder", Some(spec), "").expect("resolves");
        let openai = openai::OpenAiAgent::new("qwen", &role("openai:qwen").def).expect("builds");
        assert!(openai.body(&r).to_string().contains("known-item"));
        let anthropic = anthropic::AnthropicAgent::new("claude-x", &role("anthropic:claude-x").def).expect("builds");
        assert!(anthropic.body(&r).to_string().contains("known-item"));
    }

    #[test]
    fn build_rejects_nothing_it_can_describe() {
        let cfg = work_config::Config::default();
        for spec in ["claude", "codex:gpt-5", "openai:qwen", "anthropic:claude-sonnet-4-5", "command:true"] {
            let role = cfg.resolve_role("finder", Some(spec), "").expect("resolves");
            let agent = build(&role, Path::new("/")).expect("builds");
            assert!(agent.describe().starts_with(spec.split(':').next().unwrap_or("")), "{}", agent.describe());
        }
    }
}
