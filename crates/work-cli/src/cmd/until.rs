//! `work until`: one worker at a time until a checkable condition holds.
//!
//! ```text
//! work until <UNTIL> --goal <GOAL> [--instructions TEXT] [--max N] [--mode auto|human-gate]
//!            [--recon] [--verify CMD] [--slug NAME] [--agent SPEC] [--budget-* …] [--json]
//! work until resume [HINT] [--yes] [--budget-* …] [--json]
//! work until list [--json]
//! ```
//!
//! `work until resume <id>` (an exact session id) or `work until resume` with exactly one
//! resumable session continues at once: that is the command every pause and result names.
//! With several sessions, or a fuzzy hint, it recommends one (exit 3 `needs-confirmation`)
//! and continues only with `--yes`.
//!
//! Budgets (`--budget-dispatches`, `--budget-tokens`, `--budget-usd`) are cumulative over the
//! session: `meta.md` records what every run spent and the limits in force; a resume starts
//! from that spending, with the limits given on its command line (else the recorded ones). A
//! dispatch the budget refuses ends the run with status `budget` (exit 1), and the iteration
//! is redone by `work until resume <id>` with a bigger budget.
//!
//! A new session whose goal and verify command are those of an unfinished session (`running`,
//! what a killed run leaves, or `active`) is refused with exit 2 naming
//! `work until resume <id>`: a rerun never freezes the checks afresh from a tree a worker left
//! (`--slug NAME` opens a separate session on purpose).
//!
//! `resume` and `list` are recognised as the first word (an until-clause of exactly `resume`
//! or `list` would not be checkable anyway). Every bad-input check (vague until, missing goal,
//! bad flags, unknown agent) happens before a run directory or a session file is written.

use crate::CmdResult;
use crate::budget_args::BudgetArgs;
use crate::ctx::{CliError, Ctx, Global, print_json};
use serde_json::{Value, json};
use std::time::Duration;
use work_runtime::ExitStatus;
use work_runtime::budget::Spent;
use work_until::intent::{self, Checkability, GateCommands};
use work_until::session::{self, BudgetLimits, Meta, Mode, Resolution, Session, SessionStatus};
use work_until::workflow::{self, LoopEnv, LoopOutcome};

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// Iterate until a stop condition.
    Auto,
    /// Stop after every merged iteration (exit 3) until `work until resume`.
    HumanGate,
}

/// Arguments of `work until`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The condition that ends the loop (e.g. "`make lint` exits 0"), or `resume` / `list`.
    #[arg(value_name = "UNTIL")]
    pub until: Option<String>,
    /// With `resume`: a session id, or a word of its id, goal or until-clause.
    #[arg(value_name = "HINT")]
    pub hint: Option<String>,
    /// What the worker should achieve (required for a new session).
    #[arg(long, value_name = "GOAL")]
    pub goal: Option<String>,
    /// What the worker is told to do (default: the goal).
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,
    /// The most iterations (default 10).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max: Option<u32>,
    /// auto (default) or human-gate (stop after every merged iteration).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Run a read-only recon (iteration 0) first.
    #[arg(long)]
    pub recon: bool,
    /// The mechanical check: `done` is accepted only when this exits 0 (`sh -c`, repository root).
    #[arg(long, value_name = "CMD")]
    pub verify: Option<String>,
    /// Kill the verify command after this many seconds (default 900).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub verify_timeout: Option<u64>,
    /// The session id (kebab-case; default: a slug of the goal).
    #[arg(long, value_name = "NAME")]
    pub slug: Option<String>,
    /// The worker's backend.
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// With `resume`: continue the recommended session (needed only when the pick is a
    /// recommendation among several sessions or a fuzzy hint; an exact id continues without it).
    #[arg(long)]
    pub yes: bool,
    /// `--budget-dispatches`, `--budget-tokens`, `--budget-usd` (cumulative over the session).
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Print the result as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    /// Check everything and print the plan — the worker's agent and model, the check, the
    /// budget (and with `-v` the first brief) — then stop: nothing is dispatched or written.
    #[arg(long)]
    pub dry_run: bool,
}

fn limits(b: &BudgetArgs) -> BudgetLimits {
    BudgetLimits { dispatches: b.budget_dispatches, tokens: b.budget_tokens, usd: b.budget_usd }
}

/// Runs `work until`.
pub fn run(global: &Global, args: Args) -> CmdResult {
    match args.until.as_deref().map(str::trim) {
        Some("resume") => run_resume(global, args),
        Some("list") => run_list(global, args),
        Some(u) if !u.is_empty() => {
            let until = u.to_string();
            run_new(global, args, until)
        }
        _ => Err(CliError::bad(
            "start a session: give an until-clause (`work until \"<condition>\" --goal …`), or `resume` / `list`",
        )),
    }
}

fn nonblank(v: &Option<String>, what: &str) -> Result<Option<String>, CliError> {
    match v {
        Some(s) if s.trim().is_empty() => Err(CliError::bad(format!("use {what}: it is empty"))),
        Some(s) => Ok(Some(s.trim().to_string())),
        None => Ok(None),
    }
}

fn run_new(global: &Global, args: Args, until: String) -> CmdResult {
    if let Some(extra) = &args.hint {
        return Err(CliError::bad(format!(
            "start a session: unexpected argument `{extra}` (quote the until-clause as one argument)"
        )));
    }
    args.budget.validate("start a session")?;
    let goal = nonblank(&args.goal, "--goal")?
        .ok_or_else(|| CliError::bad("start a session: --goal GOAL is required (what the worker should achieve)"))?;
    let instructions = nonblank(&args.instructions, "--instructions")?.unwrap_or_else(|| goal.clone());
    let verify_flag = nonblank(&args.verify, "--verify")?;
    let agent_flag = nonblank(&args.agent, "--agent")?;
    if let Some(slug) = &args.slug {
        session::check_slug(slug).map_err(CliError::bad)?;
    }
    let ctx = Ctx::new(global)?;
    let gates = GateCommands {
        test: ctx.config.gates.test.clone(),
        lint: ctx.config.gates.lint.clone(),
        typecheck: ctx.config.gates.typecheck.clone(),
    };
    let check = intent::classify(&until, &gates);
    let (verify, verify_source) = match (&verify_flag, &check) {
        (Some(v), _) => (Some(v.clone()), Some("--verify".to_string())),
        (None, Checkability::Vague) => {
            return Err(CliError::bad(format!(
                "accept the until-clause `{}`: nothing in it can be checked mechanically and there is no --verify; name a check, {}",
                one_line(&until),
                intent::EXAMPLES
            )));
        }
        (None, Checkability::Mechanical { derived: Some(d), .. }) => {
            (Some(d.command.clone()), Some(format!("derived from {}", d.source)))
        }
        (None, Checkability::Mechanical { derived: None, .. }) => (None, None),
    };
    let exists = |slug: &str| {
        if session::sessions_dir(&ctx.state_dir).join(slug).exists() {
            return Err(CliError::bad(format!(
                "start session `{slug}`: it already exists (continue it with `work until resume {slug}`)"
            )));
        }
        Ok(())
    };
    if let Some(slug) = &args.slug {
        exists(slug)?;
    }
    refuse_unfinished(&ctx, &args, &goal, verify.as_deref())?;
    let (role, agent) = ctx.resolve_agent("worker", agent_flag.as_deref())?;
    args.budget.check_agent(agent.as_ref())?;
    let new_meta = |id: String, now: String| Meta {
        id,
        goal: goal.clone(),
        until: until.clone(),
        instructions: instructions.clone(),
        verify: verify.clone(),
        verify_source: verify_source.clone(),
        mode: match args.mode {
            Some(ModeArg::HumanGate) => Mode::HumanGate,
            _ => Mode::Auto,
        },
        max: args.max.unwrap_or(10),
        recon: args.recon,
        recon_done: false,
        agent: agent_flag.clone(),
        status: SessionStatus::Active,
        iteration_count: 0,
        in_progress: None,
        empty_streak: 0,
        blockers_seen: Vec::new(),
        stopped_reason: None,
        created: now.clone(),
        updated: now,
        runs: Vec::new(),
        budget: limits(&args.budget),
        spent: Spent::default(),
    };
    if args.dry_run {
        let id = args.slug.clone().unwrap_or_else(|| session::free_id(&ctx.state_dir, &session::slugify(&goal)));
        return dry_run(&new_meta(id, String::new()), &role, agent.as_ref(), &args);
    }
    let run_id = ctx.new_run_id("until");
    // The worker writes the tree: one writer per tree, whatever the state directory.
    let _tree = ctx.lock_tree(&run_id)?;
    let id = match &args.slug {
        Some(slug) => slug.clone(),
        None => session::free_id(&ctx.state_dir, &session::slugify(&goal)),
    };
    let session_lock = ctx.lock_state(&format!("until-{id}"), &format!("session `{id}`"), &run_id)?;
    if let Err(e) = exists(&id) {
        work_run::lock::discard(session_lock);
        return Err(e);
    }
    let _session_lock = session_lock;
    work_run::signals::set_resume_hint(format!("work until resume {id}"));
    let run = ctx.start_run_as(run_id, "until", args.budget.budget(), Spent::default(), Default::default())?;
    let meta = new_meta(id, run.clock.now_rfc3339());
    let mut s = session::init_session(&ctx.state_dir, meta, &|p, t| run.write_text(p, t))
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    let m = &s.meta;
    run.progress(&format!("Session {} (new) at {}", m.id, s.dir.display()));
    run.progress(&format!("until: {} · verify: {}", one_line(&m.until), m.verify.as_deref().unwrap_or("(none)")));
    run.progress(&format!("goal: {}", one_line(&m.goal)));
    run.progress(&format!("max {} · mode {} · recon {}", m.max, m.mode.as_str(), if m.recon { "yes" } else { "no" }));
    run.events.announce_total(work_runtime::events::Unit::Iteration, m.max.into());
    let timeout = Duration::from_secs(args.verify_timeout.unwrap_or(900));
    let d = crate::ctx::dispatcher(&run, &role, agent);
    let env = LoopEnv {
        run: &run,
        dispatcher: &d,
        model: role.model.clone(),
        effort: role.effort.clone(),
        verify_timeout: timeout,
    };
    let outcome =
        crate::ctx::runtime()?.block_on(workflow::drive(&env, &mut s)).map_err(|e| CliError::Runtime(e.to_string()))?;
    run.finish(outcome.status.as_str(), json!({"session": s.meta.id, "reason": outcome.stopped_reason}));
    Ok(render(&s, &outcome, &run, args.json))
}

/// `work until --dry-run`: the session that would start, and its first brief.
fn dry_run(
    meta: &Meta,
    role: &work_config::ResolvedRole,
    agent: &dyn work_runtime::dispatch::Agent,
    args: &Args,
) -> CmdResult {
    let mut plan = crate::dry_run::DryRun::new("until");
    plan.role(role, agent)
        .row("session", format!("{} (new)", meta.id))
        .row("until", one_line(&meta.until))
        .row(
            "verify",
            match (&meta.verify, &meta.verify_source) {
                (Some(v), Some(src)) => format!("{v} ({src})"),
                (Some(v), None) => v.clone(),
                (None, _) => "(none: the until-clause is checked as written)".into(),
            },
        )
        .row("goal", one_line(&meta.goal))
        .row(
            "iterations",
            format!(
                "at most {} · mode {} · recon {}",
                meta.max,
                meta.mode.as_str(),
                if meta.recon { "yes" } else { "no" }
            ),
        )
        .budget(&args.budget);
    if meta.recon {
        plan.prompt("recon (iteration 0)", work_until::templates::recon_prompt(meta));
    }
    let handoff = work_until::templates::handoff(meta, &work_until::ledger::Ledger::default(), 1, None);
    plan.prompt("worker (iteration 1)", work_until::templates::worker_prompt(meta, &handoff, 1));
    plan.print(args.json)
}

/// Refuses (exit 2) a new session that would silently replace an unfinished one with the same
/// goal and verify command: a worker that committed its change to a check and killed `work`
/// would otherwise get a fresh freeze of that commit. The unfinished session is resumed (its
/// kept freeze judges the tree); a new one is opened on purpose with another `--slug`.
fn refuse_unfinished(ctx: &Ctx, args: &Args, goal: &str, verify: Option<&str>) -> Result<(), CliError> {
    if args.slug.is_some() {
        return Ok(());
    }
    match session::unfinished_with(&ctx.state_dir, &session::slugify(goal), goal, verify) {
        None => Ok(()),
        Some(session::Unfinished::Unreadable(e)) => Err(CliError::bad(format!(
            "start a session: an earlier session of this goal cannot be read ({e}); nothing was started"
        ))),
        Some(session::Unfinished::Session(s)) => {
            let next = session::resume_command(&s.meta).unwrap_or_else(|| format!("work until resume {}", s.meta.id));
            Err(CliError::bad(format!(
                "start a session: session `{}` has the same goal and verify and is not finished (status {}, iteration {}/{}); continue it with `{next}` (it judges the tree against the checks it froze), or start a separate session on purpose with `--slug NAME`",
                s.meta.id,
                s.meta.status.as_str(),
                s.meta.iteration_count,
                s.meta.max
            )))
        }
    }
}

fn run_resume(global: &Global, args: Args) -> CmdResult {
    for (flag, set) in [("--goal", args.goal.is_some()), ("--slug", args.slug.is_some()), ("--recon", args.recon)] {
        if set {
            return Err(CliError::bad(format!(
                "resume a session: {flag} belongs to a new session (`work until <UNTIL> --goal …`)"
            )));
        }
    }
    args.budget.validate("resume a session")?;
    let instructions = nonblank(&args.instructions, "--instructions")?;
    let verify_flag = nonblank(&args.verify, "--verify")?;
    let agent_flag = nonblank(&args.agent, "--agent")?;
    let ctx = Ctx::new(global)?;
    let candidates = match session::resolve_resume(&ctx.state_dir, args.hint.as_deref()) {
        Resolution::Nothing(msg) => return Err(CliError::bad(msg)),
        Resolution::Candidates(c) => c,
    };
    // An exact id, or the only resumable session, is a pick: it continues. A recommendation
    // among several sessions or a fuzzy hint waits for `--yes` (never continue on a guess).
    if !args.yes && !session::is_definite_pick(args.hint.as_deref(), &candidates) {
        return Ok(recommend(&candidates, args.json));
    }
    let Some(picked) = candidates.into_iter().next() else {
        return Err(CliError::bad("find a session to resume: none"));
    };
    let agent_spec = agent_flag.clone().or_else(|| picked.meta.agent.clone());
    let (role, agent) = ctx.resolve_agent("worker", agent_spec.as_deref())?;
    // Limits given now replace the recorded ones; without flags the recorded ones stay.
    let budget = if args.budget.is_set() { limits(&args.budget) } else { picked.meta.budget };
    crate::budget_args::check_usd(budget.usd.is_some(), agent.as_ref())?;
    let id = picked.meta.id.clone();
    let run_id = ctx.new_run_id("until");
    // One run per session: a second `resume` of it is refused at once, before it dispatches.
    let _session_lock = ctx.lock_state(&format!("until-{id}"), &format!("session `{id}`"), &run_id)?;
    let _tree = ctx.lock_tree(&run_id)?;
    // Read again under the lock: a run that just ended may have moved it on.
    let mut s = Session::load(&picked.dir).map_err(|e| CliError::Runtime(e.to_string()))?;
    work_run::signals::set_resume_hint(format!("work until resume {id}"));
    // The session's earlier spending counts: the budget is cumulative over the session.
    let run = ctx.start_run_as(run_id, "until", budget.budget(), s.meta.spent, Default::default())?;
    s.meta.budget = budget;
    let was = s.meta.status;
    if let Some(max) = args.max {
        s.meta.max = max;
    }
    run.events.announce_total(work_runtime::events::Unit::Iteration, s.meta.max.into());
    if let Some(mode) = args.mode {
        s.meta.mode = if mode == ModeArg::HumanGate { Mode::HumanGate } else { Mode::Auto };
    }
    if let Some(v) = verify_flag {
        s.meta.verify = Some(v);
        s.meta.verify_source = Some("--verify (on resume)".into());
    }
    if let Some(i) = instructions {
        s.meta.instructions = i;
    }
    if agent_flag.is_some() {
        s.meta.agent = agent_flag;
    }
    // A person resumed: a blocked or stalled session gets a fresh stall memory.
    if matches!(was, SessionStatus::Blocked) {
        s.meta.empty_streak = 0;
        s.meta.blockers_seen.clear();
    }
    run.progress(&format!(
        "Session {} (resume, was {}) at {}: from iteration {}",
        s.meta.id,
        was.as_str(),
        s.dir.display(),
        s.meta.iteration_count + 1
    ));
    let timeout = Duration::from_secs(args.verify_timeout.unwrap_or(900));
    let d = crate::ctx::dispatcher(&run, &role, agent);
    let env = LoopEnv {
        run: &run,
        dispatcher: &d,
        model: role.model.clone(),
        effort: role.effort.clone(),
        verify_timeout: timeout,
    };
    let outcome =
        crate::ctx::runtime()?.block_on(workflow::drive(&env, &mut s)).map_err(|e| CliError::Runtime(e.to_string()))?;
    run.finish(outcome.status.as_str(), json!({"session": s.meta.id, "reason": outcome.stopped_reason}));
    Ok(render(&s, &outcome, &run, args.json))
}

fn recommend(candidates: &[Session], as_json: bool) -> ExitStatus {
    let Some(first) = candidates.first() else { return ExitStatus::BadInput };
    let next = session::resume_command(&first.meta).unwrap_or_else(|| format!("work until resume {}", first.meta.id));
    if as_json {
        print_json(&json!({
            "status": "needs-confirmation",
            "recommended": session::to_json(first),
            "candidates": candidates.iter().map(session::to_json).collect::<Vec<Value>>(),
            "next": next,
        }));
    } else {
        work_run::output::line(format!("Recommended: {}", session::describe(first)));
        if candidates.len() > 1 {
            work_run::output::line("Other candidates:");
            for c in &candidates[1..] {
                work_run::output::line(format!("  {}", session::describe(c)));
            }
        }
        work_run::output::line(format!(
            "Nothing was started. Run `{next}` to continue it, or `work until resume <id>` (an exact id) to pick another."
        ));
    }
    ExitStatus::Paused
}

fn run_list(global: &Global, args: Args) -> CmdResult {
    if let Some(extra) = &args.hint {
        return Err(CliError::bad(format!("list sessions: unexpected argument `{extra}`")));
    }
    if args.goal.is_some() {
        return Err(CliError::bad("list sessions: --goal belongs to a new session"));
    }
    let ctx = Ctx::new(global)?;
    let (sessions, errors) = session::list_sessions(&ctx.state_dir);
    if args.json {
        print_json(&json!({
            "sessions": sessions.iter().map(session::to_json).collect::<Vec<Value>>(),
            "unreadable": errors.iter().map(|e| e.to_string()).collect::<Vec<String>>(),
        }));
    } else {
        if sessions.is_empty() {
            work_run::output::line(format!("No sessions under {}", session::sessions_dir(&ctx.state_dir).display()));
        }
        for s in &sessions {
            work_run::output::line(session::describe(s));
        }
        for e in &errors {
            work_run::output::err_line(&format!("warning: {e}"));
        }
    }
    Ok(ExitStatus::Done)
}

fn one_line(s: &str) -> String {
    work_until::ledger::one_line(s, 160)
}

fn render(s: &Session, outcome: &LoopOutcome, run: &work_runtime::run::RunContext, as_json: bool) -> ExitStatus {
    let (run_id, run_dir) = (run.run_id.as_str(), run.run_dir());
    let status = outcome.status;
    if as_json {
        let files = |name: &str| s.dir.join(name).display().to_string();
        print_json(&json!({
            "session_id": s.meta.id,
            "path": s.dir.display().to_string(),
            "status": status.as_str(),
            "iterations": outcome.iterations,
            "max": s.meta.max,
            "until": s.meta.until,
            "goal": s.meta.goal,
            "mode": s.meta.mode.as_str(),
            "verify": s.meta.verify,
            "stoppedReason": outcome.stopped_reason,
            "summary": outcome.summary,
            "run_id": run_id,
            "budget": {"dispatches": s.meta.budget.dispatches, "tokens": s.meta.budget.tokens, "usd": s.meta.budget.usd},
            "spent": s.meta.spent,
            "resume": session::resume_command(&s.meta),
            "files": {
                "meta": files("meta.md"), "master": files("master.md"), "handoff": files("handoff.md"),
                "report": files("report.md"), "reports": files("reports"),
            },
        }));
    } else {
        for l in &outcome.summary {
            work_run::output::human(l);
        }
    }
    let ledger = s.load_ledger().ok();
    let items: Vec<String> = ledger
        .map(|l| {
            let earlier = l.earlier.into_iter();
            earlier.chain(l.iterations.into_iter().map(|e| e.heading)).rev().take(10).collect::<Vec<_>>()
        })
        .map(|mut v| {
            v.reverse();
            v
        })
        .unwrap_or_default();
    let summary = work_run::harness::Summary {
        outcome: format!("{} ({})", status.as_str(), outcome.stopped_reason),
        label: "iterations".into(),
        total: outcome.iterations as usize,
        items,
        spent: s.meta.spent,
        budget: s.meta.budget.budget(),
        next: Some(match session::resume_command(&s.meta) {
            Some(resume) => resume,
            None => "review the change (`git diff`) and commit it".into(),
        }),
        events: Some(run_dir.join("events.jsonl")),
        ..Default::default()
    };
    summary.print();
    work_run::status::until(status)
}
