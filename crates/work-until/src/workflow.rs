//! The iteration loop (seed Step 3) with the stall rules, the human gate, git ground truth and
//! crash-safe bookkeeping.
//!
//! One iteration `n`, in this order:
//!
//! 1. `meta.md`: `status: running`, `in_progress: n`;
//! 2. compact the ledger (`master.md`, ≤ 150 lines) and write `handoff.md`;
//! 3. snapshot the whole working tree by content (a git tree through a temporary index, so no
//!    index flag or HEAD move changes what it sees), dispatch exactly one worker
//!    (`workspace-write`), snapshot again: the difference is what really changed;
//! 4. the dispatcher validated the answer against [`crate::report::report_schema`] (malformed ⇒
//!    one retry ⇒ dropped); the engine parses it ([`crate::report::validate_report`]);
//! 5. decide: `done` ⇒ verify ⇒ done, or next; `blocked` ⇒ stop; `continue` ⇒ stall check
//!    (the same blocker twice, or two reports in a row that changed nothing); a dispatch the
//!    budget refused ⇒ status `budget` (the iteration is not counted, and not a failure of the
//!    worker; a resume with a bigger budget redoes it). A `done` whose
//!    verify fails is a `continue` for the stall check: an always-`done` worker that changes
//!    nothing stalls like an empty `continue`. Outside a git work tree no change can be
//!    verified, so no report counts as progress there (claims are recorded as unverifiable);
//!    `n == max` ⇒ `max-reached`; human-gate ⇒ pause;
//! 6. **commit**: the iteration's record appended to the ledger log `ledger.jsonl` (see
//!    [`crate::store`]); it carries what the iteration leaves in the meta (status, stop
//!    reason, stall state);
//! 7. the files derived from it: the archive `reports/NN.md`, `report.md`, the merge (a
//!    snapshot `ledger.json` + `master.md` when the log has outgrown the last one or the
//!    iteration stopped the session), and `meta.md` last (`iteration_count: n`), so a meta
//!    that says stopped always has its ledger.
//!
//! The tree the iteration started from is recorded (`iteration-start.json`) before its
//! dispatch; a redo after a crash measures its change against that, not against what the
//! killed attempt left in the tree (which would read as "changed nothing").
//!
//! A kill before step 6 leaves no record `n`: the next start redoes iteration `n` with the
//! same number. A kill after it leaves the meta (and perhaps the archive) behind the log: the
//! next start rolls them forward from the record (a session from before the log, from its
//! archives) and, when the committed iteration
//! stopped the session, finishes with that stop without dispatching. Merges are idempotent.
//! So no iteration is lost or counted twice. The session directory itself appears whole (see
//! [`crate::session::init_session`]).

use crate::ledger::{
    IterationCommit, IterationRecord, LEDGER_LINE_LIMIT, Ledger, ReconRecord, VerifyResult, normalize_blocker,
    one_line, render_report, with_machine_block,
};
use crate::report::{ReportStatus, WorkerReport, recon_schema, report_schema, validate_recon, validate_report};
use crate::session::{Mode, SURFACE_FILE, Session, SessionError, SessionStatus, io_err};
use crate::store::LedgerStore;
use crate::templates;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use work_git::{Git, is_excluded};
use work_runtime::dispatch::{Access, DispatchOutcome, DispatchSpec, Dispatcher};
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;
use work_runtime::run::RunContext;

/// What the loop needs from the outside world.
pub struct LoopEnv<'a> {
    /// The run (clock, events, spawner, redacting writer).
    pub run: &'a RunContext,
    /// The worker's dispatcher.
    pub dispatcher: &'a Dispatcher,
    /// The worker's model pin.
    pub model: String,
    /// The worker's effort pin.
    pub effort: String,
    /// The verify command's timeout.
    pub verify_timeout: Duration,
}

/// How a run of the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopOutcome {
    /// The session's status.
    pub status: SessionStatus,
    /// Why it stopped.
    pub stopped_reason: String,
    /// Iterations merged in the session (all runs).
    pub iterations: u32,
    /// At most 25 lines for a person.
    pub summary: Vec<String>,
}

/// Why the loop could not run (exit 1; the session files stay consistent).
#[derive(Debug, thiserror::Error)]
pub enum UntilError {
    /// A session file could not be read or written.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A git the engine ran to judge the iteration failed (exit 128, killed): an error of the
    /// run, never a verdict about the worker.
    #[error(transparent)]
    Git(#[from] work_git::GitError),
}

/// The working tree at one instant, by content: every tracked and untracked (not ignored) file
/// outside the state directory, written as a git tree through a temporary index
/// ([`Git::snapshot_tree`]). Nothing of the real index is trusted, so an `assume-unchanged` or
/// `skip-worktree` flag cannot hide a change and a staged, unstaged or HEAD-only move (`git rm
/// --cached`, `git reset --soft`) cannot fake one.
fn snapshot(git: &Git, exclude: &[String]) -> Option<String> {
    git.snapshot_tree(exclude).ok()
}

/// What changed from the tree `a` to the tree `b`: the paths whose content (or mode) differs.
/// Commits in between count by what they left in the working tree, not by moving HEAD.
fn changed_between(git: &Git, a: &str, b: &str, exclude: &[String]) -> Option<Vec<String>> {
    let mut out = git.tree_diff_names(a, b).ok()?;
    out.retain(|p| !p.is_empty() && !is_excluded(p, exclude));
    out.sort();
    out.dedup();
    Some(out)
}

fn covers(claim: &str, path: &str) -> bool {
    let c = claim.trim_end_matches('/');
    path == c || path.starts_with(&format!("{c}/"))
}

fn tail_lines(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].iter().map(|l| one_line(l, 300)).collect()
}

/// What a commit appends.
enum Record<'a> {
    Iteration(&'a IterationRecord),
    Recon(&'a ReconRecord),
}

struct Ctx<'a, 'b> {
    env: &'a LoopEnv<'b>,
    git: Option<Git>,
    exclude: Vec<String>,
    /// What judges `done`, frozen before the session's first dispatch (see `check_surface`).
    surface: Option<work_git::surface::CheckSurface>,
    /// git's view of the tree when the session first ran (see `crate::seal`).
    seal: Option<work_git::integrity::Seal>,
    /// The ledger's snapshot and log (see [`crate::store`]).
    store: std::sync::Mutex<LedgerStore>,
    /// HEAD when this run started (its base): a worker's commits on top of it are its
    /// change; any other move of HEAD blocks (`work_git::head`).
    head: Option<work_git::head::HeadAt>,
}

/// The verify command's check surface (its check scripts, the configuration, the test tree),
/// frozen the first time the session runs with a verify command and kept in the session, so a
/// later run compares with the same freeze. The test runners the verify command runs report
/// their suite once here (the baseline a green verify is compared with), and the whole tree is
/// recorded as a git tree (what the rerun with the frozen checks restored writes back from).
async fn check_surface(
    env: &LoopEnv<'_>,
    session: &Session,
    git: Option<&Git>,
    exclude: &[String],
) -> Result<Option<work_git::surface::CheckSurface>, SessionError> {
    let Some(verify) = session.meta.verify.as_ref() else { return Ok(None) };
    let path = session.dir.join(SURFACE_FILE);
    // The kept freeze, refused when changed or removed since `work` wrote it: a freeze taken
    // again would start from the tree the worker left.
    if let Some(text) = work_runtime::fsx::read_kept(&path).map_err(|e| io_err("read", &path, e))? {
        return serde_json::from_str(&text).map(Some).map_err(|e| io_err("read", &path, e));
    }
    let mut s = work_git::surface::CheckSurface::freeze(
        &env.run.root,
        std::slice::from_ref(verify),
        work_git::surface::Named::CheckLike,
    );
    // A script only the verify command names is the check; one the goal names is the work.
    let work = format!("{}\n{}\n{}", session.meta.until, session.meta.goal, session.meta.instructions);
    s.pin_unnamed_by(&env.run.root, std::slice::from_ref(verify), &work);
    if let Some(g) = git {
        s.record_tree(g, exclude);
    }
    s.record_suites(&env.run.spawner, &env.run.root, std::slice::from_ref(verify), Some(env.verify_timeout)).await;
    for (part, collected, skipped) in s.suites() {
        env.run.emit(Event::UntilSuiteBaseline {
            command: json!(part),
            collected: json!(collected),
            skipped: json!(skipped),
        });
    }
    if let Err(e) = env.run.write_state(&path, &s) {
        env.run.emit(Event::UntilSurfaceUnsaved { error: e.to_string() });
    }
    Ok(Some(s))
}

impl Ctx<'_, '_> {
    fn now(&self) -> String {
        self.env.run.clock.now_rfc3339()
    }

    fn write(&self, path: &Path, text: &str) -> Result<(), SessionError> {
        self.env.run.write_text(path, text).map_err(|e| SessionError::Io {
            action: "write",
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    fn save_meta(&self, s: &mut Session) -> Result<(), SessionError> {
        let now = self.now();
        let run = self.env.run;
        // Every save records the session's spending (the run started from what earlier runs
        // spent), so the budget of a resumed session is cumulative.
        s.meta.spent = run.budget.spent();
        s.save_meta(now, &|p, t| run.write_text(p, t))
    }

    /// The stop for a dispatch the budget refused: status `budget`, nothing counted.
    fn budget_stop(&self, s: &Session, what: &str) -> (SessionStatus, String) {
        let tracker = &self.env.run.budget;
        let mut meta = s.meta.clone();
        meta.spent = tracker.spent();
        meta.status = SessionStatus::Budget;
        let next = crate::session::resume_command(&meta).unwrap_or_default();
        (
            SessionStatus::Budget,
            format!(
                "budget: {} over the session; {what} was not run and is not counted; continue with a bigger budget: `{next}`",
                tracker.stop_line()
            ),
        )
    }

    /// Compacts the ledger and writes it whole: the snapshot `ledger.json` (which starts a
    /// fresh log) and `master.md`, the ledger as a person reads it.
    fn save_ledger(&self, s: &Session, ledger: &mut Ledger) -> Result<(), SessionError> {
        ledger.compact(&s.meta, LEDGER_LINE_LIMIT);
        let path = s.dir.join(crate::store::SNAPSHOT_FILE);
        let io = |e: std::io::Error| SessionError::Io {
            action: "write",
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        match self.store.lock() {
            Ok(mut st) => st.snapshot(self.env.run, ledger).map_err(io)?,
            Err(_) => return Err(io(std::io::Error::other("the ledger store is poisoned"))),
        }
        self.write(&s.master_path(), &ledger.render(&s.meta))
    }

    /// The commit point of an iteration (or the recon): its record appended to the log.
    fn commit(&self, s: &Session, record: Record<'_>) -> Result<(), SessionError> {
        let path = s.dir.join(crate::store::LOG_FILE);
        let io = |e: std::io::Error| SessionError::Io {
            action: "append to",
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let mut st = self.store.lock().map_err(|_| io(std::io::Error::other("the ledger store is poisoned")))?;
        match record {
            Record::Iteration(r) => st.commit_iteration(self.env.run, r),
            Record::Recon(r) => st.commit_recon(self.env.run, r),
        }
        .map_err(io)
    }

    /// The log has grown as large as the snapshot.
    fn snapshot_due(&self) -> bool {
        self.store.lock().map(|st| st.due()).unwrap_or(true)
    }

    /// Where a verdict runs: the engine's copy of the agent's tree as it is now (its snapshot,
    /// the state directory left out: nothing the verify writes lands in the agent's tree), the
    /// tree itself outside a git repository. `Err` says why the copy could not be made.
    fn verdict_copy(&self) -> Result<Option<work_git::copy::EngineCopy>, String> {
        match &self.git {
            Some(g) => g
                .snapshot_copy(&self.exclude)
                .map(Some)
                .map_err(|e| format!("the engine's copy could not be made: {e}")),
            None => Ok(None),
        }
    }

    async fn verify(&self, cmd: &str, dir: Result<&Path, &str>) -> VerifyResult {
        let run = self.env.run;
        run.emit(Event::UntilVerifyStart { command: json!(cmd) });
        let dir = match dir {
            Ok(dir) => dir,
            Err(why) => {
                let v = VerifyResult { command: cmd.into(), passed: false, end: why.to_string(), tail: Vec::new() };
                run.emit(Event::UntilVerifyEnd { command: json!(cmd), passed: false, end: json!(v.end) });
                return v;
            }
        };
        let res = run.spawner.shell(cmd, dir, Some(self.env.verify_timeout)).await;
        let v = match res {
            Ok(out) => {
                let mut text = out.stdout_text();
                text.push('\n');
                text.push_str(&out.stderr_text());
                VerifyResult {
                    command: cmd.into(),
                    passed: out.success(),
                    end: out.describe_end(),
                    tail: tail_lines(&run.redactor.redact(&text), 15),
                }
            }
            Err(e) => VerifyResult { command: cmd.into(), passed: false, end: e.to_string(), tail: Vec::new() },
        };
        run.emit(Event::UntilVerifyEnd { command: json!(cmd), passed: v.passed, end: json!(v.end) });
        v
    }
}

/// Runs the session from `meta.iteration_count + 1` until a stop (see the module docs).
pub async fn drive(env: &LoopEnv<'_>, session: &mut Session) -> Result<LoopOutcome, UntilError> {
    let git = Git::new(&env.run.root);
    let git = if git.is_repo() { Some(git) } else { None };
    let exclude = env.run.state_exclude();
    let surface = check_surface(env, session, git.as_ref(), &exclude).await?;
    let seal = crate::seal::session_seal(env, session, git.as_ref())?;
    let (mut ledger, store, committed) = commit::load_ledger(session)?;
    let head = git.as_ref().map(Git::head_at);
    let cx = Ctx { env, git, exclude, surface, seal, store: std::sync::Mutex::new(store), head };
    let run = env.run;

    // Roll the meta and the ledger forward from the commit points (the ledger log's records;
    // the archives of a session written before the log), and note an interrupted iteration.
    let before_roll = session.meta.iteration_count;
    let rolled = commit::roll_meta_forward(session, &committed);
    // The spending of what rolled forward counts: the run started from the meta's.
    run.budget.carry_to(&session.meta.spent);
    for k in (before_roll + 1)..=session.meta.iteration_count {
        let Some(r) = committed.iteration(session, k) else { continue };
        let text = render_report(&session.meta, &r);
        if !session.archive_path(k).exists() {
            cx.write(&session.archive_path(k), &with_machine_block(text.clone(), &r))?;
        }
        if k == session.meta.iteration_count {
            cx.write(&session.report_path(), &text)?;
        }
    }
    if session.meta.recon_done
        && ledger.recon.is_empty()
        && let Some(r) = committed.recon(session)
    {
        ledger.merge_recon(&r);
    }
    for k in (ledger.merged_through + 1)..=session.meta.iteration_count {
        match committed.iteration(session, k) {
            Some(r) => ledger.merge(&r),
            None => ledger.incident(&format!("the archive of iteration {k:02} is unreadable; its merge is lost")),
        }
        ledger.merged_through = ledger.merged_through.max(k);
    }
    if let Some(k) = session.meta.in_progress
        && k > session.meta.iteration_count
    {
        ledger.incident(&format!("iteration {k:02} was interrupted before it was merged; it is redone as {k:02}"));
        run.emit(Event::UntilIterationRedo { iteration: json!(k) });
    }
    // A committed iteration that stopped the session, rolled forward: the run that made it
    // was killed before it could finish; this one finishes it, dispatching nothing.
    let rolled = rolled.or_else(|| {
        (session.meta.status == SessionStatus::Done)
            .then(|| (SessionStatus::Done, session.meta.stopped_reason.clone().unwrap_or_default()))
    });
    if let Some((status, reason)) = rolled {
        session.meta.runs.push(run.run_id.clone());
        return Ok(finish(&cx, session, &ledger, status, reason));
    }
    session.meta.status = SessionStatus::Running;
    session.meta.stopped_reason = None;
    session.meta.runs.push(run.run_id.clone());
    cx.save_ledger(session, &mut ledger)?;
    cx.save_meta(session)?;

    let mut last_verify: Option<VerifyResult> = if session.meta.iteration_count > 0 {
        committed.iteration(session, session.meta.iteration_count).and_then(|r| r.verify)
    } else {
        None
    };

    // Iteration 0: the read-only recon.
    if session.meta.recon && !session.meta.recon_done {
        if let Some(stop) = recon(&cx, session, &mut ledger).await? {
            return Ok(finish(&cx, session, &ledger, stop.0, stop.1));
        }
        if session.meta.mode == Mode::HumanGate {
            let reason = format!("human-gate: review the recon, then run `work until resume {}`", session.meta.id);
            return Ok(finish(&cx, session, &ledger, SessionStatus::Paused, reason));
        }
    }

    loop {
        let n = session.meta.iteration_count + 1;
        if n > session.meta.max {
            let reason = format!("max-reached: {} iterations without a verified done", session.meta.iteration_count);
            return Ok(finish(&cx, session, &ledger, SessionStatus::MaxReached, reason));
        }
        let redo = session.meta.in_progress == Some(n);
        session.meta.in_progress = Some(n);
        session.meta.status = SessionStatus::Running;
        ledger.compact(&session.meta, LEDGER_LINE_LIMIT);
        cx.save_meta(session)?;
        let handoff = templates::handoff(&session.meta, &ledger, n, last_verify.as_ref());
        cx.write(&session.handoff_path(), &handoff)?;
        run.emit(Event::UntilIterationStart { session: json!(session.meta.id), iteration: u64::from(n) });

        let before = commit::iteration_start(&cx, session, n, redo)?;
        let outcome = env
            .dispatcher
            .dispatch(DispatchSpec {
                role: "worker".into(),
                model: env.model.clone(),
                effort: env.effort.clone(),
                access: Access::WorkspaceWrite,
                prompt: templates::worker_prompt(&session.meta, &handoff, n),
                schema: Some(report_schema()),
                context: json!({
                    "iteration": n,
                    "max": session.meta.max,
                    "session_id": session.meta.id,
                    "session_dir": session.dir.display().to_string(),
                    "handoff_path": session.handoff_path().display().to_string(),
                    "until": session.meta.until,
                    "goal": session.meta.goal,
                    "verify": session.meta.verify,
                }),
                label: format!("iter-{n:02}"),
            })
            .await;
        let (dispatch_id, doc) = match outcome {
            DispatchOutcome::Ok { dispatch_id, output, .. } => (dispatch_id, output),
            DispatchOutcome::OverBudget { dispatch_id } => {
                // Not the worker's failure and not progress: the iteration is redone, with the
                // same number, by a resume with a bigger budget.
                let (status, reason) = cx.budget_stop(session, &format!("iteration {n:02}"));
                ledger.incident(&format!("iteration {n:02} not run: the budget is spent ({dispatch_id})"));
                return Ok(finish(&cx, session, &ledger, status, reason));
            }
            other => {
                let (status, what) = match &other {
                    DispatchOutcome::Dropped { .. } => (SessionStatus::InvalidReport, "invalid-report"),
                    _ => (SessionStatus::Failed, "failed"),
                };
                let why = other.failure_reason().unwrap_or_default();
                let reason = format!("{what}: iteration {n:02} worker {why}; not counted");
                ledger.incident(&format!("iteration {n:02} not counted: worker {why} ({})", other.dispatch_id()));
                cx.write(
                    &session.report_path(),
                    &format!("# Report — iteration {n:02} of `{}`\n\nNo valid report: {why}.\nThe iteration is not counted; `work until resume {}` redoes it.\n", session.meta.id, session.meta.id),
                )?;
                return Ok(finish(&cx, session, &ledger, status, reason));
            }
        };
        let report = match validate_report(&doc) {
            Ok(r) => r,
            Err(e) => {
                let reason = format!("invalid-report: iteration {n:02}: {e}; not counted");
                ledger.incident(&format!("iteration {n:02} not counted: {e} ({dispatch_id})"));
                return Ok(finish(&cx, session, &ledger, SessionStatus::InvalidReport, reason));
            }
        };
        let after = cx.git.as_ref().and_then(|g| snapshot(g, &cx.exclude));
        let changed = match (&cx.git, &before, &after) {
            (Some(g), Some(a), Some(b)) => changed_between(g, a, b, &cx.exclude),
            _ => None,
        };
        let git_ok = changed.is_some();
        let changed = changed.unwrap_or_default();
        let mut record = ground_truth(n, dispatch_id, report, git_ok, changed);

        // Decide.
        let (status, reason) = decide(&cx, session, &mut record).await?;
        if let Some(v) = &record.verify {
            last_verify = Some(v.clone());
        }
        let status = match status {
            Some(s) => Some((s, reason)),
            None if n >= session.meta.max => {
                Some((SessionStatus::MaxReached, format!("max-reached: {n} iterations without a verified done")))
            }
            None if session.meta.mode == Mode::HumanGate => Some((
                SessionStatus::Paused,
                format!("human-gate: review iteration {n:02}, then run `work until resume {}`", session.meta.id),
            )),
            None => None,
        };
        if let Some((s, _)) = &status
            && matches!(s, SessionStatus::MaxReached | SessionStatus::Paused)
            && record.decision == "continue"
        {
            record.decision = format!("continue; {}", s.as_str());
        }

        // Commit: the archive (with what the iteration leaves in the meta), then the files
        // derived from it — report.md, master.md, and meta.md last.
        match &status {
            Some((s, r)) => {
                session.meta.status = *s;
                session.meta.stopped_reason = Some(r.clone());
            }
            None => session.meta.status = SessionStatus::Active,
        }
        record.commit = Some(IterationCommit {
            status: session.meta.status,
            stopped_reason: session.meta.stopped_reason.clone(),
            empty_streak: session.meta.empty_streak,
            blockers_seen: session.meta.blockers_seen.clone(),
            spent: Some(run.budget.spent()),
        });
        cx.commit(session, Record::Iteration(&record))?;
        let text = render_report(&session.meta, &record);
        cx.write(&session.archive_path(n), &with_machine_block(text.clone(), &record))?;
        cx.write(&session.report_path(), &text)?;
        session.meta.iteration_count = n;
        session.meta.in_progress = None;
        ledger.merge(&record);
        if status.is_some() || cx.snapshot_due() {
            cx.save_ledger(session, &mut ledger)?;
        }
        cx.save_meta(session)?;
        run.progress(&format!(
            "Iteration {n}/{}: {} · {} · {}",
            session.meta.max,
            record.report.status.as_str(),
            if record.git { format!("{} changed", record.changed.len()) } else { "changes unknown".into() },
            record.decision
        ));
        run.emit(Event::UntilIterationEnd {
            session: json!(session.meta.id),
            iteration: u64::from(n),
            status: json!(record.report.status.as_str()),
            decision: json!(record.decision),
            changed: json!(record.changed),
            false_claims: json!(record.false_claims),
        });
        if let Some((s, r)) = status {
            return Ok(finish(&cx, session, &ledger, s, r));
        }
    }
}

fn ground_truth(n: u32, dispatch_id: String, report: WorkerReport, git: bool, changed: Vec<String>) -> IterationRecord {
    let false_claims: Vec<String> = if git {
        report.changes_claimed.iter().filter(|c| !changed.iter().any(|p| covers(c, p))).cloned().collect()
    } else {
        Vec::new()
    };
    let unclaimed: Vec<String> =
        changed.iter().filter(|p| !report.changes_claimed.iter().any(|c| covers(c, p))).cloned().collect();
    // Outside a git work tree nothing can be verified: claims are recorded as unverifiable
    // and never count as progress.
    let empty = !git || changed.is_empty();
    IterationRecord {
        iteration: n,
        dispatch_id,
        report,
        git,
        changed,
        false_claims,
        unclaimed,
        verify: None,
        decision: String::new(),
        empty,
        commit: None,
    }
}

/// Applies the exit rules to one record; returns the stopping status (if any) and its reason,
/// and updates the stall state in the meta (committed with the iteration).
async fn decide(
    cx: &Ctx<'_, '_>,
    session: &mut Session,
    record: &mut IterationRecord,
) -> Result<(Option<SessionStatus>, String), UntilError> {
    if let Some(why) = crate::seal::tampered(cx.env, cx.seal.as_ref(), cx.git.as_ref())? {
        record.decision = StopReason::GitTampered.to_string();
        return Ok((Some(SessionStatus::Blocked), why));
    }
    if let (Some(g), Some(base)) = (cx.git.as_ref(), cx.head.as_ref())
        && let Some(why) = g.judge_head(base)?.describe(base)
    {
        cx.env.run.emit(Event::HeadMoved {
            from: json!(base.sha),
            to: json!(g.head_sha()),
            breach: None,
            branch: json!(g.branch()),
        });
        record.decision = StopReason::HeadMoved.to_string();
        return Ok((Some(SessionStatus::Blocked), format!("head-moved: {why}")));
    }
    let meta = &mut session.meta;
    let rep = &record.report;
    let blocker_norm = rep.blocker.as_deref().map(normalize_blocker).filter(|b| !b.is_empty());
    let repeated = blocker_norm.as_ref().is_some_and(|b| meta.blockers_seen.contains(b));
    if let Some(b) = &blocker_norm
        && !repeated
    {
        meta.blockers_seen.push(b.clone());
    }
    // A `done` whose verify fails is a `continue` for the stall rules.
    let mut stall_check = rep.status == ReportStatus::Continue;
    let (status, reason, decision) = match rep.status {
        ReportStatus::Done => match meta.verify.clone() {
            Some(cmd)
                if let Some(changes) = cx
                    .surface
                    .as_ref()
                    .map(|s| s.changes(&cx.env.run.root, work_git::surface::TestEdits::Add))
                    .filter(|c| !c.is_empty()) =>
            {
                let what = work_git::surface::describe(&changes);
                cx.env.run.emit(Event::UntilCheckTampered { changes: json!(what) });
                (
                    Some(SessionStatus::Blocked),
                    format!(
                        "check-tampered: the worker changed what judges it ({what}); `{cmd}` is only as honest as the files it runs: restore them (git diff shows the change)"
                    ),
                    StopReason::CheckTampered.to_string(),
                )
            }
            Some(cmd) => {
                let copy = cx.verdict_copy();
                let dir = match &copy {
                    Ok(Some(c)) => Ok(c.path()),
                    Ok(None) => Ok(cx.env.run.root.as_path()),
                    Err(why) => Err(why.as_str()),
                };
                let v = cx.verify(&cmd, dir).await;
                let passed = v.passed;
                let end = v.end.clone();
                record.verify = Some(v);
                let lost = match (&cx.surface, passed, dir) {
                    (Some(s), true, Ok(dir)) => {
                        s.suite_changes(&cx.env.run.spawner, dir, Some(cx.env.verify_timeout)).await
                    }
                    _ => Vec::new(),
                };
                drop(copy);
                if passed && !lost.is_empty() {
                    let what = work_git::surface::describe(&lost);
                    cx.env.run.emit(Event::UntilCheckTampered { changes: json!(what) });
                    (
                        Some(SessionStatus::Blocked),
                        format!(
                            "check-tampered: `{cmd}` exited 0 but its suite lost tests since the session started ({what}); adding tests is the only change allowed: restore them (git diff shows the change)"
                        ),
                        StopReason::CheckTampered.to_string(),
                    )
                } else if passed && let Some(why) = cx.restored_verdict(&cmd).await {
                    cx.env.run.emit(Event::UntilCheckTampered { changes: json!(why) });
                    (Some(SessionStatus::Blocked), why, StopReason::CheckTampered.to_string())
                } else if passed {
                    meta.empty_streak = 0;
                    (Some(SessionStatus::Done), format!("done: `{cmd}` exited 0"), "done (verified)".to_string())
                } else {
                    stall_check = true;
                    (None, String::new(), format!("verify-failed ({end})"))
                }
            }
            None => {
                meta.empty_streak = 0;
                (
                    Some(SessionStatus::Paused),
                    format!(
                        "unverified-done: the worker reports done and there is no --verify command; check `{}` yourself, or go on with a check: `work until resume {} --verify CMD`",
                        one_line(&meta.until, 120),
                        meta.id
                    ),
                    "done (unverified; paused for a person)".to_string(),
                )
            }
        },
        ReportStatus::Blocked => {
            let b = rep.blocker.clone().unwrap_or_default();
            (Some(SessionStatus::Blocked), format!("blocked: {}", one_line(&b, 200)), "blocked".to_string())
        }
        ReportStatus::Continue => (None, String::new(), "continue".to_string()),
    };
    let (status, reason, decision) = if stall_check {
        if record.empty {
            meta.empty_streak += 1;
        } else {
            meta.empty_streak = 0;
        }
        let stalled = |why: &str| {
            if decision == "continue" { format!("stalled ({why})") } else { format!("{decision}; stalled ({why})") }
        };
        let what =
            if record.git { "changed nothing in the tree" } else { "made no verifiable change (not a git work tree)" };
        if repeated {
            let b = rep.blocker.clone().unwrap_or_default();
            (
                Some(SessionStatus::Blocked),
                format!("stalled: the same blocker twice: {}", one_line(&b, 200)),
                stalled("same blocker twice"),
            )
        } else if meta.empty_streak >= 2 {
            (
                Some(SessionStatus::Blocked),
                format!("stalled: two reports in a row (continue, or done that did not verify) {what}"),
                stalled("two empty reports"),
            )
        } else {
            (status, reason, decision)
        }
    } else {
        (status, reason, decision)
    };
    let decision = if status.is_none() && rep.status == ReportStatus::Done {
        format!("{decision}; next iteration")
    } else {
        decision
    };
    record.decision = decision;
    Ok((status, reason))
}

async fn recon(
    cx: &Ctx<'_, '_>,
    session: &mut Session,
    ledger: &mut Ledger,
) -> Result<Option<(SessionStatus, String)>, UntilError> {
    let env = cx.env;
    session.meta.in_progress = Some(0);
    cx.save_meta(session)?;
    let outcome = env
        .dispatcher
        .dispatch(DispatchSpec {
            role: "worker".into(),
            model: env.model.clone(),
            effort: env.effort.clone(),
            access: Access::ReadOnly,
            prompt: templates::recon_prompt(&session.meta),
            schema: Some(recon_schema()),
            context: json!({"iteration": 0, "recon": true, "session_id": session.meta.id,
                            "until": session.meta.until, "goal": session.meta.goal}),
            label: "recon".into(),
        })
        .await;
    let (dispatch_id, doc) = match outcome {
        DispatchOutcome::Ok { dispatch_id, output, .. } => (dispatch_id, output),
        DispatchOutcome::OverBudget { dispatch_id } => {
            ledger.incident(&format!("recon not run: the budget is spent ({dispatch_id})"));
            return Ok(Some(cx.budget_stop(session, "the recon (iteration 00)")));
        }
        other => {
            let status = if matches!(other, DispatchOutcome::Dropped { .. }) {
                SessionStatus::InvalidReport
            } else {
                SessionStatus::Failed
            };
            let why = other.failure_reason().unwrap_or_default();
            ledger.incident(&format!("recon not merged: {why} ({})", other.dispatch_id()));
            return Ok(Some((status, format!("{}: recon {why}", status.as_str()))));
        }
    };
    let recon = match validate_recon(&doc) {
        Ok(r) => r,
        Err(e) => return Ok(Some((SessionStatus::InvalidReport, format!("invalid-report: recon: {e}")))),
    };
    let record = ReconRecord { dispatch_id, spent: Some(cx.env.run.budget.spent()), recon };
    let text = format!("# Recon — iteration 00 of `{}`\n\n{}\n", session.meta.id, record.recon.summary.trim());
    cx.commit(session, Record::Recon(&record))?;
    cx.write(&session.archive_path(0), &with_machine_block(text, &record))?;
    session.meta.recon_done = true;
    session.meta.in_progress = None;
    ledger.merge_recon(&record);
    cx.save_ledger(session, ledger)?;
    cx.save_meta(session)?;
    env.run.progress("Iteration 0 (recon): map merged");
    Ok(None)
}

fn finish(
    cx: &Ctx<'_, '_>,
    session: &mut Session,
    ledger: &Ledger,
    status: SessionStatus,
    reason: String,
) -> LoopOutcome {
    session.meta.status = status;
    session.meta.stopped_reason = Some(reason.clone());
    session.meta.in_progress = None;
    // Best effort: the state that matters was committed before; a failure here is reported
    // through the event log and the next start rolls forward. The ledger first: `meta.md` is
    // always the last write, so a meta that says stopped has its ledger.
    let mut l = ledger.clone();
    if let Err(e) = cx.save_ledger(session, &mut l) {
        cx.env.run.emit(Event::UntilError { error: e.to_string() });
    }
    if let Err(e) = cx.save_meta(session) {
        cx.env.run.emit(Event::UntilError { error: e.to_string() });
    }
    let summary = summary_lines(session, &l);
    cx.env.run.emit(Event::UntilStop {
        session: json!(session.meta.id),
        status: json!(status.as_str()),
        reason: json!(reason),
        iterations: json!(session.meta.iteration_count),
    });
    LoopOutcome { status, stopped_reason: reason, iterations: session.meta.iteration_count, summary }
}

/// The finish summary: at most 25 lines, with the session id and path.
pub fn summary_lines(session: &Session, ledger: &Ledger) -> Vec<String> {
    let m = &session.meta;
    let mut v = vec![
        format!("work until: {} after {} iteration(s) (max {})", m.status.as_str(), m.iteration_count, m.max),
        format!("session: {} ({})", m.id, session.dir.display()),
        format!("until: {}", one_line(&m.until, 160)),
        format!("goal: {}", one_line(&m.goal, 160)),
        format!("verify: {}", m.verify.as_deref().unwrap_or("(none)")),
    ];
    if let Some(r) = &m.stopped_reason {
        v.push(format!("reason: {}", one_line(r, 200)));
    }
    let mut iters: Vec<String> = ledger
        .iterations
        .iter()
        .map(|e| {
            let first = e.body.iter().find(|b| !b.trim().is_empty()).map(|b| one_line(b, 100)).unwrap_or_default();
            format!("  {:02} {} — {first}", e.n, e.heading)
        })
        .collect();
    let room = 12usize;
    if iters.len() > room {
        let hidden = iters.len() - room;
        iters.drain(..hidden);
        iters.insert(0, format!("  … {hidden} earlier iteration(s) in the ledger"));
    }
    if !iters.is_empty() {
        v.push("iterations:".into());
        v.extend(iters);
    }
    for b in ledger.open_blockers.iter().take(2) {
        v.push(format!("open blocker: {}", one_line(&b.text, 160)));
    }
    let lies = ledger.ground_truth.iter().filter(|i| i.text.contains("but git shows no change")).count();
    if lies > 0 {
        v.push(format!("ground truth: {lies} claimed change(s) not in the tree (see master.md)"));
    }
    if let Some(cmd) = crate::session::resume_command(m) {
        v.push(format!("continue later: {cmd}"));
    }
    v.truncate(25);
    v
}

mod commit;
mod restored;

#[cfg(test)]
mod tests;
