//! What makes an iteration crash-exact, shared by standard mode and `work edit`: the progress
//! record ([`crate::progress`]) taken over from a killed run or started, the ground truth frozen
//! once per iteration, the spending carried over, and the end report kept as the run's last
//! write.
//!
//! - A killed run leaves an unfinished record: the next run of the same iteration continues it
//!   (its DONE tasks are never dispatched again, the task in progress is redone on top of its
//!   own edits) and starts from what the record says the iteration had spent, so its report's
//!   `stats` and its budget count the whole iteration as the uninterrupted run would.
//! - The record of a run that ended holds its end report ([`finish`]). A rerun of the same
//!   request over the tree that run left — HEAD unchanged, the tree dirty and exactly as it
//!   was — prints that report again and dispatches nothing ([`finished_report`]): a run killed
//!   after its last write (before its report reached the terminal) ends as it would have.
//!   Any other rerun starts the iteration afresh, with the preflight's usual dirty check.

use crate::env::Env;
use crate::progress::{self, Progress};
use crate::report::EndReport;
use crate::state_write::StateWriteError;
use crate::tree::{Preflight, Tree};
use serde_json::json;
use std::path::Path;
use work_runtime::budget::Spent;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

/// The digest of what an iteration is asked (the parts that decide its outcome, in order):
/// a finished record answers a rerun only for the same request.
pub fn request_digest(parts: &[&str]) -> String {
    work_runtime::fsx::sha256_hex(json!(parts).to_string().as_bytes())
}

/// The iteration's progress record: the one a killed run left (its preflight shown in the
/// report, its spending carried over), else a fresh one for `request`, written before the first
/// dispatch.
pub fn resume_progress(
    env: &Env,
    iter: &str,
    request: &str,
    report: &mut EndReport,
) -> Result<Progress, StateWriteError> {
    if let Some(p) = progress::load(&env.run.state_dir, iter).ok().flatten()
        && p.head == env.base_head
    {
        env.run.emit(Event::IterationResumed { ended: p.ended.len() as u64, in_progress: json!(p.in_progress) });
        report.preflight = Some(p.preflight.clone());
        env.run.budget.carry_to(&plus(&p.spent, &env.run.budget.spent()));
        return Ok(p);
    }
    let pf = report.preflight.clone().unwrap_or_else(|| Preflight {
        clean: true,
        head_sha: env.base_head.clone(),
        branch: None,
        dirty_paths: Vec::new(),
        excluded_paths: Vec::new(),
    });
    let mut p = Progress::new(iter, env.base_head.clone(), pf, env.tree.fingerprint().ok());
    p.request = Some(request.to_string());
    progress::save(&env.run, &mut p)?;
    Ok(p)
}

/// What the runs before this one spent plus what this one has spent so far (a free-form
/// plan's extraction, made again by every run).
fn plus(a: &Spent, b: &Spent) -> Spent {
    let mut s = *a;
    s.dispatches += b.dispatches;
    s.usage.add(&b.usage);
    s.unpriced += b.unpriced;
    s
}

/// Freezes what judges the iteration before its first dispatch, or takes what its first run
/// froze: the check surface, git's sealed view, and the residue of a baseline suite run by the
/// engine (never evidence). `work` is what the iteration is asked to change (the plan, an
/// edit's description and sites). One progress write for all three, and for what the caller
/// changed in the record (`changed`).
pub async fn freeze_ground_truth(
    env: &Env,
    progress: &mut Progress,
    work: &str,
    changed: bool,
) -> Result<(), StateWriteError> {
    let mut fresh = changed;
    match progress.git_seal.clone() {
        Some(seal) => env.pin_seal(seal),
        None => {
            // A `.gitignore` the plan names is the work.
            progress.git_seal = env.seal().map(|mut seal| {
                seal.allow_named_by(work);
                seal
            });
            if let Some(seal) = progress.git_seal.clone() {
                env.pin_seal(seal);
            }
            fresh = true;
        }
    }
    match progress.byproducts.clone() {
        Some(b) => env.pin_byproducts(b),
        None if !env.no_suite() => {
            // The suite once, by the engine, before any dispatch: what it leaves is residue,
            // and its runner's report (when it gives one) is the suite report's baseline.
            env.baseline_suite("baseline").await;
            progress.byproducts = Some(env.byproducts());
            progress.tree = env.tree.fingerprint().ok();
            fresh = true;
        }
        None => {}
    }
    // After the baseline run, which gave the suite report's baseline when it could (a
    // compound suite command's runners report in a run of their own).
    if progress.check_surface.is_none() {
        progress.check_surface = Some(env.freeze_checks(&[], work).await);
        fresh = true;
    }
    if fresh {
        progress::save(&env.run, progress)?;
    }
    Ok(())
}

/// The run's last write: the iteration's record marked finished, with the end report and the
/// tree the run leaves (a later run of the iteration starts afresh, or — the same request
/// over this very tree — prints `report` again). A run stopped by its budget is not finished:
/// its record keeps the tree it leaves, and the same command (with a larger budget) goes on
/// from the first task not done.
pub fn finish(env: &Env, report: &EndReport) -> Result<(), StateWriteError> {
    if let Some(iter) = report.iter_id.as_deref()
        && let Some(mut p) = progress::load(&env.run.state_dir, iter).ok().flatten()
    {
        let budget_stop = report.kind.as_deref() == Some(StopReason::Budget.as_str());
        p.finished = !budget_stop;
        p.report = (!budget_stop).then(|| report.to_json());
        p.tree = env.tree.fingerprint().ok();
        progress::save(&env.run, &mut p)?;
    }
    Ok(())
}

/// The end report of the finished run of `iter_id` when this rerun is that run over again: the
/// same `request`, HEAD where it was, and the tree (without `exclude`) dirty and exactly as the
/// run left it. An error is a record changed outside a run of work.
pub fn finished_report(
    root: &Path,
    state_dir: &Path,
    iter_id: &str,
    request: &str,
    pf: &Preflight,
) -> std::io::Result<Option<EndReport>> {
    let Some(p) = progress::read(state_dir, iter_id)?.filter(|p| p.finished) else { return Ok(None) };
    if pf.clean || p.head != pf.head_sha || p.request.as_deref() != Some(request) || p.tree.is_none() {
        return Ok(None);
    }
    let tree = Tree::new(root, state_dir).excluding(&pf.excluded_paths);
    if tree.fingerprint().ok() != p.tree {
        return Ok(None);
    }
    Ok(p.report.and_then(|r| serde_json::from_value(r).ok()))
}
