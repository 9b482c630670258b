//! Standard mode: select the tasks, run each through the per-task loop with the snapshot
//! guard at every boundary of a multi-task run (#23), then end-verify with two independent
//! legs (#11, #12, #29) and finalize the artifacts from templates in code.
//!
//! The preflight's HEAD is the run's base: every measurement (the reviewers' diffs, the
//! fingerprints, the snapshot guard, `files_touched`) starts from its tree, so an agent's
//! commits on top of it are its change like any uncommitted edit. A task (or the E2E tester)
//! that moves HEAD any other way ends the run BLOCKED `head-moved` with the breach in
//! `blocked_detail.head` (see `work_git::head`). An uncommitted plan file named on the command line is left out of the
//! preflight and of every tree measurement, with a concern saying so.

use crate::artifacts;
use crate::carrier::Mode;
use crate::env::{Counter, Env};
use crate::extract::{self, SelectBlocked};
use crate::progress::{self, InProgress};
use crate::report::{EndReport, Stats, Status, TaskOutcome, TaskStatus};
use crate::resume;
use crate::state_write::RunError;
use crate::task_loop::{self, TaskSpec};
use crate::tree::{Preflight, Snapshot, lost_paths};
use serde_json::{Value, json};
use work_git::snapshot::LostLines;
use work_loop::plan::{Plan, PlanError, parse_plan};
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

/// How a plan text is read.
#[derive(Debug, Clone)]
pub enum PlanKind {
    /// The documented form, parsed without any agent.
    Parsed(Plan),
    /// No task heading: agent index/extract under the cardinality guards.
    FreeForm,
}

/// Classifies a plan text: parsed, free-form, or refused (duplicate ids, cycles, bad ids).
pub fn classify_plan(text: &str) -> Result<PlanKind, PlanError> {
    match parse_plan(text) {
        Ok(p) => Ok(PlanKind::Parsed(p)),
        Err(PlanError::NoTasks) => Ok(PlanKind::FreeForm),
        Err(e) => Err(e),
    }
}

/// What a standard run is asked.
#[derive(Debug, Clone)]
pub struct StandardInput {
    /// The iteration id.
    pub iter_id: String,
    /// The plan path as given (for briefs and reports).
    pub plan_path: String,
    /// The plan text.
    pub plan_text: String,
    /// How to read it.
    pub plan: PlanKind,
    /// A well-formed range, if any.
    pub range: Option<(u64, u64)>,
    /// The preflight (already checked clean).
    pub preflight: Preflight,
}

/// Fills the spend figures.
pub fn fill_stats(env: &Env, report: &mut EndReport, extraction: Counter) {
    let spent = env.run.budget.spent();
    let done = report.tasks.iter().filter(|t| t.status == TaskStatus::Done).count();
    let per = |x: u64| if done == 0 { None } else { Some(x as f64 / done as f64) };
    let task_d: u64 = report.tasks.iter().map(|t| t.spent.dispatches).sum();
    let task_t: u64 = report.tasks.iter().map(|t| t.spent.tokens).sum();
    report.stats = Stats {
        dispatches: spent.dispatches,
        tokens: spent.usage.total_tokens(),
        extraction_dispatches: extraction.dispatches,
        done_tasks: done,
        dispatches_per_done_task: per(task_d),
        tokens_per_done_task: per(task_t),
        snapshots: report.snapshots.len(),
    };
    report.run_id = Some(env.run.run_id.clone());
}

/// The digest of what a standard run is asked: the plan, the range and the suite command
/// ([`resume::request_digest`]).
pub fn request(plan_text: &str, range: Option<(u64, u64)>, test_cmd: &str) -> String {
    let range = range.map(|(a, b)| format!("{a}-{b}")).unwrap_or_default();
    resume::request_digest(&["standard", plan_text, &range, test_cmd])
}

/// Runs standard mode.
pub async fn run_standard(env: &Env, input: StandardInput) -> Result<EndReport, RunError> {
    let iter = input.iter_id.clone();
    let mut report = EndReport::new(Status::Blocked, Mode::Standard, Some(iter.clone()), String::new());
    report.preflight = Some(input.preflight.clone());
    for p in &input.preflight.excluded_paths {
        report.concerns.push(format!(
            "the plan `{p}` is uncommitted: it was left out of the preflight's dirty check and of every tree measurement"
        ));
    }
    let mut extraction = Counter::default();
    let tasks = match &input.plan {
        PlanKind::Parsed(p) => extract::select_parsed(p, input.range),
        PlanKind::FreeForm => {
            extract::select_free_form(env, &mut extraction, &iter, &input.plan_path, &input.plan_text, input.range)
                .await
        }
    };
    let tasks = match tasks {
        Ok(t) => t,
        Err(SelectBlocked { kind, reason, detail }) => {
            report.kind = Some(kind.into());
            report.reason = reason;
            report.blocked_detail = Some(detail);
            return end(env, report, extraction);
        }
    };
    env.run.emit(Event::PlanSelected { tasks: json!(tasks.iter().map(|t| &t.id).collect::<Vec<_>>()) });
    let multi = tasks.len() > 1;
    let asked = request(&input.plan_text, input.range, &env.settings.test_cmd);
    let mut progress = resume::resume_progress(env, &iter, &asked, &mut report)?;
    resume::freeze_ground_truth(env, &mut progress, &input.plan_text, false).await?;
    let surface = progress.check_surface.clone().unwrap_or_default();
    let mut prev: Option<Snapshot> = progress.snapshots.last().cloned();
    report.snapshots = progress.snapshots.clone();
    let parallel = match (&input.plan, env.waves()) {
        (PlanKind::Parsed(p), Some(w)) if w.concurrency > 1 => Some((p, w)),
        _ => None,
    };
    if let Some((plan, setup)) = parallel {
        crate::waves::run(env, setup, &iter, &tasks, plan, &mut progress, &mut report).await?;
    } else {
        let mut stopped = false;
        for t in &tasks {
            if stopped {
                report.tasks.push(TaskOutcome::new(&t.id, &t.title));
                continue;
            }
            if let Some(done) = progress.done(&t.id) {
                env.run.emit(Event::TaskResumed { task_id: json!(t.id), status: json!(done.status) });
                report.concerns.extend(done.concerns.iter().cloned());
                report.tasks.push(done.clone());
                continue;
            }
            let start = progress.start_of(&t.id);
            let start_fp = start.clone().unwrap_or_else(|| env.tree.fingerprint().ok());
            progress.start_task(InProgress { task_id: t.id.clone(), start: start_fp });
            progress::save(&env.run, &mut progress)?;
            let outcome = task_loop::run_task(env, &iter, t, start).await;
            // A git that failed judging the task leaves it unjudged: not recorded, run again.
            env.git_failed()?;
            let ok = outcome.status == TaskStatus::Done;
            // With HEAD moved off the base's line, the snapshot comparison would read paths as
            // lost that the move took away. The head-moved verdict stands alone.
            let head_moved = outcome.kind.as_deref() == Some(StopReason::HeadMoved.as_str());
            report.push_judged(outcome);
            if multi && !head_moved {
                match env.tree.snapshot(&t.id) {
                    Ok(snap) => {
                        env.run.emit(Event::Snapshot {
                            boundary: json!(snap.boundary),
                            sha: json!(snap.sha),
                            paths: Some(json!(snap.paths)),
                            tree: None,
                            reference: None,
                        });
                        if let Some(p) = &prev {
                            let lost = lost_paths(p, &snap);
                            if !lost.is_empty() {
                                report.snapshots.push(snap.clone());
                                discard_verdict(&mut report, p, &snap, lost);
                                mark_rest(&mut report, &tasks);
                                return end(env, report, extraction);
                            }
                            match env.tree.lost_lines(p, &snap) {
                                Ok(lines) => {
                                    let lines = work_git::loss::unplanned_lines(&env.run.root, &t.text, lines);
                                    if !lines.is_empty() {
                                        report.snapshots.push(snap.clone());
                                        lines_lost_verdict(&mut report, p, &snap, lines);
                                        mark_rest(&mut report, &tasks);
                                        return end(env, report, extraction);
                                    }
                                }
                                Err(e) => report
                                    .concerns
                                    .push(format!("per-line snapshot comparison after task {} failed: {e}", t.id)),
                            }
                        }
                        report.snapshots.push(snap.clone());
                        progress.end_task(
                            report.tasks.last().unwrap_or(&TaskOutcome::new(&t.id, &t.title)),
                            Some(&snap),
                            env.tree.fingerprint().ok(),
                        );
                        prev = Some(snap);
                    }
                    Err(e) => report.concerns.push(format!("snapshot after task {} failed: {e}", t.id)),
                }
            }
            if progress.in_progress.is_some() {
                let last = report.tasks.last().cloned().unwrap_or_else(|| TaskOutcome::new(&t.id, &t.title));
                progress.end_task(&last, None, env.tree.fingerprint().ok());
            }
            progress::save(&env.run, &mut progress)?;
            if !ok {
                stopped = true;
            }
        }
    }
    // End-verify leg 1: files_touched, before E2E fixtures and artifacts, without what the
    // engine's own suite runs leave.
    match env.tree.porcelain() {
        Ok(lines) => {
            let lines = env.evidence(lines);
            report.files_touched = Some(lines.len());
            let text: Vec<&str> = tasks.iter().map(|t| t.text.as_str()).collect();
            report.out_of_scope_damage = work_git::scope::damage(&lines, &text.join("\n"));
            for d in &report.out_of_scope_damage {
                env.run.emit(Event::ScopeDamage { path: json!(d.path) });
                report.concerns.push(d.describe());
            }
            report.files = lines;
        }
        Err(e) => {
            report.kind = Some("git".into());
            report.reason = format!("read the tree for end-verify: {e}");
            return end(env, report, extraction);
        }
    }
    if let Some(stop) = report.tasks.iter().find(|t| matches!(t.status, TaskStatus::Blocked | TaskStatus::NeedsContext))
    {
        let done = report.tasks.iter().filter(|t| t.status == TaskStatus::Done).count();
        report.status = if stop.status == TaskStatus::NeedsContext {
            Status::NeedsContext
        } else if done > 0 {
            Status::Partial
        } else {
            Status::Blocked
        };
        report.kind = stop.kind.clone();
        report.reason = stop.reason.clone().unwrap_or_default();
        report.route = match stop.kind.as_deref() {
            Some("spec-ambiguous") => Some("specify".into()),
            _ => None,
        };
        let mut detail = json!({
            "task_id": stop.id, "kind": stop.kind, "findings": stop.findings, "held": stop.held,
            "tasks_done": done,
        });
        if stop.kind.as_deref() == Some(StopReason::HeadMoved.as_str()) {
            detail["head"] =
                json!({"from": env.base_head, "to": env.tree.git().head_sha(), "breach": stop.findings.first()});
        }
        report.blocked_detail = Some(detail);
        return end(env, report, extraction);
    }
    if report.files_touched == Some(0) {
        report.kind = Some("no-op".into());
        report.reason = format!(
            "no file touched: every task reported done but nothing in the tree differs from the run's base by content ({} task(s))",
            report.tasks.len()
        );
        return end(env, report, extraction);
    }
    // E2E tasks go to the tester: read-only in the tree, its fixtures in a directory of the
    // engine's outside it.
    for (i, t) in tasks.iter().enumerate() {
        if t.e2e && !crate::e2e::run(env, &iter, t, i, &mut report).await {
            return end(env, report, extraction);
        }
    }
    if let Some(why) = env.git_tampered() {
        report.status = Status::Blocked;
        report.kind = Some(StopReason::GitTampered.into());
        report.reason = why.clone();
        report.blocked_detail = Some(json!({"kind": StopReason::GitTampered.as_str(), "reason": why}));
        return end(env, report, extraction);
    }
    if let Some(why) = env.check_tampered(&surface) {
        report.status = crate::report::Status::Blocked;
        report.kind = Some(StopReason::CheckTampered.into());
        report.reason = why.clone();
        report.blocked_detail = Some(json!({"kind": StopReason::CheckTampered.as_str(), "reason": why}));
        return end(env, report, extraction);
    }
    // End-verify leg 2: the engine's own suite run.
    let copy = env.copy();
    let suite = env.gate_on("suite", &env.settings.test_cmd, &copy).await;
    report.suite_green = Some(suite.green);
    let green = suite.green;
    report.suite = Some(suite.clone());
    if !green && env.no_suite() {
        report.kind = Some("no-suite".into());
        report.reason = suite.end.clone();
        report.blocked_detail = Some(json!({"suite": suite}));
        return end(env, report, extraction);
    }
    if !green {
        report.kind = Some("suite-red".into());
        report.route = Some("debug".into());
        report.reason = format!("the suite is red after the iteration ({}): route back to debug, RED first", suite.end);
        report.blocked_detail = Some(json!({"suite": suite}));
        return end(env, report, extraction);
    }
    if let Some(why) = env.suite_lost(&surface, &copy).await {
        report.kind = Some(StopReason::CheckTampered.into());
        report.reason = why.clone();
        report.blocked_detail = Some(json!({"kind": StopReason::CheckTampered.as_str(), "reason": why}));
        return end(env, report, extraction);
    }
    if let Some((why, detail)) =
        env.frozen_verdict(&surface, std::slice::from_ref(&env.settings.test_cmd), &mut report.concerns).await
    {
        report.kind = Some(StopReason::CheckTampered.into());
        report.reason = why;
        report.blocked_detail = Some(detail);
        return end(env, report, extraction);
    }
    report.status = Status::Done;
    report.reason = format!(
        "{} task(s) done, {} file(s) touched, suite green",
        report.tasks.len(),
        report.files_touched.unwrap_or(0)
    );
    end(env, report, extraction)
}

fn mark_rest(report: &mut EndReport, tasks: &[TaskSpec]) {
    for t in tasks.iter().skip(report.tasks.len()) {
        report.tasks.push(TaskOutcome::new(&t.id, &t.title));
    }
}

fn discard_verdict(report: &mut EndReport, prev: &Snapshot, next: &Snapshot, lost: Vec<String>) {
    let sha = prev.sha.clone().unwrap_or_default();
    let recovery: Vec<String> = lost.iter().map(|p| format!("git show {sha}:{p}")).collect();
    report.status = Status::Blocked;
    report.kind = Some(StopReason::SnapshotLoss.into());
    report.reason = format!(
        "uncommitted work discarded between task boundaries ({} → {}): {} modified at the first boundary and gone at \
the next; recover from snapshot {sha} (`{}`); adjudicate against the snapshot",
        prev.boundary,
        next.boundary,
        lost.join(", "),
        recovery.first().cloned().unwrap_or_default()
    );
    let outcomes: Vec<Value> =
        report.tasks.iter().map(|t| json!({"id": t.id, "status": t.status, "reason": t.reason})).collect();
    report.blocked_detail = Some(json!({
        "lost_paths": lost,
        "boundary": {"from": prev.boundary, "to": next.boundary},
        "snapshot_sha": sha,
        "recovery": recovery,
        "task_outcomes": outcomes,
    }));
}

fn lines_lost_verdict(report: &mut EndReport, prev: &Snapshot, next: &Snapshot, lost: Vec<LostLines>) {
    let sha = prev.sha.clone().unwrap_or_default();
    let recovery: Vec<String> = lost.iter().map(|l| format!("git show {sha}:{}", l.path)).collect();
    report.status = Status::Blocked;
    report.kind = Some(StopReason::SnapshotLoss.into());
    report.reason = format!(
        "lines an earlier task added are gone at the next boundary ({} → {}) and the task's text does not say so: {}; recover from snapshot {sha} (`{}`); adjudicate against the snapshot",
        prev.boundary,
        next.boundary,
        work_git::loss::describe_lines(&lost),
        recovery.first().cloned().unwrap_or_default()
    );
    let outcomes: Vec<Value> =
        report.tasks.iter().map(|t| json!({"id": t.id, "status": t.status, "reason": t.reason})).collect();
    report.blocked_detail = Some(json!({
        "lost_lines": lost,
        "lost_paths": lost.iter().map(|l| l.path.clone()).collect::<Vec<_>>(),
        "boundary": {"from": prev.boundary, "to": next.boundary},
        "snapshot_sha": sha,
        "recovery": recovery,
        "task_outcomes": outcomes,
    }));
}

/// A state write that fails stops the run ([`StateWriteError`]), and so does a git that failed
/// judging it ([`RunError::Git`]): no report is written.
fn end(env: &Env, mut report: EndReport, extraction: Counter) -> Result<EndReport, RunError> {
    env.git_failed()?;
    if let Some(refused) = env.budget_refused() {
        report.stop_for_budget(&refused, &env.run.budget.stop_line());
    }
    if report.files_touched.is_none()
        && let Ok(lines) = env.tree.porcelain()
    {
        let lines = env.evidence(lines);
        report.files_touched = Some(lines.len());
        report.files = lines;
    }
    fill_stats(env, &mut report, extraction);
    artifacts::finalize(&env.run, &mut report)?;
    // The last write of the run: its progress record is spent, its report kept.
    resume::finish(env, &report)?;
    env.run.emit(Event::IterationEnd { status: json!(report.status), reason: json!(report.reason) });
    Ok(report)
}
