//! `work worker`: a long-running worker for scale-out (docs/scale-out.md). It pulls dispatch
//! requests from the queue, runs each with this machine's own backends in this checkout, and
//! publishes the answer. `work worker status` shows the workers of this checkout.

use crate::CmdResult;
use crate::ctx::{self, CliError, Ctx, Global};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use work_queue::RepoRef;
use work_queue::worker::{Backends, ScratchTree, WorkerOptions, WorkerStatus};
use work_runtime::ExitStatus;
use work_runtime::dispatch::Agent;

/// Run dispatches from a queue with this machine's agents (or show the workers' state).
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// The queue: nats://HOST:PORT (comma-separated for several nodes of a cluster).
    #[arg(long, value_name = "URL")]
    pub queue: Option<String>,
    /// Every role's backend on this worker (SPEC or a name from work.toml; default: work.toml).
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// Also run roles that may write to the checkout (read-only roles only without it).
    #[arg(long)]
    pub allow_write_roles: bool,
    /// Requests run at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: usize,
    /// This worker's name (default: worker-PID).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Seconds without a sign of life from a worker before its request goes to another (set
    /// by the first worker to start on a queue).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub ack_wait: u64,
    /// Deliveries of one request before it is given up and its dispatch fails (set by the
    /// first worker to start on a queue).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub max_deliver: i64,
}

/// `work worker` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// The workers of this checkout: running or gone, what they run, what they answered.
    Status(StatusArgs),
}

/// `work worker status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print the workers as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A role's pins and its agent for the checkout.
type RoleAgent = (work_config::ResolvedRole, Arc<dyn Agent>);

/// This machine's side of a worker: its configuration's backends (built once per role) and
/// its checkout, read again before every request.
struct Local {
    ctx: Ctx,
    cli_agent: Option<String>,
    agents: Mutex<HashMap<String, RoleAgent>>,
    /// The repository and commit of the last check.
    repo: Mutex<Option<RepoRef>>,
    /// Where this worker's scratch worktrees go: this prefix and a number.
    scratch_prefix: PathBuf,
    scratches: std::sync::atomic::AtomicU64,
}

impl Local {
    /// The scratch worktrees of this worker (its name in this checkout) live in the system's
    /// temporary directory, outside the checkout (an agent run there sees only the change's
    /// tree); the ones a killed worker left are removed when it starts again.
    fn scratch_prefix(ctx: &Ctx, name: &str) -> PathBuf {
        use sha2::Digest;
        let key = hex::encode(&sha2::Sha256::digest(format!("{}\0{name}", ctx.root.display()).as_bytes())[..6]);
        std::env::temp_dir().join(format!("work-scratch-{key}-"))
    }

    fn sweep_scratches(&self) {
        let (Some(dir), Some(prefix)) =
            (self.scratch_prefix.parent(), self.scratch_prefix.file_name().map(|f| f.to_string_lossy().into_owned()))
        else {
            return;
        };
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = work_runtime::fsx::plain::remove_dir_all(e.path());
            }
        }
        let _ = work_git::Git::new(&self.ctx.root).run(&["worktree", "prune"]);
    }
}

/// A scratch worktree of the worker's checkout.
struct Scratch(work_git::change::Scratch);

impl ScratchTree for Scratch {
    fn root(&self) -> String {
        self.0.root().display().to_string()
    }

    fn unchanged(&self) -> Result<(), String> {
        self.0.unchanged().map_err(|e| e.to_string())
    }
}

impl Backends for Local {
    /// Built once per role for the checkout; for a scratch worktree, built again from the
    /// same configuration to work there.
    fn agent(&self, role: &str, cwd: Option<&str>) -> Result<Arc<dyn Agent>, String> {
        let mut agents = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        let (resolved, agent) = match agents.get(role) {
            Some(a) => a.clone(),
            None => {
                let a = self.ctx.resolve_agent(role, self.cli_agent.as_deref()).map_err(|e| e.to_string())?;
                agents.insert(role.to_string(), a.clone());
                a
            }
        };
        match cwd {
            None => Ok(agent),
            Some(dir) => work_agents::build(&resolved, std::path::Path::new(dir)).map_err(|e| e.to_string()),
        }
    }

    /// One `git status` per request gives both HEAD and the changed tracked files (untracked
    /// files do not matter); the repository id is read again only when HEAD moved.
    fn checkout(&self) -> Result<RepoRef, String> {
        let git = work_git::Git::new(&self.ctx.root);
        let out = git
            .run(&["status", "--porcelain=v2", "--branch", "--untracked-files=no", "-z"])
            .map_err(|e| e.to_string())?;
        let (head, changed) = parse_status(&out);
        let head = head.ok_or("it has no commit checked out (HEAD)")?;
        if !changed.is_empty() {
            return Err(format!("tracked files changed ({})", changed.join(", ")));
        }
        let mut known = self.repo.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = known.as_ref().filter(|r| r.head == head) {
            return Ok(r.clone());
        }
        let r = RepoRef {
            id: crate::cmd::queue::repo_id(&self.ctx.root, &head)?,
            head,
            checkout: crate::cmd::queue::checkout_id(&self.ctx.root)?,
        };
        *known = Some(r.clone());
        Ok(r)
    }

    fn root(&self) -> String {
        self.ctx.root.display().to_string()
    }

    fn scratch(&self, head: &str, change: &work_queue::wire::Change) -> Result<Box<dyn ScratchTree>, String> {
        let n = self.scratches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = PathBuf::from(format!("{}{}-{n}", self.scratch_prefix.display(), std::process::id()));
        let change =
            work_git::change::Change { head: head.into(), tree: change.tree.clone(), patch: change.patch.clone() };
        let s = work_git::change::Scratch::create(&work_git::Git::new(&self.ctx.root), &dir, &change)
            .map_err(|e| e.to_string())?;
        Ok(Box::new(Scratch(s)))
    }
}

/// HEAD and the first few changed tracked paths from `git status --porcelain=v2 --branch -z`.
fn parse_status(out: &str) -> (Option<String>, Vec<String>) {
    let mut head = None;
    let mut changed = Vec::new();
    let mut records = out.split('\0').filter(|r| !r.is_empty());
    while let Some(r) = records.next() {
        if let Some(oid) = r.strip_prefix("# branch.oid ") {
            head = Some(oid.to_string()).filter(|o| o.chars().all(|c| c.is_ascii_hexdigit()));
            continue;
        }
        // Ordinary (8 fields before the path), renamed or copied (9, then the source path as
        // a record of its own), unmerged (10).
        let fields = match r.as_bytes().first() {
            Some(b'1') => 8,
            Some(b'2') => 9,
            Some(b'u') => 10,
            _ => continue,
        };
        if let Some(path) = r.splitn(fields + 1, ' ').nth(fields)
            && changed.len() < 5
        {
            changed.push(path.to_string());
        }
        if fields == 9 {
            let _ = records.next();
        }
    }
    (head, changed)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Runs `work worker`.
pub fn run(global: &Global, a: Args) -> CmdResult {
    if let Some(Action::Status(s)) = &a.action {
        return status(global, s);
    }
    let Some(queue) = &a.queue else {
        return Err(CliError::bad("start the worker: pass --queue nats://HOST:PORT (or `work worker status`)"));
    };
    let url = crate::cmd::queue::parse_url("start the worker", queue)?;
    if a.concurrency == 0 {
        return Err(CliError::bad("start the worker: --concurrency must be at least 1"));
    }
    if a.ack_wait == 0 || a.max_deliver < 1 {
        return Err(CliError::bad("start the worker: --ack-wait and --max-deliver must be at least 1"));
    }
    let name = a.name.clone().unwrap_or_else(|| format!("worker-{}", std::process::id()));
    if !valid_name(&name) {
        return Err(CliError::bad(format!(
            "start the worker: --name `{name}` must be a slug (letters, digits, `-`, `_`, `.`)"
        )));
    }
    let ctx = Ctx::new(global)?;
    crate::cmd::queue::repo_ref(&ctx.root).map_err(|e| CliError::bad(format!("start the worker: {e}")))?;
    if let Some(spec) = &a.agent {
        // A backend that cannot run here is bad input now, not a failure per request.
        ctx.resolve_agent("finder", Some(spec))?;
    }
    let opts = WorkerOptions {
        name: name.clone(),
        allow_write_roles: a.allow_write_roles,
        concurrency: a.concurrency,
        redelivery: work_queue::stream::Redelivery {
            ack_wait: Duration::from_secs(a.ack_wait),
            max_deliver: a.max_deliver,
        },
        status_path: Some(ctx.state_path(format!("workers/{name}.json"))),
        redactor: ctx.redactor.clone(),
    };
    let scratch_prefix = Local::scratch_prefix(&ctx, &name);
    let local = Arc::new(Local {
        ctx,
        cli_agent: a.agent.clone(),
        agents: Mutex::default(),
        repo: Mutex::default(),
        scratch_prefix,
        scratches: Default::default(),
    });
    local.sweep_scratches();
    let rt = ctx::runtime()?;
    work_run::output::note(&format!("worker {name}: pulling from {}", url.servers().join(",")));
    rt.block_on(work_queue::worker::run(&url, local, opts))
        .map_err(|e| CliError::bad(format!("start the worker: {e}")))?;
    Ok(ExitStatus::Done)
}

fn alive(pid: u32) -> bool {
    PathBuf::from(format!("/proc/{pid}")).exists()
}

fn status(global: &Global, s: &StatusArgs) -> CmdResult {
    let ctx = Ctx::new(global)?;
    let dir = ctx.state_path("workers");
    let mut workers: Vec<(WorkerStatus, bool)> = Vec::new();
    let entries =
        std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>()).unwrap_or_default();
    for path in entries.into_iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let Ok(Some(text)) = work_runtime::fsx::read_optional(&path) else { continue };
        if let Ok(w) = serde_json::from_str::<WorkerStatus>(&text) {
            let up = alive(w.pid);
            workers.push((w, up));
        }
    }
    workers.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    if s.json {
        let list: Vec<serde_json::Value> = workers
            .iter()
            .map(|(w, up)| {
                let mut v = serde_json::to_value(w).unwrap_or_default();
                v["state"] = serde_json::json!(if *up { "running" } else { "gone" });
                v
            })
            .collect();
        ctx::print_json(&serde_json::Value::Array(list));
        return Ok(ExitStatus::Done);
    }
    if workers.is_empty() {
        work_run::output::line(format!("no worker has run in this checkout ({})", dir.display()));
    }
    for (w, up) in &workers {
        let at = w.repository.as_ref().map(|r| r.head.chars().take(12).collect::<String>()).unwrap_or("-".into());
        work_run::output::line(format!(
            "{} · {} (pid {}) · {} · commit {at} · running {} · answered {} ({} failed) · refused {}{}",
            w.name,
            if *up { "running" } else { "gone" },
            w.pid,
            w.queue,
            w.running.len(),
            w.answered,
            w.failed,
            w.refused,
            w.last_refusal.as_ref().map(|r| format!(" (last: {r})")).unwrap_or_default()
        ));
    }
    Ok(ExitStatus::Done)
}

#[cfg(test)]
mod tests {
    use super::parse_status;

    #[test]
    fn a_status_names_head_and_changed_tracked_files() {
        let head = "0123456789abcdef0123456789abcdef01234567";
        let out = format!(
            "# branch.oid {head}\0# branch.head main\0\
             1 .M N... 100644 100644 100644 aa bb src/a b.rs\0\
             2 R. N... 100644 100644 100644 aa bb R100 new.rs\0old.rs\0\
             u UU N... 100644 100644 100644 100644 aa bb cc both.rs\0"
        );
        let (h, changed) = parse_status(&out);
        assert_eq!(h.as_deref(), Some(head));
        assert_eq!(changed, ["src/a b.rs", "new.rs", "both.rs"]);
        let (h, changed) = parse_status("# branch.oid (initial)\0# branch.head main\0");
        assert_eq!((h, changed.len()), (None, 0), "no commit is no HEAD");
    }
}
