//! The round loop: PARALLEL fan-out of finders → BARRIER (gate 2, dedup against `seen`) →
//! dry-counter update with the False-DRY guard → gate 3 before the K-th qualifying dry round
//! commits → journal → next round.

use crate::angle_sets::AngleSets;
use crate::items::{
    Gate2, Gate2Rules, Location, Rejected, accepted_item, canonical_location, classify_location, concept_key,
    dedup_keys, gate2_with, normalize_id,
};
use crate::journal::{Gate3Record, Journal, RoundRecord};
use crate::oracle::{OracleError, OracleTree};
use crate::store::Store;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use work_runtime::dispatch::{Access, DispatchOutcome, DispatchSpec, Dispatcher};
use work_runtime::events::Event;
use work_runtime::run::RunContext;

mod oracles;
mod readonly;

/// The stop reasons of the master object.
pub use work_runtime::outcome::ExhaustStop;

/// How many different angles the consecutive all-failed rounds with one cause must cover to
/// stop the run.
pub const FAIL_FAST_ANGLES: usize = 2;
/// The most items a finder's `context.seen` lists (the most recent ones; `seenTotal` counts
/// them all), so that a dispatch record stays the same size however many items are known.
pub const SEEN_CONTEXT_CAP: usize = 100;

/// A finder's `context.seen`: `id` and `location` of the [`SEEN_CONTEXT_CAP`] most recent items,
/// oldest first.
pub(crate) fn seen_summary(items: &[crate::Item]) -> Vec<Value> {
    let recent = &items[items.len().saturating_sub(SEEN_CONTEXT_CAP)..];
    recent
        .iter()
        .map(|it| {
            let it = it.value();
            json!({"id": it.get("id"), "location": it.get("location")})
        })
        .collect()
}

/// A finder's brief: the goal, its angle, the round, and how many items are known already
/// (`shown` of them are listed in the request's `context.seen`).
pub fn finder_prompt(what: &str, context: Option<&str>, angle: &str, round: u32, known: usize, shown: usize) -> String {
    format!(
        "You are one finder in an exhaustive discovery loop.\n\
         GOAL: find {what}.\n{context}\
         YOUR ANGLE: {angle} — search only through this angle; other finders cover the others.\n\
         Round {round}. {known} item(s) are already known (context.seen lists the {shown} most recent); \
         do not repeat them.\n\
         Work read-only. For every item give a stable kebab-case `id`, a `title`, a `location` as \
         PATH:LINE relative to the repository root (or a named concept when no file applies), the \
         `evidence` you saw, and a `severity` (critical|high|medium|low). The engine re-reads every \
         PATH:LINE itself and rejects locations that do not exist.\n\
         Answer with ONE JSON object: {{\"angle\": \"{angle}\", \"items\": [...], \"roundNotes\": \"what this angle covered and where it felt thin\"}}.",
        context = context.map(|c| format!("CONTEXT: {c}\n")).unwrap_or_default(),
    )
}

/// The line a rerun of a finished task prints.
pub fn already_stopped(reason: &str) -> String {
    format!("exhaust: task already stopped ({reason}); nothing to do (pass --fresh to start over)")
}

/// What one `work exhaust` run is asked to do.
#[derive(Debug, Clone)]
pub struct Params {
    /// What is being discovered.
    pub what: String,
    /// Extra context for the finders.
    pub context: Option<String>,
    /// K (≥ 2).
    pub k: u32,
    /// Fresh angles per round (≥ 1).
    pub angles_per_round: usize,
    /// Gate 1 commands.
    pub seed_oracles: Vec<String>,
    /// Gate 3 commands.
    pub final_oracles: Vec<String>,
    /// Stop after this many rounds (caller target).
    pub max_rounds: Option<u32>,
    /// Wave cap.
    pub concurrency: usize,
    /// The finders' model pin.
    pub model: String,
    /// The finders' effort pin.
    pub effort: String,
    /// One oracle's timeout.
    pub oracle_timeout: Duration,
    /// Where the journal lives.
    pub journal_path: PathBuf,
    /// `--scope`: normalised relative paths every `PATH:LINE` must lie at or under (empty: the
    /// whole repository).
    pub scope: Vec<String>,
}

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ExhaustError {
    /// An oracle failed (bad input: exit 2). The journal holds the last completed round.
    #[error(transparent)]
    Oracle(#[from] OracleError),
    /// The journal could not be written.
    #[error("write journal {path}: {source}")]
    Journal {
        /// The journal path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The JSON Schema every finder's answer must validate against.
pub fn finder_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["angle", "items"],
        "properties": {
            "angle": {"type": "string"},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["id", "title", "location"],
                    "properties": {
                        "id": {"type": "string", "minLength": 1},
                        "title": {"type": "string"},
                        "description": {"type": "string"},
                        "location": {"type": "string", "minLength": 1},
                        "evidence": {
                            "type": "string",
                            "description": "What you saw. Quote source text in backticks: gate 2 compares every quoted span with the lines around the location."
                        },
                        "severity": {"enum": ["critical", "high", "medium", "low"]}
                    }
                }
            },
            "roundNotes": {"type": "string"}
        }
    })
}

/// How an item fared at the barrier.
enum Admission {
    New(String),
    Duplicate,
    Rejected(String),
}

/// One exhaust loop over a journal.
pub struct Engine<'a> {
    run: &'a RunContext,
    dispatcher: &'a Dispatcher,
    params: &'a Params,
    journal: Journal,
    /// The journal's snapshot and append-only log.
    store: Store,
    /// Membership of the journal's angle lists.
    angles: AngleSets,
    /// The dedup keys of the accepted items.
    dedup: crate::keyset::KeySet,
    /// The dedup keys of the rejected items: a finder's item matching one is a duplicate; an
    /// oracle's is judged again (and its rejection recorded once).
    refused: crate::keyset::KeySet,
    rules: Gate2Rules,
    /// Paths written during any finder wave of this run: never citable.
    written: HashSet<String>,
    /// The paths git tracks, read once.
    tracked: Option<HashSet<String>>,
    /// The cause of the last consecutive all-failed rounds and the angles they ran.
    failing: Option<(String, std::collections::BTreeSet<String>)>,
    /// The tree (and git's seal) as the engine last saw it: after the last wave or oracle.
    last_seen: Option<readonly::Seen>,
    /// Where the oracles run: the engine's copy of the tree as the run started.
    oracles: OracleTree,
}

impl<'a> Engine<'a> {
    /// An engine resuming `journal` (a fresh one for a new task), its oracles run on `oracles`.
    pub fn new(
        run: &'a RunContext,
        dispatcher: &'a Dispatcher,
        params: &'a Params,
        mut journal: Journal,
        oracles: OracleTree,
    ) -> Self {
        if !journal.is_final() && journal.stopped_reason.is_some() {
            // A budget or caller-target stop is resumable: the reasons are recomputed.
            journal.stopped_reason = None;
            journal.dropped_due_to_budget.clear();
            journal.budget_notes.clear();
        }
        journal.k = params.k;
        // A finished journal is only reported: no dedup or angle bookkeeping is built for it.
        let (dedup, refused, angles) = if journal.is_final() {
            Default::default()
        } else {
            (journal.dedup_set(), journal.rejected_set(), AngleSets::of(&journal))
        };
        let forbidden = std::fs::canonicalize(&run.state_dir).into_iter().collect();
        let rules = Gate2Rules { forbidden, scope: params.scope.clone() };
        Self {
            run,
            dispatcher,
            params,
            journal,
            store: Store::new(&params.journal_path),
            angles,
            dedup,
            refused,
            rules,
            written: HashSet::new(),
            tracked: None,
            failing: None,
            last_seen: None,
            oracles,
        }
    }

    /// Commits the journal: one appended record (a snapshot now and then; see [`Store`]).
    fn save(&mut self) -> Result<(), ExhaustError> {
        self.persist(false)
    }

    /// Brings the journal's spending up to date and commits it, or writes it whole.
    fn persist(&mut self, whole: bool) -> Result<(), ExhaustError> {
        let mut spent = self.run.budget.spent();
        // Sums of floats depend on the order dispatches finished: round to stay repeatable.
        spent.usage.cost_usd = (spent.usage.cost_usd * 1e9).round() / 1e9;
        self.journal.spent = spent;
        let mut by_role = self.run.budget.spent_by_role();
        for s in by_role.values_mut() {
            s.usage.cost_usd = (s.usage.cost_usd * 1e9).round() / 1e9;
        }
        self.journal.spent_by_role = by_role;
        let written = if whole {
            self.store.snapshot(self.run, &self.journal)
        } else {
            self.store.commit(self.run, &self.journal)
        };
        written
            .map_err(|source| ExhaustError::Journal { path: self.params.journal_path.display().to_string(), source })?;
        self.run.emit(Event::JournalSaved {
            rounds: self.journal.rounds.len() as u64,
            seen: self.journal.seen.len() as u64,
        });
        Ok(())
    }

    fn gap(&mut self, text: String) {
        if !self.journal.completeness_gaps.contains(&text) {
            self.journal.completeness_gaps.push(text);
        }
    }

    /// The barrier's per-item step: dedup against everything ever seen (by normalised id, by
    /// the location's one spelling, by a concept's normalised title), then gate 2. An oracle's
    /// item (a command the engine runs, never an agent) is deduplicated against the accepted
    /// items only: a finder's rejected item at its location does not make it known, so it is
    /// judged by gate 2 on its own (a rejection repeated for the same keys is recorded once).
    ///
    /// `root` is where the item is read: the tree for a finder's, the engine's copy the oracle
    /// searched for an oracle's (which no finder wrote: the written paths are not refused).
    fn admit(&mut self, raw: &Map<String, Value>, source: &str, round: u32, root: &Path) -> Admission {
        let id = raw.get("id").and_then(Value::as_str).unwrap_or("").to_string();
        let location = raw.get("location").and_then(Value::as_str).unwrap_or("").to_string();
        let oracle = !source.starts_with("finder:");
        let canonical = canonical_location(root, &location);
        let mut keys = dedup_keys(&id, &canonical);
        if classify_location(&location) == Location::Concept
            && let Some(k) = raw.get("title").and_then(Value::as_str).and_then(concept_key)
        {
            keys.push(k);
        }
        if keys.iter().any(|k| self.dedup.contains(k) || (!oracle && self.refused.contains(k))) {
            return Admission::Duplicate;
        }
        let evidence = raw.get("evidence").and_then(Value::as_str);
        // The path as cited and the path it resolves to (a symlink to its in-repo target): a
        // location through anything written during the run — the file, a symlink planted to a
        // real file, a directory or directory link on the way — is refused.
        let cited_path = canonical.rsplit_once(':').map(|(p, _)| p.to_string()).unwrap_or_default();
        let as_cited = match classify_location(&location) {
            Location::FileLine(fl) => fl.path,
            _ => String::new(),
        };
        let verdict = if normalize_id(&id).is_empty() {
            Gate2::Refused("the id is empty".into())
        } else if !oracle && [&cited_path, &as_cited].iter().any(|p| written_through(&self.written, p)) {
            Gate2::Refused(format!(
                "location `{location}` was written during the finders' round: a read-only finder cannot cite what it wrote"
            ))
        } else {
            gate2_with(root, &location, evidence, &self.rules)
        };
        if let Gate2::Refused(reason) = &verdict {
            if keys.iter().any(|k| self.refused.contains(k)) {
                return Admission::Duplicate;
            }
            self.refused.extend(keys);
            self.run.emit(Event::Gate2Rejected {
                id: json!(id),
                location: json!(location),
                reason: json!(reason),
                source: json!(source),
            });
            self.journal.rejected.push(Rejected {
                id: id.clone(),
                location,
                reason: reason.clone(),
                source: source.into(),
                round,
                canonical_location: Some(canonical),
            });
            return Admission::Rejected(id);
        }
        self.dedup.extend(keys);
        self.journal.items.push(accepted_item(raw, &verdict, source, round).into());
        self.journal.seen.push(id.clone());
        Admission::New(id)
    }

    /// Angles still to run, in order, for a stop record.
    fn remaining_angles(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut listed: HashSet<&str> = HashSet::new();
        let pool = self.journal.pool.get(self.journal.cursor..).unwrap_or_default();
        for a in self.journal.retry_queue.iter().chain(pool.iter()) {
            if !self.angles.is_used(a) && !self.angles.is_given_up(a) && listed.insert(a) {
                out.push(a.clone());
            }
        }
        out
    }

    /// Names an angle the budget kept from running: its name in `droppedDueToBudget` (once),
    /// and why in `budgetNotes` (no silent caps).
    fn drop_for_budget(&mut self, angle: &str, why: &str) {
        if !self.journal.dropped_due_to_budget.iter().any(|a| a == angle) {
            self.journal.dropped_due_to_budget.push(angle.to_string());
            self.journal.budget_notes.push(format!("angle {angle}: {why}"));
        }
    }

    fn stop(&mut self, reason: ExhaustStop, detail: &str) -> Result<(), ExhaustError> {
        if reason == ExhaustStop::Budget || reason == ExhaustStop::CallerTarget {
            // Every angle left is named once: membership by set, not by scanning the list.
            let mut named: HashSet<String> = self.journal.dropped_due_to_budget.iter().cloned().collect();
            for a in self.remaining_angles() {
                if named.insert(a.clone()) {
                    self.journal.budget_notes.push(format!("angle {a}: not run ({detail})"));
                    self.journal.dropped_due_to_budget.push(a);
                }
            }
        }
        self.journal.stopped_reason = Some(reason.into());
        if reason == ExhaustStop::KDry {
            let moved = self.tree_moved();
            let given_up = self.journal.given_up.clone();
            let in_tree = self.oracles_in_tree();
            let confirmed = !self.params.final_oracles.is_empty() && !moved && !in_tree && given_up.is_empty();
            self.journal.completeness = Some(if confirmed { "confirmed" } else { "unconfirmed" }.into());
            if !given_up.is_empty() {
                self.run.progress(&format!(
                    "Dry, UNCONFIRMED: angle(s) {} given up (their finder failed twice); the dry does not cover them",
                    given_up.join(", ")
                ));
            } else if in_tree && !self.params.final_oracles.is_empty() {
                self.run.progress(
                    "Dry, UNCONFIRMED: not a git repository, so the final oracle searched the tree the finders could write",
                );
            } else if moved {
                self.run.progress(
                    "Dry, UNCONFIRMED: the tree changed while no finder ran, or could not be checked (see the gaps)",
                );
            } else if !confirmed {
                self.run.progress(
                    "Dry, UNCONFIRMED: no completeness oracle (--final-oracle) ran; the result rests on the finders alone",
                );
            }
        }
        self.run.emit(Event::ExhaustStop { stopped_reason: reason, detail: json!(detail) });
        // The stop writes the journal whole: the documented file is the final master object.
        self.persist(true)
    }

    /// Picks this round's angles: the retry queue first, then the pool from the cursor, up to
    /// `angles_per_round`. Returns each pick with where the cursor stands after it.
    fn pick_angles(&self) -> Vec<(String, usize, bool)> {
        let j = &self.journal;
        let want = self.params.angles_per_round.max(1);
        let s = &self.angles;
        let mut picks: Vec<(String, usize, bool)> = Vec::new();
        let mut picked: HashSet<&str> = HashSet::new();
        for a in &j.retry_queue {
            if picks.len() >= want {
                break;
            }
            if !s.is_given_up(a) && !s.is_used(a) && picked.insert(a) {
                picks.push((a.clone(), j.cursor, true));
            }
        }
        let mut cursor = j.cursor;
        while picks.len() < want && cursor < j.pool.len() {
            let a = &j.pool[cursor];
            cursor += 1;
            if s.is_given_up(a) || s.is_queued(a) || !picked.insert(a) {
                continue;
            }
            picks.push((a.clone(), cursor, false));
        }
        picks
    }

    /// A finder's dispatch; `seen_summary` is the round's [`seen_summary`] (the same for
    /// every finder of a round, made once).
    fn finder_spec(&self, angle: &str, round: u32, seen_summary: &[Value]) -> DispatchSpec {
        let p = self.params;
        let j = &self.journal;
        let prompt = finder_prompt(&p.what, p.context.as_deref(), angle, round, j.seen.len(), seen_summary.len());
        DispatchSpec {
            role: "finder".into(),
            model: p.model.clone(),
            effort: p.effort.clone(),
            access: Access::ReadOnly,
            prompt,
            schema: Some(finder_schema()),
            context: json!({
                "angle": angle,
                "round": round,
                "what": p.what,
                "context": p.context,
                "k": p.k,
                "dryCounter": j.dry_counter,
                "seen": seen_summary,
                "seenTotal": j.seen.len(),
            }),
            label: angle.into(),
        }
    }

    /// Runs the loop to a stop and returns the final journal (the master object).
    pub async fn drive(mut self) -> Result<Journal, ExhaustError> {
        let k = self.params.k;
        if self.journal.is_final() {
            self.run.progress(&already_stopped(self.journal.stopped_reason.as_deref().unwrap_or("")));
            return Ok(self.journal);
        }
        // A resumed run starts from a snapshot of what it resumes (earlier rounds folded in,
        // new angles and the new K recorded): every later commit appends to it. A fresh one
        // writes nothing before gate 1 has run (a failing seed oracle leaves no journal).
        if self.journal.seed_done {
            self.persist(true)?;
        }
        if !self.journal.seed_done {
            let seeds = self.params.seed_oracles.clone();
            let new = self.run_oracles(&seeds, "seed-oracle", 0).await?;
            self.journal.seeded = new.clone();
            self.journal.seed_done = true;
            self.save()?;
            self.run.progress(&format!(
                "Gate 1: {} seeded from {} oracle(s) ({} total) · K={k} · wave cap {}",
                new.len(),
                seeds.len(),
                self.journal.seen.len(),
                self.params.concurrency
            ));
        } else {
            self.run.progress(&format!(
                "Resuming at round {}: {} seen · dryCounter {}/{k} · wave cap {}",
                self.journal.rounds.len() + 1,
                self.journal.seen.len(),
                self.journal.dry_counter,
                self.params.concurrency
            ));
        }
        loop {
            let n = self.journal.rounds.len() as u32 + 1;
            if let Some(max) = self.params.max_rounds
                && self.journal.rounds.len() as u32 >= max
            {
                self.stop(ExhaustStop::CallerTarget, &format!("--max-rounds {max} reached"))?;
                break;
            }
            if let Some(kind) = self.run.budget.exhausted() {
                self.stop(ExhaustStop::Budget, &format!("{kind} budget spent"))?;
                break;
            }
            let mut picks = self.pick_angles();
            let left = self.run.budget.dispatches_left();
            let cut = if (picks.len() as u64) > left { picks.split_off(left as usize) } else { Vec::new() };
            if picks.is_empty() && !cut.is_empty() {
                self.stop(ExhaustStop::Budget, "dispatches budget spent")?;
                break;
            }
            if picks.is_empty() {
                let un_run: Vec<String> = self
                    .params
                    .final_oracles
                    .iter()
                    .filter(|o| !self.journal.final_oracles_run.contains(o))
                    .cloned()
                    .collect();
                if un_run.is_empty() {
                    if self.journal.angles_used.is_empty() && !self.journal.given_up.is_empty() {
                        self.gap("no finder ever returned valid output: the territory was never searched".into());
                    }
                    self.stop(ExhaustStop::Exhausted, "no fresh angle and no un-run oracle left")?;
                    break;
                }
                if self.gate3_round(n, k).await? {
                    break;
                }
                continue;
            }
            // Take the picks off the queue and the pool (persisted with the round); angles the
            // dispatch budget cut wait in the retry queue, named in droppedDueToBudget.
            for (_, cursor_after, from_retry) in picks.iter().chain(cut.iter()) {
                if !*from_retry {
                    self.journal.cursor = self.journal.cursor.max(*cursor_after);
                }
            }
            let from_queue = picks.iter().filter(|p| p.2).map(|p| p.0.as_str());
            self.angles.unqueue(&mut self.journal, from_queue);
            for (a, _, _) in &cut {
                self.drop_for_budget(a, &format!("cut from round {n} (dispatches budget)"));
                self.angles.queue_retry(&mut self.journal, a);
            }
            let angles: Vec<String> = picks.iter().map(|p| p.0.clone()).collect();
            if self.finder_round(n, k, &angles).await? {
                break;
            }
        }
        Ok(self.journal)
    }

    /// A round of finders. Returns true when the loop stopped.
    async fn finder_round(&mut self, n: u32, k: u32, angles: &[String]) -> Result<bool, ExhaustError> {
        let seen = seen_summary(&self.journal.items);
        let specs: Vec<DispatchSpec> = angles.iter().map(|a| self.finder_spec(a, n, &seen)).collect();
        self.run.emit(Event::RoundStart {
            round: u64::from(n),
            angles: json!(angles),
            cap: json!(self.params.concurrency),
        });
        let outcomes = self.read_only_waves(n, specs).await;
        let mut rec = RoundRecord {
            n,
            angles_used: angles.to_vec(),
            new_items: Vec::new(),
            dry_counter_after: self.journal.dry_counter,
            soft_empty: false,
            failed_finders: 0,
            gate3: None,
            rejected_items: Vec::new(),
            duplicates: 0,
            angles_given_up: Vec::new(),
            verdict: String::new(),
        };
        let mut any_ok = false;
        let mut ran_fresh = false;
        let mut causes: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        for (angle, outcome) in angles.iter().zip(outcomes.iter()) {
            match outcome.output() {
                Some(out) => {
                    any_ok = true;
                    // The round's angles are distinct: not used yet means not used before it.
                    if !self.angles.is_used(angle) {
                        ran_fresh = true;
                    }
                    self.angles.mark_used(&mut self.journal, angle);
                    let items: Vec<Map<String, Value>> = out
                        .get("items")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|v| v.as_object().cloned()).collect())
                        .unwrap_or_default();
                    for it in &items {
                        match self.admit(it, &format!("finder:{angle}"), n, &self.run.root) {
                            Admission::New(id) => rec.new_items.push(id),
                            Admission::Duplicate => rec.duplicates += 1,
                            Admission::Rejected(id) => rec.rejected_items.push(id),
                        }
                    }
                }
                None => {
                    if let DispatchOutcome::OverBudget { .. } = outcome {
                        self.drop_for_budget(angle, &format!("not run in round {n} (budget)"));
                        self.angles.queue_retry(&mut self.journal, angle);
                        continue;
                    }
                    rec.failed_finders += 1;
                    let reason = outcome.failure_reason().unwrap_or_default();
                    causes.insert(reason.clone());
                    let count = {
                        let c = self.journal.angle_failures.entry(angle.clone()).or_insert(0);
                        *c += 1;
                        *c
                    };
                    self.run.emit(Event::FinderFailed {
                        round: json!(n),
                        angle: json!(angle),
                        reason: json!(reason),
                        failures: json!(count),
                    });
                    if count >= 2 {
                        self.angles.give_up(&mut self.journal, angle);
                        self.angles.unqueue(&mut self.journal, [angle.as_str()]);
                        rec.angles_given_up.push(angle.clone());
                        self.gap(format!("angle {angle}: given up, its finder failed in two rounds (last: {reason})"));
                    } else if !self.angles.is_used(angle) {
                        self.angles.queue_retry(&mut self.journal, angle);
                    }
                }
            }
        }
        let mut stopped = false;
        let mut suffix = String::new();
        let mut failing_stop = None;
        if !any_ok {
            rec.verdict = "all-finders-failed".into();
            suffix = format!(" · all {} finder(s) failed — not a dry round", angles.len());
            failing_stop = self.note_all_failed(&causes, angles);
            if let Some(cause) = &failing_stop {
                suffix = format!(" · all {} finder(s) failed again: {cause} — stopping", angles.len());
            }
        } else if !rec.new_items.is_empty() {
            self.journal.dry_counter = 0;
            rec.verdict = "new-items".into();
        } else if ran_fresh {
            if self.journal.dry_counter + 1 >= k {
                let gate = self.gate3().await?;
                let failed = gate.is_none();
                let (new3, oracles) = gate.unwrap_or_default();
                rec.gate3 = Some(Gate3Record { oracles, new_items: new3.clone() });
                if failed {
                    rec.verdict = "gate3-failed".into();
                    suffix = " · gate-3 failed — not counted as dry".into();
                } else if !new3.is_empty() {
                    rec.new_items.extend(new3.iter().cloned());
                    self.journal.dry_counter = 0;
                    rec.verdict = "gate3-reset".into();
                    suffix = format!(" · gate-3 completeness: +{} new → dryCounter reset", new3.len());
                } else {
                    self.journal.dry_counter += 1;
                    rec.verdict = "qualifying-dry".into();
                    suffix = " · gate-3 clean".into();
                    stopped = true;
                }
            } else {
                self.journal.dry_counter += 1;
                rec.verdict = "qualifying-dry".into();
            }
        } else {
            rec.soft_empty = true;
            rec.verdict = "soft-empty".into();
            suffix = " · softEmpty (exhausted angle) — retry".into();
        }
        if rec.failed_finders > 0 && any_ok {
            suffix.push_str(&format!(" · {} finder(s) failed", rec.failed_finders));
        }
        if any_ok {
            self.failing = None;
        }
        let stopped = self.commit_round(rec, &suffix, stopped)?;
        if let Some(cause) = failing_stop {
            self.gap(format!("stopped: every finder of consecutive rounds failed for one cause: {cause}"));
            self.stop(ExhaustStop::AgentFailing, &cause)?;
            return Ok(true);
        }
        Ok(stopped)
    }

    /// Records an all-failed round; returns the cause when it is the single cause of this and
    /// the rounds right before it and they covered [`FAIL_FAST_ANGLES`] angles (fail fast
    /// instead of burning the pool on an agent that cannot answer).
    fn note_all_failed(&mut self, causes: &std::collections::BTreeSet<String>, angles: &[String]) -> Option<String> {
        // A timeout is the finder's own trouble (a hang), not evidence that the agent is broken.
        let cause = match causes.iter().collect::<Vec<_>>().as_slice() {
            [one] if !one.contains("timed out") => (*one).clone(),
            _ => {
                self.failing = None;
                return None;
            }
        };
        let mut seen = match self.failing.take() {
            Some((c, seen)) if c == cause => seen,
            _ => std::collections::BTreeSet::new(),
        };
        seen.extend(angles.iter().cloned());
        let stop = seen.len() >= FAIL_FAST_ANGLES;
        self.failing = Some((cause.clone(), seen));
        stop.then_some(cause)
    }

    /// Ends a round: records it, prints its one progress line, and stops (K reached, gate 3
    /// clean) or saves the journal. Returns `stopped`.
    fn commit_round(&mut self, mut rec: RoundRecord, suffix: &str, stopped: bool) -> Result<bool, ExhaustError> {
        rec.dry_counter_after = self.journal.dry_counter;
        let line = format!(
            "Round {}: {} new ({} total) · angle={} · dryCounter {}/{}{suffix}",
            rec.n,
            rec.new_items.len(),
            self.journal.seen.len(),
            rec.angles_used.join(","),
            self.journal.dry_counter,
            self.params.k
        );
        self.journal.rounds.push(rec);
        self.run.progress(&line);
        if stopped {
            self.stop(ExhaustStop::KDry, "K consecutive qualifying dry rounds, gate 3 clean")?;
        } else {
            self.save()?;
        }
        Ok(stopped)
    }

    /// A round that runs only gate 3 (no fresh angle left, an oracle not yet run). Returns
    /// true when the loop stopped.
    async fn gate3_round(&mut self, n: u32, k: u32) -> Result<bool, ExhaustError> {
        let gate = self.gate3().await?;
        let failed = gate.is_none();
        let (new3, oracles) = gate.unwrap_or_default();
        if failed {
            // The oracle stays un-run; mark it run so the loop cannot spin on it.
            for o in &self.params.final_oracles {
                if !self.journal.final_oracles_run.contains(o) {
                    self.journal.final_oracles_run.push(o.clone());
                }
            }
        }
        let mut rec = RoundRecord {
            n,
            angles_used: vec!["gate-3".into()],
            new_items: new3.clone(),
            dry_counter_after: 0,
            soft_empty: false,
            failed_finders: 0,
            gate3: Some(Gate3Record { oracles, new_items: new3.clone() }),
            rejected_items: Vec::new(),
            duplicates: 0,
            angles_given_up: Vec::new(),
            verdict: String::new(),
        };
        let stopped;
        if failed {
            rec.verdict = "gate3-failed".into();
            stopped = false;
        } else if new3.is_empty() {
            self.journal.dry_counter += 1;
            rec.verdict = "qualifying-dry".into();
            stopped = self.journal.dry_counter >= k;
        } else {
            self.journal.dry_counter = 0;
            rec.verdict = "gate3-reset".into();
            stopped = false;
        }
        let suffix = if failed { " · gate-3 failed — not counted as dry" } else { "" };
        self.commit_round(rec, suffix, stopped)
    }
}

/// True when `path` (repository-relative) or a directory on the way to it is in `written`.
fn written_through(written: &HashSet<String>, path: &str) -> bool {
    let mut p = path;
    while !p.is_empty() {
        if written.contains(p) {
            return true;
        }
        p = p.rsplit_once('/').map(|(head, _)| head).unwrap_or("");
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finders_see_only_the_most_recent_items() {
        let items: Vec<crate::Item> =
            (0..250).map(|i| json!({"id": format!("i-{i}"), "location": "a.rs:1"}).into()).collect();
        let seen = seen_summary(&items);
        assert_eq!(seen.len(), SEEN_CONTEXT_CAP);
        assert_eq!((seen[0]["id"].as_str(), seen[99]["id"].as_str()), (Some("i-150"), Some("i-249")));
        assert_eq!(seen_summary(&items[..3]).len(), 3, "fewer items than the cap: all of them");
    }
}
