//! Gates 1 and 3: the oracles, run on the engine's copy of the tree as the run started.

use super::{Admission, Engine, ExhaustError};
use crate::oracle::run_oracle;
use serde_json::json;
use work_git::inventory::describe_changes;
use work_runtime::events::Event;

/// How the gap saying the oracles ran in the tree itself begins: such a gap makes a dry stop
/// unconfirmed, also when the run is resumed.
const IN_TREE: &str = "not a git repository: the oracles searched the working tree";

impl<'a> Engine<'a> {
    /// True when an oracle of this run (or the run it resumes) searched the tree the finders
    /// can write.
    pub(super) fn oracles_in_tree(&self) -> bool {
        self.journal.completeness_gaps.iter().any(|g| g.starts_with(IN_TREE))
    }

    /// Runs `commands` on the engine's copy and admits their items; returns the new ids.
    pub(super) async fn run_oracles(
        &mut self,
        commands: &[String],
        source: &str,
        round: u32,
    ) -> Result<Vec<String>, ExhaustError> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        let (copy, changed) = self.oracles.ready()?;
        if !changed.is_empty() {
            let what = describe_changes(&changed);
            self.run.emit(Event::OracleCopyRemade {
                source: json!(source),
                round: json!(round),
                changes: json!(changed),
            });
            self.gap(format!(
                "round {round}: the engine's copy the oracles search was changed ({what}); it was made again from the tree the run started with"
            ));
        }
        let root = match copy {
            Some(root) => root,
            None => {
                self.gap(format!(
                    "{IN_TREE}, which the finders can write (there is no engine copy to search); completeness cannot be confirmed"
                ));
                self.run.root.clone()
            }
        };
        let mut new = Vec::new();
        for cmd in commands {
            let ran = run_oracle(&self.run.spawner, &root, cmd, self.params.oracle_timeout).await;
            self.oracles.settle();
            let items = ran?;
            self.run.emit(Event::OracleRan { command: json!(cmd), source: json!(source), items: items.len() as u64 });
            for it in &items {
                if let Admission::New(id) = self.admit(it, source, round, &root) {
                    new.push(id);
                }
            }
        }
        Ok(new)
    }

    /// Gate 3: every final oracle; returns the new ids and the oracles run, or `None` when an
    /// oracle failed (then gate 3 could not confirm anything: recorded as a gap, and the round
    /// does not count as dry).
    pub(super) async fn gate3(&mut self) -> Result<Option<(Vec<String>, Vec<String>)>, ExhaustError> {
        let oracles = self.params.final_oracles.clone();
        if oracles.is_empty() {
            self.gap("gate 3: no final oracle configured (--final-oracle); dry rests on finder rounds alone".into());
            return Ok(Some((Vec::new(), Vec::new())));
        }
        let n = self.journal.rounds.len() as u32 + 1;
        self.checkpoint(&format!("before the final oracle of round {n}"));
        let ran = self.run_oracles(&oracles, "final-oracle", n).await;
        self.checkpoint(&format!("while the final oracle of round {n} ran"));
        let new = match ran {
            Ok(new) => new,
            Err(ExhaustError::Oracle(e)) => {
                self.run.emit(Event::Gate3Failed { round: json!(n), error: e.to_string() });
                self.gap(format!("gate 3 could not run in round {n}: {e}"));
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        for o in &oracles {
            if !self.journal.final_oracles_run.contains(o) {
                self.journal.final_oracles_run.push(o.clone());
            }
        }
        Ok(Some((new, oracles)))
    }
}
