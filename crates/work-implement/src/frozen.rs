//! The final verdict with the frozen checks restored.
//!
//! The file-level freeze lets an agent add tests, lines appended to an existing test file
//! included. An appended line can still change what an existing test runs — `f = lambda: 1`
//! or `def f(): return 1` after `from lib import f` keeps every old line and every test id, and
//! the old test passes although the code was not fixed. So once the suite is green in the
//! agent's tree, the engine runs it again in that tree with every frozen check file — the
//! pre-existing test files, the check scripts and the runners' configuration — written back as
//! it was when the checks were frozen and every file the run added to the test tree moved
//! aside (a new test module can patch the code under test at collection), and puts the agent's
//! versions back afterwards (see `work_git::restore`; never a copy, which code could tell from
//! the tree). Green there, the verdict stands. Red there, the agent's change to a
//! check is what made the suite pass: BLOCKED `check-tampered`, naming the files. A rerun that
//! cannot be made while a frozen file differs is BLOCKED too (it fails closed).
//!
//! Only a run whose frozen files changed pays for this: otherwise the rerun would be the run.

use crate::env::{Env, GateRun};
use work_git::restore::{Frozen, red_advice, set_aside};
use work_git::surface::CheckSurface;

/// What the rerun with the frozen checks restored found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rerun {
    /// No frozen file differs from its frozen content: nothing to rerun.
    Unchanged,
    /// Green with the frozen files (named) written back.
    Green(Vec<String>),
    /// Red with the frozen files written back: why, and the files.
    Tampered {
        /// The BLOCKED reason.
        reason: String,
        /// The frozen files written back, and the added files moved aside.
        restored: Vec<String>,
        /// The failing run.
        run: GateRun,
    },
    /// The rerun could not be made (an engine failure): BLOCKED when a frozen file differs,
    /// else a concern.
    Inconclusive(String),
    /// The run added files to the test tree and the rerun without them could not be made:
    /// BLOCKED.
    NotRerun(String),
}

impl Env {
    /// From now on the rerun writes the frozen checks back from `tree`: the tree the checks
    /// were frozen in with the engine's own renamed version of the check files a rename edit
    /// changed by the rename alone (see `crate::edit`). A file that differs from that version
    /// in the agent's tree is written back as the engine's version.
    pub(crate) fn rename_frozen_checks(&self, tree: String) {
        if let Ok(mut t) = self.frozen_tree.lock() {
            *t = Some(tree);
        }
    }

    /// Runs `cmds` (each must exit 0) over the agent's tree with the frozen files of `surface`
    /// written back (see the module documentation and `work_git::restore`).
    pub async fn frozen_rerun(&self, surface: &CheckSurface, cmds: &[String]) -> Rerun {
        let frozen = match self.frozen_tree.lock().ok().and_then(|t| t.clone()) {
            Some(t) => t,
            None => match self.tree.base_tree() {
                Ok(t) => t,
                Err(e) => return Rerun::Inconclusive(format!("the frozen tree could not be read: {e}")),
            },
        };
        let exclude = self.run.state_exclude();
        let git = self.tree.git();
        let hide = surface.to_move_aside(&self.run.root);
        let emptied = surface.emptied_in_rerun(&self.run.root);
        let fz = Frozen { git, tree: &frozen, paths: surface.restored_paths(), exclude: &exclude, hide, emptied };
        let outcome = fz
            .rerun(async |dir: &std::path::Path| {
                self.run.emit("frozen-rerun.start", serde_json::json!({}));
                self.run_in(dir, cmds).await
            })
            .await;
        match outcome {
            work_git::restore::Rerun::Unchanged => Rerun::Unchanged,
            work_git::restore::Rerun::Green(restored) => {
                self.run.emit("frozen-rerun.end", serde_json::json!({"restored": restored, "green": true}));
                Rerun::Green(restored)
            }
            work_git::restore::Rerun::FrozenGone(why) | work_git::restore::Rerun::Inconclusive(why) => {
                Rerun::Inconclusive(why)
            }
            work_git::restore::Rerun::NotRerun(why) => Rerun::NotRerun(why),
            work_git::restore::Rerun::Red { restored, hidden, emptied, run } => {
                self.run.emit(
                    "frozen-rerun.end",
                    serde_json::json!({"restored": restored, "hidden": hidden, "emptied": emptied, "green": false}),
                );
                let reason = format!(
                    "the suite passes in the agent's tree but fails on the engine's copy with the frozen checks restored ({}: `{}` {}); {}",
                    set_aside(&restored, &hidden, &emptied),
                    run.command,
                    run.end,
                    red_advice(&[hidden.as_slice(), &emptied].concat()).replace("made them pass", "made it pass")
                );
                let restored = restored.into_iter().chain(hidden).chain(emptied).collect();
                Rerun::Tampered { reason, restored, run }
            }
        }
    }

    /// The verdict of [`Env::frozen_rerun`] for a green run: `Some((reason, blocked_detail))`
    /// when it is BLOCKED `check-tampered`. A rerun that could not be made fails closed when a
    /// frozen file differs from its frozen content (the green run is not believed), as in
    /// every other workflow; otherwise it is pushed onto `concerns`.
    pub async fn frozen_verdict(
        &self,
        surface: &CheckSurface,
        cmds: &[String],
        concerns: &mut Vec<String>,
    ) -> Option<(String, serde_json::Value)> {
        match self.frozen_rerun(surface, cmds).await {
            Rerun::Unchanged | Rerun::Green(_) => None,
            Rerun::Inconclusive(why) => {
                let changed: Vec<String> = surface
                    .changes(&self.run.root, work_git::surface::TestEdits::None)
                    .iter()
                    .map(|c| c.path.clone())
                    .collect();
                if changed.is_empty() {
                    concerns.push(why);
                    return None;
                }
                let reason = format!(
                    "the suite passes in the agent's tree, but frozen check files differ from their frozen content ({}) and the suite could not be rerun with them restored ({why}): not believed; restore them (git diff shows the change), or put added tests in a new file, and run again",
                    changed.join(", ")
                );
                self.run.emit("check-surface.changed", serde_json::json!({"restored": changed}));
                let detail = serde_json::json!({"kind": "check-tampered", "reason": reason, "restored": changed});
                Some((reason, detail))
            }
            Rerun::NotRerun(why) => {
                let reason = format!(
                    "the suite passes in the agent's tree, but it could not be rerun with the files the run added to the test tree moved aside ({why}): not believed; run again"
                );
                self.run.emit("check-surface.changed", serde_json::json!({"not_rerun": why}));
                Some((reason.clone(), serde_json::json!({"kind": "check-tampered", "reason": reason})))
            }
            Rerun::Tampered { reason, restored, run } => {
                self.run.emit("check-surface.changed", serde_json::json!({"restored": restored}));
                let detail = serde_json::json!({"kind": "check-tampered", "reason": reason, "restored": restored, "frozen_run": run});
                Some((reason, detail))
            }
        }
    }

    /// Runs `cmds` in `dir` (the tree, its frozen checks written back) in order until one
    /// fails: `(green, the last run)`.
    async fn run_in(&self, dir: &std::path::Path, cmds: &[String]) -> (bool, GateRun) {
        let mut last = None;
        for cmd in cmds {
            let run = self.gate_in("suite (frozen checks restored)", cmd, dir).await;
            let green = run.green;
            last = Some(run);
            if !green {
                break;
            }
        }
        match last {
            Some(run) => (run.green, run),
            None => (
                false,
                GateRun { command: String::new(), green: false, end: "no command to run".into(), tail: String::new() },
            ),
        }
    }
}
