//! `work exhaust`: discovery until dry. Validates every flag before anything
//! runs, loads or starts the journal, and drives [`work_exhaust::Engine`].

use crate::CmdResult;
use crate::budget_args::BudgetArgs;
use crate::ctx::{self, CliError, Ctx, Global};
use serde_json::json;
use std::time::Duration;
use work_exhaust::{Engine, ExhaustError, Journal, Params};
use work_run::status::ExhaustStop;
use work_runtime::events::Event;

/// Discovery until dry: rounds of parallel finders until K consecutive qualifying rounds find
/// nothing new.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What is being discovered ("all places that touch job state transitions").
    #[arg(value_name = "WHAT")]
    pub what: String,
    /// Qualifying dry rounds to stop (K ≥ 2).
    #[arg(short = 'k', long = "k", default_value_t = 3)]
    pub k: u32,
    /// Extra context for the finders.
    #[arg(long)]
    pub context: Option<String>,
    /// Journal name (default: a slug of WHAT).
    #[arg(long, value_name = "SLUG")]
    pub task: Option<String>,
    /// The angle pool, in the order to try (default: the built-in sweep pool).
    #[arg(long, value_name = "A,B,…", value_delimiter = ',')]
    pub angles: Option<Vec<String>>,
    /// Fresh angles per round.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub angles_per_round: usize,
    /// Gate 1: an oracle command run before round 1 (repeatable).
    #[arg(long, value_name = "CMD")]
    pub seed_oracle: Vec<String>,
    /// Gate 3: an oracle command run before the K-th qualifying dry round commits (repeatable).
    #[arg(long, value_name = "CMD")]
    pub final_oracle: Vec<String>,
    /// Bound the discovery: every `PATH:LINE` must lie at or under PATH (repeatable).
    #[arg(long, value_name = "PATH")]
    pub scope: Vec<String>,
    /// Stop after N rounds (stoppedReason caller-target).
    #[arg(long, value_name = "N")]
    pub max_rounds: Option<u32>,
    /// `--budget-dispatches`, `--budget-tokens`, `--budget-usd`.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Wave cap (default 8: finders wait on models, not on the CPU; at least 1).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// The finders' backend (SPEC or a name from work.toml).
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// Run the finders on `work worker`s pulling from this queue (nats://HOST:PORT; see
    /// docs/scale-out.md). The journal, budgets and rules stay here; the cap counts the
    /// dispatches in flight across all workers.
    #[arg(long, value_name = "URL")]
    pub queue: Option<String>,
    /// Start over, discarding an existing journal for this task.
    #[arg(long)]
    pub fresh: bool,
    /// Print the master object as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Check everything and print the plan — the finders' agent and model, the next angles,
    /// k, the oracles, the budget (and with `-v` the first brief) — then stop: nothing is
    /// dispatched, locked or written.
    #[arg(long)]
    pub dry_run: bool,
}

/// A slug of WHAT for the journal name: lowercase letters and digits (any script) joined by
/// `-`. When the slug had to be shortened (over 60 characters) or lost characters it cannot
/// spell (punctuation-only or empty), a short hash of WHAT keeps distinct discoveries apart.
pub fn slug(what: &str) -> String {
    use sha2::Digest;
    let mut s = String::new();
    let mut lossy = false;
    for c in what.trim().chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            s.push(c);
        } else if !s.is_empty() && !s.ends_with('-') {
            s.push('-');
        }
    }
    let mut s = s.trim_end_matches('-').to_string();
    if s.chars().count() > 60 {
        s = s.chars().take(60).collect::<String>().trim_end_matches('-').to_string();
        lossy = true;
    }
    if s.is_empty() {
        lossy = true;
    }
    if lossy {
        let hash = hex::encode(sha2::Sha256::digest(what.as_bytes()));
        s = if s.is_empty() { format!("task-{}", &hash[..8]) } else { format!("{s}-{}", &hash[..8]) };
    }
    s
}

/// The default wave cap when neither `--concurrency` nor `concurrency` in work.toml sets one.
///
/// A constant, not derived from the core count: finders spend their time waiting on a model
/// (I/O-bound), so a 2-core machine runs a wave of 8 as well as a 32-core one does.
pub const DEFAULT_CONCURRENCY: usize = 8;

fn validate(a: &Args) -> Result<(), CliError> {
    if a.what.trim().is_empty() {
        return Err(CliError::bad("start exhaust: WHAT is empty"));
    }
    if a.k < 2 {
        return Err(CliError::bad(format!("start exhaust: --k must be at least 2 (got {})", a.k)));
    }
    if a.angles_per_round == 0 {
        return Err(CliError::bad("start exhaust: --angles-per-round must be at least 1"));
    }
    if a.concurrency == Some(0) {
        return Err(CliError::bad("start exhaust: --concurrency must be at least 1"));
    }
    if a.max_rounds == Some(0) {
        return Err(CliError::bad("start exhaust: --max-rounds must be at least 1"));
    }
    a.budget.validate("start exhaust")?;
    if let Some(angles) = &a.angles
        && (angles.is_empty() || angles.iter().any(|x| x.trim().is_empty()))
    {
        return Err(CliError::bad("start exhaust: --angles has an empty angle"));
    }
    if let Some(t) = &a.task
        && (t.is_empty()
            || t.starts_with('.')
            || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
    {
        return Err(CliError::bad(format!(
            "start exhaust: --task `{t}` must be a slug (letters, digits, `-`, `_`, `.`; no path)"
        )));
    }
    if let Some(q) = &a.queue {
        crate::cmd::queue::parse_url("start exhaust", q)?;
    }
    for o in a.seed_oracle.iter().chain(a.final_oracle.iter()) {
        if o.trim().is_empty() {
            return Err(CliError::bad("start exhaust: an oracle command is empty"));
        }
    }
    Ok(())
}

/// `--scope` paths, each spelled as gate 2 spells a location (relative to the root, symlinks
/// resolved); a path that is not inside the repository or does not exist is bad input.
fn resolve_scope(ctx: &Ctx, scope: &[String]) -> Result<Vec<String>, CliError> {
    scope
        .iter()
        .map(|sc| {
            let bad = |why: &str| CliError::bad(format!("start exhaust: --scope `{sc}` {why}"));
            let rel =
                work_exhaust::locate::normalize_rel(sc).ok_or_else(|| bad("is not a path inside the repository"))?;
            let fl = work_exhaust::items::FileLine { path: rel, line: 1, end: None, text: None };
            let r = work_exhaust::items::resolve(&ctx.root, &fl).map_err(|e| bad(&format!("is refused ({e})")))?;
            if !r.real.exists() {
                return Err(bad("does not exist"));
            }
            Ok(r.rel)
        })
        .collect()
}

/// Runs each final oracle once (on the engine's copy) before anything is
/// dispatched, so that a broken gate 3 is bad input (exit 2) and not a surprise after the
/// finders have spent their budget. Its items are not used: gate 3 proper runs when the dry
/// counter would reach K.
fn preflight_final_oracles(
    ctx: &Ctx,
    tree: &mut work_exhaust::oracle::OracleTree,
    oracles: &[String],
    timeout: Duration,
) -> Result<(), CliError> {
    if oracles.is_empty() {
        return Ok(());
    }
    let spawner = work_runtime::spawn::Spawner;
    let rt = ctx::runtime()?;
    let root = tree.ready().map_err(|e| CliError::Runtime(format!("start exhaust: {e}")))?.0;
    let root = root.as_deref().unwrap_or(&ctx.root);
    for o in oracles {
        let ran = rt.block_on(work_exhaust::oracle::run_oracle(&spawner, root, o, timeout));
        tree.settle();
        ran.map_err(|e| CliError::bad(format!("{e} (checked before the first round)")))?;
    }
    Ok(())
}

/// Runs `work exhaust`. Bad input found after the journal directory was created (a failing
/// oracle, a held lock) leaves no empty directories behind.
pub fn run(global: &Global, a: Args) -> CmdResult {
    validate(&a)?;
    let ctx = Ctx::new(global)?;
    let probe = [ctx.state_path("quality-journals"), ctx.state_path("runs"), ctx.state_dir.clone()];
    let missing: Vec<std::path::PathBuf> = probe.iter().filter(|d| !d.exists()).cloned().collect();
    let result = run_in(&ctx, a);
    if matches!(result, Err(CliError::BadInput(_))) {
        for d in &missing {
            // remove_dir only removes an empty directory: nothing written is ever lost.
            let _ = work_runtime::fsx::plain::remove_dir(d);
        }
    }
    result
}

fn run_in(ctx: &Ctx, a: Args) -> CmdResult {
    let (role, agent) = match &a.queue {
        // The workers run the backends: only the pins are resolved here.
        Some(_) => (crate::cmd::queue::role(ctx, "finder", a.agent.as_deref())?, None),
        None => ctx.resolve_agent("finder", a.agent.as_deref()).map(|(r, g)| (r, Some(g)))?,
    };
    // A budget that can never be reached would silently do nothing.
    if let Some(agent) = &agent {
        a.budget.check_agent(agent.as_ref())?;
    }
    let task = a.task.clone().unwrap_or_else(|| slug(&a.what));
    let journal_path = ctx.state_path(format!("quality-journals/work-exhaust-{task}.json"));
    if a.dry_run {
        return dry_run(ctx, &a, &role, agent.as_deref(), &task, &journal_path);
    }
    // The lock comes before the journal is read: a run that read it before another finished
    // would overwrite that run's rounds.
    let lock_path = journal_path.with_extension("json.lock");
    let lock_existed = lock_path.exists();
    let _lock = work_runtime::fsx::LockFile::acquire(&lock_path)
        .map_err(|e| CliError::bad(format!("lock the journal: {e}")))?;
    let result = run_locked(ctx, a, role, agent, task, journal_path);
    if matches!(result, Err(CliError::BadInput(_))) && !lock_existed {
        // Nothing ran: leave no lock file behind (the lock is still held while it goes).
        let _ = work_runtime::fsx::plain::remove_file(&lock_path);
    }
    result
}

fn run_locked(
    ctx: &Ctx,
    a: Args,
    role: work_config::ResolvedRole,
    agent: Option<std::sync::Arc<dyn work_runtime::dispatch::Agent>>,
    task: String,
    journal_path: std::path::PathBuf,
) -> CmdResult {
    // A finished task is reported from its journal's head; the journal is read whole only when
    // it can go on, or its master object is asked for (--json).
    if !a.fresh
        && !a.json
        && a.queue.is_none()
        && let (Some(agent), Some(head)) = (&agent, finished_head(&a, &journal_path)?)
    {
        return rerun_finished(ctx, &a, agent.as_ref(), head, &journal_path);
    }
    let (journal, resumed) = journal_for(&a, &task, &journal_path)?;
    let concurrency = a.concurrency.or(ctx.config.concurrency).unwrap_or(DEFAULT_CONCURRENCY).max(1);
    let budget = a.budget.budget();
    let params = Params {
        what: a.what.clone(),
        context: a.context.clone(),
        k: a.k,
        angles_per_round: a.angles_per_round,
        seed_oracles: a.seed_oracle.clone(),
        final_oracles: a.final_oracle.clone(),
        max_rounds: a.max_rounds,
        concurrency,
        model: role.model.clone(),
        effort: role.effort.clone(),
        oracle_timeout: Duration::from_secs(ctx.config.timeouts.oracle_secs.unwrap_or(300).max(1)),
        journal_path: journal_path.clone(),
        scope: resolve_scope(ctx, &a.scope)?,
    };
    let oracle_timeout = params.oracle_timeout;
    // The oracles search the engine's copy of the tree as it is now, made once for the run
    // (dropped when it ends, and removed on an interruption): a finder cannot blind them.
    let oracles_left =
        !journal.is_final() && (!a.final_oracle.is_empty() || (!journal.seed_done && !a.seed_oracle.is_empty()));
    let mut oracle_tree = match oracles_left {
        true => work_exhaust::oracle::OracleTree::at_start(&ctx.root, &ctx.state_dir)
            .map_err(|e| CliError::Runtime(format!("start exhaust: {e}")))?,
        false => work_exhaust::oracle::OracleTree::default(),
    };
    if !journal.is_final() {
        preflight_final_oracles(ctx, &mut oracle_tree, &params.final_oracles, oracle_timeout)?;
    }
    let rt = ctx::runtime()?;
    let agent = match (agent, &a.queue) {
        (Some(agent), _) => agent,
        (None, Some(q)) => {
            let url = crate::cmd::queue::parse_url("start exhaust", q)?;
            let fresh = !resumed || a.fresh;
            crate::cmd::queue::connect(ctx, &rt, "start exhaust", &url, &format!("exhaust-{task}"), fresh)?
        }
        (None, None) => return Err(CliError::bad(ctx::NO_AGENT)),
    };
    let run = ctx.start_resumed_run("exhaust", budget, journal.spent, journal.spent_by_role.clone())?;
    if let Some(n) = a.max_rounds {
        run.events.announce_total(work_runtime::events::Unit::Round, n.into());
    }
    let d = ctx::dispatcher(&run, &role, agent);
    run.emit(Event::ExhaustStart {
        what: json!(a.what),
        k: json!(a.k),
        cap: json!(concurrency),
        agent: d.agent_description().to_string(),
        resumed,
        journal: journal_path.display().to_string(),
    });
    let fresh_seed = !journal.seed_done;
    let result = rt.block_on(Engine::new(&run, &d, &params, journal, oracle_tree).drive());
    match result {
        Ok(j) => {
            let reason = j.stopped_reason.clone().unwrap_or_default();
            run.finish(&reason, serde_json::json!({"seen": j.seen.len()}));
            run.progress(&format!(
                "Stopped: {reason} · {} seen · {} rejected · {} round(s) · journal {}",
                j.seen.len(),
                j.rejected.len(),
                j.rounds.len(),
                journal_path.display()
            ));
            if a.json {
                ctx::print_json(&ctx.redactor.redact_json(&serde_json::to_value(&j).unwrap_or_default()));
            }
            let covered = j.given_up.is_empty();
            summary(
                &run,
                &j.items.iter().take(20).map(work_exhaust::Item::value).collect::<Vec<_>>(),
                j.seen.len(),
                &reason,
                j.completeness_gaps.clone(),
            )
            .print();
            Ok(work_run::status::exhaust(ExhaustStop::parse(&reason), covered))
        }
        Err(ExhaustError::Oracle(e)) => {
            if fresh_seed && run.budget.spent().dispatches == 0 {
                // Nothing was dispatched and no journal written: leave no trace of the attempt
                // (no `run.end`, so no seal of a log that is not kept).
                let _ = work_runtime::fsx::plain::remove_dir_all(run.run_dir());
            } else {
                run.finish("oracle-failed", serde_json::json!({"error": e.to_string()}));
            }
            Err(CliError::bad(e.to_string()))
        }
        Err(e) => {
            run.finish("error", serde_json::json!({"error": e.to_string()}));
            Err(CliError::Runtime(e.to_string()))
        }
    }
}

fn load_error(journal_path: &std::path::Path) -> impl Fn(work_exhaust::store::LoadError) -> CliError + '_ {
    move |e| match e {
        work_exhaust::store::LoadError::Read(e) => {
            CliError::bad(format!("read journal {}: {e}", journal_path.display()))
        }
        work_exhaust::store::LoadError::Corrupt(e) => CliError::bad(format!(
            "resume journal {}: it is corrupt ({e}); it was left untouched — move it away or pass --fresh",
            journal_path.display()
        )),
    }
}

/// The head of a finished journal for this task (`None` with `--fresh` or when it can go on).
fn finished_head(a: &Args, journal_path: &std::path::Path) -> Result<Option<work_exhaust::head::Head>, CliError> {
    if a.fresh {
        return Ok(None);
    }
    work_exhaust::store::Store::finished(journal_path).map_err(load_error(journal_path))
}

/// The journal this run goes on with (and whether it was resumed): the task's existing one,
/// its pool joined by new angles, or a new one (`--fresh`, or none yet).
fn journal_for(a: &Args, task: &str, journal_path: &std::path::Path) -> Result<(Journal, bool), CliError> {
    let pool: Vec<String> = match &a.angles {
        Some(v) => v.iter().map(|s| s.trim().to_string()).collect(),
        None => work_exhaust::angles::default_pool(),
    };
    let existing = if a.fresh {
        None
    } else {
        work_exhaust::store::Store::load(journal_path).map_err(load_error(journal_path))?
    };
    let Some((mut j, _)) = existing else { return Ok((Journal::new(task, &a.what, a.k, pool), false)) };
    if j.what.is_empty() {
        j.what = a.what.clone();
    }
    if j.task.is_empty() {
        j.task = task.to_string();
    }
    if j.what != a.what {
        return Err(other_discovery(journal_path, &j.what, &a.what));
    }
    // New angles join the pool; angles already used are never re-run as fresh ones.
    let mut known: std::collections::HashSet<String> = j.pool.iter().chain(j.angles_used.iter()).cloned().collect();
    for angle in pool {
        if known.insert(angle.clone()) {
            j.pool.push(angle);
        }
    }
    Ok((j, true))
}

/// `work exhaust --dry-run`: the discovery that would run, and its first briefs.
fn dry_run(
    ctx: &Ctx,
    a: &Args,
    role: &work_config::ResolvedRole,
    agent: Option<&dyn work_runtime::dispatch::Agent>,
    task: &str,
    journal_path: &std::path::Path,
) -> CmdResult {
    let mut plan = crate::dry_run::DryRun::new("exhaust");
    match (agent, &a.queue) {
        (Some(agent), _) => {
            plan.role(role, agent);
        }
        (None, q) => {
            plan.row("finder", format!("on the workers of {}", q.as_deref().unwrap_or("?")));
        }
    }
    plan.row("what", &a.what);
    if let Some(head) = finished_head(a, journal_path)? {
        let reason = head.stopped_reason.clone().unwrap_or_default();
        plan.row(
            "journal",
            format!("{} (finished: {reason}; nothing would run without --fresh)", journal_path.display()),
        );
        return plan.print(a.json);
    }
    let (j, resumed) = journal_for(a, task, journal_path)?;
    let concurrency = a.concurrency.or(ctx.config.concurrency).unwrap_or(DEFAULT_CONCURRENCY).max(1);
    plan.row(
        "journal",
        match resumed {
            true => format!("{} (resumed: {} seen, {} round(s))", journal_path.display(), j.seen.len(), j.rounds.len()),
            false => format!("{} (new)", journal_path.display()),
        },
    );
    let round = j.rounds.len() as u32 + 1;
    let mut next: Vec<&String> = Vec::new();
    for angle in j.retry_queue.iter().chain(j.pool.iter().skip(j.cursor)) {
        if next.len() < a.angles_per_round.max(1) && !j.angles_used.contains(angle) && !next.contains(&angle) {
            next.push(angle);
        }
    }
    let next_text: Vec<&str> = next.iter().map(|s| s.as_str()).collect();
    plan.row("round", format!("{round}: angle(s) {}", next_text.join(", ")))
        .row("angles", format!("{} in the pool, {} used", j.pool.len(), j.angles_used.len()))
        .row(
            "stop",
            format!(
                "after k = {} consecutive dry rounds{}",
                j.k,
                a.max_rounds.map(|n| format!(", or after {n} round(s)")).unwrap_or_default()
            ),
        )
        .row("concurrency", concurrency.to_string());
    if !a.seed_oracle.is_empty() && !j.seed_done {
        plan.row("seed oracles", a.seed_oracle.join(" · "));
    }
    if !a.final_oracle.is_empty() {
        plan.row("final oracles", a.final_oracle.join(" · "));
    }
    plan.budget(&a.budget);
    let shown = j.items.len().min(work_exhaust::engine::SEEN_CONTEXT_CAP);
    for angle in next {
        let brief =
            work_exhaust::engine::finder_prompt(&a.what, a.context.as_deref(), angle, round, j.seen.len(), shown);
        plan.prompt(format!("finder, angle {angle}"), brief);
    }
    plan.print(a.json)
}

fn other_discovery(journal_path: &std::path::Path, recorded: &str, asked: &str) -> CliError {
    CliError::bad(format!(
        "resume journal {}: it records the discovery `{recorded}`, not `{asked}` — pass another --task, or --fresh to start over",
        journal_path.display()
    ))
}

/// Reruns a finished task from its journal's head: the same checks, events, lines and exit
/// status as a resume that finds the journal stopped, without reading the journal whole.
fn rerun_finished(
    ctx: &Ctx,
    a: &Args,
    agent: &dyn work_runtime::dispatch::Agent,
    head: work_exhaust::head::Head,
    journal_path: &std::path::Path,
) -> CmdResult {
    if head.what != a.what {
        return Err(other_discovery(journal_path, &head.what, &a.what));
    }
    resolve_scope(ctx, &a.scope)?;
    let run = ctx.start_resumed_run("exhaust", a.budget.budget(), head.spent, head.spent_by_role.clone())?;
    let concurrency = a.concurrency.or(ctx.config.concurrency).unwrap_or(DEFAULT_CONCURRENCY).max(1);
    run.emit(Event::ExhaustStart {
        what: json!(a.what),
        k: json!(a.k),
        cap: json!(concurrency),
        agent: agent.describe().to_string(),
        resumed: true,
        journal: journal_path.display().to_string(),
    });
    let reason = head.stopped_reason.clone().unwrap_or_default();
    run.progress(&work_exhaust::engine::already_stopped(&reason));
    run.finish(&reason, serde_json::json!({"seen": head.seen}));
    run.progress(&format!(
        "Stopped: {reason} · {} seen · {} rejected · {} round(s) · journal {}",
        head.seen,
        head.rejected,
        head.rounds,
        journal_path.display()
    ));
    let covered = head.given_up == 0;
    summary(&run, &head.first_items, head.seen, &reason, head.completeness_gaps.clone()).print();
    Ok(work_run::status::exhaust(ExhaustStop::parse(&reason), covered))
}

/// The end of the run: the accepted items as `PATH:LINE title` (the first 20), the
/// completeness gaps (an angle given up among them), what was spent, the journal to resume
/// from, the event log.
fn summary(
    run: &work_runtime::run::RunContext,
    items: &[serde_json::Value],
    total: usize,
    reason: &str,
    gaps: Vec<String>,
) -> work_run::harness::Summary {
    let items: Vec<String> = items
        .iter()
        .take(20)
        .map(|i| {
            let loc = i["location"].as_str().or(i["id"].as_str()).unwrap_or("-");
            let title = ["title", "summary", "description"].iter().find_map(|k| i[*k].as_str()).unwrap_or("");
            work_until::ledger::one_line(format!("{loc} {title}").trim(), 160)
        })
        .collect();
    work_run::harness::Summary {
        outcome: reason.to_string(),
        label: "found".into(),
        total,
        items,
        gaps,
        spent: run.budget.spent(),
        budget: run.budget.budget(),
        next: match ExhaustStop::parse(reason) {
            Some(ExhaustStop::KDry | ExhaustStop::Exhausted) => None,
            Some(ExhaustStop::Budget | ExhaustStop::CallerTarget) => {
                Some("the same command with a larger budget or --max-rounds resumes from the journal".into())
            }
            Some(ExhaustStop::AgentFailing) | None => Some("the same command resumes from the journal".into()),
        },
        events: Some(run.run_dir().join("events.jsonl")),
    }
}
