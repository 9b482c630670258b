//! `work implement` (standard and mini mode) and `work edit`: flags and
//! carriers in, the pipeline of [`work_implement`] run, the end-report out.
//!
//! Order of checks: malformed flags (exit 2) → carrier guards (BLOCKED, zero dispatches) →
//! preflight (a dirty tree is BLOCKED before the plan is read — unless a killed run of the
//! iteration left it, which the run continues, or the iteration's finished run left it exactly
//! so, whose report is printed again; the plan file itself, when it is uncommitted inside the
//! repository, is left out of the check and of every later tree measurement, and the report
//! says so) → plan, suite command and agents (exit 2) → the run.
//!
//! A budget (`--budget-dispatches`, `--budget-tokens`, `--budget-usd`) that refuses a dispatch
//! ends the run BLOCKED with kind `budget`; the reason names the refused dispatch and what was
//! not done.

use crate::CmdResult;
use crate::budget_args::BudgetArgs;
use crate::ctx::{self, CliError, Ctx, Global};
use serde_json::Value;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use work_implement::carrier::{self, Carrier, Mode};
use work_implement::report::{EndReport, Status};
use work_implement::tree::{Preflight, Tree};
use work_implement::{Env, RoleDispatch, Settings};
use work_runtime::budget::{Budget, Spent};
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

/// `work implement`: the per-task implementer → spec review → quality review pipeline.
#[derive(Debug, clap::Args)]
pub struct ImplementArgs {
    /// The plan (standard mode).
    #[arg(long, value_name = "PLAN.md")]
    pub plan: Option<String>,
    /// The iteration id (artifacts go to `.work/iterations/<ID>/`).
    #[arg(long, value_name = "ID")]
    pub iter_id: Option<String>,
    /// Run only the tasks `A` to `B` of the plan (whole-number ids); each must exist.
    #[arg(long, value_name = "A-B")]
    pub range: Option<String>,
    /// Mini mode: one fix that turns a RED test green.
    #[arg(long)]
    pub mini: bool,
    /// Mini mode: the RED test, run by name.
    #[arg(long, value_name = "NAME")]
    pub red_test: Option<String>,
    /// Mini mode: the cause the debugger found.
    #[arg(long, value_name = "TEXT")]
    pub cause: Option<String>,
    /// Mini mode: how to run one test; `{test}` is replaced by the quoted name (default: the
    /// suite command followed by the name).
    #[arg(long, value_name = "CMD")]
    pub red_test_cmd: Option<String>,
    /// Repair dispatches allowed per review loop.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_repairs: u32,
    /// What a task may touch outside what its text plans: `named` (default: each such path is
    /// named to the reviewers and in the report) or `strict` (BLOCKED `out-of-scope`).
    #[arg(long, value_enum, value_name = "MODE", default_value = "named")]
    pub scope: ScopeMode,
    /// How many independent tasks of a plan run at once, each in its own worktree, merged back
    /// in plan order (1: one after another in the working tree).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// The carrier, test command, agent, budget and output flags both commands share.
    #[command(flatten)]
    pub run: RunFlags,
}

/// `--scope`: what a task may touch outside what its text plans (`work_git::scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeMode {
    /// Named to the reviewers (`out_of_scope` in their context) and in the report.
    Named,
    /// BLOCKED `out-of-scope` before the task's reviews.
    Strict,
}

/// The flags `work implement` and `work edit` share.
#[derive(Debug, clap::Args)]
pub struct RunFlags {
    /// The whole request as a JSON carrier (flags given beside it win).
    #[arg(long, value_name = "JSON", conflicts_with = "carrier_file")]
    pub carrier: Option<String>,
    /// The carrier, read from a file.
    #[arg(long, value_name = "PATH")]
    pub carrier_file: Option<PathBuf>,
    /// The suite command (overrides `[gates].test`).
    #[arg(long, value_name = "CMD")]
    pub test_cmd: Option<String>,
    /// The backend of every role (SPEC or a name from work.toml); `[roles.R]` may pin others.
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// `--budget-dispatches`, `--budget-tokens`, `--budget-usd`.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Print the end-report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Check everything and print the plan — each role's agent and model, the tasks, the
    /// suite, the budget (and with `-v` the first brief) — then stop: nothing is dispatched,
    /// locked or written.
    #[arg(long)]
    pub dry_run: bool,
}

/// `work edit`: a compiler-driven edit at a definition site.
#[derive(Debug, clap::Args)]
pub struct EditArgs {
    /// The iteration id (default: `edit-` and 12 hex digits of what is asked and HEAD, so the
    /// same command continues a killed edit).
    #[arg(long, value_name = "ID")]
    pub iter_id: Option<String>,
    /// What to change.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// Where the definition is (`PATH:LINE`).
    #[arg(long, value_name = "PATH:LINE")]
    pub def_site: Option<String>,
    /// The build command (overrides `[gates].typecheck`; none ⇒ the suite is the build check).
    #[arg(long, value_name = "CMD")]
    pub build_cmd: Option<String>,
    /// Propagation rounds allowed while the build is red.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_repairs: u32,
    /// The carrier, test command, agent, budget and output flags both commands share.
    #[command(flatten)]
    pub run: RunFlags,
}

fn base_dir(global: &Global) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match &global.directory {
        Some(d) if d.is_absolute() => d.clone(),
        Some(d) => cwd.join(d),
        None => cwd,
    }
}

fn read_carrier(text: &Option<String>, file: &Option<PathBuf>, base: &Path) -> Result<Option<Value>, CliError> {
    if let Some(t) = text {
        return Ok(Some(carrier::value_from_text(t)));
    }
    if let Some(f) = file {
        let p = if f.is_absolute() { f.clone() } else { base.join(f) };
        let t = work_runtime::fsx::read_user_string(&p, work_runtime::fsx::USER_FILE_CAP)
            .map_err(|e| CliError::bad(format!("read carrier file `{}`: {e}", f.display())))?;
        return Ok(Some(carrier::value_from_text(&t)));
    }
    Ok(None)
}

/// The iteration id to report for an early exit, best effort.
fn loose_iter_id(flag: &Option<String>, value: &Option<Value>) -> Option<String> {
    if let Some(f) = flag {
        return Some(f.clone());
    }
    let obj = match value.clone().map(carrier::normalize) {
        Some(Ok(m)) => m,
        _ => return None,
    };
    obj.get("iter_id").and_then(Value::as_str).map(str::to_string)
}

/// Ends without a dispatch: starts a run (so the exit is audited) and reports.
fn early_exit(ctx: &Ctx, workflow: &str, json: bool, report: EndReport) -> CmdResult {
    let mut report = report;
    if let Ok(run) = ctx.start_run(workflow, Budget::default(), Spent::default()) {
        run.emit(Event::IterationEnd { status: json!(report.status), reason: json!(report.reason) });
        run.finish(report.status.as_str(), serde_json::json!({"kind": report.kind}));
        report.run_id = Some(run.run_id.clone());
    }
    emit(ctx, json, &report, None)
}

/// The flag that carries a carrier field, for a refusal of the command line itself.
fn flag_of(field: &str) -> &str {
    match field {
        "iter_id" => "--iter-id",
        "plan_path" => "--plan",
        "range" => "--range",
        "red_test_path" => "--red-test",
        "cause_summary" => "--cause",
        "edit_description" => "--description",
        "def_site" => "--def-site",
        "mode" => "--mini",
        other => other,
    }
}

/// A carrier refused. A carrier the caller gave (`--carrier`, `--carrier-file`) keeps the
/// carrier guard (BLOCKED, zero dispatches); flags alone are the command line, and a missing
/// or malformed one is bad input naming the flag (exit 2).
fn carrier_refused(ctx: &Ctx, workflow: &str, flags: &RunFlags, r: EndReport, field: Option<&str>) -> CmdResult {
    match field {
        Some(f) if flags.carrier.is_none() && flags.carrier_file.is_none() => {
            Err(CliError::bad(format!("start {workflow}: {} ({})", r.reason, flag_of(f))))
        }
        _ => early_exit(ctx, workflow, flags.json, r),
    }
}

/// Refuses a run without a suite command before anything is dispatched: DONE needs the
/// engine's own suite run, so such a run could only end BLOCKED after paying for its work.
fn require_suite(workflow: &str, test_cmd: &str) -> Result<(), CliError> {
    if test_cmd.trim().is_empty() {
        return Err(CliError::bad(format!(
            "start {workflow}: no test command (pass --test-cmd or set `[gates].test` in work.toml); DONE needs the engine's own suite run"
        )));
    }
    Ok(())
}

/// Refuses a `PATH:LINE` definition site whose path names no file in the repository; else its
/// path relative to the repository's root.
fn check_def_site(root: &Path, base: &Path, site: &str) -> Result<String, CliError> {
    let path = match site.rsplit_once(':') {
        Some((p, line)) if line.trim().chars().all(|c| c.is_ascii_digit()) && !line.trim().is_empty() => p,
        _ => return Err(CliError::bad(format!("use --def-site `{site}`: it must be PATH:LINE"))),
    };
    let p = resolve_path(base, root, path);
    match repo_relative(root, &p) {
        Some(rel) if p.is_file() => Ok(rel),
        _ => Err(CliError::bad(format!("use --def-site `{site}`: `{path}` is not a file in the repository"))),
    }
}

/// Takes the iteration's lock and the working-tree lock (a second run of one iteration, or
/// any second writer on this tree, is refused at once).
fn lock_iteration(
    ctx: &Ctx,
    workflow: &str,
    iter_id: &str,
) -> Result<(String, work_run::lock::Held, work_run::lock::Held), CliError> {
    let run_id = ctx.new_run_id(workflow);
    let key = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(iter_id.as_bytes()))[..16].to_string()
    };
    let it = ctx.lock_state(&format!("iteration-{key}"), &format!("iteration `{iter_id}`"), &run_id)?;
    let tree = match ctx.lock_tree(&run_id) {
        Ok(t) => t,
        Err(e) => {
            work_run::lock::discard(it);
            return Err(e);
        }
    };
    Ok((run_id, it, tree))
}

/// The report of a run, or — a state write failed, or a git that judged it — the run ended
/// (`run.end` says why) and its one error line (exit 1).
fn stopped(
    run: &work_runtime::run::RunContext,
    r: Result<EndReport, work_implement::state_write::RunError>,
) -> Result<EndReport, CliError> {
    r.map_err(|e| {
        run.finish("error", serde_json::json!({"error": e.to_string()}));
        CliError::Runtime(e.to_string())
    })
}

/// Prints the end-report (`--json` or human lines) and the run summary; `run` is the run
/// that dispatched (its spending and budget go in the summary).
fn emit(ctx: &Ctx, json: bool, report: &EndReport, run: Option<&work_runtime::run::RunContext>) -> CmdResult {
    if json {
        ctx::print_json(&report.to_json());
    } else {
        work_run::output::human(format!(
            "{} {}: {}",
            report.status.as_str(),
            report.iter_id.as_deref().unwrap_or("-"),
            report.reason
        ));
        for t in &report.tasks {
            let status = serde_json::to_value(t.status).ok().and_then(|v| v.as_str().map(str::to_string));
            work_run::output::human(format!("  task {}: {}", t.id, status.unwrap_or_default()));
        }
        for c in &report.concerns {
            work_run::output::human(format!("  concern: {c}"));
        }
        if let Some(dir) = &report.artifacts.dir {
            work_run::output::human(format!("  artifacts: {dir}"));
        }
    }
    let events = report.run_id.as_deref().map(|id| ctx.state_path("runs").join(id).join("events.jsonl"));
    let summary = work_run::harness::Summary {
        outcome: outcome_line(report),
        label: "changed".into(),
        total: report.files.len(),
        items: report.files.iter().take(20).cloned().collect(),
        next: Some(next_step(report)),
        events,
        spent: run.map(|r| r.budget.spent()).unwrap_or_default(),
        budget: run.map(|r| r.budget.budget()).unwrap_or_default(),
        ..Default::default()
    };
    summary.print();
    Ok(work_run::status::iteration(report.status))
}

/// `DONE`, or `BLOCKED kind: why` — the reason, on one line, so stderr says why the run stopped
/// even when stdout carries the `--json` document.
fn outcome_line(report: &EndReport) -> String {
    let head = format!("{} {}", report.status.as_str(), report.kind.as_deref().unwrap_or(""));
    let head = head.trim();
    let why: String = report.reason.split_whitespace().collect::<Vec<_>>().join(" ");
    if report.status == Status::Done || why.is_empty() {
        return head.to_string();
    }
    if why.chars().count() > 240 {
        let cut: String = why.chars().take(239).collect();
        return format!("{head}: {cut}…");
    }
    format!("{head}: {why}")
}

/// What to do after the run: review a finished change; read why it stopped and run the same
/// command again.
fn next_step(report: &EndReport) -> String {
    // A budget stop leaves its iteration open: a larger budget goes on from the first task not
    // done. Any other stop finishes it: the same command over the same tree prints this report
    // again, and over a clean tree runs the iteration afresh.
    let budget = report.kind.as_deref().and_then(StopReason::parse) == Some(StopReason::Budget);
    let again = match (budget, report.iter_id.as_deref()) {
        (true, Some(id)) => format!("the same command with --iter-id {id} and a larger budget continues task by task"),
        (true, None) => "the same command with a larger budget runs again".to_string(),
        _ => {
            "once the tree is clean (commit the change, or `git stash` it), the same command runs the iteration afresh"
                .to_string()
        }
    };
    match (report.status, &report.artifacts.dir) {
        (Status::Done, _) => "review the change (`git diff`) and commit it".into(),
        (_, Some(dir)) => format!("read {dir}/BLOCKED.md; {again}"),
        (_, None) if report.kind.as_deref() == Some("dirty-tree") => match report.iter_id.as_deref() {
            Some(id) => format!(
                "commit or stash what `git status` shows; the same command with --iter-id {id} continues task by task"
            ),
            None => "commit or stash what `git status` shows; the same command runs again".into(),
        },
        (_, None) => format!("fix what the outcome names; {again}"),
    }
}

/// What a run of an iteration does with the tree it finds.
enum Gate {
    /// Run (the tree is clean, or a killed run of the iteration left it).
    Run,
    /// The iteration's last run finished over this very tree: print its report again.
    Replay(Box<EndReport>),
    /// Refused: the tree is dirty with work no run of the iteration left.
    Dirty,
}

/// The gate before a run of iteration `iter` ([`work_implement::resume`]): its progress record
/// is state (one changed outside a run is refused); an unfinished iteration continues only from
/// the HEAD it started at, over the tree its killed run left; a finished one whose `request`
/// and tree are unchanged is answered with its report; a dirty tree is otherwise refused.
fn iteration_gate(ctx: &Ctx, iter: &str, request: Option<&str>, pf: &Preflight) -> Result<Gate, CliError> {
    let record = work_implement::progress::read(&ctx.state_dir, iter)
        .map_err(|e| CliError::bad(format!("read the progress of iteration `{iter}`: {e}")))?;
    // An unfinished iteration continues from the HEAD it started at (its base): a commit
    // made since must not turn the rerun into a fresh start whose checks are frozen from
    // that commit.
    if let Some(p) = record.filter(|p| !p.finished)
        && p.head != pf.head_sha
    {
        let short = |h: &Option<String>| h.as_deref().map_or("(none)".to_string(), |h| h.chars().take(12).collect());
        return Err(CliError::bad(format!(
            "continue iteration `{iter}`: it started at HEAD {} and HEAD is now {}: `git reset --soft {}` (keeps the work, uncommitted) to continue it, or start a new iteration with another --iter-id",
            short(&p.head),
            short(&pf.head_sha),
            short(&p.head)
        )));
    }
    if let Some(asked) = request
        && let Some(report) = work_implement::resume::finished_report(&ctx.root, &ctx.state_dir, iter, asked, pf)
            .map_err(|e| CliError::bad(format!("read the progress of iteration `{iter}`: {e}")))?
    {
        return Ok(Gate::Replay(Box::new(report)));
    }
    // A dirty tree a killed run of this iteration left is its own: the run continues it.
    let tree = Tree::new(&ctx.root, &ctx.state_dir).excluding(&pf.excluded_paths);
    if pf.clean || work_implement::progress::owns_tree(&ctx.state_dir, Some(iter), &tree) {
        Ok(Gate::Run)
    } else {
        Ok(Gate::Dirty)
    }
}

/// Runs the folded preflight; a non-repository is bad input.
fn preflight(ctx: &Ctx) -> Result<Preflight, CliError> {
    Tree::new(&ctx.root, &ctx.state_dir)
        .preflight()
        .map_err(|e| CliError::bad(format!("check the working tree of `{}`: {e}", ctx.root.display())))
}

fn dirty_report(mode: Mode, iter: Option<String>, pf: Preflight) -> EndReport {
    let n = pf.dirty_paths.len();
    let shown: Vec<&str> = pf.dirty_paths.iter().take(10).map(String::as_str).collect();
    let mut r = EndReport::infra(
        mode,
        iter,
        "dirty-tree",
        format!(
            "preflight: the working tree is dirty ({n} path(s): {}{}); commit or stash first",
            shown.join(", "),
            if n > shown.len() { ", …" } else { "" }
        ),
    );
    r.preflight = Some(pf);
    r
}

/// The suite command: `--test-cmd`, else `[gates].test`, else one detected from the
/// repository's own build files; empty when there is none (the run then ends BLOCKED
/// `no-suite` rather than DONE, since DONE needs the engine's own suite run).
fn test_command(ctx: &Ctx, flag: &Option<String>) -> String {
    match flag.clone().or(ctx.config.gates.test.clone()) {
        Some(t) if !t.trim().is_empty() => t,
        _ => detect_test_command(&ctx.root).unwrap_or_default(),
    }
}

/// A test command from the repository's build files: Cargo (`cargo test`), npm with a `test`
/// script (`npm test`), Go (`go test ./...`), a Makefile `test:` target (`make test`).
fn detect_test_command(root: &Path) -> Option<String> {
    let read = |f: &str| std::fs::read_to_string(root.join(f)).ok();
    if root.join("Cargo.toml").is_file() {
        return Some("cargo test".into());
    }
    if let Some(pkg) = read("package.json")
        && serde_json::from_str::<serde_json::Value>(&pkg).ok().is_some_and(|v| v["scripts"]["test"].is_string())
    {
        return Some("npm test".into());
    }
    if root.join("go.mod").is_file() {
        return Some("go test ./...".into());
    }
    if read("Makefile").is_some_and(|m| m.lines().any(|l| l.starts_with("test:"))) {
        return Some("make test".into());
    }
    None
}

/// A role's resolved pins and its backend.
type Resolved = (work_config::ResolvedRole, std::sync::Arc<dyn work_runtime::dispatch::Agent>);

fn roles(run: &work_runtime::run::RunContext, resolved: Vec<Resolved>) -> BTreeMap<String, RoleDispatch> {
    resolved
        .into_iter()
        .map(|(role, agent)| {
            let d = ctx::dispatcher(run, &role, agent);
            (role.role.clone(), RoleDispatch { model: role.model.clone(), effort: role.effort.clone(), dispatcher: d })
        })
        .collect()
}

fn resolve_all(ctx: &Ctx, names: &[&str], agent: Option<&str>, budget: &BudgetArgs) -> Result<Vec<Resolved>, CliError> {
    let resolved: Vec<Resolved> = names.iter().map(|n| ctx.resolve_agent(n, agent)).collect::<Result<_, _>>()?;
    for (_, a) in &resolved {
        budget.check_agent(a.as_ref())?;
    }
    Ok(resolved)
}

/// With `--concurrency` above 1, how a task's roles are built in its worktree: the same
/// agents and pins, rooted (and confined) there.
fn wave_setup(concurrency: u32, resolved: &[Resolved]) -> Option<work_implement::waves::WaveSetup> {
    if concurrency <= 1 {
        return None;
    }
    let pins: Vec<work_config::ResolvedRole> = resolved.iter().map(|(r, _)| r.clone()).collect();
    let roles_for = move |run: &work_runtime::run::RunContext| -> Result<BTreeMap<String, RoleDispatch>, String> {
        let mut built = Vec::new();
        for role in &pins {
            let agent = work_agents::build(role, &run.root).map_err(|e| e.to_string())?;
            built.push((role.clone(), agent));
        }
        Ok(roles(run, built))
    };
    Some(work_implement::waves::WaveSetup {
        concurrency: concurrency as usize,
        roles_for: std::sync::Arc::new(roles_for),
    })
}

/// `--dry-run` over an iteration that finished over this very tree: a run would print its
/// report again and dispatch nothing.
fn dry_replay(report: &EndReport, flags: &RunFlags) -> CmdResult {
    let workflow = if report.mode == Mode::Edit { "edit" } else { "implement" };
    let mut plan = crate::dry_run::DryRun::new(workflow);
    plan.row("iteration", report.iter_id.clone().unwrap_or_default()).row(
        "finished",
        format!(
            "{} over this very tree: the run prints its report again and dispatches nothing",
            report.status.as_str()
        ),
    );
    plan.print(flags.json)
}

/// The `--dry-run` plan every implement and edit run shares: the roles, the suite, the budget.
fn dry_plan(workflow: &'static str, resolved: &[Resolved], set: &Settings, flags: &RunFlags) -> crate::dry_run::DryRun {
    let mut plan = crate::dry_run::DryRun::new(workflow);
    for (role, agent) in resolved {
        plan.role(role, agent.as_ref());
    }
    plan.row("suite", &set.test_cmd).budget(&flags.budget);
    plan
}

fn settings(ctx: &Ctx, test_cmd: String, max_repairs: u32) -> Settings {
    Settings {
        test_cmd,
        gate_timeout: ctx.config.timeouts.gate_secs.map(std::time::Duration::from_secs),
        max_repairs,
        concurrency: ctx.config.concurrency.unwrap_or(4).max(1),
        ..Settings::default()
    }
}

fn resolve_path(base: &Path, root: &Path, p: &str) -> PathBuf {
    let path = PathBuf::from(p);
    if path.is_absolute() {
        return path;
    }
    let from_base = base.join(&path);
    if from_base.exists() { from_base } else { root.join(path) }
}

/// `path` relative to the repository root (as `git status` prints it), when it lies inside.
fn repo_relative(root: &Path, path: &Path) -> Option<String> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let path = match (path.parent().map(Path::canonicalize), path.file_name()) {
        (Some(Ok(dir)), Some(name)) => dir.join(name),
        _ => path.to_path_buf(),
    };
    let rel = path.strip_prefix(&root).ok()?;
    let s = rel.to_string_lossy().replace('\\', "/");
    if s.is_empty() { None } else { Some(s) }
}

/// Runs `work implement`.
pub fn run_implement(global: &Global, a: ImplementArgs) -> CmdResult {
    a.run.budget.validate("start implement")?;
    if let Some(r) = &a.range {
        carrier::parse_range(r).map_err(|e| CliError::bad(format!("parse --range: {e}")))?;
    }
    let ctx = Ctx::new(global)?;
    let base = base_dir(global);
    let value = read_carrier(&a.run.carrier, &a.run.carrier_file, &base)?;
    let overlay = [
        ("iter_id", a.iter_id.clone()),
        ("plan_path", a.plan.clone()),
        ("range", a.range.clone()),
        ("red_test_path", a.red_test.clone()),
        ("cause_summary", a.cause.clone()),
        ("mode", a.mini.then(|| "mini".to_string())),
    ];
    let default_mode = if a.mini { Mode::Mini } else { Mode::Standard };
    let c: Carrier = match carrier::parse(value.clone(), &[Mode::Standard, Mode::Mini], default_mode, &overlay) {
        Ok(c) => c,
        Err(e) => {
            let mut r = EndReport::infra(default_mode, loose_iter_id(&a.iter_id, &value), e.kind(), e.to_string());
            r.detail = e.field().map(|f| serde_json::json!({"field": f}));
            return carrier_refused(&ctx, "implement", &a.run, r, e.field());
        }
    };
    let test_cmd = test_command(&ctx, &a.run.test_cmd);
    require_suite("implement", &test_cmd)?;
    let range = match c.range.as_deref().map(carrier::parse_range) {
        Some(Err(e)) => {
            let r = EndReport::infra(c.mode, c.iter_id.clone(), "bad-range", format!("carrier {e}"));
            return early_exit(&ctx, "implement", a.run.json, r);
        }
        Some(Ok(r)) => Some(r),
        None => None,
    };
    let mut pf = preflight(&ctx)?;
    // The plan named on the command line is input, not work: uncommitted, it neither makes
    // the tree dirty nor counts as touched (the report says so).
    if c.mode == Mode::Standard
        && let Some(rel) =
            c.plan_path.as_deref().and_then(|p| repo_relative(&ctx.root, &resolve_path(&base, &ctx.root, p)))
    {
        pf.exclude(&rel);
    }
    if c.mode == Mode::Standard
        && let Some(i) = c.iter_id.as_deref()
    {
        // Read leniently here: an unreadable plan is refused below, after the dirty check.
        let plan = c.plan_path.as_deref().map(|p| resolve_path(&base, &ctx.root, p));
        let text = plan.and_then(|p| work_runtime::fsx::read_user_string(&p, work_runtime::fsx::USER_FILE_CAP).ok());
        let asked = text.map(|t| work_implement::standard::request(&t, range, &test_command(&ctx, &a.run.test_cmd)));
        match iteration_gate(&ctx, i, asked.as_deref(), &pf)? {
            Gate::Run => {}
            Gate::Replay(report) if a.run.dry_run => return dry_replay(&report, &a.run),
            Gate::Replay(report) => return emit(&ctx, a.run.json, &report, None),
            Gate::Dirty => {
                return early_exit(&ctx, "implement", a.run.json, dirty_report(c.mode, c.iter_id.clone(), pf));
            }
        }
    } else if !pf.clean {
        return early_exit(&ctx, "implement", a.run.json, dirty_report(c.mode, c.iter_id.clone(), pf));
    }
    let iter_id = c.iter_id.clone().unwrap_or_default();
    let mut set = settings(&ctx, test_cmd, a.max_repairs);
    set.red_test_cmd = a.red_test_cmd.clone();
    set.scope_strict = a.scope == ScopeMode::Strict;
    set.exclude = pf.excluded_paths.clone();
    match c.mode {
        Mode::Mini => {
            let resolved = resolve_all(&ctx, &["implementer"], a.run.agent.as_deref(), &a.run.budget)?;
            if a.run.dry_run {
                let mut plan = dry_plan("implement", &resolved, &set, &a.run);
                let (red, cause) =
                    (c.red_test_path.clone().unwrap_or_default(), c.cause_summary.clone().unwrap_or_default());
                plan.row("mode", "mini").row("red test", &red).row("cause", &cause);
                plan.prompt("implementer", work_implement::prompts::mini(&iter_id, &red, &cause));
                return plan.print(a.run.json);
            }
            let (run_id, _iteration, _tree) = lock_iteration(&ctx, "implement", &iter_id)?;
            let run =
                ctx.start_run_as(run_id, "implement", a.run.budget.budget(), Spent::default(), Default::default())?;
            let env = Env::new(run.clone(), roles(&run, resolved), set);
            let input = work_implement::mini::MiniInput {
                iter_id,
                red_test: c.red_test_path.clone().unwrap_or_default(),
                cause: c.cause_summary.clone().unwrap_or_default(),
                preflight: pf,
            };
            let report = stopped(&run, ctx::runtime()?.block_on(work_implement::mini::run_mini(&env, input)))?;
            run.finish(report.status.as_str(), serde_json::json!({"kind": report.kind}));
            emit(&ctx, a.run.json, &report, Some(&run))
        }
        _ => {
            let plan_arg = c.plan_path.clone().unwrap_or_default();
            let plan_file = resolve_path(&base, &ctx.root, &plan_arg);
            let plan_text = work_runtime::fsx::read_user_string(&plan_file, work_runtime::fsx::USER_FILE_CAP)
                .map_err(|e| CliError::bad(format!("read plan `{plan_arg}`: {e}")))?;
            let kind = work_implement::standard::classify_plan(&plan_text)
                .map_err(|e| CliError::bad(format!("parse plan `{plan_arg}`: {e}")))?;
            let names: &[&str] = match kind {
                work_implement::standard::PlanKind::Parsed(_) => {
                    &["implementer", "spec-reviewer", "quality-reviewer", "tester"]
                }
                work_implement::standard::PlanKind::FreeForm => {
                    &["implementer", "spec-reviewer", "quality-reviewer", "tester", "plan-index", "plan-extract"]
                }
            };
            if let (work_implement::standard::PlanKind::Parsed(plan), Some(r)) = (&kind, range) {
                work_implement::extract::select_parsed(plan, Some(r))
                    .map_err(|e| CliError::bad(format!("use --range `{}-{}`: {}", r.0, r.1, e.reason)))?;
            }
            let resolved = resolve_all(&ctx, names, a.run.agent.as_deref(), &a.run.budget)?;
            if a.run.dry_run {
                let mut plan = dry_plan("implement", &resolved, &set, &a.run);
                plan.row("plan", &plan_arg).row("scope", if set.scope_strict { "strict" } else { "named" });
                plan.row("concurrency", a.concurrency.to_string());
                match &kind {
                    work_implement::standard::PlanKind::Parsed(p) => {
                        let tasks = work_implement::extract::select_parsed(p, range).unwrap_or_default();
                        for (i, t) in tasks.iter().enumerate() {
                            plan.row(format!("task {}", i + 1), format!("{}: {}", t.id, t.title));
                        }
                        if let Some(t) = tasks.first() {
                            plan.prompt(
                                format!("implementer, task {}", t.id),
                                work_implement::prompts::implementer(&iter_id, &t.id, &t.title, &t.text),
                            );
                        }
                    }
                    work_implement::standard::PlanKind::FreeForm => {
                        plan.row("tasks", "a free-form plan: the plan-index and plan-extract roles list them first");
                    }
                }
                return plan.print(a.run.json);
            }
            let (run_id, _iteration, _tree) = lock_iteration(&ctx, "implement", &iter_id)?;
            let run =
                ctx.start_run_as(run_id, "implement", a.run.budget.budget(), Spent::default(), Default::default())?;
            let setup = wave_setup(a.concurrency, &resolved);
            let mut env = Env::new(run.clone(), roles(&run, resolved), set);
            if let Some(setup) = setup {
                env = env.with_waves(setup);
            }
            let input = work_implement::standard::StandardInput {
                iter_id,
                plan_path: plan_arg,
                plan_text,
                plan: kind,
                range,
                preflight: pf,
            };
            let report = stopped(&run, ctx::runtime()?.block_on(work_implement::standard::run_standard(&env, input)))?;
            run.finish(report.status.as_str(), serde_json::json!({"kind": report.kind}));
            emit(&ctx, a.run.json, &report, Some(&run))
        }
    }
}

/// Runs `work edit`.
pub fn run_edit(global: &Global, a: EditArgs) -> CmdResult {
    a.run.budget.validate("start edit")?;
    let ctx = Ctx::new(global)?;
    let base = base_dir(global);
    let value = read_carrier(&a.run.carrier, &a.run.carrier_file, &base)?;
    let overlay =
        [("iter_id", a.iter_id.clone()), ("edit_description", a.description.clone()), ("def_site", a.def_site.clone())];
    let c = match carrier::parse(value.clone(), &[Mode::Edit], Mode::Edit, &overlay) {
        Ok(c) => c,
        Err(e) => {
            let mut r = EndReport::infra(Mode::Edit, loose_iter_id(&a.iter_id, &value), e.kind(), e.to_string());
            r.detail = e.field().map(|f| serde_json::json!({"field": f}));
            return carrier_refused(&ctx, "edit", &a.run, r, e.field());
        }
    };
    let test_cmd = test_command(&ctx, &a.run.test_cmd);
    require_suite("edit", &test_cmd)?;
    let def_site_path = check_def_site(&ctx.root, &base, c.def_site.as_deref().unwrap_or_default())?;
    let build_cmd = a.build_cmd.clone().or(ctx.config.gates.typecheck.clone()).filter(|s| !s.trim().is_empty());
    let description = c.edit_description.clone().unwrap_or_default();
    let def_site = c.def_site.clone().unwrap_or_default();
    let asked = work_implement::edit::request(&description, &def_site, &test_cmd, build_cmd.as_deref());
    let pf = preflight(&ctx)?;
    // Without --iter-id, the same command over the same HEAD is the same iteration: a killed
    // edit is continued by running it again.
    let iter_id = c.iter_id.clone().unwrap_or_else(|| {
        let head = pf.head_sha.clone().unwrap_or_default();
        format!("edit-{}", &work_implement::resume::request_digest(&[&asked, &head])[..12])
    });
    match iteration_gate(&ctx, &iter_id, Some(&asked), &pf)? {
        Gate::Run => {}
        Gate::Replay(report) if a.run.dry_run => return dry_replay(&report, &a.run),
        Gate::Replay(report) => return emit(&ctx, a.run.json, &report, None),
        Gate::Dirty => return early_exit(&ctx, "edit", a.run.json, dirty_report(Mode::Edit, Some(iter_id), pf)),
    }
    let mut set = settings(&ctx, test_cmd, a.max_repairs);
    set.build_cmd = build_cmd;
    let resolved = resolve_all(&ctx, &["editor"], a.run.agent.as_deref(), &a.run.budget)?;
    if a.run.dry_run {
        let mut plan = dry_plan("edit", &resolved, &set, &a.run);
        let (description, def_site) =
            (c.edit_description.clone().unwrap_or_default(), c.def_site.clone().unwrap_or_default());
        plan.row("edit", &description).row("definition site", &def_site);
        if let Some(b) = &set.build_cmd {
            plan.row("build", b);
        }
        plan.prompt("editor", work_implement::edit::first_brief(&ctx.root, &description, &def_site, &def_site_path));
        return plan.print(a.run.json);
    }
    let (run_id, _iteration, _tree) = lock_iteration(&ctx, "edit", &iter_id)?;
    let run = ctx.start_run_as(run_id, "edit", a.run.budget.budget(), Spent::default(), Default::default())?;
    let env = Env::new(run.clone(), roles(&run, resolved), set);
    let input = work_implement::edit::EditInput { iter_id, description, def_site, def_site_path, preflight: pf };
    let report = stopped(&run, ctx::runtime()?.block_on(work_implement::edit::run_edit(&env, input)))?;
    run.finish(report.status.as_str(), serde_json::json!({"kind": report.kind}));
    emit(&ctx, a.run.json, &report, Some(&run))
}
