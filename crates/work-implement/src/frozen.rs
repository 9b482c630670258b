//! The final verdict with the frozen checks restored.
//!
//! The file-level freeze lets an agent add tests, lines appended to an existing test file
//! included. An appended line can still change what an existing test runs — `f = lambda: 1`
//! or `def f(): return 1` after `from lib import f` keeps every old line and every test id, and
//! the old test passes although the code was not fixed. So once the suite is green on the
//! engine's copy of the agent's tree, it runs again on an engine copy with every frozen check
//! file that changed — the pre-existing test files, the check scripts and the runners'
//! configuration — put back as it was when the checks were frozen and every file the run added
//! to the test tree left out (see `work_git::restore`). Green there, the verdict stands. Red
//! there, the agent's change to a check is what made the suite pass: BLOCKED
//! `check-tampered`, naming the files. A rerun that cannot be made while a frozen file differs
//! is BLOCKED too (it fails closed).
//!
//! Only a run whose frozen files changed, or that added to the test tree, pays for this:
//! otherwise the rerun would be the run.

use crate::env::{Env, GateRun};
use serde_json::json;
use work_git::restore::Rerun;
use work_git::surface::{CheckSurface, TestEdits};
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

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

    /// The verdict of the rerun with the frozen checks of `surface` restored for a green run
    /// of `cmds`: `Some((reason, blocked_detail))` when it is BLOCKED `check-tampered`. A rerun
    /// that could not be made fails closed when a frozen file differs from its frozen content
    /// (the green run is not believed), as in every other workflow; otherwise it is pushed
    /// onto `concerns`.
    pub async fn frozen_verdict(
        &self,
        surface: &CheckSurface,
        cmds: &[String],
        concerns: &mut Vec<String>,
    ) -> Option<(String, serde_json::Value)> {
        let frozen = match self.frozen_tree.lock().ok().and_then(|t| t.clone()) {
            Some(t) => Ok(t),
            None => self.tree.base_tree().map_err(|e| format!("the frozen tree could not be read: {e}")),
        };
        let exclude = self.run.state_exclude();
        let root = &self.run.root;
        let (hide, emptied) = (surface.to_move_aside(root), surface.emptied_in_rerun(root));
        let outcome = match &frozen {
            Ok(tree) => {
                let git = self.tree.git();
                let fz = work_git::restore::Frozen {
                    git,
                    tree,
                    paths: surface.restored_paths(),
                    exclude: &exclude,
                    hide,
                    emptied,
                };
                fz.rerun(async |dir: &std::path::Path| {
                    self.run.emit(Event::FrozenRerunStart {});
                    self.run_in(dir, cmds).await
                })
                .await
            }
            Err(why) => Rerun::Inconclusive(why.clone()),
        };
        let changed: Vec<String> = surface.changes(root, TestEdits::None).into_iter().map(|c| c.path).collect();
        let (restored, run) = match &outcome {
            Rerun::Green(restored) => {
                self.run.emit(Event::FrozenRerunEnd {
                    goal_id: None,
                    restored: json!(restored),
                    hidden: None,
                    emptied: None,
                    green: true,
                });
                return None;
            }
            Rerun::Red { restored, hidden, emptied, run } => {
                self.run.emit(Event::FrozenRerunEnd {
                    goal_id: None,
                    restored: json!(restored),
                    hidden: Some(json!(hidden)),
                    emptied: Some(json!(emptied)),
                    green: false,
                });
                (restored.iter().chain(hidden).chain(emptied).cloned().collect(), Some(run))
            }
            Rerun::FrozenGone(why) | Rerun::Inconclusive(why) if changed.is_empty() => {
                concerns.push(why.clone());
                return None;
            }
            _ => (changed.clone(), None),
        };
        let reason =
            outcome.blocked_reason("the suite", |r| format!("`{}` {}", r.command, r.end), !changed.is_empty())?;
        self.run.emit(Event::CheckSurfaceChanged { goal_id: None, changes: None, restored: Some(json!(restored)) });
        let detail = serde_json::json!({"kind": StopReason::CheckTampered.as_str(), "reason": reason, "restored": restored, "frozen_run": run});
        Some((reason, detail))
    }

    /// Runs `cmds` in `dir` (the copy with the frozen checks put back) in order until one
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
