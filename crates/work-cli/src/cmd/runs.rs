//! `work runs`: the run history of this repository.
//!
//! - `work runs list [--json]`: every run under `.work/runs/`, newest first: id, workflow,
//!   subject (exhaust task, until session, ultra goal, implement tasks), start, duration,
//!   outcome, dispatches, tokens, cost. A run without `run.end` is `running` while its
//!   process lives, else `interrupted`.
//! - `work runs gc --older-than DURATION [--json]`: removes the run directories that started
//!   longer ago than DURATION (`30d`, `12h`, `90m`, `2w`); a running run is never removed. The
//!   task worktrees parallel waves of those runs left are removed where their work is on their
//!   ref, kept and named where it is not.

use crate::CmdResult;
use crate::ctx::{CliError, Ctx, Global};
use serde_json::{Value, json};
use work_history::{RunSummary, Store};
use work_runtime::ExitStatus;

/// Arguments of `work runs`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  work runs list\n  work runs list --json | jq '.[0].run_id'\n  work runs gc --older-than 30d --dry-run\n  work runs gc --older-than 30d"
)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: RunsCommand,
}

/// `work runs` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RunsCommand {
    /// Every run in this repository, newest first.
    List {
        /// Print the runs as a JSON array on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Remove old run directories (never a running one).
    Gc {
        /// Remove runs that started longer ago than this (`30d`, `12h`, `90m`, `2w`).
        #[arg(long, value_name = "DURATION")]
        older_than: String,
        /// Print what was removed as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// List what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Runs `work runs`.
pub fn run(global: &Global, args: Args) -> CmdResult {
    match args.command {
        RunsCommand::List { json } => list(global, json),
        RunsCommand::Gc { older_than, json, dry_run } => gc(global, &older_than, json, dry_run),
    }
}

/// The `runs list --json` row of one run.
pub fn row_json(s: &RunSummary) -> Value {
    json!({
        "run_id": s.run_id,
        "workflow": s.workflow,
        "subject": s.subject,
        "started": s.started,
        "duration_ms": s.duration_ms,
        "outcome": s.outcome,
        "state": s.state,
        "dispatches": s.dispatches,
        "tokens": s.tokens,
        "cost_usd": s.cost_usd,
        "unpriced": s.unpriced,
        "failures": s.failures.len(),
    })
}

fn list(global: &Global, json: bool) -> CmdResult {
    let ctx = Ctx::new(global)?;
    let runs = Store::new(&ctx.state_dir).list().map_err(|e| CliError::Runtime(e.to_string()))?;
    if json {
        let rows: Vec<Value> = runs.iter().map(row_json).collect();
        work_run::output::json(&Value::Array(rows));
        return Ok(ExitStatus::Done);
    }
    if runs.is_empty() {
        work_run::output::line(format!(
            "No runs yet in {} (start one: work exhaust WHAT).",
            ctx.state_dir.join("runs").display()
        ));
        return Ok(ExitStatus::Done);
    }
    let mut lines = vec![format!(
        "{:<40} {:<10} {:<24} {:<20} {:>9} {:<20} {:>5} {:>9} {:>9}",
        "RUN", "WORKFLOW", "SUBJECT", "STARTED", "DURATION", "OUTCOME", "DISP", "TOKENS", "COST"
    )];
    for s in &runs {
        let subject = s.subject.as_ref().map(|x| x.id.clone()).unwrap_or_else(|| "-".into());
        lines.push(format!(
            "{:<40} {:<10} {:<24} {:<20} {:>9} {:<20} {:>5} {:>9} {:>9}",
            s.run_id,
            s.workflow,
            clip(&subject, 24),
            s.started.as_deref().map(|t| t.get(..19).unwrap_or(t).replace('T', " ")).unwrap_or_default(),
            s.duration_ms.map(work_history::report::human_ms).unwrap_or_default(),
            clip(&s.outcome, 20),
            s.dispatches,
            s.tokens,
            work_runtime::budget::cost_text(s.cost_usd, s.unpriced),
        ));
    }
    work_run::output::line(lines.join("\n"));
    work_run::output::line(format!("\n{} run(s). Look at one: work show RUN · work report RUN", runs.len()));
    Ok(ExitStatus::Done)
}

/// Cuts `s` to `n` characters (an ellipsis marks the cut).
pub fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n - 1).collect::<String>()) }
}

fn gc(global: &Global, older_than: &str, json: bool, dry_run: bool) -> CmdResult {
    let secs = work_history::duration::parse_duration(older_than)
        .map_err(|e| CliError::bad(format!("parse --older-than: {e}")))?;
    let ctx = Ctx::new(global)?;
    let mode = if dry_run { work_history::Gc::Preview } else { work_history::Gc::Remove };
    let store = Store::new(&ctx.state_dir);
    let report = store.gc(secs, ctx.clock.now(), mode).map_err(|e| CliError::Runtime(e.to_string()))?;
    let trees = gc_worktrees(&ctx, &store, secs, dry_run)?;
    if json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        v["worktrees_removed"] = json!(trees.removed);
        v["worktrees_kept"] = json!(trees.kept);
        work_run::output::json(&v);
        return Ok(ExitStatus::Done);
    }
    let (verb, done) = if dry_run { ("would remove", "would be removed") } else { ("removed", "removed") };
    for id in &report.removed {
        work_run::output::human(format!("{verb} {id}"));
    }
    for id in &report.kept_running {
        work_run::output::human(format!("kept {id} (still running)"));
    }
    for t in &trees.removed {
        work_run::output::human(format!("{verb} worktree {} (its work is on {})", t.path, t.reference));
    }
    for t in &trees.kept {
        work_run::output::human(format!("kept worktree {} ({})", t.path, t.reason));
    }
    work_run::output::human(format!(
        "{} run(s) {done}, {} still running kept, {} younger than {older_than} kept.",
        report.removed.len(),
        report.kept_running.len(),
        report.kept
    ));
    Ok(ExitStatus::Done)
}

/// A parallel wave's task worktree `gc` removed (or would): its work is on its ref.
#[derive(Debug, serde::Serialize)]
struct TreeRemoved {
    path: String,
    reference: String,
}

/// A task worktree `gc` kept, and why.
#[derive(Debug, serde::Serialize)]
struct TreeKept {
    path: String,
    reason: String,
}

#[derive(Debug, Default)]
struct TreesGc {
    removed: Vec<TreeRemoved>,
    kept: Vec<TreeKept>,
}

/// The task worktrees of parallel waves (`<git-common-dir>/work/trees/<run>/<task>`) of the
/// runs `gc` selects (old enough, not running): one whose work is exported — its ref
/// `refs/work/<run>/<task>` holds exactly its tree — is removed; one with work on no ref is
/// kept and named, never removed. Outside a git repository there are none.
fn gc_worktrees(ctx: &Ctx, store: &Store, secs: i64, dry_run: bool) -> Result<TreesGc, CliError> {
    let git = work_git::Git::new(&ctx.root);
    let now = ctx.clock.now();
    let mut out = TreesGc::default();
    if !git.is_repo() {
        return Ok(out);
    }
    let failed = |e: &dyn std::fmt::Display| CliError::Runtime(format!("gc of the wave worktrees: {e}"));
    let trees = git.task_trees().map_err(|e| failed(&e))?;
    for t in trees {
        let age = store.age_of(&t.run, secs, now).map_err(|e| failed(&e))?;
        if age != work_history::store::Age::Old {
            continue;
        }
        let path = t.dir.display().to_string();
        match git.exported(&t).map_err(|e| failed(&e))? {
            Some(reference) => {
                if !dry_run {
                    git.drop_worktree(&t.dir).map_err(|e| failed(&e))?;
                }
                out.removed.push(TreeRemoved { path, reference });
            }
            None => {
                let reason = format!("work on no ref; look: git -C {path} status");
                out.kept.push(TreeKept { path, reason });
            }
        }
    }
    Ok(out)
}
