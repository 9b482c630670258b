//! The goal runner: RED before any implementation dispatch, then attempts until every
//! criterion is observed GREEN or a stop rule holds.
//!
//! ```text
//! notepad header (new goal) | resume entry
//! RED: every criterion without a RED for its current definition runs now
//!      change criterion PASSING  ⇒ stop BLOCKED already-green (no failing-first proof)
//!      pin criterion FAILING     ⇒ stop BLOCKED pin-red (a pin holds on unchanged code)
//! check: criteria whose RED is older than this run are observed again
//! loop:
//!   red = criteria whose latest observation fails
//!   none red ⇒ final full pass (`green`) ⇒ every PASS and no failed receipt still holding ⇒ DONE
//!                                          (else BLOCKED leftover-state)
//!   targets = LIGHT: every red criterion · HEAVY: the first red criterion (file order)
//!   a target used max_attempts this run ⇒ BLOCKED attempts-exhausted
//!   commit the attempt in flight ⇒ keep the notepad + RED evidence ⇒ dispatch implementer
//!   (workspace-write) — or, resuming a run killed after its answer, take the answer it recorded
//!   records changed ⇒ restore them ⇒ BLOCKED evidence-tampered
//!   verify its cleanup claims ⇒ observe every criterion (scenario, cleanup, escaped-process sweep)
//!   a target failing with the same observation as after its previous attempt ⇒ BLOCKED same-failure
//!   agent answered `blocked` and a target is still red ⇒ BLOCKED agent-blocked
//!   budget spent ⇒ BLOCKED budget
//! ```
//!
//! Every step is written before the next starts: evidence, `receipts.json`, then `state.json`
//! (the commit point: it counts the receipts it goes with) atomically, the notepad by appending. A run killed anywhere is resumed by running the goal
//! again: kept REDs are not re-captured, attempts continue their numbering, an attempt whose
//! answer the killed run recorded is finished with that answer (`in_flight`) and one cut off
//! before it (or whose record a crash tore) is made again, and the figures
//! of the run go on from the killed run's (`attempts_before_run`).

use crate::brief::{self, Answer, CleanupClaim, TargetView};
use crate::goal::{Criterion, CriterionKind, EvidenceKind, Goal, Tier};
use crate::observe::{self, Observation, Verdict};
use crate::state::{
    AttemptRecord, EvidencePaths, GoalState, GoalStatus, InFlightAttempt, Notepad, ObsRecord, Receipt, ReceiptSource,
    Receipts,
};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use work_runtime::dispatch::replay::{CutOffRuns, Replayed, request_digest};
use work_runtime::dispatch::{Access, DispatchOutcome, DispatchSpec, Dispatcher};
use work_runtime::events::Event;
use work_runtime::outcome::StopReason as Shared;
use work_runtime::run::RunContext;

mod copy;
mod freeze;
mod restored;

/// A failure to keep the goal's files (exit 1; the goal can be resumed).
#[derive(Debug, thiserror::Error)]
pub enum UltraError {
    /// Writing a state, evidence or notepad file failed.
    #[error("write `{path}`: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A git the engine ran to judge an attempt failed (exit 128, killed): an error of the
    /// run, never a verdict about the implementer.
    #[error(transparent)]
    Git(#[from] work_git::GitError),
}

/// What the engine runs with.
pub struct Env<'a> {
    /// The run.
    pub run: &'a RunContext,
    /// The implementer's dispatcher.
    pub dispatcher: &'a Dispatcher,
    /// The implementer's model pin.
    pub model: String,
    /// The implementer's effort pin.
    pub effort: String,
    /// The goal directory (`<state>/goals/<goal-id>`).
    pub dir: PathBuf,
    /// The goal file as given (for the notepad).
    pub goal_file: String,
}

/// Why a goal stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Every criterion passed the final full pass; every receipt verified.
    AllGreen,
    /// A behaviour-change criterion passed before any implementation.
    AlreadyGreen,
    /// A pin failed on the unchanged code.
    PinRed,
    /// A target used its attempts for this run.
    AttemptsExhausted,
    /// Two attempts at a target ended with the identical failure.
    SameFailureRepeated,
    /// The agent reported it cannot progress and the engine still observes RED.
    AgentBlocked,
    /// Every criterion passed, but a cleanup receipt failed: something claimed torn down is
    /// still there, a `cleanup` command failed, a scenario's process could not be killed.
    LeftoverState,
    /// The implementer changed the engine's own records (the notepad's earlier bytes, the
    /// evidence); they were restored where the engine kept a copy.
    EvidenceTampered,
    /// The run's budget is spent.
    Budget,
    /// The implementer changed what judges it: a scenario's script, the project's or a test
    /// runner's configuration, or an existing test.
    CheckTampered,
    /// The agent failed consecutive attempts for one cause (a logged-out CLI, a refused key):
    /// the dispatcher's fail-fast streak tripped.
    AgentFailing,
    /// The implementer changed git's view of the tree: an index flag, an exclude file, an
    /// attribute, a hook or a driver in the configuration (see `work_git::integrity`).
    GitTampered,
    /// HEAD moved in a way no honest commit moves it: reset below the run's base, the base
    /// rewritten, another branch checked out (see `work_git::head`). Commits on top of the
    /// base are the implementer's change.
    HeadMoved,
}

impl StopReason {
    /// The machine word (`all-green`, `same-failure-repeated`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::AllGreen => "all-green",
            StopReason::AlreadyGreen => "already-green",
            StopReason::PinRed => "pin-red",
            StopReason::AttemptsExhausted => "attempts-exhausted",
            StopReason::SameFailureRepeated => "same-failure-repeated",
            StopReason::AgentBlocked => "agent-blocked",
            StopReason::LeftoverState => "leftover-state",
            StopReason::EvidenceTampered => "evidence-tampered",
            StopReason::Budget => Shared::Budget.as_str(),
            StopReason::CheckTampered => Shared::CheckTampered.as_str(),
            StopReason::AgentFailing => Shared::AgentFailing.as_str(),
            StopReason::GitTampered => Shared::GitTampered.as_str(),
            StopReason::HeadMoved => Shared::HeadMoved.as_str(),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// DONE or BLOCKED.
    pub status: GoalStatus,
    /// Why.
    pub reason: StopReason,
    /// One line for a person: what happened and what to do.
    pub detail: String,
    /// Implementation attempts made by this run.
    pub attempts_this_run: u32,
    /// Whether any implementation was dispatched by this run.
    pub dispatched: bool,
}

fn werr(path: &Path) -> impl FnOnce(std::io::Error) -> UltraError + '_ {
    move |source| UltraError::Write { path: path.display().to_string(), source }
}

struct Runner<'a, 'e> {
    env: &'a Env<'e>,
    goal: &'a Goal,
    state: &'a mut GoalState,
    receipts: &'a mut Receipts,
    notepad: Notepad,
    /// Scenario runs so far in this run (makes each run's process marker unique).
    scenario_runs: u64,
}

/// Runs (or resumes) a goal. `state` and `receipts` are the loaded files (fresh ones for a
/// new goal); both are kept current on disk.
pub async fn drive(
    env: &Env<'_>,
    goal: &Goal,
    state: &mut GoalState,
    receipts: &mut Receipts,
) -> Result<Outcome, UltraError> {
    let notepad = Notepad::new(&env.dir, env.run.redactor.clone());
    let mut r = Runner { env, goal, state, receipts, notepad, scenario_runs: 0 };
    r.run().await
}

impl Runner<'_, '_> {
    fn now(&self) -> String {
        self.env.run.clock.now_rfc3339()
    }

    fn note(&self, entry: &str) -> Result<(), UltraError> {
        self.notepad.append(entry).map_err(werr(self.notepad.path()))
    }

    /// Writes `receipts.json`, then `state.json`, which commits it (it records how many
    /// receipts it goes with: a kill between the two leaves receipts no state counts, dropped
    /// when the goal is read again, so a re-observed step is not receipted twice).
    fn save(&mut self) -> Result<(), UltraError> {
        self.state.updated = self.now();
        let p = self.env.dir.join("receipts.json");
        self.env.run.write_state(&p, &*self.receipts).map_err(werr(&p))?;
        self.state.receipts_committed = Some(self.receipts.receipts.len());
        let p = self.env.dir.join("state.json");
        self.env.run.write_state(&p, &*self.state).map_err(werr(&p))
    }

    fn receipt(&mut self, source: ReceiptSource, during: &str, criterion: Option<&str>, r: ReceiptParts) {
        let seq = self.receipts.next_seq();
        self.receipts.receipts.push(Receipt {
            seq,
            run_id: self.env.run.run_id.clone(),
            ts: self.now(),
            source,
            during: during.into(),
            criterion: criterion.map(str::to_string),
            resource: r.resource,
            action: r.action,
            verified: r.verified,
            check: r.check,
            path: r.path,
            pids: r.pids,
        });
    }

    async fn run(&mut self) -> Result<Outcome, UltraError> {
        let goal: &Goal = self.goal;
        let run_id = self.env.run.run_id.clone();
        let is_new = self.state.runs.is_empty();
        let was = self.state.status;
        let old_tier = self.state.tier;
        self.state.runs.push(run_id.clone());
        // A run that resumes one cut off (the goal still RUNNING) goes on with its figures.
        if was != GoalStatus::Running || self.state.attempts_before_run.is_none() {
            self.state.attempts_before_run = Some(self.state.attempts);
        }
        self.state.tier = self.state.tier.max(self.goal.tier);
        self.state.objective = self.goal.objective.clone();
        self.state.goal_file = self.env.goal_file.clone();
        self.state.status = GoalStatus::Running;
        self.state.stop_reason = None;
        self.state.stop_detail = None;
        let run_no = self.state.runs.len();
        if is_new || !self.notepad.exists() {
            self.note(&self.header())?;
        } else {
            let mut e = format!("\n## {} — Resume (run {run_no}, {run_id}; was {})\n", self.now(), was.as_str());
            if self.goal.tier > old_tier {
                e.push_str(&format!(
                    "- Tier ratcheted up: {} → {} ({}). Every criterion is re-observed; HEAVY works one criterion at a time.\n",
                    old_tier.as_str(),
                    self.goal.tier.as_str(),
                    self.goal.tier_justification
                ));
            }
            let known: BTreeSet<&String> = self.state.criteria.keys().collect();
            let now_ids: BTreeSet<&String> = goal.criteria.iter().map(|c| &c.id).collect();
            for gone in known.difference(&now_ids) {
                e.push_str(&format!("- Criterion `{gone}` is no longer in the goal (its evidence is kept).\n"));
            }
            for n in &self.goal.notes {
                e.push_str(&format!("- Goal file: {n}\n"));
            }
            self.note(&e)?;
        }
        self.env.run.progress(&format!(
            "goal {} ({}, {} criteria) at {}",
            self.goal.id,
            self.goal.tier.as_str(),
            goal.criteria.len(),
            self.env.dir.display()
        ));
        self.save()?;

        let root = self.env.run.root.clone();
        // A check changed since the goal's first run froze it: stop before anything runs.
        if let Some(stop) = self.changed_between_runs(&root)? {
            return Ok(stop);
        }
        if let Some(stop) = self.goal_changed_between_runs()? {
            return Ok(stop);
        }

        // RED: before any implementation dispatch.
        let mut fresh_red: BTreeSet<String> = BTreeSet::new();
        for c in &goal.criteria {
            // A criterion is its definition and the content of the scripts its scenario runs:
            // a rewritten script is a different check, and its RED is captured again.
            let def = format!(
                "{}-{}",
                c.definition_fingerprint(),
                work_git::surface::commands_digest(
                    &root,
                    std::slice::from_ref(&c.scenario),
                    work_git::surface::Named::CheckLike
                )
            );
            let kept = self.state.criteria.get(&c.id).is_some_and(|s| s.definition == def && s.red.is_some());
            if kept {
                continue;
            }
            let changed = self.state.criteria.get(&c.id).is_some_and(|s| s.red.is_some());
            let rec = self.observe(c, "red").await?;
            let st = self.state.criteria.entry(c.id.clone()).or_default();
            st.definition = def;
            st.red = Some(rec.clone());
            st.last = Some(rec.clone());
            fresh_red.insert(c.id.clone());
            let want = match c.kind {
                CriterionKind::Change => "FAIL (failing-first proof)",
                CriterionKind::Pin => "PASS (characterization pin)",
            };
            self.note(&format!(
                "\n## {} — RED captured: `{}`{}\n- observed {} ({}); wanted {want}\n- evidence: {}\n",
                rec.ts,
                c.id,
                if changed { " (definition changed: re-captured)" } else { "" },
                verdict_word(rec.pass),
                describe_rec(&rec),
                rec.evidence.json
            ))?;
            self.env.run.progress(&format!("RED {}: {} ({})", c.id, verdict_word(rec.pass), rec.end));
            self.save()?;
        }
        let mut bad_red = Vec::new();
        let mut pin_red = Vec::new();
        for c in &goal.criteria {
            let Some(red) = self.state.criteria.get(&c.id).and_then(|s| s.red.as_ref()) else { continue };
            match (c.kind, red.pass) {
                (CriterionKind::Change, true) => bad_red.push(c.id.clone()),
                (CriterionKind::Pin, false) => pin_red.push(c.id.clone()),
                _ => {}
            }
        }
        if !bad_red.is_empty() {
            let detail = format!(
                "{} already pass{} before any implementation: no failing-first proof; make the scenario fail for the right reason (or mark a regression guard kind = \"pin\") and run the goal again",
                ticks(&bad_red),
                if bad_red.len() == 1 { "es" } else { "" }
            );
            return self.stop(GoalStatus::Blocked, StopReason::AlreadyGreen, detail, 0, false);
        }
        if !pin_red.is_empty() {
            let detail = format!(
                "pin {} fail{} on the unchanged code: a characterization pin must pass before the change; fix the pin's scenario and run the goal again",
                ticks(&pin_red),
                if pin_red.len() == 1 { "s" } else { "" }
            );
            return self.stop(GoalStatus::Blocked, StopReason::PinRed, detail, 0, false);
        }

        // Criteria whose RED is from an earlier run: observe where they stand now.
        let check_label = format!("check-{run_no}");
        let stale: Vec<&Criterion> = goal.criteria.iter().filter(|c| !fresh_red.contains(&c.id)).collect();
        if !stale.is_empty() {
            let (_, lines) = self.observe_all(&stale, &check_label).await?;
            self.note(&format!("\n## {} — Check (RED kept from earlier runs)\n{}\n", self.now(), lines.join("\n")))?;
            self.save()?;
        }

        // The check surface is frozen before the first implementation dispatch.
        let mut checks: Vec<String> = goal.criteria.iter().map(|c| c.scenario.clone()).collect();
        checks.extend(goal.criteria.iter().filter_map(|c| c.cleanup.clone()));
        // A criterion that runs a test runner: its suite's own report, taken once for the goal,
        // is the baseline the final full pass is compared with.
        let longest = goal.criteria.iter().map(|c| c.timeout_secs).max().map(Duration::from_secs);
        let scenarios: Vec<&str> = goal.criteria.iter().map(|c| c.scenario.as_str()).collect();
        let (surface, frozen) = self.freeze(&root, &checks, &scenarios, longest).await?;
        let git = work_git::Git::new(&root);
        // A `.gitignore` the objective names is the work.
        let seal = if git.is_repo() { git.seal().ok() } else { None }.map(|mut seal| {
            seal.allow_named_by(&goal.objective);
            seal
        });
        let head = git.is_repo().then(|| git.head_at());
        let (mut attempts_this_run, mut attempts_run) = self.attempts_of_this_run();
        let mut last_fail = self.last_failures();
        let mut notes: Vec<String> = Vec::new();
        let mut resumed = self.resumed_attempt(goal, &fresh_red);
        loop {
            let resume = resumed.take();
            let red: Vec<&Criterion> = goal.criteria.iter().filter(|c| !self.is_green(&c.id)).collect();
            if resume.is_none() && red.is_empty() {
                // The full set once more, right before the final word.
                let all: Vec<&Criterion> = goal.criteria.iter().collect();
                let (_, lines) = self.observe_all(&all, "green").await?;
                self.note(&format!("\n## {} — GREEN: final full pass\n{}\n", self.now(), lines.join("\n")))?;
                // Not written here: the pass commits with the stop it leads to (or with the
                // next attempt), so a run cut off between the two passes once more, not twice.
                if goal.criteria.iter().any(|c| !self.is_green(&c.id)) {
                    notes.push("the final full pass failed a criterion that had passed: make it pass reliably".into());
                    continue;
                }
                let copy = self.check_copy();
                let lost = match copy::dir_of(&copy, &root) {
                    Ok(dir) => frozen.suite_changes(&self.env.run.spawner, dir, longest).await,
                    Err(why) => vec![work_git::surface::SurfaceChange {
                        path: "the suites".into(),
                        role: work_git::surface::Role::Runner,
                        what: format!("gave no report: {why}").into(),
                    }],
                };
                drop(copy);
                if !lost.is_empty() {
                    let what = work_git::surface::describe(&lost);
                    let detail = format!(
                        "every criterion passes, but the suite a criterion runs lost tests since the goal's run started: {what}. Adding tests is the only change allowed: restore them (git diff shows the change), then run the goal again"
                    );
                    return self.stop(GoalStatus::Blocked, StopReason::CheckTampered, detail, attempts_this_run, true);
                }
                if let Some(detail) = self.restored_detail(&root, &frozen).await {
                    self.note(&format!(
                        "\n## {} — Not GREEN with the frozen checks restored\n- {detail}\n",
                        self.now()
                    ))?;
                    return self.stop(GoalStatus::Blocked, StopReason::CheckTampered, detail, attempts_this_run, true);
                }
                let leftovers = self.leftovers();
                if !leftovers.is_empty() {
                    let detail = format!(
                        "every criterion passes, but leftover state remains: {}; tear it down and run the goal again",
                        leftovers.join("; ")
                    );
                    return self.stop(
                        GoalStatus::Blocked,
                        StopReason::LeftoverState,
                        detail,
                        attempts_this_run,
                        attempts_this_run > 0,
                    );
                }
                let detail = if attempts_this_run == 0 {
                    "every criterion still passes: re-verified by the engine (RED kept from an earlier run)".to_string()
                } else {
                    format!(
                        "every criterion went RED → GREEN by the engine's own observation ({} attempt{} this run)",
                        attempts_this_run,
                        if attempts_this_run == 1 { "" } else { "s" }
                    )
                };
                return self.stop(
                    GoalStatus::Done,
                    StopReason::AllGreen,
                    detail,
                    attempts_this_run,
                    attempts_this_run > 0,
                );
            }
            let targets: Vec<&Criterion> = match (&resume, self.goal.tier) {
                (Some((ids, _)), _) => goal.criteria.iter().filter(|c| ids.contains(&c.id)).collect(),
                (None, Tier::Light) => red,
                (None, Tier::Heavy) => red.into_iter().take(1).collect(),
            };
            let exhausted: Vec<String> = targets
                .iter()
                .filter(|c| attempts_run.get(&c.id).copied().unwrap_or(0) >= c.max_attempts)
                .map(|c| c.id.clone())
                .collect();
            if !exhausted.is_empty() {
                let detail = format!(
                    "{} still fail{} after {} attempt{} this run; see the notepad for what was tried, then run the goal again to retry",
                    ticks(&exhausted),
                    if exhausted.len() == 1 { "s" } else { "" },
                    attempts_run.get(&exhausted[0]).copied().unwrap_or(0),
                    if attempts_run.get(&exhausted[0]).copied().unwrap_or(0) == 1 { "" } else { "s" }
                );
                return self.stop(
                    GoalStatus::Blocked,
                    StopReason::AttemptsExhausted,
                    detail,
                    attempts_this_run,
                    attempts_this_run > 0,
                );
            }

            // One implementation attempt.
            let n = self.state.attempts + 1;
            let ids: Vec<String> = targets.iter().map(|c| c.id.clone()).collect();
            self.note(&format!("\n## {} — Now: attempt {n} → {}\n", self.now(), ticks(&ids)))?;
            self.env.run.progress(&format!("attempt {n}: {}", ids.join(", ")));
            let views: Vec<TargetView<'_>> = targets.iter().map(|c| self.view(c)).collect();
            let history = self.history();
            let prompt = brief::prompt(self.goal, &views, n, &history, &notes);
            notes.clear();
            let mut context = json!({"goal_id": self.goal.id, "attempt": n, "tier": self.goal.tier.as_str()});
            match self.goal.tier {
                Tier::Heavy => context["criterion"] = json!(ids[0]),
                Tier::Light => context["criteria"] = json!(ids),
            }
            let spec = DispatchSpec {
                role: "implementer".into(),
                model: self.env.model.clone(),
                effort: self.env.effort.clone(),
                access: Access::WorkspaceWrite,
                prompt,
                schema: Some(brief::answer_schema()),
                context,
                label: format!("{}-a{n}", self.goal.id),
            };
            let recorded = self.commit_in_flight(n, &ids, &spec, resume.and_then(|r| r.1))?;
            // The engine's records as they are before the agent runs (A5: the agent works in
            // the repository, and the goal directory is usually inside it).
            let kept = self.keep_records();
            let outcome = match recorded {
                Some(r) => r.take(self.env.run, &spec.role),
                None => self.env.dispatcher.dispatch(spec).await,
            };
            // Cleared in memory: the next write of the state records the attempt (or the stop).
            self.state.in_flight = None;
            // A dispatch the budget refused is no attempt: nothing is counted and nothing is
            // observed (the records are still checked: a malformed first attempt may have run
            // before the retry was refused).
            let over_budget = matches!(outcome, DispatchOutcome::OverBudget { .. });
            if !over_budget {
                self.state.attempts = n;
                attempts_this_run += 1;
            }
            let answer = outcome.output().and_then(|v| Answer::from_value(v).ok());
            let during = format!("attempt-{n}");
            let tampered = self.check_records(&kept)?;
            if !tampered.is_empty() {
                for id in &ids {
                    self.state.criteria.entry(id.clone()).or_default().attempts += 1;
                }
                self.state.attempt_log.push(AttemptRecord {
                    n,
                    run_id: run_id.clone(),
                    targets: ids.clone(),
                    dispatch_id: outcome.dispatch_id().to_string(),
                    outcome: "records-tampered".into(),
                    agent_status: answer.as_ref().map(|a| a.status.clone()),
                    summary: answer.as_ref().map(|a| one_line(&a.summary, 300)),
                    green_after: Vec::new(),
                    observed: "not observed: the engine's records were changed".into(),
                });
                self.note(&format!(
                    "- dispatch {}: the implementer changed the engine's records: {}\n- restored: {}\n",
                    outcome.dispatch_id(),
                    tampered.join(", "),
                    kept.restorable()
                ))?;
                let detail = format!(
                    "the implementer changed the engine's own records ({}) during attempt {n}; the notepad and the RED evidence were restored from the engine's copy. The failing-first proof and the notepad are the engine's, not the agent's: find why the agent wrote there, then run the goal again",
                    tampered.join(", ")
                );
                return self.stop(GoalStatus::Blocked, StopReason::EvidenceTampered, detail, attempts_this_run, true);
            }
            let touched = surface.changes(&root, work_git::surface::TestEdits::Add);
            if !touched.is_empty() {
                let what = work_git::surface::describe(&touched);
                self.note(&format!(
                    "- dispatch {}: the implementer changed what judges it: {what}\n",
                    outcome.dispatch_id()
                ))?;
                let detail = format!(
                    "the implementer changed what judges it during attempt {n}: {what}. A criterion is only as honest as the scripts and tests it runs: restore them (git diff shows the change), then run the goal again"
                );
                return self.stop(GoalStatus::Blocked, StopReason::CheckTampered, detail, attempts_this_run, true);
            }
            if let Some(what) = git_tampered(&git, seal.as_ref())? {
                self.note(&format!(
                    "- dispatch {}: the implementer changed git's view of the tree: {what}\n",
                    outcome.dispatch_id()
                ))?;
                let detail = format!(
                    "the implementer changed git's view of the tree during attempt {n}: {what}. Index flags, exclude files, attributes, hooks and drivers hide a change from git status and git diff: undo it, then run the goal again"
                );
                return self.stop(GoalStatus::Blocked, StopReason::GitTampered, detail, attempts_this_run, true);
            }
            let verdict = head.as_ref().map(|base| git.judge_head(base).map(|v| v.describe(base))).transpose()?;
            if let Some(why) = verdict.flatten() {
                self.note(&format!("- dispatch {}: {why}\n", outcome.dispatch_id()))?;
                let detail = format!("the implementer moved HEAD during attempt {n}: {why}");
                return self.stop(GoalStatus::Blocked, StopReason::HeadMoved, detail, attempts_this_run, true);
            }
            if over_budget {
                self.note(&format!(
                    "- dispatch {}: not run: the budget is spent; attempt {n} is not counted\n",
                    outcome.dispatch_id()
                ))?;
                let detail = format!(
                    "{}; attempt {n} ({}) was not run and is not counted: run the goal again with a bigger budget (--budget-dispatches / --budget-tokens / --budget-usd)",
                    self.env.run.budget.stop_line(),
                    ticks(&ids)
                );
                return self.stop(
                    GoalStatus::Blocked,
                    StopReason::Budget,
                    detail,
                    attempts_this_run,
                    attempts_this_run > 0,
                );
            }
            let mut receipt_lines = Vec::new();
            if let Some(a) = &answer {
                for claim in &a.cleanup {
                    let parts = verify_cleanup(&self.env.run.root, claim);
                    receipt_lines.push(format!(
                        "- cleanup (agent): {} — {} — {}",
                        parts.resource,
                        parts.action,
                        verified_word(parts.verified, &parts.check)
                    ));
                    if parts.verified == Some(false) {
                        notes.push(format!("your cleanup claim `{}` did not hold: {}", parts.resource, parts.check));
                    }
                    self.receipt(ReceiptSource::Agent, &during, None, parts);
                }
            }

            // GREEN: the engine's own observation of every criterion.
            let all: Vec<&Criterion> = goal.criteria.iter().collect();
            let (observed, lines) = self.observe_all(&all, &during).await?;
            for id in &ids {
                self.state.criteria.entry(id.clone()).or_default().attempts += 1;
                *attempts_run.entry(id.clone()).or_default() += 1;
            }
            let green_after: Vec<String> = ids.iter().filter(|i| self.is_green(i)).cloned().collect();
            let outcome_word = match &outcome {
                DispatchOutcome::Ok { .. } => "ok".to_string(),
                other => other.failure_reason().unwrap_or_default(),
            };
            self.state.attempt_log.push(AttemptRecord {
                n,
                run_id: run_id.clone(),
                targets: ids.clone(),
                dispatch_id: outcome.dispatch_id().to_string(),
                outcome: outcome_word.clone(),
                agent_status: answer.as_ref().map(|a| a.status.clone()),
                summary: answer.as_ref().map(|a| one_line(&a.summary, 300)),
                green_after: green_after.clone(),
                observed: observed.join(" · "),
            });
            let mut entry = format!("- dispatch {}: {outcome_word}\n", outcome.dispatch_id());
            if let Some(a) = &answer {
                match one_line(&a.summary, 300) {
                    s if s.is_empty() => entry.push_str(&format!("- agent says {}\n", a.status)),
                    s => entry.push_str(&format!("- agent says {}: {s}\n", a.status)),
                }
                for cl in &a.claims {
                    let seen = self
                        .state
                        .criteria
                        .get(&cl.criterion)
                        .and_then(|s| s.last.as_ref())
                        .map(|r| verdict_word(r.pass))
                        .unwrap_or("not a criterion");
                    entry.push_str(&format!(
                        "- claim `{}`: {} — engine observed {seen}\n",
                        cl.criterion,
                        one_line(&cl.claim, 200)
                    ));
                }
                if let Some(b) = a.blocker.as_deref().filter(|b| !b.trim().is_empty()) {
                    entry.push_str(&format!("- blocker: {}\n", one_line(b, 300)));
                }
            }
            entry.push_str("- GREEN check (engine):\n");
            entry.push_str(&lines.join("\n"));
            entry.push('\n');
            for l in &receipt_lines {
                entry.push_str(l);
                entry.push('\n');
            }
            self.note(&entry)?;
            self.save()?;
            self.env.run.progress(&format!("attempt {n}: {}", observed.join(" · ")));

            // Stop rules.
            if let (DispatchOutcome::Failed { .. }, Some(cause)) = (&outcome, self.env.dispatcher.failing()) {
                let detail = format!(
                    "the agent is failing: consecutive attempts failed for one cause: {}; check the agent (`work agents check`), then run the goal again",
                    one_line(&cause, 300)
                );
                return self.stop(GoalStatus::Blocked, StopReason::AgentFailing, detail, attempts_this_run, true);
            }
            let mut repeated = Vec::new();
            for id in &ids {
                if self.is_green(id) {
                    last_fail.remove(id);
                    continue;
                }
                let fp = self.state.criteria.get(id).and_then(|s| s.last.as_ref()).map(|r| r.fingerprint.clone());
                if let Some(fp) = fp {
                    if last_fail.get(id) == Some(&fp) {
                        repeated.push(id.clone());
                    }
                    last_fail.insert(id.clone(), fp);
                }
            }
            if !repeated.is_empty() {
                let detail = format!(
                    "{} failed twice in a row with the identical observation; surface what was tried (notepad) and decide before another retry (run the goal again)",
                    ticks(&repeated)
                );
                return self.stop(
                    GoalStatus::Blocked,
                    StopReason::SameFailureRepeated,
                    detail,
                    attempts_this_run,
                    true,
                );
            }
            if let Some(a) = &answer
                && a.is_blocked()
                && ids.iter().any(|i| !self.is_green(i))
            {
                let why = a.blocker.as_deref().filter(|b| !b.trim().is_empty()).unwrap_or(a.summary.as_str());
                let detail = format!("the implementer is blocked: {}", one_line(why, 300));
                return self.stop(GoalStatus::Blocked, StopReason::AgentBlocked, detail, attempts_this_run, true);
            }
        }
    }

    /// The attempts made since this run began — the runs it resumes (cut off) included — and
    /// how many of them targeted each criterion.
    fn attempts_of_this_run(&self) -> (u32, BTreeMap<String, u32>) {
        let before = self.state.attempts_before_run.unwrap_or(self.state.attempts);
        let mut per: BTreeMap<String, u32> = BTreeMap::new();
        for a in self.state.attempt_log.iter().filter(|a| a.n > before) {
            for t in &a.targets {
                *per.entry(t.clone()).or_default() += 1;
            }
        }
        (self.state.attempts.saturating_sub(before), per)
    }

    /// The failures the same-failure rule compares the next attempt's with: none at the start
    /// of a run; when the run goes on from one cut off after its attempts, each target of the
    /// last attempt still failing, as observed now — so a kill between two attempts does not
    /// give the goal an extra attempt before the rule holds.
    fn last_failures(&self) -> BTreeMap<String, String> {
        let before = self.state.attempts_before_run.unwrap_or(self.state.attempts);
        let Some(last) = self.state.attempt_log.iter().rev().find(|a| a.n > before) else {
            return BTreeMap::new();
        };
        last.targets
            .iter()
            .filter(|id| !self.is_green(id))
            .filter_map(|id| {
                let fp = self.state.criteria.get(id)?.last.as_ref()?.fingerprint.clone();
                Some((id.clone(), fp))
            })
            .collect()
    }

    /// The attempt a cut-off run had in flight: its targets, and the answer the run recorded
    /// for it when it got that far — taken as the attempt instead of asking again. Without a
    /// recorded answer (cut off before it, or its record torn) the same attempt is made again:
    /// forgetting it, the rerun would find whatever the implementer had already done green and
    /// end with no attempt. None — and the attempt in flight dropped — when it no longer fits
    /// the goal (a target gone, or its RED captured again).
    fn resumed_attempt(
        &mut self,
        goal: &Goal,
        fresh_red: &BTreeSet<String>,
    ) -> Option<(Vec<String>, Option<Replayed>)> {
        let f = self.state.in_flight.clone()?;
        let fits = f.n == self.state.attempts + 1
            && !f.targets.is_empty()
            && f.targets.iter().all(|t| goal.criteria.iter().any(|c| &c.id == t) && !fresh_red.contains(t));
        if !fits {
            self.state.in_flight = None;
            return None;
        }
        let run = &self.env.run;
        let found =
            CutOffRuns::read(&run.state_dir, std::slice::from_ref(&f.run_id), &run.run_id).answer_to(&f.request_sha256);
        Some((f.targets, found))
    }

    /// Before attempt `n` asks `spec`: with the answer a cut-off run recorded, says so in the
    /// notepad and gives it back; otherwise commits the attempt in flight (the request's digest)
    /// to `state.json`, so that a run cut off after the answer is resumed with it.
    fn commit_in_flight(
        &mut self,
        n: u32,
        ids: &[String],
        spec: &DispatchSpec,
        recorded: Option<Replayed>,
    ) -> Result<Option<Replayed>, UltraError> {
        if let Some(r) = recorded {
            self.note(&format!(
                "- the answer cut-off run {} recorded for attempt {n} ({}) is taken, not asked again\n",
                r.run, r.dispatch_id
            ))?;
            return Ok(Some(r));
        }
        self.state.in_flight = Some(InFlightAttempt {
            n,
            run_id: self.env.run.run_id.clone(),
            targets: ids.to_vec(),
            request_sha256: request_digest(spec),
        });
        self.save()?;
        Ok(None)
    }

    /// Copies the notepad and every RED evidence file, and fingerprints every evidence file.
    fn keep_records(&self) -> KeptRecords {
        let dir = &self.env.dir;
        let mut kept = KeptRecords {
            notepad: std::fs::read(self.notepad.path()).ok(),
            copies: BTreeMap::new(),
            digests: BTreeMap::new(),
        };
        for rel in evidence_files(dir) {
            if let Ok(bytes) = std::fs::read(dir.join(&rel)) {
                kept.digests.insert(rel, digest(&bytes));
            }
        }
        for cs in self.state.criteria.values() {
            let Some(red) = &cs.red else { continue };
            for rel in [Some(&red.evidence.json), red.evidence.stdout.as_ref(), red.evidence.stderr.as_ref()]
                .into_iter()
                .flatten()
            {
                if let Ok(bytes) = std::fs::read(dir.join(rel)) {
                    kept.copies.insert(rel.clone(), bytes);
                }
            }
        }
        kept
    }

    /// Compares the records with what [`Self::keep_records`] kept; restores the notepad and the
    /// RED evidence where they changed; returns what changed (relative to the goal directory).
    fn check_records(&self, kept: &KeptRecords) -> Result<Vec<String>, UltraError> {
        let dir = &self.env.dir;
        let mut changed = Vec::new();
        let pad = self.notepad.path();
        if let Some(before) = &kept.notepad
            && std::fs::read(pad).ok().as_deref() != Some(before.as_slice())
        {
            changed.push("notepad.md".to_string());
            work_runtime::fsx::write_atomic(pad, before).map_err(werr(pad))?;
        }
        let now: BTreeMap<String, String> = evidence_files(dir)
            .into_iter()
            .filter_map(|rel| std::fs::read(dir.join(&rel)).ok().map(|b| (rel, digest(&b))))
            .collect();
        let names: BTreeSet<&String> = kept.digests.keys().chain(now.keys()).collect();
        for rel in names {
            if kept.digests.get(rel) == now.get(rel) {
                continue;
            }
            changed.push(rel.clone());
            if let Some(bytes) = kept.copies.get(rel) {
                let p = dir.join(rel);
                work_runtime::fsx::write_atomic(&p, bytes).map_err(werr(&p))?;
            }
        }
        Ok(changed)
    }

    fn is_green(&self, id: &str) -> bool {
        self.state.criteria.get(id).and_then(|s| s.last.as_ref()).is_some_and(|r| r.pass)
    }

    fn view<'c>(&self, c: &'c Criterion) -> TargetView<'c> {
        let last = self.state.criteria.get(&c.id).and_then(|s| s.last.as_ref());
        let read = |rel: &Option<String>| {
            rel.as_ref()
                .and_then(|r| std::fs::read_to_string(self.env.dir.join(r)).ok())
                .map(|t| brief::tail(&t, 1500))
                .unwrap_or_default()
        };
        match last {
            Some(r) => TargetView {
                criterion: c,
                latest: format!("{} ({})", verdict_word(r.pass), describe_rec(r)),
                stdout_tail: read(&r.evidence.stdout),
                stderr_tail: read(&r.evidence.stderr),
            },
            None => TargetView {
                criterion: c,
                latest: "not observed".into(),
                stdout_tail: String::new(),
                stderr_tail: String::new(),
            },
        }
    }

    fn history(&self) -> Vec<String> {
        let log = &self.state.attempt_log;
        log.iter()
            .skip(log.len().saturating_sub(8))
            .map(|a| {
                let said = match (&a.agent_status, &a.summary) {
                    (Some(s), Some(m)) => format!("agent said {s}: {m}"),
                    _ => format!("dispatch {}", a.outcome),
                };
                format!("attempt {} ({}): {said}; engine observed: {}", a.n, a.targets.join(", "), a.observed)
            })
            .collect()
    }

    /// Failed cleanup receipts that still hold, one line each. A receipt is re-checked where
    /// it can be (a path still there, a pid still running, a later receipt for the same
    /// resource); one that cannot be re-checked holds for the run that made it.
    fn leftovers(&self) -> Vec<String> {
        let all = &self.receipts.receipts;
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        // Latest first: a resource failed several times is named by its latest receipt.
        for r in all.iter().rev().filter(|r| r.verified == Some(false)) {
            let still = recheck(&self.env.run.root, r, all).unwrap_or(r.run_id == self.env.run.run_id);
            if still
                && seen.insert((
                    r.source == ReceiptSource::Agent,
                    r.criterion.clone(),
                    r.resource.clone(),
                    r.path.clone(),
                    r.pids.clone(),
                ))
            {
                out.push(leftover_line(&self.env.run.root, r));
            }
        }
        out.reverse();
        out
    }

    /// The self-review's receipts line: counts, and every failed receipt by name.
    fn receipts_review(&self) -> String {
        let all = &self.receipts.receipts;
        let ok = all.iter().filter(|r| r.verified == Some(true)).count();
        let unchecked = all.iter().filter(|r| r.verified.is_none()).count();
        let failed: Vec<String> = all
            .iter()
            .filter(|r| r.verified == Some(false))
            .map(|r| {
                let by_later = r.path.is_none() && r.pids.is_empty();
                let now = match (recheck(&self.env.run.root, r, all), by_later) {
                    (Some(true), false) => "still there",
                    (Some(false), false) => "gone since",
                    (Some(true), true) => "failed again later",
                    (Some(false), true) => "succeeded later",
                    (None, _) if r.run_id == self.env.run.run_id => "holds for this run",
                    (None, _) => "from an earlier run",
                };
                format!("#{} {}: {} — {now}", r.seq, r.resource, r.check)
            })
            .collect();
        let named = if failed.is_empty() {
            String::new()
        } else {
            let shown: Vec<&str> = failed.iter().rev().take(6).rev().map(String::as_str).collect();
            format!(" ({}{})", if failed.len() > shown.len() { "…; " } else { "" }, shown.join("; "))
        };
        format!(
            "- cleanup receipts: {ok} verified, {} failed{named}, {unchecked} recorded as claims (receipts.json)\n",
            failed.len()
        )
    }

    fn header(&self) -> String {
        let g = self.goal;
        let mut s = format!(
            "# Ultrawork Notepad — {}\nStarted: {}\nGoal: {} · file: {} · run {}\n\n## Tier\n{} — {}\n\n## Plan\n",
            one_line(&g.objective, 200),
            self.now(),
            g.id,
            self.env.goal_file,
            self.env.run.run_id,
            g.tier.as_str(),
            g.tier_justification
        );
        s.push_str("1. Capture every criterion RED (pins: passing) before any implementation dispatch.\n");
        s.push_str(match g.tier {
            Tier::Light => "2. LIGHT: one implementer dispatch per attempt for every red criterion.\n",
            Tier::Heavy => {
                "2. HEAVY: one criterion at a time, in file order (RED → GREEN each); every scenario re-run after every increment.\n"
            }
        });
        s.push_str(
            "3. After each attempt the engine re-runs every scenario; a criterion is green only by that observation.\n",
        );
        s.push_str(
            "4. Before the final word, the full set runs once more (`green` evidence); cleanup receipts must hold.\n",
        );
        s.push_str(
            "5. Stop BLOCKED on: the identical failure twice in a row, attempts exhausted, an agent blocker, leftover state.\n",
        );
        s.push_str("\n## Success criteria + QA scenarios\n");
        for c in &g.criteria {
            s.push_str(&format!(
                "- `{}` ({}): `{}` — PASS when {} — evidence: {} — max attempts {} per run{}\n",
                c.id,
                c.kind.as_str(),
                c.scenario,
                c.pass.describe(),
                c.evidence.iter().map(|e| e.as_str()).collect::<Vec<_>>().join(", "),
                c.max_attempts,
                c.cleanup.as_deref().map(|x| format!(" — cleanup: `{x}`")).unwrap_or_default()
            ));
        }
        s.push_str(&format!("\n## Stop line\n{}\n", g.stop_line));
        if !g.notes.is_empty() {
            s.push_str("\n## Findings (goal file)\n");
            for n in &g.notes {
                s.push_str(&format!("- {n}\n"));
            }
        }
        s
    }

    fn stop(
        &mut self,
        status: GoalStatus,
        reason: StopReason,
        detail: String,
        attempts_this_run: u32,
        dispatched: bool,
    ) -> Result<Outcome, UltraError> {
        let mut e = String::new();
        if status == GoalStatus::Done || reason == StopReason::LeftoverState {
            e.push_str(&format!("\n## {} — Self-review\n", self.now()));
            for c in &self.goal.criteria {
                let st = self.state.criteria.get(&c.id);
                let red = st.and_then(|s| s.red.as_ref());
                let last = st.and_then(|s| s.last.as_ref());
                e.push_str(&format!(
                    "- `{}`: RED {} ({}) → GREEN {} ({})\n",
                    c.id,
                    red.map(|r| verdict_word(r.pass)).unwrap_or("-"),
                    red.map(|r| r.evidence.json.as_str()).unwrap_or("-"),
                    last.map(|r| verdict_word(r.pass)).unwrap_or("-"),
                    last.map(|r| r.evidence.json.as_str()).unwrap_or("-"),
                ));
            }
            e.push_str(&self.receipts_review());
            e.push_str(&format!("- tier held: {} — {}\n", self.goal.tier.as_str(), self.goal.tier_justification));
        }
        e.push_str(&format!("\n## {} — Stop: {} ({})\n{}\n", self.now(), status.as_str(), reason.as_str(), detail));
        self.note(&e)?;
        self.state.status = status;
        self.state.stop_reason = Some(reason.as_str().into());
        self.state.stop_detail = Some(detail.clone());
        self.state.attempts_before_run = None;
        self.save()?;
        self.env.run.progress(&format!("goal {}: {} ({}) — {detail}", self.goal.id, status.as_str(), reason.as_str()));
        Ok(Outcome { status, reason, detail, attempts_this_run, dispatched })
    }

    /// Runs a criterion's scenario (and its paired cleanup), writes its evidence under
    /// `evidence/<criterion>/<label>.*` and returns the record.
    /// Observes each criterion, records it as its latest observation, and returns a short
    /// `id VERDICT` per criterion and a notepad line per criterion.
    async fn observe_all(
        &mut self,
        criteria: &[&Criterion],
        label: &str,
    ) -> Result<(Vec<String>, Vec<String>), UltraError> {
        let (mut short, mut lines) = (Vec::new(), Vec::new());
        for c in criteria {
            let rec = self.observe(c, label).await?;
            short.push(format!("{} {}", c.id, verdict_word(rec.pass)));
            lines.push(format!(
                "- `{}`: {} ({}) — {}",
                c.id,
                verdict_word(rec.pass),
                describe_rec(&rec),
                rec.evidence.json
            ));
            self.state.criteria.entry(c.id.clone()).or_default().last = Some(rec);
        }
        Ok((short, lines))
    }

    async fn observe(&mut self, c: &Criterion, label: &str) -> Result<ObsRecord, UltraError> {
        let run = self.env.run;
        let timeout = Duration::from_secs(c.timeout_secs);
        self.scenario_runs += 1;
        let marker = format!("{}.{}.{}.{}", run.run_id, c.id, label, self.scenario_runs);
        let copy = self.check_copy();
        let dir = copy::dir_of(&copy, &run.root);
        let obs = copy::run_on(&run.spawner, &c.scenario, dir, timeout, &marker).await;
        let verdict = observe::evaluate(&c.pass, &obs);
        let rel_dir = format!("evidence/{}", c.id);
        let mut paths = EvidencePaths { json: format!("{rel_dir}/{label}.json"), stdout: None, stderr: None };
        if c.captures(EvidenceKind::Stdout) {
            let rel = format!("{rel_dir}/{label}.stdout");
            let p = self.env.dir.join(&rel);
            run.write_text(&p, &obs.stdout).map_err(werr(&p))?;
            paths.stdout = Some(rel);
        }
        if c.captures(EvidenceKind::Stderr) {
            let rel = format!("{rel_dir}/{label}.stderr");
            let p = self.env.dir.join(&rel);
            run.write_text(&p, &obs.stderr).map_err(werr(&p))?;
            paths.stderr = Some(rel);
        }
        let ts = self.now();
        // The paired teardown, run right after the scenario.
        let cleanup = match &c.cleanup {
            Some(cmd) => {
                let o = copy::run_on(&run.spawner, cmd, dir, timeout, &marker).await;
                let ok = o.exit_code == Some(0);
                self.receipt(
                    ReceiptSource::Engine,
                    label,
                    Some(&c.id),
                    ReceiptParts {
                        resource: format!("cleanup of scenario `{}`", c.id),
                        action: format!("ran `{cmd}`"),
                        verified: Some(ok),
                        check: o.describe_end(),
                        path: None,
                        pids: Vec::new(),
                    },
                );
                Some(json!({"command": cmd, "end": o.describe_end(), "exit_code": o.exit_code}))
            }
            None => None,
        };
        // The spawner killed the scenario's process group; a process that left the group
        // (`setsid`, a double fork) is found by the marker in its environment, killed, and
        // checked gone. Only then is the receipt verified.
        let swept = observe::sweep(&marker).await;
        drop(copy);
        let list = |pids: &[i64]| pids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        let (action, check) = if swept.escaped.is_empty() {
            (
                "process group killed by the spawner when the scenario ended".to_string(),
                format!("scenario {}; no process of it outlived it", obs.describe_end()),
            )
        } else if swept.survivors.is_empty() {
            (
                format!(
                    "process group killed by the spawner; escaped processes killed by the engine ({})",
                    list(&swept.escaped)
                ),
                format!(
                    "scenario {}; {} escaped process(es) outlived it (pid {}): killed, checked gone",
                    obs.describe_end(),
                    swept.escaped.len(),
                    list(&swept.escaped)
                ),
            )
        } else {
            (
                format!(
                    "process group killed by the spawner; escaped processes sent SIGKILL ({})",
                    list(&swept.escaped)
                ),
                format!(
                    "scenario {}; escaped process(es) still running after SIGKILL: pid {}",
                    obs.describe_end(),
                    list(&swept.survivors)
                ),
            )
        };
        self.receipt(
            ReceiptSource::Engine,
            label,
            Some(&c.id),
            ReceiptParts {
                resource: format!("processes of scenario `{}`", c.id),
                action,
                verified: Some(swept.survivors.is_empty()),
                check,
                path: None,
                pids: swept.survivors.clone(),
            },
        );
        let fingerprint = obs.fingerprint();
        let record = json!({
            "goal_id": self.goal.id,
            "criterion": c.id,
            "label": label,
            "run_id": run.run_id,
            "ts": ts,
            "command": c.scenario,
            "cwd": run.root.display().to_string(),
            "pass_when": c.pass.describe(),
            "end": obs.describe_end(),
            "exit_code": obs.exit_code,
            "signal": obs.signal,
            "timed_out": obs.timed_out,
            "truncated": obs.truncated,
            "verdict": verdict.word(),
            "checks": verdict.checks,
            "fingerprint": fingerprint,
            "stdout": paths.stdout,
            "stderr": paths.stderr,
            "cleanup": cleanup,
        });
        let p = self.env.dir.join(&paths.json);
        run.write_state(&p, &record).map_err(werr(&p))?;
        run.emit(Event::UltraObserve {
            goal_id: json!(self.goal.id),
            criterion: json!(c.id),
            label: json!(label),
            verdict: json!(verdict.word()),
            end: json!(obs.describe_end()),
        });
        Ok(to_record(label, &run.run_id, ts, &obs, &verdict, fingerprint, paths))
    }
}

fn to_record(
    label: &str,
    run_id: &str,
    ts: String,
    obs: &Observation,
    verdict: &Verdict,
    fingerprint: String,
    evidence: EvidencePaths,
) -> ObsRecord {
    ObsRecord {
        label: label.into(),
        run_id: run_id.into(),
        ts,
        pass: verdict.pass,
        end: obs.describe_end(),
        exit_code: obs.exit_code,
        failures: verdict.failures(),
        fingerprint,
        evidence,
    }
}

/// The parts of a receipt the caller decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptParts {
    /// What.
    pub resource: String,
    /// What was done.
    pub action: String,
    /// Verified gone / failed / unverifiable.
    pub verified: Option<bool>,
    /// How it was checked.
    pub check: String,
    /// The claimed path, when there is one.
    pub path: Option<String>,
    /// Processes that must no longer run (re-checked at the end of the run).
    pub pids: Vec<i64>,
}

/// Whether a claimed-removed path is still there; `None` when it cannot be checked (a
/// relative path that escapes the repository root).
fn path_present(root: &Path, p: &str) -> Option<bool> {
    let abs = if Path::new(p).is_absolute() { PathBuf::from(p) } else { work_runtime::fsx::confine(root, p).ok()? };
    Some(std::fs::symlink_metadata(abs).is_ok())
}

/// Re-checks a failed receipt now: `Some(true)` what it names is still there, `Some(false)`
/// it is gone, `None` it cannot be re-checked.
fn recheck(root: &Path, r: &Receipt, all: &[Receipt]) -> Option<bool> {
    if let Some(p) = &r.path {
        return path_present(root, p);
    }
    if !r.pids.is_empty() {
        return Some(r.pids.iter().any(|&p| observe::pid_running(p)));
    }
    // A later receipt for the same resource (a criterion's cleanup command run again) decides.
    all.iter()
        .rfind(|l| l.seq > r.seq && l.source == r.source && l.criterion == r.criterion && l.resource == r.resource)
        .map(|l| l.verified != Some(true))
}

fn leftover_line(root: &Path, r: &Receipt) -> String {
    let what = if let Some(p) = &r.path {
        if path_present(root, p) == Some(true) { format!("`{p}` still exists") } else { r.check.clone() }
    } else if !r.pids.is_empty() {
        let running: Vec<String> =
            r.pids.iter().filter(|&&p| observe::pid_running(p)).map(|p| format!("pid {p} still runs")).collect();
        if running.is_empty() { r.check.clone() } else { running.join(", ") }
    } else if r.resource.starts_with("cleanup of scenario") {
        format!("the cleanup command failed ({})", r.check)
    } else {
        r.check.clone()
    };
    format!("{what} ({}, receipt #{})", r.resource, r.seq)
}

/// Checks an agent's cleanup claim: a path must be gone (relative paths are confined to the
/// repository root; an absolute path, e.g. a `mktemp` directory, is only checked for
/// existence), a pid must no longer run; anything else is recorded as an unverifiable claim.
pub fn verify_cleanup(root: &Path, claim: &CleanupClaim) -> ReceiptParts {
    let mut parts = ReceiptParts {
        resource: one_line(&claim.resource, 200),
        action: one_line(&claim.action, 200),
        verified: None,
        check: "no path or pid to check: recorded as a claim".into(),
        path: None,
        pids: Vec::new(),
    };
    if let Some(p) = claim.path.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
        parts.path = Some(p.to_string());
        if !Path::new(p).is_absolute()
            && let Err(e) = work_runtime::fsx::confine(root, p)
        {
            parts.verified = Some(false);
            parts.check = format!("path refused: {e}");
            return parts;
        }
        if path_present(root, p) != Some(false) {
            parts.verified = Some(false);
            parts.check = format!("`{p}` still exists");
        } else {
            parts.verified = Some(true);
            parts.check = format!("`{p}` is gone");
        }
    } else if let Some(pid) = claim.pid {
        parts.pids = vec![pid];
        if pid <= 0 || pid > i64::from(i32::MAX) {
            parts.verified = Some(false);
            parts.check = format!("pid {pid} is not a process id");
            parts.pids.clear();
        } else if observe::pid_running(pid) {
            parts.verified = Some(false);
            parts.check = format!("pid {pid} still runs");
        } else {
            parts.verified = Some(true);
            parts.check = format!("pid {pid} no longer runs");
        }
    }
    parts
}

/// The engine's records as they were before a dispatch.
struct KeptRecords {
    /// The notepad's bytes.
    notepad: Option<Vec<u8>>,
    /// Copies of the RED evidence files (relative path → bytes): restored when changed.
    copies: BTreeMap<String, Vec<u8>>,
    /// sha256 of every evidence file (relative path → hex).
    digests: BTreeMap<String, String>,
}

impl KeptRecords {
    fn restorable(&self) -> String {
        let mut v = Vec::new();
        if self.notepad.is_some() {
            v.push("notepad.md".to_string());
        }
        v.extend(self.copies.keys().cloned());
        v.join(", ")
    }
}

fn digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// Every file under `<dir>/evidence/`, relative to `dir` (`evidence/<criterion>/<label>.*`),
/// sorted. Links are not followed.
fn evidence_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::from("evidence")];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&rel)) else { continue };
        for e in entries.flatten() {
            let r = rel.join(e.file_name());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(r),
                Ok(_) => out.push(r.to_string_lossy().into_owned()),
                Err(_) => {}
            }
        }
    }
    out.sort();
    out
}

fn verdict_word(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

fn verified_word(v: Option<bool>, check: &str) -> String {
    match v {
        Some(true) => format!("verified ({check})"),
        Some(false) => format!("NOT verified ({check})"),
        None => format!("unverifiable ({check})"),
    }
}

fn describe_rec(r: &ObsRecord) -> String {
    if r.failures.is_empty() { r.end.clone() } else { format!("{}; {}", r.end, one_line(&r.failures, 300)) }
}

fn ticks(ids: &[String]) -> String {
    ids.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
}

fn one_line(s: &str, max: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > max { format!("{}…", s.chars().take(max).collect::<String>()) } else { s }
}

/// What changed in git's view of the tree since `seal` (one line), if anything.
fn git_tampered(
    git: &work_git::Git,
    seal: Option<&work_git::integrity::Seal>,
) -> Result<Option<String>, work_git::GitError> {
    let Some(seal) = seal else { return Ok(None) };
    let changes = seal.changes(&git.seal()?);
    Ok(if changes.is_empty() { None } else { Some(work_git::integrity::describe(&changes)) })
}
