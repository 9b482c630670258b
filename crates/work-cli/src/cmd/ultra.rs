//! `work ultra <GOAL.toml>`: the evidence-driven goal runner (docs/ultra.md).
//!
//! ```text
//! work ultra <GOAL.toml> [--agent SPEC] [--max-attempts N] [--fresh]
//!            [--budget-dispatches N] [--budget-tokens N] [--budget-usd X] [--json]
//! ```
//!
//! The goal file is read and checked (`work_ultra::goal`), the goal's earlier state is read
//! (`<state>/goals/<goal-id>/`), the tier may only ratchet up, and the implementer's agent is
//! resolved, all before anything is written: bad input is exit 2 with one line. Running the
//! same goal again resumes it (kept REDs, continued attempt numbers, the notepad appended to);
//! a state file changed or removed outside a run is refused, and `--fresh` starts the goal over.
//! Exit 0 when every criterion went RED → GREEN, 1 when the goal stopped BLOCKED (a spent
//! budget is stop reason `budget`; the budget is per run).

use crate::CmdResult;
use crate::budget_args::BudgetArgs;
use crate::ctx::{CliError, Ctx, Global, print_json};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use work_runtime::budget::Spent;
use work_ultra::engine::{self, Env, Outcome};
use work_ultra::goal::{self, Goal, Tier};
use work_ultra::state::{self, GoalState, GoalStatus, ObsRecord, ReceiptSource, Receipts};

/// Arguments of `work ultra`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The goal file (TOML: objective, tier, tier_justification, stop_line, [[criteria]]; see docs/ultra.md).
    #[arg(value_name = "GOAL.toml")]
    pub goal: PathBuf,
    /// The implementer's backend.
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// Attempts per criterion for this run (overrides the goal's `max_attempts`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=goal::MAX_MAX_ATTEMPTS as i64))]
    pub max_attempts: Option<u32>,
    /// `--budget-dispatches`, `--budget-tokens`, `--budget-usd` (per run).
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Start the goal over: its state (REDs, attempts, the frozen check surface), receipts and
    /// notepad are discarded, the evidence files are kept until overwritten.
    #[arg(long)]
    pub fresh: bool,
    /// Print the result as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    /// Check everything and print the plan — the implementer's agent and model, the criteria,
    /// the budget (and with `-v` the first brief) — then stop: nothing is dispatched, locked or
    /// written.
    #[arg(long)]
    pub dry_run: bool,
}

/// `work ultra --dry-run`: the goal that would run, and the first brief (every criterion a
/// target, as when each is RED: the RED run decides which are).
fn dry_run(
    goal: &goal::Goal,
    dir: &Path,
    role: &work_config::ResolvedRole,
    agent: &dyn work_runtime::dispatch::Agent,
    args: &Args,
) -> CmdResult {
    let mut plan = crate::dry_run::DryRun::new("ultra");
    plan.role(role, agent)
        .row("goal", format!("{} · tier {}", goal.id, goal.tier.as_str()))
        .row("objective", &goal.objective)
        .row(
            "state",
            match (args.fresh, dir.join("state.json").exists()) {
                (true, _) => "started over (--fresh)".to_string(),
                (false, true) => format!("resumed from {}", dir.display()),
                (false, false) => "new".to_string(),
            },
        );
    for c in &goal.criteria {
        let kind = match c.kind {
            goal::CriterionKind::Change => "change: RED first, then GREEN",
            goal::CriterionKind::Pin => "pin: GREEN throughout",
        };
        plan.row(
            format!("criterion {}", c.id),
            format!("{} ({kind}; at most {} attempt(s))", c.scenario, c.max_attempts),
        );
    }
    plan.budget(&args.budget);
    let targets: Vec<work_ultra::brief::TargetView<'_>> = goal
        .criteria
        .iter()
        .filter(|c| matches!(c.kind, goal::CriterionKind::Change))
        .map(|criterion| work_ultra::brief::TargetView {
            criterion,
            latest: "RED (as the RED run would find it)".into(),
            stdout_tail: String::new(),
            stderr_tail: String::new(),
        })
        .collect();
    plan.prompt("implementer, attempt 1", work_ultra::brief::prompt(goal, &targets, 1, &[], &[]));
    plan.print(args.json)
}

fn goal_path(global: &Global, file: &Path) -> Result<PathBuf, CliError> {
    if file.is_absolute() {
        return Ok(file.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|e| CliError::Runtime(format!("read the current directory: {e}")))?;
    let base = match &global.directory {
        Some(d) if d.is_absolute() => d.clone(),
        Some(d) => cwd.join(d),
        None => cwd,
    };
    Ok(base.join(file))
}

/// Runs `work ultra`.
pub fn run(global: &Global, args: Args) -> CmdResult {
    args.budget.validate("run the goal")?;
    let shown = args.goal.display().to_string();
    let path = goal_path(global, &args.goal)?;
    let text = match work_runtime::fsx::read_user_string(&path, work_runtime::fsx::USER_FILE_CAP) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CliError::bad(format!("read goal `{shown}`: no such file")));
        }
        Err(e) => return Err(CliError::bad(format!("read goal `{shown}`: {e}"))),
    };
    let mut goal = goal::parse(&text, &shown).map_err(|e| CliError::bad(e.to_string()))?;
    if let Some(n) = args.max_attempts {
        for c in &mut goal.criteria {
            c.max_attempts = n;
        }
    }
    let agent_flag = match args.agent.as_deref().map(str::trim) {
        Some("") => return Err(CliError::bad("use --agent: it is empty")),
        other => other.map(str::to_string),
    };
    let ctx = Ctx::new(global)?;
    let (role, agent) = ctx.resolve_agent("implementer", agent_flag.as_deref())?;
    args.budget.check_agent(agent.as_ref())?;
    let dir = state::goal_dir(&ctx.state_dir, &goal.id);
    if args.dry_run {
        return dry_run(&goal, &dir, &role, agent.as_ref(), &args);
    }
    // One run per goal at a time (a kernel flock, released when the process dies; the lock
    // file is never deleted once a run has used it). Taken before the state is read, so a
    // second run can neither read a state the first is about to change nor write over it.
    let lock_path = dir.join("lock");
    let fresh: Vec<PathBuf> =
        [ctx.state_dir.clone(), ctx.state_dir.join("goals"), dir.clone()].into_iter().filter(|d| !d.exists()).collect();
    // A run that loses the lock touches nothing: the lock file is the holder's.
    let lock = work_runtime::fsx::LockFile::acquire(&lock_path)
        .map_err(|e| CliError::bad(format!("lock goal `{}`: {e}", goal.id)))?;
    let loaded = if args.fresh {
        Ok((None, Receipts { goal_id: goal.id.clone(), receipts: Vec::new() }))
    } else {
        load_state(&dir, &goal, &shown)
    };
    let (existing, mut receipts) = match loaded {
        Ok(l) => l,
        Err(e) => {
            // Removed while still held, so no other run can be holding this file.
            remove_fresh(&lock_path, &fresh);
            drop(lock);
            return Err(e);
        }
    };
    let run_id = ctx.new_run_id("ultra");
    // The implementer writes the tree: one writer per tree, whatever the state directory.
    let tree = match ctx.lock_tree(&run_id) {
        Ok(t) => t,
        Err(e) => {
            remove_fresh(&lock_path, &fresh);
            drop(lock);
            return Err(e);
        }
    };
    if args.fresh {
        discard_state(&dir, &goal)?;
    }
    let run = ctx.start_run_as(run_id, "ultra", args.budget.budget(), Spent::default(), Default::default())?;
    run.events.announce_total(work_runtime::events::Unit::Criterion, goal.criteria.len() as u64);
    let mut st = existing
        .unwrap_or_else(|| GoalState::new(&goal.id, &goal.objective, goal.tier, &shown, &run.clock.now_rfc3339()));
    let dispatcher = crate::ctx::dispatcher(&run, &role, agent);
    let env = Env {
        run: &run,
        dispatcher: &dispatcher,
        model: role.model.clone(),
        effort: role.effort.clone(),
        dir: dir.clone(),
        goal_file: shown.clone(),
    };
    let outcome = crate::ctx::runtime()?
        .block_on(engine::drive(&env, &goal, &mut st, &mut receipts))
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    run.finish(
        outcome.status.as_str(),
        json!({"goal_id": goal.id, "reason": outcome.reason.as_str(), "detail": outcome.detail}),
    );
    let result = render(&goal, &st, &receipts, &outcome, &dir, &run.run_id);
    if args.json {
        print_json(&result);
    } else {
        print_human(&goal, &st, &outcome, &dir);
    }
    work_run::harness::Summary {
        outcome: format!("{} ({})", outcome.status.as_str(), outcome.reason.as_str()),
        spent: run.budget.spent(),
        budget: run.budget.budget(),
        next: Some(next_step(&args, &shown, &outcome, &dir, &run.budget.spent())),
        events: Some(run.run_dir().join("events.jsonl")),
        ..Default::default()
    }
    .print();
    drop(tree);
    drop(lock);
    Ok(work_run::status::goal(outcome.status))
}

/// What to run after the run: review a finished change, or read the notepad and run the goal
/// again (fresh attempts; a budget stop with the spent limits raised).
fn next_step(args: &Args, shown: &str, outcome: &Outcome, dir: &Path, spent: &Spent) -> String {
    if outcome.status == GoalStatus::Done {
        return "review the change (`git diff`) and commit it".into();
    }
    let mut again = format!("work ultra {}", super::sh_quote(shown));
    if let Some(a) = &args.agent {
        again.push_str(&format!(" --agent {}", super::sh_quote(a)));
    }
    if let Some(n) = args.max_attempts {
        again.push_str(&format!(" --max-attempts {n}"));
    }
    let b = &args.budget;
    let limits = work_until::session::BudgetLimits {
        dispatches: b.budget_dispatches,
        tokens: b.budget_tokens,
        usd: b.budget_usd,
    };
    let raised = limits.raised_flags(spent);
    if !raised.is_empty() {
        again.push_str(&format!(" {raised}"));
    }
    let notepad = dir.join("notepad.md");
    match outcome.reason {
        engine::StopReason::Budget => format!("{again} continues with a larger budget"),
        _ => format!("read {} (what was tried), then `{again}` tries again", notepad.display()),
    }
}

/// Reads the goal's earlier state and receipts (digest-checked, and the evidence they name)
/// and checks them against the goal.
fn load_state(dir: &Path, goal: &Goal, shown: &str) -> Result<(Option<GoalState>, Receipts), CliError> {
    let fresh_hint = |e: String| CliError::bad(format!("{e} (`work ultra {shown} --fresh` starts the goal over)"));
    let existing = GoalState::load(dir).map_err(fresh_hint)?;
    let mut receipts = Receipts::load(dir, &goal.id).map_err(fresh_hint)?;
    // Receipts written ahead of a state a crash lost were never committed.
    if let Some(n) = existing.as_ref().and_then(|st| st.receipts_committed) {
        receipts.receipts.truncate(n);
    }
    if let Some(st) = &existing {
        st.check_records(dir).map_err(fresh_hint)?;
    }
    if let Some(st) = &existing {
        if st.tier == Tier::Heavy && goal.tier == Tier::Light {
            return Err(CliError::bad(format!(
                "run goal `{}` as LIGHT: it ran as HEAVY before and a tier only ratchets up (set tier = \"HEAVY\")",
                goal.id
            )));
        }
        if st.goal_id != goal.id {
            return Err(CliError::bad(format!(
                "read goal state `{}`: it belongs to goal `{}`",
                dir.join("state.json").display(),
                st.goal_id
            )));
        }
    }
    Ok((existing, receipts))
}

/// `--fresh`: removes the goal's state, receipts and notepad (through the state writer, so
/// their digests are forgotten) and starts with none.
fn discard_state(dir: &Path, goal: &Goal) -> Result<(), CliError> {
    for name in ["state.json", "receipts.json", "notepad.md"] {
        let p = dir.join(name);
        if p.exists() {
            work_runtime::fsx::remove_state(&p)
                .map_err(|e| CliError::bad(format!("start goal `{}` over: remove `{}`: {e}", goal.id, p.display())))?;
        }
    }
    Ok(())
}

/// Bad input after the lock was taken: leave nothing this call created (the lock file and
/// the directories made for it; a directory is removed only when empty).
fn remove_fresh(lock_path: &Path, fresh: &[PathBuf]) {
    if fresh.is_empty() {
        return;
    }
    let _ = work_runtime::fsx::plain::remove_file(lock_path);
    for d in fresh.iter().rev() {
        let _ = work_runtime::fsx::plain::remove_dir(d);
    }
}

fn obs_json(dir: &Path, r: &ObsRecord) -> Value {
    let abs = |rel: &str| dir.join(rel).display().to_string();
    json!({
        "label": r.label,
        "verdict": if r.pass { "pass" } else { "fail" },
        "end": r.end,
        "exit_code": r.exit_code,
        "failures": r.failures,
        "run_id": r.run_id,
        "evidence": {
            "json": abs(&r.evidence.json),
            "stdout": r.evidence.stdout.as_deref().map(abs),
            "stderr": r.evidence.stderr.as_deref().map(abs),
        },
    })
}

fn render(goal: &Goal, st: &GoalState, receipts: &Receipts, outcome: &Outcome, dir: &Path, run_id: &str) -> Value {
    let criteria: Vec<Value> = goal
        .criteria
        .iter()
        .map(|c| {
            let cs = st.criteria.get(&c.id);
            let red = cs.and_then(|s| s.red.as_ref());
            let last = cs.and_then(|s| s.last.as_ref()).filter(|r| r.label != "red");
            let green = cs.and_then(|s| s.last.as_ref()).is_some_and(|r| r.pass);
            json!({
                "id": c.id,
                "name": c.name,
                "kind": c.kind.as_str(),
                "scenario": c.scenario,
                "pass_when": c.pass.describe(),
                "status": if green { "green" } else { "red" },
                "attempts": cs.map(|s| s.attempts).unwrap_or(0),
                "red": red.map(|r| obs_json(dir, r)),
                "green": last.map(|r| obs_json(dir, r)),
            })
        })
        .collect();
    let count = |f: &dyn Fn(Option<bool>) -> bool| receipts.receipts.iter().filter(|r| f(r.verified)).count();
    let agent_receipts = receipts.receipts.iter().filter(|r| r.source == ReceiptSource::Agent).count();
    json!({
        "goal_id": goal.id,
        "status": outcome.status.as_str(),
        "stop_reason": outcome.reason.as_str(),
        "stop_detail": outcome.detail,
        "objective": goal.objective,
        "tier": st.tier.as_str(),
        "tier_justification": goal.tier_justification,
        "stop_line": goal.stop_line,
        "notes": goal.notes,
        "run_id": run_id,
        "runs": st.runs.len(),
        "attempts": st.attempts,
        "attempts_this_run": outcome.attempts_this_run,
        "dispatched": outcome.dispatched,
        "criteria": criteria,
        "receipts": {
            "verified": count(&|v| v == Some(true)),
            "failed": count(&|v| v == Some(false)),
            "unverifiable": count(&|v| v.is_none()),
            "from_agent": agent_receipts,
        },
        "files": {
            "dir": dir.display().to_string(),
            "state": dir.join("state.json").display().to_string(),
            "notepad": dir.join("notepad.md").display().to_string(),
            "receipts": dir.join("receipts.json").display().to_string(),
            "evidence": dir.join("evidence").display().to_string(),
        },
    })
}

fn print_human(goal: &Goal, st: &GoalState, outcome: &Outcome, dir: &Path) {
    work_run::output::human(format!(
        "goal {}: {} ({}) — {}",
        goal.id,
        outcome.status.as_str(),
        outcome.reason.as_str(),
        outcome.detail
    ));
    for c in &goal.criteria {
        let cs = st.criteria.get(&c.id);
        let word = |r: Option<&ObsRecord>| match r {
            Some(r) if r.pass => "PASS",
            Some(_) => "FAIL",
            None => "-",
        };
        let red = cs.and_then(|s| s.red.as_ref());
        let last = cs.and_then(|s| s.last.as_ref()).filter(|r| r.label != "red");
        work_run::output::human(format!(
            "  {:<20} RED {} → GREEN {}  (attempts {})",
            c.id,
            word(red),
            word(last),
            cs.map(|s| s.attempts).unwrap_or(0)
        ));
    }
    work_run::output::human(format!("notepad: {}", dir.join("notepad.md").display()));
}
