//! `<spec-dir>/loop-run.json`: what `work loop run` remembers between invocations beyond the
//! engine and the cohort (which stay the authority on state, waves and retry counts).
//!
//! It holds only the driver's own progress: the review mode chosen, the revision the drafter
//! owes, the tasks of the current wave already done, the fix the implementer owes, the current
//! review unit's rounds and sustained findings, the engine transition whose fingerprints were
//! recorded, the code phase's base commit, the implementer dispatch in flight (its base and
//! "before" tree, written before the dispatch), the last implementer step's boundary snapshot
//! and the loss found at a boundary, a review stop that waits for a person's
//! decision, the gate the run last paused at, the runs cut off before they ended, the review round
//! in progress and a unit on its way to the merge gate. Written atomically after every step (and
//! before every implementer dispatch), so a killed run resumes where it was.

use crate::risk::ReviewMode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The file's name inside the spec directory.
pub const STATE_FILE: &str = "loop-run.json";
/// The schema tag.
pub const SCHEMA: &str = "work.loop.run.v1";

/// What the drafter must revise (sustained spec-review findings or a person's rejection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revision {
    /// `review` or `rejected`.
    pub kind: String,
    /// What to change, in words.
    pub detail: String,
    /// The sustained findings, when from a review.
    #[serde(default)]
    pub findings: Vec<Value>,
}

/// What the implementer must fix before the wave is complete again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    /// `gates`, `review` or `human`.
    pub kind: String,
    /// What to fix, in words.
    pub detail: String,
    /// The sustained findings (review) — re-read from the adjudication artifacts.
    #[serde(default)]
    pub findings: Vec<Value>,
}

/// A sustained finding of the current review unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitFinding {
    /// The reviewer role.
    pub reviewer: String,
    /// The round it was sustained in.
    pub round: u32,
    /// The finding id.
    pub id: String,
    /// `blocker`, `concern`, `nit`, …
    pub severity: String,
    /// The title.
    pub title: String,
    /// Its fingerprint.
    pub fingerprint: String,
    /// `open` until a fix round ran after it, then `fixed`.
    pub resolution: String,
}

/// One reviewer's adjudicated outcome in a round (kept for the verdict record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewerOutcome {
    /// The round.
    pub round: u32,
    /// The reviewer role.
    pub role: String,
    /// `clean`, `findings`, `indeterminate`, `missing` or `skipped`.
    pub outcome: String,
    /// The raw report (repository-relative), when one was persisted.
    pub report: Option<String>,
    /// The adjudication artifact (repository-relative), when one was persisted.
    pub adjudication: Option<String>,
    /// Sustained findings.
    pub sustained: usize,
    /// Refuted findings.
    pub refuted: usize,
    /// Indeterminate findings.
    pub indeterminate: usize,
    /// Why, for `missing` / `skipped` / `indeterminate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// An implementer dispatch that was started and whose result is not yet recorded: persisted
/// before the dispatch, so a run killed mid-dispatch judges the resumed dispatch against the
/// tree as it was before the first one (not against the killed agent's half-done work).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    /// The dispatch label (`task-<id>`, `fix-<kind>`).
    pub label: String,
    /// The attempt (1, or 2 after a nudge).
    pub attempt: u32,
    /// HEAD when the task or fix started (`""` on an unborn branch): changes are measured
    /// against it, so committed work counts.
    pub base: String,
    /// The tree's change against `base` before the first dispatch: path ⇒ content hash.
    pub before: BTreeMap<String, String>,
}

/// The whole tree when an implementer step (a plan task or a repair round) of the code phase
/// ended with a change: the boundary the next step's loss is measured from (see the driver's
/// `boundary` module).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boundary {
    /// The step (`task-<id>`, `fix-<kind>`).
    pub label: String,
    /// The whole tree (tracked and untracked, outside the spec and state directories) as a
    /// git tree id.
    pub tree: String,
    /// A snapshot commit of that tree, kept from `git gc` by the run's snapshot ref:
    /// `git show <commit>:<path>` recovers any file of it.
    pub commit: String,
}

/// Work a later step lost of the earlier steps' (the stop `snapshot-loss`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostWork {
    /// The boundary the work was there at.
    pub from: String,
    /// The step that lost it.
    pub to: String,
    /// The snapshot commit to recover from (the `from` boundary's).
    pub snapshot: String,
    /// The ref that keeps it (and the run's earlier snapshots).
    pub snapshot_ref: String,
    /// Lines an earlier step added that are gone, per path.
    pub lines: Vec<work_git::snapshot::LostLines>,
    /// Paths an earlier step changed that are back at the base or gone.
    pub paths: Vec<String>,
    /// `git show <snapshot>:<path>` for every path named.
    pub recovery: Vec<String>,
}

/// A review stop that waits for a person's decision (review stasis, an undecided
/// adjudication). Kept so that a resume without a decision pauses again without a new, paid
/// review round, and so that `--approve` / `--reject` know what they decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingDecision {
    /// The review unit.
    pub unit: String,
    /// `code` or `spec-plan`.
    pub phase: String,
    /// The stop's reason code (`review-stasis`, `adjudication-indeterminate`).
    pub reason: String,
    /// The stop's message.
    pub message: String,
    /// The round that stopped.
    pub round: u32,
    /// The findings the person decides on (stasis: the findings sustained again; an undecided
    /// adjudication: the findings left indeterminate or unadjudicated).
    #[serde(default)]
    pub undecided: Vec<Value>,
    /// Findings of the same round that were sustained and are not in question (they reopen
    /// work whatever the decision).
    #[serde(default)]
    pub sustained: Vec<Value>,
}

/// The driver's progress (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunnerState {
    /// [`SCHEMA`].
    pub schema: String,
    /// The engine run this belongs to.
    pub run_id: String,
    /// The review mode, once decided.
    #[serde(default)]
    pub review_mode: Option<ReviewMode>,
    /// Why that mode.
    #[serde(default)]
    pub mode_reasons: Vec<String>,
    /// Light mode escalated to full (a Blocker survived the single re-review).
    #[serde(default)]
    pub escalated: bool,
    /// What the drafter owes.
    #[serde(default)]
    pub revision: Option<Revision>,
    /// The current spec review unit's id and rounds.
    #[serde(default)]
    pub spec_unit: String,
    /// Rounds run in the current spec review unit.
    #[serde(default)]
    pub spec_rounds: u32,
    /// Wave index (as a string key) ⇒ tasks done in the current pass over that wave.
    #[serde(default)]
    pub done_tasks: BTreeMap<String, Vec<String>>,
    /// What the implementer owes.
    #[serde(default)]
    pub fix: Option<Fix>,
    /// The current code review unit's id.
    #[serde(default)]
    pub unit: String,
    /// Rounds run in the current unit.
    #[serde(default)]
    pub unit_rounds: u32,
    /// Reviewer outcomes of the current unit, every round.
    #[serde(default)]
    pub unit_reviews: Vec<ReviewerOutcome>,
    /// Sustained findings of the current unit.
    #[serde(default)]
    pub unit_findings: Vec<UnitFinding>,
    /// Light mode: the single Blocker re-review was used in this unit.
    #[serde(default)]
    pub rereview_used: bool,
    /// Light mode: what the next CODE-REVIEW does without a new pass: `accept` (non-Blocker
    /// fixes are not re-reviewed) or `rereview` (the single Blocker re-review).
    #[serde(default)]
    pub light_next: Option<String>,
    /// The engine transition (sequence number) whose `review record --fingerprint` ran.
    #[serde(default)]
    pub recorded_seq: Option<u64>,
    /// The last gate runs.
    #[serde(default)]
    pub last_gates: Vec<Value>,
    /// The gates (name, command) as they were when the run started: every later invocation
    /// runs these, whatever `work.toml` says by then.
    #[serde(default)]
    pub pinned_gates: Option<Vec<(String, String)>>,
    /// What judges the code phase (the gate scripts, the configuration, the test tree), frozen
    /// when the code phase began.
    #[serde(default)]
    pub check_surface: Option<work_git::surface::CheckSurface>,
    /// git's view of the tree (index flags, excludes, attributes, hooks, drivers), sealed when
    /// the code phase began (see [`crate::git_seal`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_seal: Option<work_git::integrity::Seal>,
    /// spec.md and plan.md (their status lines left out) as approved at plan-locked.
    #[serde(default)]
    pub approved_digests: BTreeMap<String, String>,
    /// Verdict records written (repository-relative paths), in order.
    #[serde(default)]
    pub verdicts: Vec<String>,
    /// HEAD when the code phase began (`""` on an unborn branch): code review sees the change
    /// against it (`git diff <base>` plus untracked files), committed work included.
    #[serde(default)]
    pub code_base: Option<String>,
    /// The branch when the code phase began (`None`: detached, or a run started before the
    /// branch was recorded): with `code_base`, the base HEAD is judged against after every
    /// implementer dispatch (`work_git::head`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_branch: Option<String>,
    /// The implementer dispatch in flight (see [`InFlight`]).
    #[serde(default)]
    pub in_flight: Option<InFlight>,
    /// The last boundary of the code phase (see [`Boundary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<Boundary>,
    /// The loss that stopped the run at the last boundary (see [`LostWork`]); cleared when a
    /// boundary passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_work: Option<LostWork>,
    /// A review stop waiting for a person's decision (see [`PendingDecision`]).
    #[serde(default)]
    pub pending_decision: Option<PendingDecision>,
    /// The engine transition sequence at which the run last paused at a spec or plan human
    /// gate: an Approved status line fires the gate only after the run has paused there once
    /// (or with `--approve`), so an approval that predates the gate is never silently taken.
    #[serde(default)]
    pub gate_waited: Option<u64>,
    /// The `work` runs of this loop run that were cut off (killed) before they ended: what
    /// they recorded as answered (`dispatches.jsonl`) is taken from their records instead of
    /// being dispatched again. A run adds itself before its first dispatch; a run that ends
    /// (done, paused or blocked) clears the list, its answers judged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_runs: Vec<String>,
    /// The review round in progress (see [`OpenRound`]): a run cut off during it resumes the
    /// same round, not a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_round: Option<OpenRound>,
    /// A review unit on its way to the merge gate whose clean record and verdict are still
    /// owed (see [`Shipping`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipping: Option<Shipping>,
    /// A person's decision given to a run that may be cut off before it ends (see
    /// [`Decision`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
}

/// A person's `--approve` / `--reject`, committed before it is applied, with the engine's
/// transition sequence then. When that run is cut off after the engine moved past it, the same
/// command run again finds its decision spent: it resumes without deciding again (never at
/// the next gate, never refused for not being at one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// `approve` or `reject`.
    pub kind: String,
    /// The rejection's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The engine's transition sequence when the decision was given.
    pub seq: u64,
}

impl Decision {
    /// True when `self` is the decision `kind`/`text` a command line gives.
    pub fn is(&self, kind: &str, text: Option<&str>) -> bool {
        self.kind == kind && self.text.as_deref() == text
    }
}

/// A review round that was started and not yet routed: its number and the engine transition
/// sequence when it started. While the engine has not moved, a resumed run runs this round
/// again under the same number (its recorded answers are taken, see `open_runs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenRound {
    /// The round.
    pub round: u32,
    /// The engine's transition sequence when the round started.
    pub seq: u64,
}

/// A clean review unit shipped to the merge gate: written before `reviewers-clean` fires, so a
/// run cut off after the transition still records the clean report and writes the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shipping {
    /// The review unit.
    pub unit: String,
    /// The clean adjudication to record, if any (a person's acceptance has none).
    pub clean: Option<String>,
    /// The residual risks the verdict carries.
    pub residual: Vec<String>,
}

impl RunnerState {
    /// A fresh state for an engine run.
    pub fn new(run_id: &str) -> Self {
        RunnerState { schema: SCHEMA.into(), run_id: run_id.into(), ..RunnerState::default() }
    }

    /// True when a run was cut off after applying the decision `kind`/`text` (the engine is
    /// at `seq` now): that decision is spent.
    pub fn spent_decision(&self, kind: &str, text: Option<&str>, seq: u64) -> bool {
        !self.open_runs.is_empty() && self.decision.as_ref().is_some_and(|d| d.is(kind, text) && seq > d.seq)
    }
}
