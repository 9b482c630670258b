//! Mini mode: one fix for a handed-off RED test. The engine re-runs the RED test by name
//! before (it must be red) and after (it must be green), re-runs the suite, and requires a
//! dirty tree; a still-red test, a regression or a clean tree is BLOCKED, route debug (#12).
//!
//! "Dirty" and `files_touched` are measured against the tree as the engine's own RED run
//! left it (a whole-tree snapshot taken just before the dispatch, compared by hashing, never
//! through the index), so test
//! byproducts (`.pytest_cache`, `__pycache__`, coverage files) never pass for a fix: a
//! do-nothing implementer ends `no-op`. HEAD must not move (BLOCKED `head-moved`).

use crate::answers;
use crate::artifacts;
use crate::carrier::Mode;
use crate::env::{Counter, Env};
use crate::prompts;
use crate::report::{EndReport, Status, TaskOutcome, TaskStatus};
use crate::standard::fill_stats;
use crate::state_write::RunError;
use crate::tree::Preflight;
use serde_json::json;
use work_runtime::dispatch::Access;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

/// What a mini run is asked.
#[derive(Debug, Clone)]
pub struct MiniInput {
    /// The iteration id.
    pub iter_id: String,
    /// The RED test, by name.
    pub red_test: String,
    /// The debugger's cause summary.
    pub cause: String,
    /// The preflight (already checked clean).
    pub preflight: Preflight,
}

fn blocked(report: &mut EndReport, kind: &str, reason: String) {
    report.status = Status::Blocked;
    report.kind = Some(kind.into());
    report.route = Some("debug".into());
    report.reason = reason;
}

/// Runs mini mode.
pub async fn run_mini(env: &Env, input: MiniInput) -> Result<EndReport, RunError> {
    let mut report = EndReport::new(Status::Blocked, Mode::Mini, Some(input.iter_id.clone()), String::new());
    report.preflight = Some(input.preflight.clone());
    let red_cmd = env.red_test_command(&input.red_test);
    // The engine's own RED run first: what it leaves is residue, and the check surface (and
    // the suite report's baseline run) is recorded after it.
    let before = env.learn_byproducts("red-before", &red_cmd).await;
    let surface = env.freeze_checks(std::slice::from_ref(&red_cmd), &input.cause).await;
    let mut detail = json!({"red_test": input.red_test, "red_command": red_cmd, "red_before": before});
    if before.green {
        blocked(
            &mut report,
            "red-test-not-red",
            format!("the RED test `{}` already passes before any fix: nothing to reproduce", input.red_test),
        );
        report.detail = Some(detail);
        return end(env, report);
    }
    let mut task = TaskOutcome::new("mini", &format!("make `{}` pass", input.red_test));
    // What the engine's own RED run left in the tree (caches, logs) is not the fix: the tree
    // is measured against this baseline, taken after that run and before the dispatch.
    let baseline = match env.tree.snapshot_tree() {
        Ok(b) => b,
        Err(e) => {
            blocked(&mut report, "git", format!("read the tree: {e}"));
            report.detail = Some(detail);
            return end(env, report);
        }
    };
    let left = env.tree.base_tree().and_then(|b| env.tree.git().tree_diff_names(&b, &baseline)).unwrap_or_default();
    if !left.is_empty() {
        detail["red_run_left"] = json!(left);
    }
    let fp0 = env.tree.fingerprint().ok();
    let r = env
        .ask(
            &mut task.spent,
            "implementer",
            Access::WorkspaceWrite,
            prompts::mini(&input.iter_id, &input.red_test, &input.cause),
            prompts::implementer_schema(),
            json!({"task_id": "mini", "iter_id": input.iter_id, "phase": "mini", "red_test": input.red_test}),
            "mini",
        )
        .await;
    task.tree_changed = fp0.is_some() && env.tree.fingerprint().ok() != fp0;
    if let Some(m) = env.head_moved() {
        let reason = format!("during the fix, {}", m.describe());
        report.tasks.push(task.blocked(StopReason::HeadMoved.as_str(), reason.clone()));
        blocked(&mut report, StopReason::HeadMoved.as_str(), reason);
        report.route = None;
        detail["head"] = json!(m);
        report.detail = Some(detail);
        return end(env, report);
    }
    let doc = match r.map(|d| answers::implementer(&d)) {
        Ok(d) => d,
        Err(reason) => {
            task = task.blocked(env.failed_kind(), reason.clone());
            report.tasks.push(task);
            blocked(&mut report, env.failed_kind(), reason);
            report.detail = Some(detail);
            return end(env, report);
        }
    };
    task.applied_changes_claimed = doc["applied_changes"].as_bool();
    let status = doc["status"].as_str().unwrap_or("");
    let why = doc["reason"].as_str().or(doc["summary"].as_str()).unwrap_or("no reason given").to_string();
    if status == "BLOCKED" || status == "NEEDS_CONTEXT" {
        task.status = if status == "BLOCKED" { TaskStatus::Blocked } else { TaskStatus::NeedsContext };
        task.reason = Some(why.clone());
        report.tasks.push(task);
        blocked(&mut report, "implementer-blocked", format!("the implementer reported {status}: {why}"));
        if status == "NEEDS_CONTEXT" {
            report.status = Status::NeedsContext;
            report.kind = Some("needs-context".into());
        }
        report.detail = Some(detail);
        return end(env, report);
    }
    // The task is DONE only when the gates below say so (see `end`).
    report.tasks.push(task);
    match env.tree.changes_from(&baseline) {
        Ok(lines) => {
            let lines = env.evidence(lines);
            report.files_touched = Some(lines.len());
            report.files = lines;
        }
        Err(e) => {
            blocked(&mut report, "git", format!("read the tree: {e}"));
            return end(env, report);
        }
    }
    if report.files_touched == Some(0) {
        blocked(
            &mut report,
            "no-op",
            format!("the tree is clean after the fix: nothing was changed (the implementer said {status})"),
        );
        report.detail = Some(detail);
        return end(env, report);
    }
    if let Some(why) = env.git_tampered() {
        report.status = Status::Blocked;
        report.kind = Some(StopReason::GitTampered.into());
        report.reason = why.clone();
        report.blocked_detail = Some(json!({"kind": StopReason::GitTampered.as_str(), "reason": why}));
        return end(env, report);
    }
    if let Some(why) = env.check_tampered(&surface) {
        report.status = crate::report::Status::Blocked;
        report.kind = Some(StopReason::CheckTampered.into());
        report.reason = why.clone();
        report.blocked_detail = Some(json!({"kind": StopReason::CheckTampered.as_str(), "reason": why}));
        return end(env, report);
    }
    let copy = env.copy();
    let after = env.gate_on("red-after", &red_cmd, &copy).await;
    detail["red_after"] = json!(after);
    if !after.green {
        blocked(
            &mut report,
            "still-red",
            format!("the RED test `{}` still fails after the fix ({})", input.red_test, after.end),
        );
        report.detail = Some(detail);
        return end(env, report);
    }
    let suite = env.gate_on("suite", &env.settings.test_cmd, &copy).await;
    report.suite_green = Some(suite.green);
    report.suite = Some(suite.clone());
    if !suite.green {
        blocked(
            &mut report,
            "regression",
            format!("the RED test passes but the suite is red ({}): a regression", suite.end),
        );
        report.blocked_detail = Some(json!({"suite": suite}));
        report.detail = Some(detail);
        return end(env, report);
    }
    if let Some(why) = env.suite_lost(&surface, &copy).await {
        blocked(&mut report, StopReason::CheckTampered.as_str(), why);
        report.route = None;
        report.detail = Some(detail);
        return end(env, report);
    }
    let cmds = [red_cmd.clone(), env.settings.test_cmd.clone()];
    if let Some((why, d)) = env.frozen_verdict(&surface, &cmds, &mut report.concerns).await {
        blocked(&mut report, StopReason::CheckTampered.as_str(), why);
        report.route = None;
        report.blocked_detail = Some(d);
        report.detail = Some(detail);
        return end(env, report);
    }
    report.status = Status::Done;
    report.reason =
        format!("`{}` is green, suite green, {} file(s) touched", input.red_test, report.files_touched.unwrap_or(0));
    report.detail = Some(detail);
    end(env, report)
}

fn end(env: &Env, mut report: EndReport) -> Result<EndReport, RunError> {
    env.git_failed()?;
    if let Some(refused) = env.budget_refused() {
        report.stop_for_budget(&refused, &env.run.budget.stop_line());
    }
    if report.files_touched.is_none()
        && let Ok(lines) = env.tree.porcelain()
    {
        report.files_touched = Some(lines.len());
        report.files = lines;
    }
    // The one task follows the run: DONE only when every gate passed.
    let (status, kind, reason) = (report.status, report.kind.clone(), report.reason.clone());
    for t in report.tasks.iter_mut().filter(|t| t.status == TaskStatus::NotAttempted) {
        if status == Status::Done {
            t.status = TaskStatus::Done;
        } else {
            t.status = TaskStatus::Blocked;
            t.kind = kind.clone();
            t.reason = Some(reason.clone());
        }
    }
    if report.status != Status::Done && report.blocked_detail.is_none() {
        report.blocked_detail = report.detail.clone();
    }
    report.concerns.extend(report.tasks.iter().flat_map(|t| t.concerns.clone()));
    fill_stats(env, &mut report, Counter::default());
    artifacts::finalize(&env.run, &mut report)?;
    env.run.emit(Event::IterationEnd { status: json!(report.status), reason: json!(report.reason) });
    Ok(report)
}
