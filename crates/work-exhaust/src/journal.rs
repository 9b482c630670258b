//! The journal: `.work/quality-journals/work-exhaust-<task>.json` (how it is kept on disk, a
//! snapshot plus an append-only log, is [`crate::store`]). It is both the resume source and
//! (its public fields) the master object.

use crate::item::Item;
use crate::items::{Rejected, concept_key, dedup_keys};
use crate::keyset::KeySet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use work_runtime::budget::Spent;

/// The journal format version.
pub const JOURNAL_VERSION: u32 = 1;

/// One round's record (the `rounds[]` entry).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RoundRecord {
    /// 1-based round number.
    pub n: u32,
    /// The angles this round ran (`gate-3` for a round that ran only the final oracles).
    pub angles_used: Vec<String>,
    /// Ids of the items this round added to `seen` (gate 3's included).
    pub new_items: Vec<String>,
    /// The qualifying dry counter after the round.
    pub dry_counter_after: u32,
    /// The round re-ran only exhausted angles (counter untouched).
    pub soft_empty: bool,
    /// Finders that failed (exit code, timeout, malformed twice).
    pub failed_finders: u32,
    /// Whether gate 3 ran in this round, and what it found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate3: Option<Gate3Record>,
    /// Items refused by gate 2 in this round.
    #[serde(default)]
    pub rejected_items: Vec<String>,
    /// Items dropped as already seen.
    #[serde(default)]
    pub duplicates: u32,
    /// Angles given up in this round (their finder failed in two rounds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub angles_given_up: Vec<String>,
    /// `qualifying-dry`, `new-items`, `soft-empty`, `all-finders-failed`.
    pub verdict: String,
}

/// Gate 3 in a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gate3Record {
    /// The final oracles run.
    pub oracles: Vec<String>,
    /// Ids gate 3 added.
    pub new_items: Vec<String>,
}

/// The journal (and master object).
///
/// Every field has a default, so a journal in the minimal shape
/// (`{"seen": [], "anglesUsed": [], "dryCounter": 0, "rounds": [], "droppedDueToBudget": []}`)
/// resumes: its `seen` ids dedup, its used angles are never re-run as fresh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Journal {
    /// Format version.
    pub version: u32,
    /// The task slug.
    pub task: String,
    /// What is being discovered.
    pub what: String,
    /// K at the last run.
    pub k: u32,
    /// Per-round summaries.
    pub rounds: Vec<RoundRecord>,
    /// Ids of every accepted item, in order of acceptance.
    pub seen: Vec<String>,
    /// Accepted items, with the engine's `reReadSources` and `workDone`.
    pub items: Vec<Item>,
    /// Items refused by gate 2 (remembered: they never re-enter).
    pub rejected: Vec<Rejected>,
    /// Why the loop stopped (`null` while it can go on).
    pub stopped_reason: Option<String>,
    /// What was not run because of a budget or a caller target (no silent caps).
    pub dropped_due_to_budget: Vec<String>,
    /// Why each angle in `droppedDueToBudget` was not run.
    pub budget_notes: Vec<String>,
    /// Scope misses and given-up angles, stated.
    pub completeness_gaps: Vec<String>,
    /// On a `k-consecutive-dry` stop: `confirmed` when a final oracle (gate 3) ran clean before
    /// the stop, `unconfirmed` when none was configured — dry then rests on the finders alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completeness: Option<String>,
    /// Angles whose finder returned valid output at least once.
    pub angles_used: Vec<String>,
    /// The qualifying dry counter.
    pub dry_counter: u32,
    /// The angle pool in use (duplicates mean deliberate re-runs).
    pub pool: Vec<String>,
    /// How many pool entries have been taken.
    pub cursor: usize,
    /// Failure counts of angles whose finder failed.
    pub angle_failures: BTreeMap<String, u32>,
    /// Angles given up after failing in two rounds.
    pub given_up: Vec<String>,
    /// Angles to run before the pool continues: a finder that failed once, or one the budget
    /// cut from its round.
    pub retry_queue: Vec<String>,
    /// Gate 1 has run.
    pub seed_done: bool,
    /// Ids gate 1 accepted.
    pub seeded: Vec<String>,
    /// Final oracles that have run at least once.
    pub final_oracles_run: Vec<String>,
    /// Dispatches, tokens and USD spent over every run of this journal.
    pub spent: Spent,
    /// The same, per role.
    pub spent_by_role: BTreeMap<String, Spent>,
}

impl Default for Journal {
    fn default() -> Self {
        Journal::new("", "", 3, Vec::new())
    }
}

impl Journal {
    /// A fresh journal.
    pub fn new(task: &str, what: &str, k: u32, pool: Vec<String>) -> Self {
        Journal {
            version: JOURNAL_VERSION,
            task: task.into(),
            what: what.into(),
            k,
            rounds: Vec::new(),
            seen: Vec::new(),
            items: Vec::new(),
            rejected: Vec::new(),
            stopped_reason: None,
            dropped_due_to_budget: Vec::new(),
            budget_notes: Vec::new(),
            completeness_gaps: Vec::new(),
            completeness: None,
            angles_used: Vec::new(),
            dry_counter: 0,
            pool,
            cursor: 0,
            angle_failures: BTreeMap::new(),
            given_up: Vec::new(),
            retry_queue: Vec::new(),
            seed_done: false,
            seeded: Vec::new(),
            final_oracles_run: Vec::new(),
            spent: Spent::default(),
            spent_by_role: BTreeMap::new(),
        }
    }

    /// Parses a journal; the error is one line.
    pub fn parse(text: &str) -> Result<Journal, String> {
        let j: Journal = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if j.version != JOURNAL_VERSION {
            return Err(format!("unsupported journal version {}", j.version));
        }
        if j.cursor > j.pool.len() {
            return Err(format!("cursor {} is past the pool of {}", j.cursor, j.pool.len()));
        }
        Ok(j)
    }

    /// Every dedup key of an accepted item (and of the ids listed in `seen`); the rejected
    /// items' keys are [`Journal::rejected_set`] (a finder's item dedups against both, an
    /// oracle's against these only, so a finder that reports the real sites with wrong quotes
    /// cannot make the oracle's hits there look known).
    pub fn dedup_set(&self) -> KeySet {
        let mut set = KeySet::new();
        for id in &self.seen {
            set.extend(dedup_keys(id, ""));
        }
        for it in &self.items {
            let it = it.value();
            let id = it.get("id").and_then(Value::as_str).unwrap_or("");
            let loc = it.get("location").and_then(Value::as_str).unwrap_or("");
            set.extend(dedup_keys(id, loc));
            // The engine's own re-read names the location's one spelling.
            if let Some(src) = it.pointer("/reRead/source").and_then(Value::as_str) {
                set.extend(dedup_keys("", src));
            }
            if it.get("gate2").and_then(Value::as_str) == Some("concept")
                && let Some(k) = it.get("title").and_then(Value::as_str).and_then(concept_key)
            {
                set.insert(&k);
            }
        }
        set
    }

    /// The dedup keys of every item gate 2 rejected: the same rejection is recorded once.
    pub fn rejected_set(&self) -> KeySet {
        let mut set = KeySet::new();
        for r in &self.rejected {
            set.extend(dedup_keys(&r.id, &r.location));
            if let Some(c) = &r.canonical_location {
                set.extend(dedup_keys("", c));
            }
        }
        set
    }

    /// True when the loop ended for good (not resumable by a bigger budget).
    pub fn is_final(&self) -> bool {
        is_final_reason(self.stopped_reason.as_deref())
    }
}

/// True for the stop reasons that end a loop for good.
pub(crate) fn is_final_reason(reason: Option<&str>) -> bool {
    use work_runtime::outcome::ExhaustStop;
    matches!(reason.and_then(ExhaustStop::parse), Some(ExhaustStop::KDry | ExhaustStop::Exhausted))
}
