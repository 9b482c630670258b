//! `work agents`: inspect and try agent backends.
//!
//! - `work agents check [--json]`: which backends are usable on this machine and, for each that
//!   is not, why (CLI missing, key absent, bad settings, banned model); for the CLIs, their
//!   version and how role efforts are sent to it. Exit 0 when every agent the
//!   configuration names is usable, 1 when one is not, 2 for a bad `work.toml`.
//! - `work agents try [--agent SPEC] [--role ROLE] [--schema FILE] [--write] [--json] PROMPT`:
//!   one dispatch through the real engine (schema validation, one retry, event log, dispatch
//!   records), to smoke-test a backend. Exit 0 when it produced a valid answer, else 1.

use crate::CmdResult;
use crate::ctx::{self, CliError, Ctx, Global};
use serde_json::{Value, json};
use std::path::PathBuf;
use work_runtime::ExitStatus;
use work_runtime::budget::{Budget, Spent};
use work_runtime::dispatch::{Access, DispatchOutcome, DispatchSpec};

/// Arguments of `work agents`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: AgentsCommand,
}

/// `work agents` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum AgentsCommand {
    /// Which backends are usable on this machine, and why the others are not.
    Check {
        /// Print the report as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Run one dispatch through a backend, validated by the engine like any other.
    Try(TryArgs),
}

/// Arguments of `work agents try`.
#[derive(Debug, clap::Args)]
pub struct TryArgs {
    /// The brief.
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
    /// The backend (SPEC or a name from work.toml).
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// The role whose pins (model, effort, timeout) apply.
    #[arg(long, value_name = "ROLE", default_value = "finder")]
    pub role: String,
    /// A JSON Schema file the answer must validate against (default: any JSON).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Dispatch with workspace-write access (default read-only).
    #[arg(long)]
    pub write: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub fn run(global: &Global, args: Args) -> CmdResult {
    match args.command {
        AgentsCommand::Check { json } => check(global, json),
        AgentsCommand::Try(a) => try_one(global, a),
    }
}

fn check(global: &Global, json_out: bool) -> CmdResult {
    let ctx = Ctx::new(global)?;
    let rt = ctx::runtime()?;
    let report = rt.block_on(work_agents::check::check_all(&ctx.config, &ctx.root))?;
    let sandbox = work_runtime::sandbox::mode();
    if json_out {
        let mut v = serde_json::to_value(&report).map_err(|e| CliError::Runtime(format!("encode the report: {e}")))?;
        if let Some(o) = v.as_object_mut() {
            o.insert("isolation".into(), json!({"sandbox": sandbox.is_kernel(), "detail": sandbox.describe()}));
        }
        ctx::print_json(&ctx.redactor.redact_json(&v));
    } else {
        let width = report.agents.iter().map(|a| a.name.len()).max().unwrap_or(8).max(8);
        for a in &report.agents {
            let state = if a.usable { "usable" } else { "unusable" };
            let detail = match (&a.reason, &a.version, &a.endpoint) {
                (Some(r), _, _) => r.clone(),
                (None, Some(v), _) => v.clone(),
                (None, None, Some(e)) => e.clone(),
                _ => String::new(),
            };
            let detail = match (&a.reason, &a.efforts) {
                (None, Some(e)) if detail.is_empty() => e.clone(),
                (None, Some(e)) => format!("{detail} · {e}"),
                _ => detail,
            };
            let spec = if a.spec == a.name { String::new() } else { format!(" ({})", a.spec) };
            let roles = if a.usable { format!(" · roles: {}", a.roles) } else { String::new() };
            let line = format!("{:width$}  {state:8}  {detail}{spec}{roles}", a.name);
            work_run::output::line(ctx.redactor.redact(line.trim_end()));
        }
        work_run::output::line(format!("isolation: {}", sandbox.describe()));
    }
    Ok(if report.configured_usable() { ExitStatus::Done } else { ExitStatus::Unsuccessful })
}

fn try_one(global: &Global, args: TryArgs) -> CmdResult {
    let ctx = Ctx::new(global)?;
    let schema = match &args.schema {
        Some(p) => {
            let path = if p.is_absolute() { p.clone() } else { ctx.root.join(p) };
            let text = std::fs::read_to_string(&path)
                .map_err(|e| CliError::bad(format!("read schema `{}`: {e}", p.display())))?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| CliError::bad(format!("parse schema `{}`: {e}", p.display())))?;
            if !v.is_object() && !v.is_boolean() {
                return Err(CliError::bad(format!("use schema `{}`: a JSON Schema is an object", p.display())));
            }
            Some(v)
        }
        None => None,
    };
    if args.prompt.trim().is_empty() {
        return Err(CliError::bad("run `work agents try`: the prompt is empty"));
    }
    let (role, agent) = ctx.resolve_agent(&args.role, args.agent.as_deref())?;
    if let (Some(s), Some(p)) = (&schema, &args.schema)
        && let Some(why) = agent.schema_refusal(s)
    {
        return Err(CliError::bad(format!("use schema `{}` with {}: {why}", p.display(), agent.describe())));
    }
    let rt = ctx::runtime()?;
    let run = ctx.start_run("agents-try", Budget::default(), Spent::default())?;
    let dispatcher = ctx::dispatcher(&run, &role, agent.clone());
    let spec = DispatchSpec {
        role: role.role.clone(),
        model: role.model.clone(),
        effort: role.effort.clone(),
        access: if args.write { Access::WorkspaceWrite } else { Access::ReadOnly },
        prompt: args.prompt.clone(),
        schema,
        context: json!({"try": true}),
        label: "try".into(),
    };
    run.progress(&format!("dispatching to {} (model {}, effort {})", agent.describe(), role.model, role.effort));
    let outcome = rt.block_on(dispatcher.dispatch(spec));
    let spent = run.budget.spent();
    let (name, attempts) = match &outcome {
        DispatchOutcome::Ok { attempts, .. } => ("ok", Some(*attempts)),
        DispatchOutcome::Failed { .. } => ("failed", None),
        DispatchOutcome::Dropped { .. } => ("dropped", None),
        DispatchOutcome::OverBudget { .. } => ("over-budget", None),
    };
    let result = json!({
        "run_id": run.run_id,
        "agent": agent.describe(),
        "role": role.role,
        "model": role.model,
        "effort": role.effort,
        "dispatch_id": outcome.dispatch_id(),
        "outcome": name,
        "attempts": attempts,
        "output": outcome.output(),
        "reason": outcome.failure_reason(),
        "usage": spent.usage,
        "dispatches": spent.dispatches,
    });
    run.finish(name, json!({"dispatch_id": outcome.dispatch_id(), "reason": outcome.failure_reason()}));
    let result = ctx.redactor.redact_json(&result);
    if args.json {
        ctx::print_json(&result);
    } else {
        match outcome.output() {
            Some(o) => {
                work_run::output::line(serde_json::to_string_pretty(&ctx.redactor.redact_json(o)).unwrap_or_default())
            }
            None => work_run::output::err_line(&outcome.failure_reason().unwrap_or_default()),
        }
    }
    Ok(if outcome.output().is_some() { ExitStatus::Done } else { ExitStatus::Unsuccessful })
}
