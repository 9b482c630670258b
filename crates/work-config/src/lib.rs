//! `work.toml` and agent selection.
//!
//! - [`Config`] is the parsed `work.toml` (every table rejects unknown keys, naming them);
//! - [`apply_override`] applies one `-c key=value` before parsing;
//! - [`AgentSpec`] parses the `--agent SPEC` forms (docs/agents.md);
//! - [`Config::resolve_role`] gives every dispatch its agent, **model** and **effort** pin
//!   (defaults in code per role, overrides in the file), resolves a tier pin to the model the
//!   backend will actually send ([`sent_model`]), and refuses a banned model.
//!
//! Model precedence for a role, highest first: the model in an `--agent SPEC` given on the
//! command line (`--agent claude:haiku`), `[roles.R].model`, the model in the SPEC the role's
//! agent resolves to in `work.toml`, the named agent's `model`, the code's default pin.
//!
//! Numbers are checked when the file is loaded (a zero `max_turns`, a non-finite or non-positive
//! `max_budget_usd`, a negative price, a zero timeout are refused, naming the key) and every
//! timeout is capped at [`MAX_TIMEOUT_SECS`].
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Why the configuration or an agent spec was refused. Every variant is bad input (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// The TOML is malformed or has an unknown key or a wrong type.
    #[error("parse {path}: {reason}")]
    Parse {
        /// The file (or `-c`).
        path: String,
        /// What is wrong, with the key named.
        reason: String,
    },
    /// A `-c` override is not `key=value`.
    #[error("parse -c override `{0}`: expected key=value")]
    BadOverride(String),
    /// An agent spec that names no backend and no configured agent (then the nearest name,
    /// when one is near: `; did you mean `claude`?`).
    #[error(
        "resolve agent `{0}`: not a backend (command:…, claude[:MODEL], codex[:MODEL], openai:MODEL, anthropic:MODEL) nor an agent named in work.toml{1}"
    )]
    UnknownAgent(String, String),
    /// An agent spec with a missing part (`command:` with no command, `openai:` with no model).
    #[error("parse agent spec `{spec}`: {reason}")]
    BadAgentSpec {
        /// The spec.
        spec: String,
        /// What is missing.
        reason: String,
    },
    /// The model pinned for a role is banned.
    #[error("use model `{model}` for role {role}: the model is banned by banned_models")]
    BannedModel {
        /// The role.
        role: String,
        /// The model.
        model: String,
    },
    /// Named agents refer to each other in a loop.
    #[error("resolve agent `{0}`: named agents refer to each other in a loop")]
    AgentLoop(String),
    /// A role name that no workflow dispatches.
    #[error("resolve role `{role}`: not a role{hint}")]
    UnknownRole {
        /// The name as given.
        role: String,
        /// `; did you mean …?` or the list of roles.
        hint: String,
    },
    /// A setting has a value outside its range.
    #[error("parse {path}: `{key}` {reason}")]
    BadValue {
        /// The file (or `work.toml with -c overrides`).
        path: String,
        /// The dotted key (`agents.local.max_tokens`).
        key: String,
        /// What is wrong, with the value.
        reason: String,
    },
}

/// The longest timeout honoured (7 days): larger values are capped, so that no deadline
/// computation can overflow.
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

/// The parsed `work.toml`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The default agent for every role: a SPEC or the name of an `[agents.NAME]` entry.
    pub agent: Option<String>,
    /// The default wave cap.
    pub concurrency: Option<usize>,
    /// Models that must never be dispatched (case-insensitive substring match).
    /// Defaults to `["fable"]`.
    pub banned_models: Option<Vec<String>>,
    /// Timeouts.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Named agents.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentDef>,
    /// Per-role overrides.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleDef>,
    /// The project's own check commands.
    #[serde(default)]
    pub gates: Gates,
}

/// `[timeouts]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// One agent attempt (default 600 s).
    pub dispatch_secs: Option<u64>,
    /// One oracle command (default 300 s).
    pub oracle_secs: Option<u64>,
    /// One gate command (lint, typecheck, test; default 1800 s).
    pub gate_secs: Option<u64>,
}

/// `[agents.NAME]`: a named agent.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentDef {
    /// The backend SPEC (`command:…`, `claude:…`, …) or another agent's name.
    pub spec: String,
    /// Model for every role using this agent (a role's own `model` wins).
    pub model: Option<String>,
    /// Effort for every role using this agent (a role's own `effort` wins).
    pub effort: Option<String>,
    /// Endpoint for HTTP backends (default from `OPENAI_BASE_URL` / the vendor's URL).
    pub base_url: Option<String>,
    /// The environment variable holding the key (default `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).
    pub api_key_env: Option<String>,
    /// OpenAI-compatible servers: `json_schema` (default) or `json_object`
    /// (servers that only take `{"type": "json_object", "schema": …}`).
    pub response_format: Option<String>,
    /// Anthropic: `output_config` (default: native structured output), `output_format` (the
    /// earlier beta parameter) or `tool` (forced tool use).
    pub structured_output: Option<String>,
    /// Per-attempt timeout for this agent.
    pub timeout_secs: Option<u64>,
    /// Extra arguments for CLI backends.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// Max output tokens for HTTP backends.
    pub max_tokens: Option<u64>,
    /// HTTP backends: send the role's effort to the API (`reasoning_effort` for OpenAI-compatible
    /// servers, `output_config.effort` for Anthropic). Default: only for OpenAI reasoning models
    /// (`o1`…, `o3`…, `o4`…, `gpt-5`…) on `openai:`, never on `anthropic:`.
    pub send_effort: Option<bool>,
    /// Claude Code: `--max-turns` for every dispatch. HTTP backends: the most model calls
    /// (turns) of one attempt of the engine's tool loop (default 30).
    pub max_turns: Option<u32>,
    /// Claude Code: `--max-budget-usd` for every dispatch.
    pub max_budget_usd: Option<f64>,
    /// HTTP backends: the price of a million input tokens in USD, to account cost.
    pub input_usd_per_mtok: Option<f64>,
    /// HTTP backends: the price of a million output tokens in USD, to account cost.
    pub output_usd_per_mtok: Option<f64>,
    /// Command and CLI backends: environment variables (exact names, or prefixes ending in
    /// `*`) the agent's process gets beyond the base allowlist.
    #[serde(default)]
    pub env: Vec<String>,
    /// Command backends: the agent reaches the network (default: loopback of its own only).
    pub network: Option<bool>,
    /// Claude Code and Codex: read the repository's own agent configuration (Claude Code's
    /// project settings and `.mcp.json`, Codex's project config). Default: ignored.
    pub project_config: Option<bool>,
}

/// `[roles.ROLE]`: overrides for one role.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RoleDef {
    /// The agent (SPEC or name) for this role.
    pub agent: Option<String>,
    /// The model pin.
    pub model: Option<String>,
    /// The effort pin.
    pub effort: Option<String>,
    /// Per-attempt timeout.
    pub timeout_secs: Option<u64>,
}

/// `[gates]`: shell commands run with `sh -c` in the repository root.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Gates {
    /// The lint command.
    pub lint: Option<String>,
    /// The type-check command.
    pub typecheck: Option<String>,
    /// The test command.
    pub test: Option<String>,
}

/// A parsed agent SPEC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSpec {
    /// `command:<command line>`, split like a shell splits words.
    Command(Vec<String>),
    /// `claude[:MODEL]`.
    Claude(Option<String>),
    /// `codex[:MODEL]`.
    Codex(Option<String>),
    /// `openai:MODEL`.
    OpenAi(String),
    /// `anthropic:MODEL`.
    Anthropic(String),
    /// The name of an `[agents.NAME]` entry.
    Named(String),
}

impl AgentSpec {
    /// Parses a SPEC string.
    pub fn parse(spec: &str) -> Result<AgentSpec, ConfigError> {
        let s = spec.trim();
        let bad = |reason: &str| ConfigError::BadAgentSpec { spec: spec.to_string(), reason: reason.to_string() };
        let model = |m: &str| if m.trim().is_empty() { None } else { Some(m.trim().to_string()) };
        if let Some(cmd) = s.strip_prefix("command:") {
            let words = shell_words::split(cmd).map_err(|e| bad(&format!("cannot split the command line: {e}")))?;
            if words.is_empty() {
                return Err(bad("no command after `command:`"));
            }
            return Ok(AgentSpec::Command(words));
        }
        if s == "claude" {
            return Ok(AgentSpec::Claude(None));
        }
        if let Some(m) = s.strip_prefix("claude:") {
            return Ok(AgentSpec::Claude(model(m)));
        }
        if s == "codex" {
            return Ok(AgentSpec::Codex(None));
        }
        if let Some(m) = s.strip_prefix("codex:") {
            return Ok(AgentSpec::Codex(model(m)));
        }
        if let Some(m) = s.strip_prefix("openai:") {
            return model(m).map(AgentSpec::OpenAi).ok_or_else(|| bad("`openai:` needs a model"));
        }
        if s == "openai" {
            return Err(bad("`openai` needs a model: openai:MODEL"));
        }
        if let Some(m) = s.strip_prefix("anthropic:") {
            return model(m).map(AgentSpec::Anthropic).ok_or_else(|| bad("`anthropic:` needs a model"));
        }
        if s == "anthropic" {
            return Err(bad("`anthropic` needs a model: anthropic:MODEL"));
        }
        let valid_name =
            !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if valid_name {
            Ok(AgentSpec::Named(s.to_string()))
        } else {
            Err(ConfigError::UnknownAgent(spec.to_string(), agent_hint(s, &[])))
        }
    }

    /// The model the spec itself names, if any.
    pub fn model(&self) -> Option<&str> {
        match self {
            AgentSpec::Claude(m) | AgentSpec::Codex(m) => m.as_deref(),
            AgentSpec::OpenAi(m) | AgentSpec::Anthropic(m) => Some(m),
            _ => None,
        }
    }
}

/// Every role a workflow dispatches: the names `[roles.ROLE]` and `-c roles.ROLE.…` accept.
pub const ROLES: [&str; 12] = [
    "finder",
    "worker",
    "implementer",
    "spec-reviewer",
    "quality-reviewer",
    "tester",
    "editor",
    "plan-index",
    "plan-extract",
    "spec-drafter",
    "adversarial-reviewer",
    "finding-adjudicator",
];

/// The effort words a role may be pinned to (each backend maps them to what it sends).
pub const EFFORTS: [&str; 6] = ["minimal", "low", "medium", "high", "xhigh", "max"];

/// Checks an effort word (case and surrounding blanks folded), giving its canonical spelling.
pub fn check_effort(effort: &str) -> Result<&'static str, String> {
    let e = effort.trim().to_ascii_lowercase();
    EFFORTS
        .iter()
        .copied()
        .find(|v| *v == e)
        .ok_or_else(|| format!("= `{effort}` is not an effort (valid: {})", EFFORTS.join(", ")))
}

/// Checks a role name, exactly as spelled.
pub fn check_role(role: &str) -> Result<(), ConfigError> {
    if ROLES.contains(&role) {
        return Ok(());
    }
    Err(ConfigError::UnknownRole { role: role.to_string(), hint: work_runtime::suggest::hint(role, &ROLES) })
}

/// The code's default (model, effort) pin for a role. Judgement roles get the strong tier at
/// `xhigh`; in-loop mechanical roles the fast tier at `high`; schema-bound extraction and
/// verification stages `medium`.
pub fn default_pin(role: &str) -> (&'static str, &'static str) {
    match role {
        "quality-reviewer"
        | "adversarial-reviewer"
        | "finding-adjudicator"
        | "architect"
        | "debugger"
        | "plan-recon"
        | "spec-skeptic"
        | "grounding-check"
        | "tdd-author"
        | "recon" => ("opus", "xhigh"),
        "implementer" | "spec-reviewer" | "tester" | "worker" | "editor" => ("sonnet", "high"),
        "plan-index" | "plan-extract" | "finalize" | "verify" => ("sonnet", "medium"),
        "finder" => ("sonnet", "high"),
        _ => ("sonnet", "high"),
    }
}

/// A role's resolved agent and pins.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedRole {
    /// The role.
    pub role: String,
    /// The backend spec (never [`AgentSpec::Named`]).
    pub spec: AgentSpec,
    /// The named agent's settings (defaults when the spec was given directly).
    pub def: AgentDef,
    /// The model the backend sends ([`sent_model`] of the winning pin): what every dispatch
    /// record and progress line shows.
    pub model: String,
    /// The effort pin.
    pub effort: String,
    /// Per-attempt timeout in seconds (1 to [`MAX_TIMEOUT_SECS`]).
    pub timeout_secs: u64,
}

impl Config {
    /// Loads `work.toml` from `root` (absent ⇒ defaults), applying `-c` overrides.
    pub fn load(root: &Path, overrides: &[String]) -> Result<Config, ConfigError> {
        Self::load_layered(root, None, &[], overrides)
    }

    /// Loads the settings in their order of precedence, lowest first: the user's config file
    /// `user` (absent ⇒ nothing), the repository's `work.toml`, the `WORK_*` settings `env`
    /// (as `key=value`), then the `-c` overrides. Each file is checked alone first, so an
    /// unknown key is named with the file it sits in.
    pub fn load_layered(
        root: &Path,
        user: Option<&Path>,
        env: &[String],
        overrides: &[String],
    ) -> Result<Config, ConfigError> {
        let mut table = None;
        if let Some(path) = user {
            let shown = path.display().to_string();
            let read = work_runtime::fsx::read_user_text_optional(path, USER_CONFIG_CAP)
                .map_err(|e| ConfigError::Read { path: shown.clone(), reason: e.to_string() })?;
            if let Some(text) = read {
                Self::from_str_with_overrides(&text, &shown, &[])?;
                table = Some(parse_table(&text, &shown)?);
            }
        }
        let path = root.join("work.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(ConfigError::Read { path: path.display().to_string(), reason: e.to_string() }),
        };
        let Some(mut table) = table.or_else(|| (!env.is_empty()).then(toml::Table::new)) else {
            return Self::from_str_with_overrides(&text, "work.toml", overrides);
        };
        Self::from_str_with_overrides(&text, "work.toml", &[])?;
        merge(&mut table, parse_table(&text, "work.toml")?);
        for o in env {
            apply_override(&mut table, o)?;
        }
        let name = if env.is_empty() { "the settings" } else { "the settings with WORK_* variables" };
        Self::from_table(table, name, overrides)
    }

    /// Parses TOML text, applying `-c` overrides.
    pub fn from_str_with_overrides(text: &str, name: &str, overrides: &[String]) -> Result<Config, ConfigError> {
        Self::from_table(parse_table(text, name)?, name, overrides)
    }

    fn from_table(mut table: toml::Table, name: &str, overrides: &[String]) -> Result<Config, ConfigError> {
        for o in overrides {
            apply_override(&mut table, o)?;
        }
        let src = if overrides.is_empty() { name.to_string() } else { format!("{name} with -c overrides") };
        let mut config = Config::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
            let message = one_line(&e.to_string());
            // Name the table the unknown key sits in (`[gates] of work.toml`).
            let place = unknown_field(&message)
                .and_then(|key| table_holding(&table, key))
                .map_or_else(|| name.to_string(), |t| format!("[{t}] of {name}"));
            ConfigError::Parse {
                path: src.clone(),
                reason: work_runtime::suggest::rewrite_serde_unknown(&message, "key", &place),
            }
        })?;
        config.check_values(&src)?;
        config.cap_timeouts();
        Ok(config)
    }

    /// Refuses numbers outside their range, naming the key.
    fn check_values(&self, path: &str) -> Result<(), ConfigError> {
        let bad = |key: String, reason: String| Err(ConfigError::BadValue { path: path.to_string(), key, reason });
        let timeout = |key: String, v: Option<u64>| match v {
            Some(0) => bad(key, "must be at least 1 second (got 0)".into()),
            _ => Ok(()),
        };
        timeout("timeouts.dispatch_secs".into(), self.timeouts.dispatch_secs)?;
        timeout("timeouts.oracle_secs".into(), self.timeouts.oracle_secs)?;
        timeout("timeouts.gate_secs".into(), self.timeouts.gate_secs)?;
        for (name, d) in &self.agents {
            let key = |k: &str| format!("agents.{name}.{k}");
            timeout(key("timeout_secs"), d.timeout_secs)?;
            if d.max_turns == Some(0) {
                return bad(key("max_turns"), "must be at least 1 (got 0)".into());
            }
            if d.max_tokens == Some(0) {
                return bad(key("max_tokens"), "must be at least 1 (got 0)".into());
            }
            if let Some(x) = d.max_budget_usd
                && !(x.is_finite() && x > 0.0)
            {
                return bad(key("max_budget_usd"), format!("must be a positive number of US dollars (got {x})"));
            }
            for (k, price) in
                [("input_usd_per_mtok", d.input_usd_per_mtok), ("output_usd_per_mtok", d.output_usd_per_mtok)]
            {
                if let Some(x) = price
                    && !(x.is_finite() && x >= 0.0)
                {
                    return bad(key(k), format!("must be a price of zero or more US dollars (got {x})"));
                }
            }
        }
        for (role, r) in &self.roles {
            if !ROLES.contains(&role.as_str()) {
                let hint = work_runtime::suggest::hint(role, &ROLES);
                return bad(format!("roles.{role}"), format!("is not a role{hint}"));
            }
            timeout(format!("roles.{role}.timeout_secs"), r.timeout_secs)?;
            if let Some(e) = &r.effort
                && let Err(why) = check_effort(e)
            {
                return bad(format!("roles.{role}.effort"), why);
            }
        }
        for (name, d) in &self.agents {
            if let Some(e) = &d.effort
                && let Err(why) = check_effort(e)
            {
                return bad(format!("agents.{name}.effort"), why);
            }
        }
        Ok(())
    }

    /// Caps every timeout at [`MAX_TIMEOUT_SECS`].
    fn cap_timeouts(&mut self) {
        let cap = |v: &mut Option<u64>| {
            if let Some(x) = v {
                *x = (*x).min(MAX_TIMEOUT_SECS);
            }
        };
        cap(&mut self.timeouts.dispatch_secs);
        cap(&mut self.timeouts.oracle_secs);
        cap(&mut self.timeouts.gate_secs);
        for d in self.agents.values_mut() {
            cap(&mut d.timeout_secs);
        }
        for r in self.roles.values_mut() {
            cap(&mut r.timeout_secs);
        }
    }

    /// The banned model patterns.
    pub fn banned(&self) -> Vec<String> {
        self.banned_models.clone().unwrap_or_else(|| vec!["fable".into()])
    }

    /// True when `model` matches a banned pattern.
    pub fn is_banned(&self, model: &str) -> bool {
        let m = model.to_ascii_lowercase();
        self.banned().iter().any(|b| !b.trim().is_empty() && m.contains(&b.to_ascii_lowercase()))
    }

    /// Resolves a spec or name to a backend spec and the named agent's settings; an unknown
    /// name is refused with the nearest backend or configured agent.
    pub fn resolve_agent(&self, spec_or_name: &str) -> Result<(AgentSpec, AgentDef), ConfigError> {
        let mut current = spec_or_name.to_string();
        let mut def: Option<AgentDef> = None;
        for _ in 0..8 {
            match AgentSpec::parse(&current)? {
                AgentSpec::Named(name) => match self.agents.get(&name) {
                    Some(d) => {
                        let mut merged = d.clone();
                        if let Some(outer) = &def {
                            // The outer (first-named) agent's settings win.
                            merged = merge_def(outer, &merged);
                        }
                        current = d.spec.clone();
                        def = Some(merged);
                    }
                    None => {
                        let named: Vec<&str> = self.agents.keys().map(String::as_str).collect();
                        return Err(ConfigError::UnknownAgent(name.clone(), agent_hint(&name, &named)));
                    }
                },
                spec => return Ok((spec, def.unwrap_or_default())),
            }
        }
        Err(ConfigError::AgentLoop(spec_or_name.to_string()))
    }

    /// Resolves `role`: the agent (`cli_agent` > `[roles.R].agent` > `agent` > `fallback`),
    /// then the model pin (the model in a `cli_agent` SPEC > `[roles.R].model` > the resolved
    /// spec's own model > the named agent's > code default) and effort (`[roles.R]` > the named
    /// agent's > code default). The resolved model is the one the backend will send
    /// ([`sent_model`]); a banned pin or a banned model to send is refused.
    pub fn resolve_role(
        &self,
        role: &str,
        cli_agent: Option<&str>,
        fallback: &str,
    ) -> Result<ResolvedRole, ConfigError> {
        check_role(role)?;
        let r = self.roles.get(role).cloned().unwrap_or_default();
        let chosen = cli_agent.map(str::to_string).or(r.agent.clone()).or(self.agent.clone());
        let chosen = chosen.unwrap_or_else(|| fallback.to_string());
        let (spec, def) = self.resolve_agent(&chosen)?;
        // A model written in the SPEC on the command line is the most explicit choice there is.
        let cli_model = match cli_agent.map(AgentSpec::parse) {
            Some(Ok(s)) if !matches!(s, AgentSpec::Named(_)) => s.model().map(str::to_string),
            _ => None,
        };
        let (dm, de) = default_pin(role);
        let pinned = cli_model
            .or(r.model.clone())
            .or_else(|| spec.model().map(str::to_string))
            .or(def.model.clone())
            .unwrap_or_else(|| dm.to_string());
        let effort = r.effort.clone().or(def.effort.clone()).unwrap_or_else(|| de.to_string());
        let effort = check_effort(&effort).map(str::to_string).unwrap_or(effort);
        let model = sent_model(&spec, &def, &pinned);
        for m in [&pinned, &model] {
            if self.is_banned(m) {
                return Err(ConfigError::BannedModel { role: role.into(), model: m.clone() });
            }
        }
        let timeout_secs = r
            .timeout_secs
            .or(def.timeout_secs)
            .or(self.timeouts.dispatch_secs)
            .unwrap_or(600)
            .clamp(1, MAX_TIMEOUT_SECS);
        Ok(ResolvedRole { role: role.into(), spec, def, model, effort, timeout_secs })
    }
}

/// The model tiers the code's role pins use ([`default_pin`]): aliases that Claude Code
/// understands, and that every other backend replaces by a concrete model.
pub const TIERS: [&str; 3] = ["opus", "sonnet", "haiku"];

/// True when `model` is a bare tier name (`opus`, `sonnet`, `haiku`), not a concrete model.
pub fn is_tier(model: &str) -> bool {
    TIERS.iter().any(|t| t.eq_ignore_ascii_case(model.trim()))
}

/// The concrete model for a backend that does not understand tier names: the pinned model
/// when it is concrete, else `fallback` (the spec's own model), else `None` (the tool's default).
pub fn concrete_model(pinned: &str, fallback: Option<&str>) -> Option<String> {
    let pinned = pinned.trim();
    if !pinned.is_empty() && !is_tier(pinned) {
        return Some(pinned.to_string());
    }
    fallback.map(str::trim).filter(|m| !m.is_empty() && !is_tier(m)).map(str::to_string)
}

/// The model a backend actually sends for a role pinned to `pinned`:
///
/// - `command:` and `claude`: the pin as it is (Claude Code takes the tier aliases);
/// - `codex`: a concrete pin, else the spec's or the named agent's concrete model; with
///   neither, the tier pin stays (and no `-m` is sent: Codex uses its configured default);
/// - `openai:M` / `anthropic:M`: a concrete pin, else `M`.
pub fn sent_model(spec: &AgentSpec, def: &AgentDef, pinned: &str) -> String {
    match spec {
        AgentSpec::Codex(m) => {
            concrete_model(pinned, m.as_deref().or(def.model.as_deref())).unwrap_or_else(|| pinned.to_string())
        }
        AgentSpec::OpenAi(m) | AgentSpec::Anthropic(m) => concrete_model(pinned, Some(m)).unwrap_or_else(|| m.clone()),
        AgentSpec::Command(_) | AgentSpec::Claude(_) | AgentSpec::Named(_) => pinned.to_string(),
    }
}

fn merge_def(outer: &AgentDef, inner: &AgentDef) -> AgentDef {
    AgentDef {
        spec: inner.spec.clone(),
        model: outer.model.clone().or(inner.model.clone()),
        effort: outer.effort.clone().or(inner.effort.clone()),
        base_url: outer.base_url.clone().or(inner.base_url.clone()),
        api_key_env: outer.api_key_env.clone().or(inner.api_key_env.clone()),
        response_format: outer.response_format.clone().or(inner.response_format.clone()),
        structured_output: outer.structured_output.clone().or(inner.structured_output.clone()),
        timeout_secs: outer.timeout_secs.or(inner.timeout_secs),
        extra_args: if outer.extra_args.is_empty() { inner.extra_args.clone() } else { outer.extra_args.clone() },
        max_tokens: outer.max_tokens.or(inner.max_tokens),
        send_effort: outer.send_effort.or(inner.send_effort),
        max_turns: outer.max_turns.or(inner.max_turns),
        max_budget_usd: outer.max_budget_usd.or(inner.max_budget_usd),
        input_usd_per_mtok: outer.input_usd_per_mtok.or(inner.input_usd_per_mtok),
        output_usd_per_mtok: outer.output_usd_per_mtok.or(inner.output_usd_per_mtok),
        env: if outer.env.is_empty() { inner.env.clone() } else { outer.env.clone() },
        network: outer.network.or(inner.network),
        project_config: outer.project_config.or(inner.project_config),
    }
}

/// The cap on the user's config file.
pub const USER_CONFIG_CAP: u64 = 1024 * 1024;

fn parse_table(text: &str, name: &str) -> Result<toml::Table, ConfigError> {
    text.parse()
        .map_err(|e: toml::de::Error| ConfigError::Parse { path: name.into(), reason: one_line(&e.to_string()) })
}

/// Lays `top` over `base`: tables merge key by key, anything else is replaced.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (k, v) in top {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => merge(b, t),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Applies one `-c key=value` override to a TOML table. The value is read as TOML
/// (`-c concurrency=4`, `-c 'banned_models=["x"]'`) and falls back to a plain string
/// (`-c agent=command:./a.sh`). Dotted keys address nested tables (`-c roles.finder.model=opus`).
pub fn apply_override(table: &mut toml::Table, o: &str) -> Result<(), ConfigError> {
    let (key, raw) = o.split_once('=').ok_or_else(|| ConfigError::BadOverride(o.to_string()))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|k| k.trim().is_empty()) {
        return Err(ConfigError::BadOverride(o.to_string()));
    }
    let value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    let mut cur = table;
    for p in &parts[..parts.len() - 1] {
        let entry = cur.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(ConfigError::BadOverride(o.to_string())),
        };
    }
    cur.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

/// The key serde's "unknown field `x`, …" names.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = &message[message.find("unknown field `")? + "unknown field `".len()..];
    rest.split('`').next()
}

/// The dotted path of the nested table that holds `key` (`gates`, `roles.finder`), first found
/// depth-first; `None` when only the top level holds it (or nothing does).
fn table_holding(table: &toml::Table, key: &str) -> Option<String> {
    for (name, value) in table {
        if let toml::Value::Table(inner) = value {
            if inner.contains_key(key) {
                return Some(name.clone());
            }
            if let Some(deeper) = table_holding(inner, key) {
                return Some(format!("{name}.{deeper}"));
            }
        }
    }
    None
}

/// `; did you mean `X`?` for the backend or configured agent nearest to `given`, else nothing.
fn agent_hint(given: &str, configured: &[&str]) -> String {
    let mut valid = vec!["claude", "codex", "openai", "anthropic", "command"];
    valid.extend_from_slice(configured);
    let head = given.split(':').next().unwrap_or(given);
    match work_runtime::suggest::nearest(head, &valid) {
        Some(v) if v != head => format!("; did you mean `{v}`?"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spec_form() {
        assert_eq!(
            AgentSpec::parse("command:python3 'a b.py' -x"),
            Ok(AgentSpec::Command(vec!["python3".into(), "a b.py".into(), "-x".into()]))
        );
        assert_eq!(AgentSpec::parse("claude"), Ok(AgentSpec::Claude(None)));
        assert_eq!(AgentSpec::parse("claude:opus"), Ok(AgentSpec::Claude(Some("opus".into()))));
        assert_eq!(AgentSpec::parse("codex:gpt-5"), Ok(AgentSpec::Codex(Some("gpt-5".into()))));
        assert_eq!(AgentSpec::parse("openai:qwen"), Ok(AgentSpec::OpenAi("qwen".into())));
        assert_eq!(AgentSpec::parse("anthropic:claude-x"), Ok(AgentSpec::Anthropic("claude-x".into())));
        assert_eq!(AgentSpec::parse("mybot"), Ok(AgentSpec::Named("mybot".into())));
        assert!(AgentSpec::parse("command:").is_err());
        assert!(AgentSpec::parse("openai:").is_err());
        assert!(AgentSpec::parse("what ever:x").is_err());
    }

    #[test]
    fn layers_merge_table_by_table() {
        let mut base: toml::Table = "agent = 'a'\n[roles.finder]\nmodel = 'x'\neffort = 'low'".parse().expect("toml");
        merge(&mut base, "[roles.finder]\nmodel = 'y'".parse().expect("toml"));
        let c = Config::from_table(base, "t", &[]).expect("ok");
        assert_eq!(c.agent.as_deref(), Some("a"));
        assert_eq!(c.roles["finder"].model.as_deref(), Some("y"));
        assert_eq!(c.roles["finder"].effort.as_deref(), Some("low"));
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = Config::from_str_with_overrides("concurency = 3", "work.toml", &[]).expect_err("unknown key");
        assert!(e.to_string().contains("concurency"), "{e}");
        let e = Config::from_str_with_overrides("[roles.finder]\nmodle = 'x'", "work.toml", &[]).expect_err("unknown");
        assert!(e.to_string().contains("modle"), "{e}");
    }

    #[test]
    fn overrides_and_role_resolution() {
        let text = r#"
agent = "bot"
[agents.bot]
spec = "command:./bot.sh"
effort = "low"
[roles.finder]
model = "opus"
"#;
        let c =
            Config::from_str_with_overrides(text, "work.toml", &["roles.worker.effort=max".into()]).expect("parses");
        let f = c.resolve_role("finder", None, "command:x").expect("resolves");
        assert_eq!(f.spec, AgentSpec::Command(vec!["./bot.sh".into()]));
        assert_eq!((f.model.as_str(), f.effort.as_str()), ("opus", "low"));
        let w = c.resolve_role("worker", Some("claude:haiku"), "command:x").expect("resolves");
        assert_eq!((w.model.as_str(), w.effort.as_str()), ("haiku", "max"));
        let banned = c.resolve_role("worker", Some("claude:fable-2"), "command:x");
        assert!(matches!(banned, Err(ConfigError::BannedModel { .. })));
        assert!(matches!(c.resolve_role("worker", Some("nope"), "command:x"), Err(ConfigError::UnknownAgent(..))));
        let e = c.resolve_agent("cluade").expect_err("unknown");
        assert!(e.to_string().ends_with("nor an agent named in work.toml; did you mean `claude`?"), "{e}");
        let c = Config::from_str_with_overrides("concurrency = 2", "w", &["concurrency=5".into()]).expect("ok");
        assert_eq!(c.concurrency, Some(5));
        assert!(Config::from_str_with_overrides("", "w", &["novalue".into()]).is_err());
    }

    #[test]
    fn a_model_in_the_cli_spec_beats_the_role_pin() {
        let text = "[roles.finder]\nmodel = \"opus\"\n[agents.fast]\nspec = \"claude:haiku\"\n";
        let c = Config::from_str_with_overrides(text, "work.toml", &[]).expect("parses");
        assert_eq!(c.resolve_role("finder", Some("claude:haiku"), "").expect("ok").model, "haiku");
        assert_eq!(c.resolve_role("finder", Some("claude"), "").expect("ok").model, "opus", "no model in the spec");
        // A named agent's spec lives in work.toml: the role's own pin still wins there.
        assert_eq!(c.resolve_role("finder", Some("fast"), "").expect("ok").model, "opus");
        assert_eq!(c.resolve_role("worker", Some("fast"), "").expect("ok").model, "haiku");
    }

    #[test]
    fn the_resolved_model_is_the_one_sent_and_bans_apply_to_it() {
        let c =
            Config::from_str_with_overrides("[roles.finder]\nmodel = \"sonnet\"\n", "work.toml", &[]).expect("parses");
        // A tier pin is replaced by the spec's concrete model: that is what is recorded.
        assert_eq!(c.resolve_role("finder", Some("openai:qwen"), "").expect("ok").model, "qwen");
        assert_eq!(c.resolve_role("finder", Some("codex"), "").expect("ok").model, "sonnet", "codex default");
        assert_eq!(c.resolve_role("finder", Some("codex:gpt-5"), "").expect("ok").model, "gpt-5");
        let banned = |c: &Config, agent: &str| matches!(c.resolve_role("finder", Some(agent), ""), Err(ConfigError::BannedModel { model, .. }) if model.contains("fable"));
        assert!(banned(&c, "openai:fable-5"));
        assert!(banned(&c, "anthropic:claude-fable-5"));
        let text = "[roles.finder]\nmodel = \"opus\"\n[agents.cx]\nspec = \"codex\"\nmodel = \"fable-5\"\n";
        let c = Config::from_str_with_overrides(text, "work.toml", &[]).expect("parses");
        assert!(banned(&c, "cx"), "the named agent's model is what codex is sent");
        let c = Config::from_str_with_overrides("", "work.toml", &["roles.finder.model=haiku".into()]).expect("ok");
        assert!(banned(&c, "anthropic:claude-fable-5"));
    }

    #[test]
    fn huge_timeouts_are_capped_and_bad_numbers_refused_by_key() {
        let c =
            Config::from_str_with_overrides("", "w", &[format!("timeouts.dispatch_secs={}", i64::MAX)]).expect("ok");
        assert_eq!(c.timeouts.dispatch_secs, Some(MAX_TIMEOUT_SECS));
        assert_eq!(c.resolve_role("finder", Some("command:x"), "").expect("ok").timeout_secs, MAX_TIMEOUT_SECS);
        let text = format!("[agents.a]\nspec = \"openai:m\"\ntimeout_secs = {}\n", i64::MAX);
        let c = Config::from_str_with_overrides(&text, "w", &[]).expect("ok");
        assert_eq!(c.resolve_role("finder", Some("a"), "").expect("ok").timeout_secs, MAX_TIMEOUT_SECS);
        let cases = [
            ("max_turns = 0", "agents.a.max_turns"),
            ("max_budget_usd = nan", "agents.a.max_budget_usd"),
            ("max_budget_usd = 0.0", "agents.a.max_budget_usd"),
            ("max_budget_usd = inf", "agents.a.max_budget_usd"),
            ("max_tokens = 0", "agents.a.max_tokens"),
            ("input_usd_per_mtok = -1.0", "agents.a.input_usd_per_mtok"),
            ("output_usd_per_mtok = nan", "agents.a.output_usd_per_mtok"),
            ("timeout_secs = 0", "agents.a.timeout_secs"),
        ];
        for (line, key) in cases {
            let text = format!("[agents.a]\nspec = \"claude\"\n{line}\n");
            let e = Config::from_str_with_overrides(&text, "work.toml", &[]).expect_err(line);
            assert!(matches!(&e, ConfigError::BadValue { key: k, .. } if k == key), "{line}: {e}");
            assert!(e.to_string().contains(key), "{e}");
        }
        let e = Config::from_str_with_overrides("", "w", &["roles.finder.timeout_secs=0".into()]).expect_err("zero");
        assert!(e.to_string().contains("roles.finder.timeout_secs"), "{e}");
        let e = Config::from_str_with_overrides("[timeouts]\ndispatch_secs = 0\n", "w", &[]).expect_err("zero");
        assert!(e.to_string().contains("timeouts.dispatch_secs"), "{e}");
        let ok = "[agents.a]\nspec = \"openai:m\"\ninput_usd_per_mtok = 0.0\nmax_budget_usd = 0.5\n";
        assert!(Config::from_str_with_overrides(ok, "w", &[]).is_ok(), "a free model is allowed");
    }

    #[test]
    fn role_names_efforts_and_keys_are_checked_with_a_suggestion() {
        let err = |text: &str, o: &[&str]| {
            let o: Vec<String> = o.iter().map(|s| s.to_string()).collect();
            Config::from_str_with_overrides(text, "work.toml", &o).expect_err("refused").to_string()
        };
        let e = err("", &["roles.findr.model=opus"]);
        assert!(e.contains("`roles.findr` is not a role; did you mean `finder`?"), "{e}");
        let e = err("", &["roles.finder.effort=ultra"]);
        assert!(e.contains("`ultra` is not an effort (valid: minimal, low, medium, high, xhigh, max)"), "{e}");
        let e = err("[agents.a]\nspec = \"claude\"\neffort = \"huge\"\n", &[]);
        assert!(e.contains("agents.a.effort") && e.contains("not an effort"), "{e}");
        let e = err("concurrncy = 2\n", &[]);
        assert_eq!(e, "parse work.toml: unknown key `concurrncy` in work.toml; did you mean `concurrency`?");
        let ok = Config::from_str_with_overrides("", "work.toml", &["roles.finder.effort= High ".into()]);
        let c = ok.expect("case and blanks of an effort fold");
        assert_eq!(c.resolve_role("finder", Some("command:x"), "").expect("ok").effort, "high");
        let e = c.resolve_role("reviewer", Some("command:x"), "").expect_err("unknown role").to_string();
        assert!(e.starts_with("resolve role `reviewer`: not a role"), "{e}");
        assert!(!e.contains('\n'));
    }
}
