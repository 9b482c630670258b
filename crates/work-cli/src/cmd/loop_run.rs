//! `work loop run <spec-dir>`: the agent-driven PLAN → EXECUTE → GATES → REVIEW → DECIDE loop
//! (docs/loop-run.md). Validates every flag and the spec
//! directory before anything is dispatched or changed (exit 2), resolves one agent per role,
//! takes the spec directory's run lock, and drives [`work_loop_run::Driver`].
//!
//! A budget (`--budget-dispatches`, `--budget-tokens`, `--budget-usd`, per invocation) that is
//! spent stops the run BLOCKED with reason `budget`; `--resume` with a bigger budget redoes the
//! refused dispatch.
//!
//! Exit codes: 0 DONE, 1 BLOCKED (the reason in the result), 2 bad input, 3 paused for a person
//! (a human gate or a surfaced situation; `next` in the result says what to do, then
//! `work loop run <spec-dir> --resume`).

use crate::CmdResult;
use crate::budget_args::BudgetArgs;
use crate::ctx::{self, CliError, Ctx, Global, print_json};
use std::collections::BTreeMap;
use work_loop::cohort::{self, Caps};
use work_loop::table::Mode;
use work_loop_run::prompts::ROLES;
use work_loop_run::{Driver, HumanInput, Report, ReviewMode, RoleDispatch, Settings};
use work_runtime::budget::Spent;

/// `--mode` of `work loop run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RunMode {
    /// Implementation work: after the plan is locked, EXECUTE → GATES → REVIEW → merge gate.
    Code,
    /// Spec/plan-only work: the run ends when the plan is locked.
    SpecPlan,
}

/// Drive the whole work loop over a spec directory with agents.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The spec directory (`docs/specs/<feature>`), relative to the repository root. It must
    /// exist; a missing spec.md / plan.md is written by the drafter.
    pub spec_dir: String,
    /// The engine mode of a new run (default `code`); on resume it must match the run's.
    #[arg(long, value_enum)]
    pub mode: Option<RunMode>,
    /// Light mode (single bounded adversarial pass), whatever the risk triggers say.
    #[arg(long, conflicts_with = "full")]
    pub light: bool,
    /// Full mode (spec/plan review, reviewers iterated to adjudicated clean).
    #[arg(long)]
    pub full: bool,
    /// The agents' backend (SPEC or a name from work.toml), for every role.
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// Continue an existing run (refused when the spec directory has no engine-state.json).
    #[arg(long)]
    pub resume: bool,
    /// Approve at the gate the run waits at: the spec or plan gate (the status line becomes
    /// Approved), the merge gate (fires `done`), or a review stop that waits for a decision
    /// (review stasis, an undecided adjudication: the findings are accepted as residual risk),
    /// or a `snapshot-loss` stop (the loss is accepted: the step's tree is the new boundary).
    #[arg(long, conflicts_with = "reject")]
    pub approve: bool,
    /// Reject at a human gate: the spec or plan goes back to drafting, or (at the merge gate)
    /// the change goes back to implementation, with TEXT as what to change. At a review stop
    /// that waits for a decision, the findings in question are sustained and sent back.
    #[arg(long, value_name = "TEXT")]
    pub reject: Option<String>,
    /// The test gate (overrides `[gates].test`).
    #[arg(long, value_name = "CMD")]
    pub test_cmd: Option<String>,
    /// The implementation retry cap of a new run's cohort.
    #[arg(long, value_name = "N")]
    pub implementation_retry_cap: Option<u32>,
    /// The review retry cap of a new run's cohort.
    #[arg(long, value_name = "N")]
    pub review_retry_cap: Option<u32>,
    /// Spec/plan review revisions before the run is blocked.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub max_spec_rounds: u32,
    /// `--budget-dispatches`, `--budget-tokens`, `--budget-usd` (per invocation).
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Print the result as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    /// Run the reviewers and the finding-adjudicator on `work worker`s pulling from this queue
    /// (nats://HOST:PORT; see docs/scale-out.md); each request carries the working tree's
    /// change against HEAD. The drafter and the implementer run here.
    #[arg(long, value_name = "URL")]
    pub queue: Option<String>,
    /// Check everything and print the plan — each role's agent and model, where the run
    /// stands, the gates, the budget — then stop: nothing is dispatched, locked or written.
    #[arg(long)]
    pub dry_run: bool,
}

/// The roles whose dispatches go to the queue with `--queue`: the read-only review round.
const QUEUE_ROLES: &[&str] =
    &[work_loop_run::prompts::REVIEWER, work_loop_run::prompts::QUALITY, work_loop_run::prompts::ADJUDICATOR];

/// A role's pins and its agent.
type RoleAgent = (work_config::ResolvedRole, std::sync::Arc<dyn work_runtime::dispatch::Agent>);

/// One agent per role: the queue's (carrying the change) for [`QUEUE_ROLES`] with `--queue`,
/// this machine's for the others. Bad input (exit 2) when a role cannot be served.
fn resolve_roles(ctx: &Ctx, a: &RunArgs, rt: &tokio::runtime::Runtime, key: &str) -> Result<Vec<RoleAgent>, CliError> {
    let queued = |r: &str| a.queue.is_some() && QUEUE_ROLES.contains(&r);
    let mut local = Vec::new();
    for r in ROLES.iter().filter(|r| !queued(r)) {
        let (role, agent) = ctx.resolve_agent(r, a.agent.as_deref())?;
        a.budget.check_agent(agent.as_ref())?;
        local.push((role, agent));
    }
    let Some(q) = &a.queue else { return Ok(local) };
    let what = "run the loop";
    let url = crate::cmd::queue::parse_url(what, q)?;
    // The workers run the backends: only the pins are resolved here, before anything is written.
    let pins = QUEUE_ROLES
        .iter()
        .map(|r| crate::cmd::queue::role(ctx, r, a.agent.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let queue = crate::cmd::queue::connect_agent(ctx, rt, what, &url, &format!("loop-{key}"), !a.resume)?
        .carrying_change(crate::cmd::queue::change_source(ctx));
    let agent: std::sync::Arc<dyn work_runtime::dispatch::Agent> = std::sync::Arc::new(queue);
    local.extend(pins.into_iter().map(|role| (role, agent.clone())));
    Ok(local)
}

/// `work loop run --dry-run`: where the run stands and who would serve each role.
fn dry_run(ctx: &Ctx, a: &RunArgs, settings: &Settings) -> CmdResult {
    let sd = work_loop_run::preflight(&ctx.root, settings).map_err(loop_err)?;
    let mut plan = crate::dry_run::DryRun::new("loop run");
    for r in ROLES {
        match &a.queue {
            Some(q) if QUEUE_ROLES.contains(r) => {
                crate::cmd::queue::role(ctx, r, a.agent.as_deref())?;
                plan.row(*r, format!("on the workers of {q}"));
            }
            _ => {
                let (role, agent) = ctx.resolve_agent(r, a.agent.as_deref())?;
                a.budget.check_agent(agent.as_ref())?;
                plan.role(&role, agent.as_ref());
            }
        }
    }
    let stands = match work_loop::engine::load(&sd).map_err(loop_err)? {
        Some(st) => format!("{} (run {}, {} mode)", st.state, st.run_id, st.mode),
        None => "no run yet: a new one starts".to_string(),
    };
    plan.row("spec directory", &settings.spec_dir).row("state", stands);
    for (name, cmd) in &settings.gates {
        plan.row(format!("{name} gate"), cmd);
    }
    if settings.gates.is_empty() {
        plan.row("gates", "none");
    }
    plan.budget(&a.budget);
    plan.print(a.json)
}

fn settings(ctx: &Ctx, a: &RunArgs) -> Result<Settings, CliError> {
    if a.spec_dir.trim().is_empty() {
        return Err(CliError::bad("use the spec directory: it is empty"));
    }
    let human = match (&a.approve, &a.reject) {
        (true, _) => HumanInput::Approve,
        (false, Some(t)) if t.trim().is_empty() => {
            return Err(CliError::bad("use --reject: say what to change (the text is empty)"));
        }
        (false, Some(t)) => HumanInput::Reject(t.trim().to_string()),
        (false, None) => HumanInput::None,
    };
    a.budget.validate("run the loop")?;
    if let Some(q) = &a.queue {
        crate::cmd::queue::parse_url("run the loop", q)?;
    }
    if a.max_spec_rounds == 0 {
        return Err(CliError::bad("use --max-spec-rounds: it must be at least 1"));
    }
    if let Some(t) = &a.test_cmd
        && t.trim().is_empty()
    {
        return Err(CliError::bad("use --test-cmd: the command is empty"));
    }
    let g = &ctx.config.gates;
    let test = a.test_cmd.clone().or(g.test.clone());
    let gates: Vec<(String, String)> = [("lint", g.lint.clone()), ("typecheck", g.typecheck.clone()), ("test", test)]
        .into_iter()
        .filter_map(|(n, c)| c.filter(|c| !c.trim().is_empty()).map(|c| (n.to_string(), c)))
        .collect();
    Ok(Settings {
        spec_dir: a.spec_dir.trim().trim_end_matches('/').to_string(),
        mode: a.mode.map(|m| match m {
            RunMode::Code => Mode::Code,
            RunMode::SpecPlan => Mode::SpecPlan,
        }),
        review_mode: if a.light {
            Some(ReviewMode::Light)
        } else if a.full {
            Some(ReviewMode::Full)
        } else {
            None
        },
        gates,
        gate_timeout: Some(work_loop_run::driver::gate_timeout(ctx.config.timeouts.gate_secs)),
        caps: Caps {
            implementation: a.implementation_retry_cap.unwrap_or(cohort::DEFAULT_IMPLEMENTATION_RETRY_CAP),
            review: a.review_retry_cap.unwrap_or(cohort::DEFAULT_REVIEW_RETRY_CAP),
        },
        max_spec_rounds: a.max_spec_rounds,
        human,
        resume: a.resume,
    })
}

fn loop_err(e: work_loop::LoopError) -> CliError {
    match e {
        work_loop::LoopError::BadInput(m) => CliError::BadInput(m),
        work_loop::LoopError::Refused { message, .. } => CliError::Runtime(message),
    }
}

/// Runs `work loop run`.
pub fn run(global: &Global, a: RunArgs) -> CmdResult {
    let ctx = Ctx::new(global)?;
    let settings = settings(&ctx, &a)?;
    // One driver per spec directory at a time; the lock lives in the state directory.
    let key = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(settings.spec_dir.as_bytes()))[..16].to_string()
    };
    if a.dry_run {
        return dry_run(&ctx, &a, &settings);
    }
    let lock_path = ctx.state_path(format!("locks/loop-run-{key}.lock"));
    let lock_existed = lock_path.exists();
    let state_dir_existed = ctx.state_dir.exists();
    let locks_existed = ctx.state_path("locks").exists();
    let lock = work_runtime::fsx::LockFile::acquire(&lock_path)
        .map_err(|e| CliError::bad(format!("lock the spec directory `{}`: {e}", settings.spec_dir)))?;
    let rt = ctx::runtime()?;
    let prepared = work_loop_run::preflight(&ctx.root, &settings)
        .map_err(loop_err)
        .and_then(|sd| Ok((sd, resolve_roles(&ctx, &a, &rt, &key)?)));
    let (sd, resolved) = match prepared {
        Ok(p) => p,
        Err(e) => {
            // Removed while still held (never after releasing it: another run could then be
            // holding the same file).
            if !lock_existed {
                // Nothing ran: leave nothing behind (each directory only when this invocation
                // created it and it is empty).
                let _ = work_runtime::fsx::plain::remove_file(&lock_path);
                if !locks_existed {
                    let _ = work_runtime::fsx::plain::remove_dir(ctx.state_path("locks"));
                }
                if !state_dir_existed {
                    let _ = work_runtime::fsx::plain::remove_dir(&ctx.state_dir);
                }
            }
            drop(lock);
            return Err(e);
        }
    };
    let run_id = ctx.new_run_id("loop");
    // The agents write the tree: one writer per tree, whatever the state directory.
    let _tree = ctx.lock_tree(&run_id)?;
    let run = ctx.start_run_as(run_id, "loop", a.budget.budget(), Spent::default(), Default::default())?;
    let roles: BTreeMap<String, RoleDispatch> = resolved
        .into_iter()
        .map(|(role, agent)| {
            let dispatcher = ctx::dispatcher(&run, &role, agent);
            (role.role.clone(), RoleDispatch { model: role.model.clone(), effort: role.effort.clone(), dispatcher })
        })
        .collect();
    let (tracker, events) = (run.budget.clone(), run.run_dir().join("events.jsonl"));
    let report = rt.block_on(Driver::new(run, roles, settings, sd).drive());
    let next = render(&report, &resume_flags(&a), a.json);
    if report.outcome == "done" {
        uncommitted_hint(&ctx.root);
    }
    work_run::harness::Summary {
        outcome: format!("{} ({})", report.outcome, report.reason),
        spent: tracker.spent(),
        budget: tracker.budget(),
        next,
        events: Some(events),
        ..Default::default()
    }
    .print();
    drop(lock);
    Ok(report.exit)
}

/// The flags a resumed run needs again (the run's state keeps neither the agent nor the test
/// gate given on this command line), so the printed `--resume` commands work as printed.
fn resume_flags(a: &RunArgs) -> String {
    let mut out = String::new();
    if let Some(agent) = &a.agent {
        out.push_str(&format!(" --agent {}", super::sh_quote(agent)));
    }
    if let Some(t) = &a.test_cmd {
        out.push_str(&format!(" --test-cmd {}", super::sh_quote(t)));
    }
    if let Some(q) = &a.queue {
        out.push_str(&format!(" --queue {}", super::sh_quote(q)));
    }
    out
}

/// Every `work loop run <dir> --resume` in the result, completed with `extra`.
fn complete_resume(v: &mut serde_json::Value, extra: &str) {
    use serde_json::Value;
    match v {
        Value::String(s) if s.contains(" --resume") && s.contains("work loop run ") => {
            *s = s.replace(" --resume", &format!(" --resume{extra}"));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| complete_resume(x, extra)),
        Value::Object(o) => o.values_mut().for_each(|x| complete_resume(x, extra)),
        _ => {}
    }
}

/// After DONE, one line when the change still sits uncommitted in the working tree.
fn uncommitted_hint(root: &std::path::Path) {
    let git = work_git::Git::new(root);
    if git.status().is_ok_and(|s| !s.is_empty()) {
        work_run::output::note(
            "note: the change is not committed: inspect it with `git status` and `git diff`, then `git add` and `git commit` it",
        );
    }
}

/// The one command that continues the run, for the summary's `next:` line: at a gate, the
/// approve command (with the reject alternative named, not repeated); else the resume command.
fn next_command(doc: &serde_json::Value) -> Option<String> {
    let cmd = |k: &str| doc.pointer(&format!("/next/{k}")).and_then(serde_json::Value::as_str);
    match (cmd("approve"), cmd("reject")) {
        (Some(a), Some(_)) => Some(format!("{a}  (or --reject \"<what to change>\" in place of --approve)")),
        (Some(a), None) => Some(a.to_string()),
        _ => cmd("resume").or(cmd("then")).filter(|c| c.starts_with("work ")).map(str::to_string),
    }
}

/// The engine's message without the commands it embeds (the summary says the one command):
/// cut before the `;` or `:` that leads to the first `` `work `` in it.
fn gist(message: &str) -> &str {
    let Some(at) = message.find("`work ") else { return message };
    let head = &message[..at];
    let cut = head.rfind([';', ':']).unwrap_or(head.len());
    head[..cut].trim_end()
}

/// Prints the result and returns the command that continues the run (for the summary).
fn render(r: &Report, extra: &str, json: bool) -> Option<String> {
    let mut doc = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
    if !extra.is_empty() {
        complete_resume(&mut doc, extra);
    }
    let next = next_command(&doc);
    if json {
        print_json(&doc);
        return next;
    }
    let line = |k: &str| doc.get(k).and_then(serde_json::Value::as_str).unwrap_or("-").to_string();
    let message = line("message");
    let message = if line("outcome") == "paused" { gist(&message) } else { &message };
    work_run::output::human(format!("{} ({}): {message}", line("outcome"), line("reason")));
    work_run::output::human(format!(
        "state: {}  run: {}  review mode: {}",
        line("state"),
        line("run_id"),
        line("review_mode")
    ));
    let recovery = doc.pointer("/lost_work/recovery").and_then(serde_json::Value::as_array);
    for r in recovery.into_iter().flatten().filter_map(serde_json::Value::as_str) {
        work_run::output::human(format!("recover: {r}"));
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser, Subcommand};

    /// A stand-in for `work loop` with its global `--json`, to check that `run`'s own
    /// `--json` coexists with it.
    #[derive(Debug, Parser)]
    struct Outer {
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        cmd: Sub,
    }

    #[derive(Debug, Subcommand)]
    enum Sub {
        Run(RunArgs),
    }

    #[test]
    fn parses_beside_a_global_json_flag() {
        Outer::command().debug_assert();
        let o = Outer::try_parse_from(["loop", "run", "docs/specs/x", "--json", "--light", "--reject", "no"])
            .expect("parse");
        let Sub::Run(a) = o.cmd;
        assert!(a.json && a.light);
        assert_eq!(a.reject.as_deref(), Some("no"));
        assert!(Outer::try_parse_from(["loop", "run", "x", "--light", "--full"]).is_err());
        assert!(Outer::try_parse_from(["loop", "run", "x", "--approve", "--reject", "y"]).is_err());
    }
}
