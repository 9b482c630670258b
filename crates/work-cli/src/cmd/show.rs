//! `work show RUN|TASK [--json]`: one run, for a person: outcome, spend, the workflow's items,
//! iterations or tasks, the reasons of failed dispatches, and where the event log and the
//! dispatch records are. RUN is a run id (or a unique prefix); TASK is an exhaust task, an
//! until session, an ultra goal or an implement task id (its newest run).

use crate::CmdResult;
use crate::cmd::runs::clip;
use crate::ctx::{CliError, Ctx, Global};
use serde_json::json;
use work_history::detail::Detail;
use work_history::report::human_ms;
use work_history::{RunSummary, Store};
use work_runtime::ExitStatus;

/// Arguments of `work show`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  work show 20260101T000000000Z-exhaust-1a2b\n  work show unwrap-and-expect-calls\n  work show my-session --json"
)]
pub struct Args {
    /// A run id (or a unique prefix), or an exhaust task, until session, ultra goal or task id.
    #[arg(value_name = "RUN|TASK")]
    pub run_id: String,
    /// Print the run as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The most rows of one list printed (the rest are counted).
const MAX_ROWS: usize = 30;

/// Runs `work show`.
pub fn run(global: &Global, args: Args) -> CmdResult {
    let ctx = Ctx::new(global)?;
    let store = Store::new(&ctx.state_dir);
    let summary = store.resolve(&args.run_id).map_err(|e| CliError::bad(e.to_string()))?;
    let detail = store.detail(&summary).map_err(|e| CliError::Runtime(e.to_string()))?;
    if args.json {
        let v = json!({"run": summary, "detail": detail});
        work_run::output::json(&v);
    } else {
        work_run::output::line(render(&summary, &detail));
    }
    Ok(ExitStatus::Done)
}

fn more(out: &mut Vec<String>, total: usize) {
    if total > MAX_ROWS {
        out.push(format!("  … {} more (work show RUN --json has them all)", total - MAX_ROWS));
    }
}

fn render(s: &RunSummary, d: &Detail) -> String {
    let mut o = Vec::new();
    let subject = s.subject.as_ref().map(|x| format!(" · {} {}", x.kind, x.id)).unwrap_or_default();
    o.push(format!("Run {} · {}{subject}", s.run_id, s.workflow));
    o.push(format!(
        "Outcome: {} · started {} · took {}",
        s.outcome,
        s.started.as_deref().unwrap_or("?"),
        s.duration_ms.map(human_ms).unwrap_or_else(|| "?".into())
    ));
    let roles: Vec<String> = s
        .spent_by_role
        .iter()
        .map(|(r, x)| {
            format!(
                "{r} {} · {} tok · {}",
                x.dispatches,
                x.tokens,
                work_runtime::budget::cost_text(x.cost_usd, x.unpriced)
            )
        })
        .collect();
    o.push(format!(
        "Spent: {} dispatch(es) · {} tokens · {}{}",
        s.dispatches,
        s.tokens,
        work_runtime::budget::cost_text(s.cost_usd, s.unpriced),
        if roles.is_empty() { String::new() } else { format!(" ({})", roles.join("; ")) }
    ));
    if s.skipped_lines > 0 {
        o.push(format!("Note: {} unreadable line(s) of the log skipped (a run cut off mid-write).", s.skipped_lines));
    }
    if let Some(x) = &d.exhaust {
        o.push(String::new());
        o.push(format!(
            "Exhaust \"{}\": {} round(s) · {} accepted · {} rejected · stopped: {}{}",
            x.what,
            x.rounds.len(),
            x.accepted.len(),
            x.rejected.len(),
            x.stopped_reason.as_deref().unwrap_or("-"),
            x.completeness.as_deref().map(|c| format!(" · {c}")).unwrap_or_default()
        ));
        if !x.given_up.is_empty() {
            o.push(format!("Given up (their finder failed in two rounds): {}", x.given_up.join(", ")));
        }
        if !x.completeness_gaps.is_empty() {
            o.push("Gaps:".into());
        }
        for g in &x.completeness_gaps {
            o.push(format!("  {}", clip(g, 160)));
        }
        for r in &x.rounds {
            let g3 = r.gate3_new.map(|n| format!(" · gate 3: {n} new")).unwrap_or_default();
            o.push(format!("  round {}: {} new · dry {} · {}{g3}", r.n, r.new_items, r.dry_counter_after, r.verdict));
        }
        if !x.accepted.is_empty() {
            o.push("Accepted:".into());
        }
        for a in x.accepted.iter().take(MAX_ROWS) {
            o.push(format!("  {}  {}  {}", a.location, clip(&a.id, 30), clip(&a.title, 60)));
        }
        more(&mut o, x.accepted.len());
        if !x.rejected.is_empty() {
            o.push("Rejected:".into());
        }
        for r in x.rejected.iter().take(MAX_ROWS) {
            o.push(format!("  {}  {}: {}", r.location, clip(&r.id, 30), clip(&r.reason, 80)));
        }
        more(&mut o, x.rejected.len());
    }
    if let Some(u) = &d.until {
        o.push(String::new());
        o.push(format!("Until session {}: {} iteration(s)", u.session, u.iterations.len()));
        for i in u.iterations.iter().take(MAX_ROWS) {
            let verify = match (i.verify_passed, &i.verify_end) {
                (Some(p), end) => {
                    format!(" · verify {} ({})", if p { "passed" } else { "failed" }, end.as_deref().unwrap_or(""))
                }
                _ => String::new(),
            };
            let lies = if i.false_claims.is_empty() {
                String::new()
            } else {
                format!(" · claimed, not changed: {}", i.false_claims.join(", "))
            };
            o.push(format!("  iteration {}: {} → {}{verify}{lies}", i.n, i.status, i.decision));
        }
        more(&mut o, u.iterations.len());
    }
    let tasks: Vec<_> =
        d.timeline.iter().filter(|t| matches!(t.phase.as_str(), "task" | "gate" | "review" | "decision")).collect();
    if d.exhaust.is_none() && d.until.is_none() && !tasks.is_empty() {
        o.push(String::new());
        o.push("Tasks, gates and reviews:".into());
        for t in tasks.iter().take(MAX_ROWS) {
            o.push(format!("  {:<8} {} {} {}", t.phase, t.label, t.status, clip(&t.note, 80)).trim_end().to_string());
        }
        more(&mut o, tasks.len());
    }
    o.push(String::new());
    // A run that ended on an error (a state write that failed, a full disk) says so first.
    let ended_on = s.end_detail.get("error").and_then(|e| e.as_str());
    let count = s.failures.len() + usize::from(ended_on.is_some());
    if count == 0 {
        o.push("Failures: none".into());
    } else {
        o.push(format!("Failures ({count}):"));
        if let Some(e) = ended_on {
            o.push(format!("  the run ended on an error ({}): {}", s.outcome, clip(e, 160)));
        }
        for f in s.failures.iter().take(MAX_ROWS) {
            let rec = f.record.as_deref().map(|r| format!(" [{r}]")).unwrap_or_default();
            o.push(format!("  {} ({}) {}: {}{rec}", f.dispatch_id, f.role, f.outcome, clip(&f.reason, 120)));
        }
        more(&mut o, s.failures.len());
    }
    o.push(format!("Event log: {}", s.events_path.display()));
    o.push(format!("Dispatch records: {}", s.run_dir.join(work_runtime::events::RECORDS_FILE).display()));
    o.push(format!("Next: work report {}", s.run_id));
    o.join("\n")
}
