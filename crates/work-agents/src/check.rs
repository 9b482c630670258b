//! `work agents check`: which backends are usable on this machine, and why not.
//!
//! The four built-in backends are always listed (`claude`, `codex`, `openai`, `anthropic`);
//! then every agent the configuration names: `[agents.NAME]` entries, the default `agent`, and
//! each `[roles.R].agent`. A backend is usable when it can start here: its CLI is on PATH, its
//! key is set, its settings are valid, its model is not banned, and a CLI has credentials
//! (`claude auth status`; for Codex the selected provider's `env_key` variable, else
//! `OPENAI_API_KEY`/`CODEX_API_KEY` or `codex login status`). Nothing is dispatched; a CLI is
//! also asked `--version`, from which the report says how role efforts will be sent to it
//! (`xhigh` and `max` are lowered for older Claude Code and Codex releases). Each line also says
//! which roles the backend can serve, and why ([`roles`]).

use crate::{BuildError, build, describe_spec};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;
use work_config::{AgentDef, AgentSpec, Config, ResolvedRole};
use work_runtime::spawn::{ProcessSpec, Spawner};

/// How long `--version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentCheck {
    /// The name (`claude`, a `[agents.NAME]` name, or the SPEC given in the config).
    pub name: String,
    /// The backend (`claude`, `codex`, `openai`, `anthropic`, `command`).
    pub backend: String,
    /// The resolved SPEC.
    pub spec: String,
    /// True when the configuration names this agent.
    pub configured: bool,
    /// True when it can run here.
    pub usable: bool,
    /// Why not, when not usable.
    pub reason: Option<String>,
    /// The CLI's `--version`, for CLI backends found on PATH.
    pub version: Option<String>,
    /// The endpoint, for HTTP backends.
    pub endpoint: Option<String>,
    /// How role efforts are sent, for CLI backends found on PATH (`xhigh sent as high (before
    /// 2.1.111)`).
    pub efforts: Option<String>,
    /// Which roles the backend can serve, and why ([`roles`]).
    pub roles: String,
}

/// Which roles a backend can serve, and why: the CLIs and `command:` programs bring their own
/// tools; the HTTP backends get the engine's tool loop (read-only roles: read, list, search;
/// write roles: also run commands, edit, write and patch files), up to `max_turns` turns.
pub fn roles(spec: &AgentSpec, def: &AgentDef) -> String {
    let turns = def.max_turns.unwrap_or(crate::tools::DEFAULT_MAX_TURNS);
    let names =
        |access| crate::tools::offered(access).into_iter().map(crate::tools::Tool::name).collect::<Vec<_>>().join(", ");
    match spec {
        AgentSpec::Claude(_) => "all roles: Claude Code's own tools, held to each role's access".into(),
        AgentSpec::Codex(_) => "all roles: Codex's own tools, in its read-only or workspace-write sandbox".into(),
        AgentSpec::Command(_) => {
            "all roles: the program reads and writes what it will (access is in the request)".into()
        }
        AgentSpec::OpenAi(_) | AgentSpec::Anthropic(_) => format!(
            "all roles through the engine's tools, up to {turns} turns: read-only roles {}; write roles {}",
            names(work_runtime::dispatch::Access::ReadOnly),
            names(work_runtime::dispatch::Access::WorkspaceWrite)
        ),
        AgentSpec::Named(_) => "unresolved".into(),
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Built-ins first, then configured agents by name.
    pub agents: Vec<AgentCheck>,
}

impl Report {
    /// True when every configured agent is usable.
    pub fn configured_usable(&self) -> bool {
        self.agents.iter().filter(|a| a.configured).all(|a| a.usable)
    }
}

fn backend_of(spec: &AgentSpec) -> &'static str {
    match spec {
        AgentSpec::Command(_) => "command",
        AgentSpec::Claude(_) => "claude",
        AgentSpec::Codex(_) => "codex",
        AgentSpec::OpenAi(_) => "openai",
        AgentSpec::Anthropic(_) => "anthropic",
        AgentSpec::Named(_) => "named",
    }
}

/// The first line of `program --version`, when it answers.
pub async fn version(program: &str, root: &Path) -> Option<String> {
    let spec = ProcessSpec::new(program, vec!["--version".into()], root).with_timeout(Some(VERSION_TIMEOUT));
    let out = Spawner.run(&spec).await.ok()?;
    if !out.success() {
        return None;
    }
    out.stdout_text().lines().map(str::trim).find(|l| !l.is_empty()).map(|l| crate::head(l, 80))
}

fn endpoint(spec: &AgentSpec, def: &AgentDef) -> Option<String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    match spec {
        AgentSpec::OpenAi(_) => Some(
            def.base_url.clone().or(env("OPENAI_BASE_URL")).unwrap_or_else(|| crate::openai::DEFAULT_BASE_URL.into()),
        ),
        AgentSpec::Anthropic(_) => Some(
            def.base_url
                .clone()
                .or(env("ANTHROPIC_BASE_URL"))
                .unwrap_or_else(|| crate::anthropic::DEFAULT_BASE_URL.into()),
        ),
        _ => None,
    }
    .map(|u| crate::http::endpoint_of(&u))
}

/// Checks one agent.
pub async fn check_one(name: &str, spec: &AgentSpec, def: &AgentDef, root: &Path, configured: bool) -> AgentCheck {
    let role = ResolvedRole {
        role: "check".into(),
        spec: spec.clone(),
        def: def.clone(),
        model: spec.model().map(str::to_string).or(def.model.clone()).unwrap_or_default(),
        effort: def.effort.clone().unwrap_or_default(),
        timeout_secs: 600,
    };
    let mut c = AgentCheck {
        name: name.into(),
        backend: backend_of(spec).into(),
        spec: describe_spec(spec),
        configured,
        usable: false,
        reason: None,
        version: None,
        endpoint: endpoint(spec, def),
        efforts: None,
        roles: roles(spec, def),
    };
    match build(&role, root) {
        Ok(agent) => match agent.preflight() {
            Ok(()) => c.usable = true,
            Err(e) => c.reason = Some(e),
        },
        Err(BuildError::Unusable { reason, .. }) => c.reason = Some(reason),
        Err(e @ BuildError::Unsupported(_)) => c.reason = Some(e.to_string()),
    }
    if c.usable {
        match spec {
            AgentSpec::Claude(_) => {
                c.version = version("claude", root).await;
                let v = c.version.as_deref().and_then(crate::parse_version);
                c.efforts = Some(crate::claude::effort_note(v));
                c.reason = claude_credentials(root).await;
            }
            AgentSpec::Codex(_) => {
                c.version = version("codex", root).await;
                let v = c.version.as_deref().and_then(crate::parse_version);
                c.efforts = Some(crate::codex::effort_note(v));
                c.reason = codex_credentials(root).await;
            }
            _ => {}
        }
        c.usable = c.reason.is_none();
    }
    c
}

/// Runs `program args…` briefly: (exit code 0, stdout), `None` when it could not start.
async fn probe(program: &str, args: &[&str], root: &Path) -> Option<(bool, String)> {
    let spec = ProcessSpec::new(program, args.iter().map(|a| a.to_string()).collect(), root)
        .with_timeout(Some(VERSION_TIMEOUT));
    let out = Spawner.run(&spec).await.ok()?;
    Some((out.success(), out.stdout_text()))
}

/// Why Claude Code has no credentials (`claude auth status` says `loggedIn: false`), or
/// `None`. An answer that is not the status object (an older CLI) is not held against it.
async fn claude_credentials(root: &Path) -> Option<String> {
    let (_, stdout) = probe("claude", &["auth", "status"], root).await?;
    let status: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    match status.get("loggedIn").and_then(serde_json::Value::as_bool) {
        Some(false) => Some(
            "no credentials: `claude auth status` says not logged in (set ANTHROPIC_API_KEY or run `claude auth login`)"
                .into(),
        ),
        _ => None,
    }
}

/// Why Codex has no credentials: the selected provider's `env_key` is unset, or the OpenAI
/// provider has no key variable and `codex login status` fails.
async fn codex_credentials(root: &Path) -> Option<String> {
    match crate::codex::credential_source() {
        Err(why) => Some(format!("no credentials: {why}")),
        Ok(Some(login)) if login == "login" => match probe("codex", &["login", "status"], root).await {
            Some((true, _)) => None,
            _ => Some(
                "no credentials: `codex login status` says not logged in and neither OPENAI_API_KEY nor CODEX_API_KEY is set"
                    .into(),
            ),
        },
        Ok(_) => None,
    }
}

/// Checks the built-in backends and every agent the configuration names.
pub async fn check_all(config: &Config, root: &Path) -> Result<Report, work_config::ConfigError> {
    let mut agents = Vec::new();
    // The built-ins with their default settings; the HTTP ones with a placeholder model.
    let builtins = [
        ("claude", AgentSpec::Claude(None)),
        ("codex", AgentSpec::Codex(None)),
        ("openai", AgentSpec::OpenAi("MODEL".into())),
        ("anthropic", AgentSpec::Anthropic("MODEL".into())),
    ];
    for (name, spec) in builtins {
        let mut c = check_one(name, &spec, &AgentDef::default(), root, false).await;
        c.spec = name.into();
        agents.push(c);
    }
    let mut names: BTreeSet<String> = config.agents.keys().cloned().collect();
    names.extend(config.agent.iter().cloned());
    names.extend(config.roles.values().filter_map(|r| r.agent.clone()));
    for name in names {
        let (spec, def) = config.resolve_agent(&name)?;
        let mut c = check_one(&name, &spec, &def, root, true).await;
        if let Some(m) = spec.model().or(def.model.as_deref()).filter(|m| config.is_banned(m)) {
            c.usable = false;
            c.reason = Some(format!("model `{m}` is banned by banned_models"));
        }
        agents.push(c);
    }
    Ok(Report { agents })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reports_configured_agents_and_reasons() {
        let text = r#"
agent = "local"
[agents.local]
spec = "openai:qwen"
base_url = "http://127.0.0.1:9/v1"
[agents.broken]
spec = "openai:qwen"
response_format = "yaml"
[agents.script]
spec = "command:definitely-not-a-program-xyz"
[agents.shady]
spec = "openai:fable-5"
base_url = "http://127.0.0.1:9/v1"
"#;
        let config = Config::from_str_with_overrides(text, "work.toml", &[]).expect("parses");
        let report = check_all(&config, Path::new("/")).await.expect("checks");
        let names: Vec<&str> = report.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["claude", "codex", "openai", "anthropic", "broken", "local", "script", "shady"]);
        let get = |n: &str| report.agents.iter().find(|a| a.name == n).expect("listed");
        assert!(get("local").usable && get("local").configured, "a local endpoint needs no key");
        assert_eq!(get("local").endpoint.as_deref(), Some("http://127.0.0.1:9"));
        assert!(get("broken").reason.as_deref().unwrap_or("").contains("response_format `yaml`"));
        assert!(get("script").reason.as_deref().unwrap_or("").contains("not on PATH"));
        assert!(!get("shady").usable && get("shady").reason.as_deref().unwrap_or("").contains("banned"));
        assert!(!report.configured_usable());
        assert!(get("local").roles.contains("read-only roles read_file, list_dir, search;"), "{}", get("local").roles);
        assert!(get("local").roles.contains("write roles read_file, list_dir, search, run_command, edit_file"));
        assert!(get("claude").roles.contains("Claude Code's own tools"), "{}", get("claude").roles);
    }
}
