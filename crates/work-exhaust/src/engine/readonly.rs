//! Read-only, enforced: the finders' waves, and the tree between them.

use super::Engine;
use serde_json::json;
use work_git::inventory::{Inventory, describe_changes};
use work_runtime::dispatch::{DispatchOutcome, DispatchSpec};
use work_runtime::events::Event;

/// The tree and git's seal at one instant.
pub(super) type Seen = (Inventory, Option<work_git::integrity::SealReading>);

/// One look at the tree: its snapshot and git's seal, or why the seal could not be read.
type Looked = (Inventory, Result<work_git::integrity::SealReading, String>);

/// How a gap about a change outside every finder begins: such a gap makes a dry stop
/// unconfirmed, also when the run is resumed.
const MOVED: &str = "the tree changed while no finder ran";

/// What a gap about a look at the tree that failed says: such a gap, too, makes a dry stop
/// unconfirmed (what the finders did there was never checked).
const UNCHECKED: &str = "the read-only check could not run";

impl Engine<'_> {
    /// Runs read-only finders and enforces read-only. The tree (tracked, untracked, ignored, the
    /// state directory, git's refs, config, hooks and info, and git's sealed view: index flags,
    /// excludes, attributes, drivers) is compared before and after:
    /// - a change to a tracked file, to work's state or to git's own files is a violation:
    ///   every answer of the wave is dropped as a failed dispatch (which finder wrote cannot be
    ///   told apart while they run at once) and the run says what changed;
    /// - any other path written during the wave (a scratch file, a cache) may not be cited:
    ///   gate 2 refuses a location in it.
    ///
    /// The "before" is also compared with the previous wave's "after" ([`Engine::checkpoint`]).
    pub(super) async fn read_only_waves(&mut self, n: u32, specs: Vec<DispatchSpec>) -> Vec<DispatchOutcome> {
        self.checkpoint(&format!("before round {n}"));
        let before = self.last_seen.take();
        let outcomes = self.dispatcher.dispatch_waves(specs, self.params.concurrency).await;
        let Some(before) = before else {
            // The look before the wave failed (a gap says why): nothing to compare with.
            return self.unchecked(n, "the tree could not be read before the wave", outcomes);
        };
        let (after, mut changes) = match self.look(Some(&before)) {
            Ok(seen) => seen,
            Err(e) => return self.unchecked(n, &e, outcomes),
        };
        // git's view (index flags, excludes, attributes, hooks, drivers): the index file itself
        // is left out of the walk (any `git status` refreshes it), its flags are not.
        match (&before.1, &after.1) {
            (Some(seal), Ok(now)) => changes.extend(self.seal_changes(&seal.seal, &now.seal)),
            (Some(_), Err(e)) => {
                let e = e.clone();
                return self.unchecked(n, &e, outcomes);
            }
            (None, _) => {}
        }
        self.last_seen = Some((after.0, after.1.ok()));
        if changes.is_empty() {
            return outcomes;
        }
        let protected = self.protected(&changes, true);
        // Cumulative over the run: a file written in one round cannot be cited in a later one.
        self.written.extend(changes.iter().map(|c| c[1..].to_string()));
        self.run.emit(Event::ReadonlyWrites {
            round: Some(json!(n)),
            between: None,
            changes: json!(changes),
            violations: json!(protected),
        });
        if protected.is_empty() {
            return outcomes;
        }
        let what = describe_changes(&protected);
        self.run.progress(&format!("Round {n}: a read-only finder changed the tree ({what}); its answers are dropped"));
        self.gap(format!(
            "round {n}: a read-only finder changed the tree ({what}); the answers of its wave were dropped"
        ));
        outcomes
            .into_iter()
            .map(|o| match o {
                DispatchOutcome::Ok { dispatch_id, .. } => DispatchOutcome::Failed {
                    dispatch_id,
                    reason: format!("wrote to the tree in a read-only dispatch: {what}"),
                },
                other => other,
            })
            .collect()
    }

    /// A wave whose read-only check could not run (the tree could not be walked, git's view
    /// could not be read): its answers are dropped as unverified — never as a finding about a
    /// finder — and the run says why; the next look starts afresh.
    fn unchecked(&mut self, n: u32, why: &str, outcomes: Vec<DispatchOutcome>) -> Vec<DispatchOutcome> {
        self.last_seen = None;
        self.run.progress(&format!(
            "Round {n}: the tree could not be checked after the finders ({why}); their answers are dropped"
        ));
        self.gap(format!("round {n}: {UNCHECKED} ({why}); the answers of its wave were dropped"));
        outcomes
            .into_iter()
            .map(|o| match o {
                DispatchOutcome::Ok { dispatch_id, .. } => {
                    DispatchOutcome::Failed { dispatch_id, reason: format!("the read-only check could not run: {why}") }
                }
                other => other,
            })
            .collect()
    }

    /// What changed in git's view from `was` to `now`, as tree changes (`~.git/ (…)`). A
    /// `.gitattributes` or `.gitignore` in the run's own directory is left out: it applies to the
    /// engine's files only, and the directory is not walked (it grows with every dispatch).
    fn seal_changes(&self, was: &work_git::integrity::Seal, now: &work_git::integrity::Seal) -> Vec<String> {
        let changes = match self.run.run_dir().strip_prefix(&self.run.root).ok().map(|p| p.to_string_lossy()) {
            Some(rel) if !rel.is_empty() => was.without_files_under(&rel).changes(&now.without_files_under(&rel)),
            _ => was.changes(now),
        };
        changes.into_iter().map(|c| format!("~.git/ ({c})")).collect()
    }

    /// The tree and git's seal now (an error when the tree cannot be walked; the seal's own
    /// reading, which may have failed, beside it), and the tree's changes since the `last` look. git's seal is read again only when one of its inputs
    /// changed since, or the tree did where it can change the seal (the engine's own journal
    /// writes between waves cannot). The run directory is not walked: it grows with every
    /// dispatch, and what git sees in it is left out of every comparison
    /// ([`Engine::seal_changes`]). Nor is the directory of the engine's copies.
    fn look(&self, last: Option<&Seen>) -> Result<(Looked, Vec<String>), String> {
        // Nor is the engine's copy the oracles search (checked before each oracle runs).
        let exclude: Vec<_> = std::iter::once(self.run.run_dir()).chain(self.oracles.home().map(Into::into)).collect();
        let snap = Inventory::read_only(&self.run.root, &exclude);
        let git = work_git::Git::new(&self.run.root);
        let changes = last.map(|(was, _)| was.changes(&snap)).unwrap_or_default();
        let seal = match last {
            Some((_, Some(reading))) => {
                let kept = changes.iter().all(|c| !work_git::integrity::may_change_seal(&c[1..]));
                git.reread_seal(reading, kept)
            }
            _ => git.read_seal(),
        };
        Ok(((snap, seal.map_err(|e| e.to_string())), changes))
    }

    /// Compares the tree now with the tree as the engine last saw it (after the last wave or
    /// final oracle) and keeps it as the new "last seen". No finder runs in between, so a
    /// change to a tracked file or to git's own files there was made by something outside the
    /// engine's dispatches (a process a daemon outside `work` started, a person): what the
    /// rounds found may not hold for the tree the run started with. It is a gap, and a dry stop
    /// is then never `confirmed`. The state directory is left out: the engine writes it.
    pub(super) fn checkpoint(&mut self, when: &str) {
        let (now, mut changes) = match self.look(self.last_seen.as_ref()) {
            Ok(seen) => seen,
            Err(e) => {
                self.last_seen = None;
                self.gap(format!("{UNCHECKED} {when} ({e}); completeness cannot be confirmed"));
                return;
            }
        };
        if let Some((_, seal)) = &self.last_seen {
            match (seal, &now.1) {
                (Some(seal), Ok(seal_now)) => changes.extend(self.seal_changes(&seal.seal, &seal_now.seal)),
                (Some(_), Err(e)) => self.gap(format!(
                    "{UNCHECKED} {when}: git's view could not be read ({e}); completeness cannot be confirmed"
                )),
                (None, _) => {}
            }
            if !changes.is_empty() {
                let protected = self.protected(&changes, false);
                self.written.extend(changes.iter().map(|c| c[1..].to_string()));
                self.run.emit(Event::ReadonlyWrites {
                    round: None,
                    between: Some(json!(when)),
                    changes: json!(changes),
                    violations: json!(protected),
                });
                if !protected.is_empty() {
                    let what = describe_changes(&protected);
                    self.run.progress(&format!("The tree changed {when}, while no finder ran ({what})"));
                    self.gap(format!(
                        "{MOVED} ({when}: {what}): the rounds before saw another tree; completeness cannot be confirmed"
                    ));
                }
            }
        }
        self.last_seen = Some((now.0, now.1.ok()));
    }

    /// True when a change outside every finder was seen in this run (or the run it resumes), or
    /// a look at the tree failed.
    pub(super) fn tree_moved(&self) -> bool {
        self.journal.completeness_gaps.iter().any(|g| g.starts_with(MOVED) || g.contains(UNCHECKED))
    }

    /// The changes a read-only run may not make: tracked files, git's own files and (when
    /// `state` is set) the state directory.
    fn protected(&mut self, changes: &[String], state: bool) -> Vec<String> {
        self.load_tracked();
        let tracked = self.tracked.as_ref();
        let state_rel = self
            .run
            .state_dir
            .strip_prefix(&self.run.root)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty());
        let in_state = |p: &str| state_rel.as_deref().is_some_and(|s| p == s || p.starts_with(&format!("{s}/")));
        changes
            .iter()
            .filter(|c| {
                let p = &c[1..];
                if in_state(p) {
                    return state;
                }
                tracked.is_some_and(|t| t.contains(p)) || p == ".git" || p.starts_with(".git/")
            })
            .cloned()
            .collect()
    }

    /// Reads the paths git tracks, once a run (none outside a git checkout).
    fn load_tracked(&mut self) {
        if self.tracked.is_none() {
            let git = work_git::Git::new(&self.run.root);
            let set = git
                .run(&["ls-files", "-z"])
                .map(|out| out.split('\0').filter(|p| !p.is_empty()).map(str::to_string).collect())
                .unwrap_or_default();
            self.tracked = Some(set);
        }
    }
}
