//! The goal's durable files under `<state>/goals/<goal-id>/`:
//!
//! - `state.json` — the resume source: tier, attempts, per-criterion RED and latest
//!   observation (written atomically after every step);
//! - `notepad.md` — the append-only notepad (earlier bytes are never changed: each entry is
//!   appended by writing old bytes + the new entry atomically, see [`Notepad::append`]);
//! - `receipts.json` — the cleanup receipts (written atomically, entries only ever added);
//! - `evidence/<criterion>/<label>.{stdout,stderr,json}` — what each scenario run showed.
//!
//! Every one of them is written through the runtime's state writer and read back through its
//! digest-checked readers: a file changed (or `state.json` / `receipts.json` removed) outside a
//! run is refused on the next run with one line, and `work ultra GOAL.toml --fresh` starts the
//! goal over.

use crate::goal::{Criterion, CriterionKind, PassSpec, Tier};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use work_runtime::fsx;
use work_runtime::redact::Redactor;

/// The state file's schema version.
pub const STATE_VERSION: u32 = 1;

/// The directory of a goal.
pub fn goal_dir(state_dir: &Path, goal_id: &str) -> PathBuf {
    state_dir.join("goals").join(goal_id)
}

/// How a goal (or a run of it) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GoalStatus {
    /// Running (a run that was killed leaves this; the next run resumes).
    #[serde(rename = "RUNNING")]
    Running,
    /// Every criterion observed PASS, every cleanup receipt verified.
    #[serde(rename = "DONE")]
    Done,
    /// Stopped without success; the stop reason says why and what to do.
    #[serde(rename = "BLOCKED")]
    Blocked,
}

impl GoalStatus {
    /// `RUNNING`, `DONE` or `BLOCKED`.
    pub fn as_str(self) -> &'static str {
        match self {
            GoalStatus::Running => "RUNNING",
            GoalStatus::Done => "DONE",
            GoalStatus::Blocked => "BLOCKED",
        }
    }
}

/// Paths of one observation's evidence, relative to the goal directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct EvidencePaths {
    /// The engine's record (command, end, exit code, verdict, checks, fingerprint).
    pub json: String,
    /// stdout, when captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// stderr, when captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

/// The summary of one observation kept in the state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObsRecord {
    /// `red`, `check-<run>`, `attempt-<n>`.
    pub label: String,
    /// The run that made it.
    pub run_id: String,
    /// When.
    pub ts: String,
    /// PASS.
    pub pass: bool,
    /// How the scenario ended (`exit 1`, `timed out`).
    pub end: String,
    /// The exit code.
    pub exit_code: Option<i32>,
    /// The failed checks (empty when it passed).
    pub failures: String,
    /// The observation fingerprint.
    pub fingerprint: String,
    /// Where its evidence is.
    pub evidence: EvidencePaths,
}

/// One criterion's durable state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CriterionState {
    /// The definition fingerprint the RED below belongs to.
    pub definition: String,
    /// The failing-first proof (or, for a pin, the passing characterization).
    pub red: Option<ObsRecord>,
    /// The latest observation.
    pub last: Option<ObsRecord>,
    /// Implementation attempts that targeted this criterion, over all runs.
    pub attempts: u32,
}

/// One implementation attempt, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// The goal-wide attempt number (1, 2, …).
    pub n: u32,
    /// The run.
    pub run_id: String,
    /// The criteria it targeted.
    pub targets: Vec<String>,
    /// The dispatch id.
    pub dispatch_id: String,
    /// `ok`, or the dispatch's failure reason.
    pub outcome: String,
    /// The agent's status (`done`, `partial`, `blocked`), when it answered.
    pub agent_status: Option<String>,
    /// The agent's one-line summary, when it answered.
    pub summary: Option<String>,
    /// The targets observed PASS after it.
    pub green_after: Vec<String>,
    /// What the engine observed after it, on one line (`a FAIL (exit 1) · b PASS`).
    pub observed: String,
}

/// An implementation attempt dispatched and not yet recorded: committed before the dispatch,
/// so that a run cut off after the implementer answered (its answer is in that run's
/// `dispatches.jsonl`) is resumed with that answer as this attempt, never forgetting it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightAttempt {
    /// The goal-wide attempt number.
    pub n: u32,
    /// The run that dispatched it.
    pub run_id: String,
    /// The criteria it targets.
    pub targets: Vec<String>,
    /// The digest of the request (`work_runtime::dispatch::replay::request_digest`): the
    /// recorded answer to exactly this request is taken.
    pub request_sha256: String,
}

/// `state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalState {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The goal id.
    pub goal_id: String,
    /// The objective (as of the latest run).
    pub objective: String,
    /// The tier (ratchets up only).
    pub tier: Tier,
    /// The goal file of the latest run.
    pub goal_file: String,
    /// Status.
    pub status: GoalStatus,
    /// Why it stopped (machine word), when it stopped.
    pub stop_reason: Option<String>,
    /// The stop in one line for a person.
    pub stop_detail: Option<String>,
    /// Created (RFC 3339).
    pub created: String,
    /// Updated (RFC 3339).
    pub updated: String,
    /// The runs, in order.
    pub runs: Vec<String>,
    /// Attempts over all runs.
    pub attempts: u32,
    /// The attempts, in order.
    pub attempt_log: Vec<AttemptRecord>,
    /// Per criterion id.
    pub criteria: BTreeMap<String, CriterionState>,
    /// What judges the goal (the scenarios' check scripts, the configuration, the test tree,
    /// the suites' own reports), frozen before the goal's first implementation dispatch: every
    /// later run compares the tree with it before anything runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_surface: Option<work_git::surface::CheckSurface>,
    /// The sha256 of `check_surface` as frozen ([`surface_digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_surface_sha256: Option<String>,
    /// What judges each criterion, frozen with the check surface (criteria added to the goal
    /// later are frozen at the next run's freeze): a later run whose goal removed or changed
    /// one stops BLOCKED `check-tampered` before anything runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub frozen_criteria: BTreeMap<String, FrozenCriterion>,
    /// How many receipts `receipts.json` held when this state was written: `receipts.json` is
    /// written first and `state.json` commits it, so receipts beyond this count (a run killed
    /// between the two writes) were never committed and are dropped when the goal is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipts_committed: Option<usize>,
    /// The attempt dispatched and not yet recorded (see [`InFlightAttempt`]); cleared by the
    /// write that records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlightAttempt>,
    /// The goal's attempts when the run in progress began: a run that resumes one cut off
    /// keeps it, so its figures (attempts this run, per criterion against `max_attempts`)
    /// count the cut-off run's attempts. Cleared when a run stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts_before_run: Option<u32>,
}

/// What judges a criterion, as frozen: its kind, scenario, observable and teardown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenCriterion {
    /// `change` or `pin`.
    pub kind: CriterionKind,
    /// The scenario command.
    pub scenario: String,
    /// The PASS/FAIL observable.
    pub pass: PassSpec,
    /// The paired teardown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<String>,
}

impl FrozenCriterion {
    /// `c` as it judges now.
    pub fn of(c: &Criterion) -> Self {
        FrozenCriterion { kind: c.kind, scenario: c.scenario.clone(), pass: c.pass.clone(), cleanup: c.cleanup.clone() }
    }

    /// What of `self` `now` changed (`scenario`, `pass`, `kind`, `cleanup`), in that order.
    pub fn changed_in(&self, now: &FrozenCriterion) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.scenario != now.scenario {
            v.push("scenario");
        }
        if self.pass != now.pass {
            v.push("pass");
        }
        if self.kind != now.kind {
            v.push("kind");
        }
        if self.cleanup != now.cleanup {
            v.push("cleanup");
        }
        v
    }
}

/// The digest of a frozen check surface (of its JSON form).
pub fn surface_digest(s: &work_git::surface::CheckSurface) -> String {
    fsx::sha256_hex(&serde_json::to_vec(s).unwrap_or_default())
}

impl GoalState {
    /// A fresh state.
    pub fn new(goal_id: &str, objective: &str, tier: Tier, goal_file: &str, now: &str) -> Self {
        GoalState {
            version: STATE_VERSION,
            goal_id: goal_id.into(),
            objective: objective.into(),
            tier,
            goal_file: goal_file.into(),
            status: GoalStatus::Running,
            stop_reason: None,
            stop_detail: None,
            created: now.into(),
            updated: now.into(),
            runs: Vec::new(),
            attempts: 0,
            attempt_log: Vec::new(),
            criteria: BTreeMap::new(),
            check_surface: None,
            check_surface_sha256: None,
            frozen_criteria: BTreeMap::new(),
            receipts_committed: None,
            in_flight: None,
            attempts_before_run: None,
        }
    }

    /// Loads `state.json` from a goal directory; `Ok(None)` when there is none (and never was:
    /// one that `work` wrote and someone removed is refused).
    pub fn load(dir: &Path) -> Result<Option<GoalState>, String> {
        let path = dir.join("state.json");
        let text = fsx::read_kept(&path).map_err(|e| format!("read `{}`: {e}", path.display()))?;
        let Some(text) = text else { return Ok(None) };
        let st: GoalState =
            serde_json::from_str(&text).map_err(|e| format!("read goal state `{}`: {e}", path.display()))?;
        if st.version != STATE_VERSION {
            return Err(format!("read goal state `{}`: version {} is not {STATE_VERSION}", path.display(), st.version));
        }
        if let Some(s) = &st.check_surface
            && st.check_surface_sha256.as_deref() != Some(surface_digest(s).as_str())
        {
            return Err(format!(
                "read goal state `{}`: its frozen check surface does not match its digest (changed outside a run)",
                path.display()
            ));
        }
        Ok(Some(st))
    }

    /// Reads back the notepad and every evidence file the state names (digest-checked): a
    /// notepad, a RED proof or an observation rewritten after `work` exited is refused, naming
    /// the file.
    pub fn check_records(&self, dir: &Path) -> Result<(), String> {
        let pad = dir.join("notepad.md");
        fsx::read_optional_bytes(&pad).map_err(|e| format!("read `{}`: {e}", pad.display()))?;
        let recs = self.criteria.values().flat_map(|c| c.red.iter().chain(c.last.iter()));
        for r in recs {
            for rel in
                [Some(&r.evidence.json), r.evidence.stdout.as_ref(), r.evidence.stderr.as_ref()].into_iter().flatten()
            {
                let path = dir.join(rel);
                fsx::read_optional_bytes(&path).map_err(|e| format!("read evidence `{}`: {e}", path.display()))?;
            }
        }
        Ok(())
    }
}

/// Who issued a cleanup receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiptSource {
    /// The engine itself (a scenario's process group, a criterion's `cleanup` command).
    Engine,
    /// An agent's claim, checked by the engine where it can be.
    Agent,
}

/// One cleanup receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// 1, 2, … over the goal.
    pub seq: u64,
    /// The run.
    pub run_id: String,
    /// When.
    pub ts: String,
    /// Who issued it.
    pub source: ReceiptSource,
    /// The attempt (agent receipts) or the observation label (engine receipts).
    pub during: String,
    /// The criterion, when it belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criterion: Option<String>,
    /// What was torn down (a path, a pid, a process group, a command).
    pub resource: String,
    /// What was done to it.
    pub action: String,
    /// Engine-verified: `true` checked gone / succeeded, `false` checked still there / failed,
    /// `null` cannot be checked (recorded as a claim only).
    pub verified: Option<bool>,
    /// How it was checked.
    pub check: String,
    /// For an agent's path claim: the path, relative to the repository root (re-checked at
    /// the end of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Processes that must no longer run: an agent's claimed-killed pid, or a scenario's
    /// escaped processes that outlived the engine's kill (re-checked at the end of the run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<i64>,
}

/// `receipts.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Receipts {
    /// The goal id.
    pub goal_id: String,
    /// Every receipt, oldest first.
    pub receipts: Vec<Receipt>,
}

impl Receipts {
    /// Loads `receipts.json`; empty when absent.
    pub fn load(dir: &Path, goal_id: &str) -> Result<Receipts, String> {
        let path = dir.join("receipts.json");
        match fsx::read_kept(&path).map_err(|e| format!("read `{}`: {e}", path.display()))? {
            None => Ok(Receipts { goal_id: goal_id.into(), receipts: Vec::new() }),
            Some(t) => serde_json::from_str(&t).map_err(|e| format!("read cleanup receipts `{}`: {e}", path.display())),
        }
    }

    /// The next sequence number.
    pub fn next_seq(&self) -> u64 {
        self.receipts.last().map(|r| r.seq + 1).unwrap_or(1)
    }
}

/// The append-only notepad.
#[derive(Debug, Clone)]
pub struct Notepad {
    path: PathBuf,
    redactor: Redactor,
}

impl Notepad {
    /// The notepad of a goal directory.
    pub fn new(dir: &Path, redactor: Redactor) -> Self {
        Notepad { path: dir.join("notepad.md"), redactor }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether it exists yet.
    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    /// Appends `entry` (redacted; a trailing newline is added when missing). The earlier bytes
    /// are kept exactly: the file is rewritten atomically as old bytes + entry, so a crash
    /// leaves either the old notepad or the old notepad plus the whole entry.
    pub fn append(&self, entry: &str) -> io::Result<()> {
        // Digest-checked: a notepad rewritten after `work` exited is refused, never appended to.
        let mut bytes = fsx::read_optional_bytes(&self.path)?.unwrap_or_default();
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(self.redactor.redact(entry).as_bytes());
        if !bytes.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        fsx::write_atomic(&self.path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notepad_only_ever_grows_and_keeps_earlier_bytes() {
        let dir = tempfile::tempdir().expect("tmp");
        let pad = Notepad::new(dir.path(), Redactor::default());
        pad.append("# Notepad\nStarted: now").expect("append");
        let first = std::fs::read(pad.path()).expect("read");
        pad.append("## entry 2\n").expect("append");
        let second = std::fs::read(pad.path()).expect("read");
        assert!(second.starts_with(&first), "earlier bytes changed");
        assert_eq!(String::from_utf8_lossy(&second), "# Notepad\nStarted: now\n## entry 2\n");
    }

    #[test]
    fn a_secret_in_a_new_entry_is_redacted_but_old_bytes_are_not_touched() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut r = Redactor::default();
        r.add("sk-very-secret-value");
        let plain = Notepad::new(dir.path(), Redactor::default());
        plain.append("old line").expect("append");
        let pad = Notepad::new(dir.path(), r);
        pad.append("key sk-very-secret-value").expect("append");
        let text = std::fs::read_to_string(pad.path()).expect("read");
        assert!(text.starts_with("old line\n"));
        assert!(!text.contains("sk-very-secret-value"), "{text}");
    }

    #[test]
    fn state_round_trips_and_a_foreign_version_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let st = GoalState::new("g", "o", Tier::Light, "GOAL.toml", "t");
        fsx::write_json_atomic(&dir.path().join("state.json"), &st).expect("write");
        assert_eq!(GoalState::load(dir.path()).expect("load"), Some(st.clone()));
        let mut bad = serde_json::to_value(&st).expect("json");
        bad["version"] = 99.into();
        fsx::write_json_atomic(&dir.path().join("state.json"), &bad).expect("write");
        assert!(GoalState::load(dir.path()).expect_err("refused").contains("version 99"));
        assert_eq!(GoalState::load(&dir.path().join("none")).expect("absent"), None);
    }
}
