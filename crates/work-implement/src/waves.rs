//! Parallel write waves (`work implement --concurrency N`, N > 1, a plan in the task format).
//!
//! - **Waves.** A task goes in the first wave after every task it depends on (`Depends on:`);
//!   two tasks whose `**Touches:**` globs may name the same file never share a wave (the later
//!   one in plan order moves on). Tasks of a wave run at most N at a time.
//! - **Worktrees.** Every task of a wave starts from the wave's base — the user's tree as it is
//!   when the wave starts, as a dangling commit — in a worktree of the engine's under the git
//!   directory (`<git-common-dir>/work/trees/<run>/<task>`, `<run>` the id of the run that
//!   started the wave); the task's implementer and reviewers run there (a write role
//!   confined to that worktree where the sandbox runs), its reviewers judge its own diff.
//! - **Results kept first.** A task that ends DONE has its worktree committed on the wave's base
//!   and written to `refs/work/<run>/<task>` before anything else happens to it; the commit
//!   is also recorded in the iteration's progress.
//! - **Merge-back** is the engine's, in plan order: each kept result is merged three-way into
//!   the user's tree (only the paths it changes are written; the index is never touched). A
//!   conflict leaves the task BLOCKED `merge-conflict` with its ref and worktree kept and
//!   named, and the command that shows its change; a task depending on a task not merged is
//!   not run.
//! - **Writes outside a worktree are caught.** The user's tree must not change while a wave
//!   runs (only the merge writes it), and a task's worktree must still hold its kept result
//!   when it is merged: either breach is BLOCKED `outside-worktree`, nothing of the wave merged
//!   after it, every kept result left on its ref. A ref that was deleted or moved is put back
//!   from the recorded commit (`ref.restored`, a concern) before its merge.
//! - **Resume.** A killed run's next run takes the record: a merged task is done; a kept,
//!   unmerged result is merged, never dispatched again; a task in flight is run again in its
//!   own worktree, on top of what it left there. A worktree is removed only once its result
//!   is merged.

use crate::env::{Env, RoleDispatch};
use crate::progress::{self, Progress};
use crate::report::{EndReport, TaskOutcome, TaskStatus};
use crate::state_write::RunError;
use crate::task_loop::{self, TaskSpec};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use work_git::wave::Merged;
use work_loop::plan::Plan;
use work_runtime::events::Event;
use work_runtime::run::RunContext;

/// Builds a task's roles for a run rooted in its worktree (the agents confined there).
pub type RolesFor = Arc<dyn Fn(&RunContext) -> Result<BTreeMap<String, RoleDispatch>, String> + Send + Sync>;

/// How a run runs waves.
#[derive(Clone)]
pub struct WaveSetup {
    /// Tasks of a wave run at once (more than 1: one runs the sequential path).
    pub concurrency: usize,
    /// A task's roles in its worktree.
    pub roles_for: RolesFor,
}

/// The waves of a run, as the iteration's progress records them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaveState {
    /// A wave is running or merging: the user's tree is the run's own.
    pub open: bool,
    /// Every task dispatched in a wave, in the order they were started.
    pub tasks: Vec<WaveTask>,
}

/// One task of a wave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaveTask {
    /// The task id.
    pub task_id: String,
    /// The wave's base commit.
    pub base: String,
    /// The task's worktree.
    pub worktree: String,
    /// The ref its result is kept on.
    pub reference: String,
    /// The kept result (a commit on `base`), once the task ended DONE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// How the task ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TaskOutcome>,
    /// Its result is in the user's tree.
    #[serde(default)]
    pub merged: bool,
}

impl WaveState {
    fn get(&self, id: &str) -> Option<&WaveTask> {
        self.tasks.iter().find(|t| t.task_id == id)
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut WaveTask> {
        self.tasks.iter_mut().find(|t| t.task_id == id)
    }
}

/// The waves of `tasks` (indices, plan order inside each): after their dependencies, and apart
/// from a task whose `**Touches:**` globs may overlap theirs.
pub fn layers(tasks: &[TaskSpec], plan: &Plan) -> Vec<Vec<usize>> {
    let index: BTreeMap<&str, usize> = tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let touches: Vec<Option<BTreeSet<String>>> =
        tasks.iter().map(|t| plan.task(&t.id).and_then(work_loop::touches::task_touches)).collect();
    let overlap = |a: usize, b: usize| match (&touches[a], &touches[b]) {
        (Some(x), Some(y)) => x.iter().any(|g| y.iter().any(|h| work_loop::touches::globs_overlap(g, h))),
        _ => false,
    };
    let mut level: Vec<usize> = vec![0; tasks.len()];
    let mut waves: Vec<Vec<usize>> = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let deps = plan.task(&t.id).map(|p| p.depends_on.clone()).unwrap_or_default();
        let mut l = deps.iter().filter_map(|d| index.get(d.as_str())).map(|&d| level[d] + 1).max().unwrap_or(0);
        while waves.get(l).is_some_and(|w| w.iter().any(|&j| overlap(i, j))) {
            l += 1;
        }
        level[i] = l;
        while waves.len() <= l {
            waves.push(Vec::new());
        }
        waves[l].push(i);
    }
    waves
}

/// Runs the selected tasks in waves; the outcomes go to `report.tasks` in plan order.
pub async fn run(
    env: &Env,
    setup: &WaveSetup,
    iter: &str,
    tasks: &[TaskSpec],
    plan: &Plan,
    progress: &mut Progress,
    report: &mut EndReport,
) -> Result<(), RunError> {
    let mut state = progress.waves.clone().unwrap_or_default();
    let mut outcomes: BTreeMap<String, TaskOutcome> = BTreeMap::new();
    let mut failed: BTreeSet<String> = BTreeSet::new();
    let mut stopped = false;
    for wave in layers(tasks, plan) {
        if stopped {
            break;
        }
        let mut fresh = Vec::new();
        let mut rerun = Vec::new();
        for &i in &wave {
            let t = &tasks[i];
            let deps = plan.task(&t.id).map(|p| p.depends_on.clone()).unwrap_or_default();
            if deps.iter().any(|d| failed.contains(d)) {
                failed.insert(t.id.clone());
                continue;
            }
            match state.get(&t.id) {
                Some(w) if w.merged || w.result.is_some() => {}
                Some(w) if w.outcome.is_some() => {
                    // Ended not DONE in an earlier run: as it ended.
                    failed.insert(t.id.clone());
                }
                Some(_) => rerun.push(i),
                None => fresh.push(i),
            }
        }
        env.run.emit(Event::WaveStart {
            tasks: json!(wave.iter().map(|&i| &tasks[i].id).collect::<Vec<_>>()),
            concurrency: json!(setup.concurrency),
        });
        if !fresh.is_empty() {
            let base = env.tree.git().wave_base(env.tree.exclusions()).map_err(RunError::Git)?;
            let dir = env.tree.git().wave_dir(&env.run.run_id).map_err(RunError::Git)?;
            for &i in &fresh {
                let id = &tasks[i].id;
                let reference = work_git::wave::result_ref(&env.run.run_id, id).unwrap_or_default();
                let worktree = dir.join(id).display().to_string();
                state.tasks.push(WaveTask {
                    task_id: id.clone(),
                    base: base.clone(),
                    worktree,
                    reference,
                    result: None,
                    outcome: None,
                    merged: false,
                });
            }
        }
        let run_now: Vec<usize> = rerun.iter().chain(&fresh).copied().collect();
        if !run_now.is_empty() {
            state.open = true;
            save(env, progress, &state)?;
            let before = env.tree.snapshot_tree().map_err(RunError::Git)?;
            let shared = std::sync::Mutex::new((std::mem::take(&mut state), &mut *progress));
            let saved = dispatch_wave(env, setup, iter, tasks, &run_now, &shared);
            let (taken, _) = shared.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
            state = taken;
            saved?;
            let after = env.tree.snapshot_tree().map_err(RunError::Git)?;
            if before != after {
                let paths = env.tree.git().tree_diff_names(&before, &after).unwrap_or_default();
                outside_user_tree(env, &mut state, &paths);
                stopped = true;
            }
        }
        if !stopped {
            stopped = merge_wave(env, iter, tasks, &wave, &mut state, &mut failed, report)?;
            save(env, progress, &state)?;
        }
        for &i in &wave {
            if let Some(o) = state.get(&tasks[i].id).and_then(|w| w.outcome.clone()) {
                if o.status != TaskStatus::Done {
                    failed.insert(o.id.clone());
                }
                outcomes.insert(o.id.clone(), o);
            }
        }
    }
    if !stopped {
        state.open = false;
    }
    save(env, progress, &state)?;
    for t in tasks {
        report.push_judged(outcomes.remove(&t.id).unwrap_or_else(|| TaskOutcome::new(&t.id, &t.title)));
    }
    Ok(())
}

fn save(env: &Env, progress: &mut Progress, state: &WaveState) -> Result<(), RunError> {
    progress.waves = Some(state.clone());
    progress.tree = env.tree.fingerprint().ok();
    progress::save(&env.run, progress)?;
    Ok(())
}

/// The record a wave's tasks share: each one's end is saved as it comes.
type Shared<'a> = std::sync::Mutex<(WaveState, &'a mut Progress)>;

/// Runs `which` (indices into `tasks`), at most `setup.concurrency` at once, each in its own
/// worktree; each task's outcome and, for a DONE task, its kept result is recorded (and
/// saved) as soon as it ends.
///
/// Each task is driven on a thread of its own through the runtime's handle: the engine's
/// git reads are synchronous (`Spawner::run_blocking`), and two tasks polled on one thread
/// would lose each other's wake-ups across them.
fn dispatch_wave(
    env: &Env,
    setup: &WaveSetup,
    iter: &str,
    tasks: &[TaskSpec],
    which: &[usize],
    shared: &Shared<'_>,
) -> Result<(), RunError> {
    let handle = tokio::runtime::Handle::current();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let lock = || shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let worker = || -> Result<(), RunError> {
        loop {
            let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let Some(&i) = which.get(n) else { return Ok(()) };
            let t = &tasks[i];
            let w = lock().0.get(&t.id).cloned();
            let (outcome, result) = match w {
                Some(w) => handle.block_on(one_task(env, setup, iter, t, &w)),
                None => (not_run(t, "the task has no worktree record"), None),
            };
            let mut guard = lock();
            let (state, progress) = &mut *guard;
            if let Some(m) = state.get_mut(&t.id) {
                m.result = result;
                m.outcome = Some(outcome);
            }
            save(env, progress, state)?;
        }
    };
    let threads = setup.concurrency.clamp(1, which.len().max(1));
    std::thread::scope(|scope| {
        let running: Vec<_> = (0..threads).map(|_| scope.spawn(worker)).collect();
        let mut first = Ok(());
        for r in running {
            let ended = r.join().unwrap_or_else(|_| {
                Err(RunError::Git(work_git::GitError::message(&["wave"], "a task's thread panicked")))
            });
            if first.is_ok() {
                first = ended;
            }
        }
        first
    })
}

fn not_run(t: &TaskSpec, why: &str) -> TaskOutcome {
    let mut o = TaskOutcome::new(&t.id, &t.title);
    o.status = TaskStatus::Blocked;
    o.kind = Some("worktree".into());
    o.reason = Some(format!("task {}: {why}", t.id));
    o
}

/// One task in its worktree: made (or taken as a killed run left it), the task run there, its
/// result kept on its ref when DONE.
async fn one_task(
    env: &Env,
    setup: &WaveSetup,
    iter: &str,
    t: &TaskSpec,
    w: &WaveTask,
) -> (TaskOutcome, Option<String>) {
    let dir = PathBuf::from(&w.worktree);
    if let Err(e) = env.tree.git().task_worktree(&dir, &w.base) {
        return (not_run(t, &format!("its worktree could not be made: {e}")), None);
    }
    let mut run = env.run.clone();
    run.root = dir.clone();
    let roles = match (setup.roles_for)(&run) {
        Ok(r) => r,
        Err(e) => return (not_run(t, &format!("its agents could not be set up in its worktree: {e}")), None),
    };
    let mut settings = env.settings.clone();
    settings.exclude = Vec::new();
    let tenv = Env::new(run, roles, settings);
    tenv.pin_byproducts(env.byproducts());
    env.run.emit(Event::WaveTask { task_id: json!(t.id), worktree: json!(w.worktree), base: json!(w.base) });
    let mut outcome = task_loop::run_task(&tenv, iter, t, None).await;
    if let Err(e) = tenv.git_failed() {
        return (not_run(t, &format!("git failed judging it: {e}")), None);
    }
    if let Some(why) = tenv.budget_refused() {
        env.note_budget_refused(&why);
    }
    if outcome.status != TaskStatus::Done {
        return (outcome, None);
    }
    let git = work_git::Git::new(&dir);
    match git.keep_result(&w.base, &w.reference, &format!("work: task {} of {iter}", t.id)) {
        Ok(commit) => {
            env.run.emit(Event::WaveKept {
                task_id: json!(t.id),
                reference: json!(w.reference),
                commit: json!(commit),
            });
            (outcome, Some(commit))
        }
        Err(e) => {
            outcome.status = TaskStatus::Blocked;
            outcome.kind = Some("worktree".into());
            outcome.reason = Some(format!("task {}: its result could not be kept on {}: {e}", t.id, w.reference));
            (outcome, None)
        }
    }
}

/// The command that shows a kept result's change.
pub fn show_command(w: &WaveTask) -> String {
    format!("git diff {} {}", short(&w.base), w.reference)
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Merges the wave's kept results into the user's tree in plan order; true when the run stops
/// (a write outside a worktree was caught).
fn merge_wave(
    env: &Env,
    _iter: &str,
    tasks: &[TaskSpec],
    wave: &[usize],
    state: &mut WaveState,
    failed: &mut BTreeSet<String>,
    report: &mut EndReport,
) -> Result<bool, RunError> {
    let exclude = env.tree.exclusions().to_vec();
    for &i in wave {
        let t = &tasks[i];
        let Some(w) = state.get(&t.id).cloned() else { continue };
        let Some(result) = w.result.clone() else { continue };
        if w.merged {
            continue;
        }
        // The ref is the result's only name outside the record: put back when it is gone.
        let git = env.tree.git();
        if git.ref_target(&w.reference).map_err(RunError::Git)?.as_deref() != Some(result.as_str()) {
            git.set_ref(&w.reference, &result).map_err(RunError::Git)?;
            env.run.emit(Event::RefRestored {
                task_id: json!(t.id),
                reference: json!(w.reference),
                commit: json!(result),
            });
            report.concerns.push(format!(
                "task {}: its ref {} was deleted or moved while the wave ran; put back at the kept result {}",
                t.id,
                w.reference,
                short(&result)
            ));
        }
        // The worktree must still hold what was kept: anything else was written into it
        // from outside after the task ended.
        let dir = Path::new(&w.worktree);
        if dir.exists() {
            let now = work_git::Git::new(dir).snapshot_tree(&[] as &[&str]).map_err(RunError::Git)?;
            let kept = git.run(&["rev-parse", &format!("{result}^{{tree}}")]).map_err(RunError::Git)?;
            if now != kept.trim() {
                let paths = git.tree_diff_names(kept.trim(), &now).unwrap_or_default();
                outside_worktree(env, state, &t.id, &paths);
                return Ok(true);
            }
        }
        match git.merge_result(&w.base, &result, &exclude).map_err(RunError::Git)? {
            Merged::Clean(paths) => {
                env.run.emit(Event::WaveMerged {
                    task_id: json!(t.id),
                    reference: json!(w.reference),
                    paths: json!(paths),
                });
                env.run.progress(&format!("task {}: merged ({} path(s))", t.id, paths.len()));
                if let Some(m) = state.get_mut(&t.id) {
                    m.merged = true;
                }
                if let Err(e) = git.drop_worktree(dir) {
                    report.concerns.push(format!("task {}: its merged worktree was not removed: {e}", t.id));
                }
            }
            Merged::Conflict(paths) => {
                let show = show_command(&w);
                env.run.emit(Event::WaveConflict {
                    task_id: json!(t.id),
                    reference: json!(w.reference),
                    paths: json!(paths),
                });
                let reason = format!(
                    "task {}: merge-conflict — its change conflicts with what was merged before it ({}); nothing of it was merged: its result is kept on {} (worktree {}); `{show}` shows it",
                    t.id,
                    paths.join(", "),
                    w.reference,
                    w.worktree
                );
                if let Some(m) = state.get_mut(&t.id)
                    && let Some(o) = m.outcome.as_mut()
                {
                    o.status = TaskStatus::Blocked;
                    o.kind = Some("merge-conflict".into());
                    o.reason = Some(reason);
                    o.findings =
                        vec![json!({"ref": w.reference, "worktree": w.worktree, "paths": paths, "show": show})];
                }
                failed.insert(t.id.clone());
            }
        }
    }
    Ok(false)
}

/// The user's tree changed while the wave ran: nothing of the wave is merged.
fn outside_user_tree(env: &Env, state: &mut WaveState, paths: &[String]) {
    env.run.emit(Event::WaveOutside { place: json!("the working tree"), paths: json!(paths) });
    let why = format!(
        "the working tree changed while the wave ran ({}): a task writes its own worktree only; nothing of the wave was merged",
        paths.join(", ")
    );
    hold_unmerged(state, &why, paths);
}

/// A finished task's worktree changed after its result was kept: the merge stops there.
fn outside_worktree(env: &Env, state: &mut WaveState, id: &str, paths: &[String]) {
    env.run.emit(Event::WaveOutside { place: json!(id), paths: json!(paths) });
    let worktree = state.get(id).map(|w| w.worktree.clone()).unwrap_or_default();
    let why = format!(
        "task {id}'s worktree {worktree} changed after its result was kept ({}): another task wrote outside its own worktree; nothing more of the wave was merged",
        paths.join(", ")
    );
    hold_unmerged(state, &why, paths);
}

/// Every kept, unmerged result: BLOCKED `outside-worktree` for `why`, its ref named.
fn hold_unmerged(state: &mut WaveState, why: &str, paths: &[String]) {
    for m in state.tasks.iter_mut().filter(|m| m.result.is_some() && !m.merged) {
        let show = show_command(m);
        if let Some(o) = m.outcome.as_mut() {
            o.status = TaskStatus::Blocked;
            o.kind = Some("outside-worktree".into());
            o.reason = Some(format!(
                "task {}: outside-worktree — {why}; its result is kept on {} (worktree {}); `{show}` shows it",
                o.id, m.reference, m.worktree
            ));
            o.findings = paths.iter().cloned().map(serde_json::Value::String).collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(plan: &Plan) -> Vec<TaskSpec> {
        plan.tasks()
            .iter()
            .map(|t| TaskSpec { id: t.id.clone(), title: t.title.clone(), text: t.body.clone(), e2e: false })
            .collect()
    }

    #[test]
    fn waves_follow_dependencies_and_keep_overlapping_touches_apart() {
        let plan = work_loop::plan::parse_plan(
            "## Task 1: a\n**Touches:** src/a.rs\n\n## Task 2: b\n**Touches:** src/a.rs\n\n## Task 3: c\n**Touches:** src/c.rs\n\n## Task 4: d\nDepends on: 1\n\n## Task 5: e\n",
        )
        .expect("plan");
        let tasks = specs(&plan);
        let ids = |w: &Vec<usize>| w.iter().map(|&i| tasks[i].id.clone()).collect::<Vec<_>>();
        let waves: Vec<Vec<String>> = layers(&tasks, &plan).iter().map(ids).collect();
        assert_eq!(waves, vec![vec!["1", "3", "5"], vec!["2", "4"]]);
    }

    #[test]
    fn tasks_without_touches_or_dependencies_share_one_wave() {
        let plan = work_loop::plan::parse_plan("## Task 1: a\n\n## Task 2: b\n\n## Task 3: c\n").expect("plan");
        assert_eq!(layers(&specs(&plan), &plan), vec![vec![0, 1, 2]]);
    }
}
