//! The context every command starts from: global flags resolved to a repository root, a
//! state directory, the parsed `work.toml`, a clock and a redactor; and the CLI's error type.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use work_config::Config;
use work_runtime::ExitStatus;
use work_runtime::clock::{self, Clock};
use work_runtime::redact::Redactor;

/// Global flags.
#[derive(Debug, Clone, Default)]
pub struct Global {
    /// `-C DIR`.
    pub directory: Option<PathBuf>,
    /// `--state-dir DIR`.
    pub state_dir: Option<PathBuf>,
    /// `-c key=value`.
    pub overrides: Vec<String>,
    /// `--isolation`.
    pub isolation: work_runtime::sandbox::Isolation,
}

/// A command's failure. The message reads after "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input, refused before anything was dispatched or changed (exit 2).
    #[error("{0}")]
    BadInput(String),
    /// Something went wrong while running (exit 1).
    #[error("{0}")]
    Runtime(String),
}

impl CliError {
    /// The exit status for this error.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            CliError::BadInput(_) => ExitStatus::BadInput,
            CliError::Runtime(_) => ExitStatus::Unsuccessful,
        }
    }

    /// A bad-input error.
    pub fn bad(msg: impl Into<String>) -> Self {
        CliError::BadInput(msg.into())
    }
}

impl From<work_config::ConfigError> for CliError {
    fn from(e: work_config::ConfigError) -> Self {
        CliError::BadInput(e.to_string())
    }
}

/// The resolved context of one command.
pub struct Ctx {
    /// The repository root.
    pub root: PathBuf,
    /// The state directory.
    pub state_dir: PathBuf,
    /// `work.toml` with `-c` overrides.
    pub config: Config,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Secrets to keep out of every file and line.
    pub redactor: Redactor,
}

impl Ctx {
    /// Resolves the global flags: `-C`, the repository root (`git rev-parse --show-toplevel`,
    /// else the directory), the state directory, and `work.toml`.
    pub fn new(global: &Global) -> Result<Ctx, CliError> {
        let cwd = std::env::current_dir().map_err(|e| CliError::Runtime(format!("read the current directory: {e}")))?;
        let dir = match &global.directory {
            Some(d) => {
                let d = if d.is_absolute() { d.clone() } else { cwd.join(d) };
                if !d.is_dir() {
                    return Err(CliError::bad(format!("change to directory `{}`: not a directory", d.display())));
                }
                d
            }
            None => cwd,
        };
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        let root = work_git::Git::toplevel(&dir).unwrap_or(dir);
        let state_dir = match &global.state_dir {
            Some(s) if s.is_absolute() => s.clone(),
            Some(s) => root.join(s),
            None => root.join(".work"),
        };
        // Every state file written from here on has its digest recorded; one changed outside a
        // run is refused when it is read.
        work_runtime::fsx::digests::install(&state_dir);
        // Agents never see the state directory; `--isolation required` without a sandbox is
        // refused here, before anything runs.
        work_runtime::sandbox::configure(global.isolation, vec![state_dir.clone()])
            .map_err(|e| CliError::bad(e.to_string()))?;
        let user = user_config_path();
        let config = Config::load_layered(&root, user.as_deref(), &env_settings(), &global.overrides)?;
        let mut redactor = Redactor::from_env();
        for def in config.agents.values() {
            if let Some(var) = &def.api_key_env
                && let Ok(v) = std::env::var(var)
            {
                redactor.add(v);
            }
        }
        // The one output writer redacts every line with the same secrets.
        work_run::output::set_redactor(&redactor);
        Ok(Ctx { root, state_dir, config, clock: Arc::from(clock::from_env()), redactor })
    }

    /// A path relative to the state directory.
    pub fn state_path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.state_dir.join(rel)
    }
}

/// The `WORK_*` settings, each the one environment name of a top-level `work.toml` key: they
/// sit above `work.toml` and the user's config and below `-c` and the command's flags. An
/// empty value counts as unset.
pub const ENV_SETTINGS: [(&str, &str); 2] = [("WORK_AGENT", "agent"), ("WORK_CONCURRENCY", "concurrency")];

/// The `WORK_*` settings in the environment, as `key=value` overrides.
fn env_settings() -> Vec<String> {
    ENV_SETTINGS
        .iter()
        .filter_map(|(var, key)| std::env::var(var).ok().filter(|v| !v.is_empty()).map(|v| format!("{key}={v}")))
        .collect()
}

/// The user's config file: `$XDG_CONFIG_HOME/work/config.toml` (an absolute
/// `XDG_CONFIG_HOME`), else `~/.config/work/config.toml`; none without either.
pub fn user_config_path() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    let base = xdg.or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("work").join("config.toml"))
}

/// The message when no agent is configured for a role.
pub const NO_AGENT: &str =
    "choose an agent: pass --agent SPEC, set WORK_AGENT, or set `agent` in work.toml (see `work agents check`)";

impl Ctx {
    /// Resolves a role's agent and pins (`--agent` > `[roles.R].agent` > `agent`), builds
    /// its backend and checks it can run here. Bad input (exit 2) on any failure.
    pub fn resolve_agent(
        &self,
        role: &str,
        cli_agent: Option<&str>,
    ) -> Result<(work_config::ResolvedRole, Arc<dyn work_runtime::dispatch::Agent>), CliError> {
        let has_any = cli_agent.is_some()
            || self.config.agent.is_some()
            || self.config.roles.get(role).is_some_and(|r| r.agent.is_some());
        if !has_any {
            return Err(CliError::bad(NO_AGENT));
        }
        let resolved = self.config.resolve_role(role, cli_agent, "")?;
        let agent = work_agents::build(&resolved, &self.root).map_err(|e| CliError::bad(e.to_string()))?;
        agent
            .preflight()
            .map_err(|e| CliError::bad(format!("use agent `{}` for role {role}: {e}", agent.describe())))?;
        Ok((resolved, agent))
    }

    /// Starts a run of `workflow` with `budget`, logging to `<state>/runs/<run-id>/`.
    pub fn start_run(
        &self,
        workflow: &str,
        budget: work_runtime::budget::Budget,
        already_spent: work_runtime::budget::Spent,
    ) -> Result<work_runtime::run::RunContext, CliError> {
        self.start_resumed_run(workflow, budget, already_spent, Default::default())
    }

    /// Starts a run that continues earlier spending (a resumed journal), in total and per role.
    pub fn start_resumed_run(
        &self,
        workflow: &str,
        budget: work_runtime::budget::Budget,
        already_spent: work_runtime::budget::Spent,
        already_by_role: std::collections::BTreeMap<String, work_runtime::budget::Spent>,
    ) -> Result<work_runtime::run::RunContext, CliError> {
        self.start_run_as(self.new_run_id(workflow), workflow, budget, already_spent, already_by_role)
    }

    /// A fresh run id for `workflow` (the harness names it in its locks before the run starts).
    pub fn new_run_id(&self, workflow: &str) -> String {
        work_runtime::run::new_run_id(self.clock.as_ref(), workflow)
    }

    /// Starts a run under a run id chosen beforehand.
    pub fn start_run_as(
        &self,
        run_id: String,
        workflow: &str,
        budget: work_runtime::budget::Budget,
        already_spent: work_runtime::budget::Spent,
        already_by_role: std::collections::BTreeMap<String, work_runtime::budget::Spent>,
    ) -> Result<work_runtime::run::RunContext, CliError> {
        let run = work_runtime::run::RunContext::start_with_id(
            work_runtime::run::RunOptions {
                root: self.root.clone(),
                state_dir: self.state_dir.clone(),
                clock: self.clock.clone(),
                redactor: self.redactor.clone(),
                budget,
                already_spent,
                already_by_role,
                // The one renderer (work_run::progress) prints the run's lines from its events.
                progress: work_runtime::run::ProgressSink::Silent,
            },
            workflow,
            run_id,
        )
        .map_err(|e| CliError::Runtime(format!("create the run directory under {}: {e}", self.state_dir.display())))?;
        work_run::progress::attach(&run);
        let mode = work_runtime::sandbox::mode();
        // `--isolation none` was the user's choice: only `auto` without a sandbox says so.
        if !mode.is_kernel() && work_runtime::sandbox::asked() == work_runtime::sandbox::Isolation::Auto {
            work_run::output::note(&format!("note: {}", mode.describe()));
        }
        Ok(run)
    }

    /// Takes the working-tree lock for `run_id` (a second writer on this tree is refused at once).
    pub fn lock_tree(&self, run_id: &str) -> Result<work_run::lock::Held, CliError> {
        work_run::lock::lock_tree(&self.root, &self.state_dir, run_id).map_err(CliError::from)
    }

    /// Takes a lock under `<state>/locks/` on the workflow's own state.
    pub fn lock_state(&self, name: &str, what: &str, run_id: &str) -> Result<work_run::lock::Held, CliError> {
        work_run::lock::acquire(&self.state_path(format!("locks/{name}.lock")), what, run_id).map_err(CliError::from)
    }
}

impl From<work_run::lock::LockRefused> for CliError {
    fn from(e: work_run::lock::LockRefused) -> Self {
        CliError::BadInput(e.to_string())
    }
}

/// A dispatcher for one resolved role within a run.
pub fn dispatcher(
    run: &work_runtime::run::RunContext,
    role: &work_config::ResolvedRole,
    agent: Arc<dyn work_runtime::dispatch::Agent>,
) -> work_runtime::dispatch::Dispatcher {
    work_runtime::dispatch::Dispatcher::new(
        agent,
        run.events.clone(),
        run.budget.clone(),
        &run.workflow,
        run.root.clone(),
        std::time::Duration::from_secs(role.timeout_secs.max(1)),
    )
    .with_fail_streak(run.fail_streak.clone())
}

/// Builds the multi-threaded tokio runtime commands run on.
///
/// The runtime also watches SIGINT and SIGTERM (`work_run::signals`): on either, every agent
/// process group still running is killed (no agent outlives `work` and keeps spending), the
/// exact resume command is printed, and `work` exits with 130 / 143. Journals and session
/// files are whole at every instant, so the next run resumes.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("start the async runtime: {e}")))?;
    work_run::signals::watch(&rt);
    Ok(rt)
}

/// Prints a JSON document on stdout through the one output writer (the `--json` contract:
/// nothing else on stdout).
pub fn print_json(value: &serde_json::Value) {
    work_run::output::json(value);
}
