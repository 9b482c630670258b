//! `--queue nats://…` on a workflow: the coordinator's side of scale-out (docs/scale-out.md).
//! The workflow runs exactly as locally; only the backend of its read-only fan-outs (exhaust's
//! finders, loop run's reviewers and adjudicator) is the queue. A reviewer's request carries
//! the coordinator's change against HEAD ([`change_source`]), which the worker replays in a
//! scratch worktree.

use crate::ctx::{CliError, Ctx};
use std::path::Path;
use std::sync::Arc;
use work_queue::agent::ChangeSource;
use work_queue::{QueueAgent, QueueUrl, RepoRef};
use work_runtime::dispatch::Agent;

/// The repository id (the oldest root commit: the same in every clone) and HEAD of `root`.
pub fn repo_ref(root: &Path) -> Result<RepoRef, String> {
    let git = work_git::Git::new(root);
    let head = git.head_sha().ok_or("it has no commit checked out (HEAD)")?;
    Ok(RepoRef { id: repo_id(root, &head)?, head, checkout: checkout_id(root)? })
}

/// Which checkout `root` is: its git directory, and that directory's device and inode (a
/// clone elsewhere, or the same path on another machine, differs).
pub fn checkout_id(root: &Path) -> Result<String, String> {
    let git = work_git::Git::new(root);
    let dir = git.run(&["rev-parse", "--absolute-git-dir"]).map_err(|e| e.to_string())?;
    let dir = dir.trim();
    let meta = std::fs::metadata(dir).map_err(|e| format!("read {dir}: {e}"))?;
    Ok(format!("{dir}@{}:{}", std::os::unix::fs::MetadataExt::dev(&meta), std::os::unix::fs::MetadataExt::ino(&meta)))
}

/// The repository id of commit `head` in `root`: its oldest root commit.
pub fn repo_id(root: &Path, head: &str) -> Result<String, String> {
    let git = work_git::Git::new(root);
    let roots = git.run(&["rev-list", "--max-parents=0", head]).map_err(|e| e.to_string())?;
    let mut roots: Vec<&str> = roots.split_whitespace().collect();
    roots.sort_unstable();
    Ok(roots.first().ok_or("it has no root commit")?.to_string())
}

/// Parses a `--queue` value (bad input, exit 2, on a bad one).
pub fn parse_url(what: &str, url: &str) -> Result<QueueUrl, CliError> {
    QueueUrl::parse(url).map_err(|e| CliError::bad(format!("{what}: {e}")))
}

/// The role's pins (model, effort, timeout) for a queue run: the workers run the backends, so
/// none is built or checked here; `--agent` or work.toml still choose the pins when set.
pub fn role(ctx: &Ctx, role: &str, cli_agent: Option<&str>) -> Result<work_config::ResolvedRole, CliError> {
    let configured = cli_agent.is_some()
        || ctx.config.agent.is_some()
        || ctx.config.roles.get(role).is_some_and(|r| r.agent.is_some());
    let fallback = if configured { "" } else { "command:work-worker" };
    Ok(ctx.config.resolve_role(role, cli_agent, fallback)?)
}

/// The journal's queue namespace: kept beside the journal so that a resumed run asks the same
/// dispatches (and finds the answers that arrived while it was down); a new one for a fresh
/// journal, so that it never reuses another discovery's answers. `Some(ns)` in the second
/// place when it is new and still to be written.
fn namespace(ctx: &Ctx, state_file: &Path, fresh: bool) -> (String, bool) {
    use sha2::Digest;
    if !fresh
        && let Ok(Some(text)) = work_runtime::fsx::read_optional(state_file)
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
        && let Some(ns) = v["namespace"].as_str()
        && !ns.is_empty()
        && ns.chars().all(|c| c.is_ascii_hexdigit())
    {
        return (ns.to_string(), false);
    }
    let seed = format!("{}:{}:{}", ctx.clock.now_rfc3339(), std::process::id(), state_file.display());
    (hex::encode(&sha2::Sha256::digest(seed.as_bytes())[..8]), true)
}

/// Connects the coordinator to the queue on `rt` (the runtime the workflow then runs on).
/// `journal_name` names the namespace file; `fresh` when the journal starts anew. Bad input
/// (exit 2) when the checkout or the queue cannot serve; nothing is written before it answered.
pub fn connect(
    ctx: &Ctx,
    rt: &tokio::runtime::Runtime,
    what: &str,
    url: &QueueUrl,
    journal_name: &str,
    fresh: bool,
) -> Result<Arc<dyn Agent>, CliError> {
    Ok(Arc::new(connect_agent(ctx, rt, what, url, journal_name, fresh)?))
}

/// [`connect`], as the queue agent itself.
pub fn connect_agent(
    ctx: &Ctx,
    rt: &tokio::runtime::Runtime,
    what: &str,
    url: &QueueUrl,
    journal_name: &str,
    fresh: bool,
) -> Result<QueueAgent, CliError> {
    let repository =
        repo_ref(&ctx.root).map_err(|e| CliError::bad(format!("{what}: --queue needs a git checkout: {e}")))?;
    let state_file = ctx.state_path(format!("queue/{journal_name}.json"));
    let (ns, new) = namespace(ctx, &state_file, fresh);
    let agent = rt
        .block_on(QueueAgent::connect(url, &ns, new, repository, work_queue::agent::DEFAULT_GRACE))
        .map_err(|e| CliError::bad(format!("{what}: {e}")))?;
    if new {
        work_runtime::fsx::write_json_atomic(&state_file, &serde_json::json!({"namespace": ns}))
            .map_err(|e| CliError::Runtime(format!("write {}: {e}", state_file.display())))?;
    }
    Ok(agent)
}

/// The coordinator's change against HEAD, taken when a reviewer's request is made: the whole
/// working tree (tracked and untracked files, not ignored ones), the state directory left as
/// HEAD has it.
pub fn change_source(ctx: &Ctx) -> ChangeSource {
    let root = ctx.root.clone();
    let exclude: Vec<String> = ctx
        .state_dir
        .strip_prefix(&ctx.root)
        .ok()
        .map(|p| p.display().to_string())
        .filter(|p| !p.is_empty())
        .into_iter()
        .collect();
    Arc::new(move || {
        let c = work_git::Git::new(&root).change(&exclude).map_err(|e| e.to_string())?;
        Ok((c.head, work_queue::wire::Change { tree: c.tree, patch: c.patch }))
    })
}
