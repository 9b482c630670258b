//! The final verdict with the frozen checks restored.
//!
//! The file-level freeze lets an agent add tests, lines appended to an existing test file
//! included. An appended line can still change what an existing test runs — `f = lambda: 1`
//! or `def f(): return 1` after `from lib import f` keeps every old line and every test id, and
//! the old test passes although the code was not fixed. So once the suite is green in the
//! agent's tree, the engine runs it again over a copy of that tree (outside the repository,
//! see `work_git::restore`) with every frozen check file — the pre-existing test files, the
//! check scripts and the runners' configuration — written back as it was when the checks were
//! frozen; the tests the agent added run there too. Green there, the verdict stands. Red there,
//! the agent's change to a check is what made the suite pass: BLOCKED `check-tampered`, naming
//! the files (the reason also says whether a plain copy of the agent's tree is green, so that a
//! suite that cannot run in a copy shows as such — it is not let through: an agent could make
//! its own tree red in a copy).
//!
//! Only a run whose frozen files changed pays for this: otherwise the copy would be the tree.

use crate::env::{Env, GateRun};
use work_git::restore::{Frozen, written_back};
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
        /// The frozen files written back.
        restored: Vec<String>,
        /// The failing run in the copy.
        run: GateRun,
    },
    /// The copy could not be built or written (an engine failure, said as a concern).
    Inconclusive(String),
}

impl Env {
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
        let exclude: Vec<String> = self
            .run
            .state_dir
            .strip_prefix(&self.run.root)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty())
            .into_iter()
            .collect();
        let git = self.tree.git();
        let fz = Frozen {
            git,
            root: &self.run.root,
            tree: &frozen,
            paths: surface.paths(),
            exclude: &exclude,
            tag: &self.run.run_id,
        };
        let mut copies = 0;
        let outcome = fz
            .rerun(async |dir: &std::path::Path| {
                copies += 1;
                let what = if copies == 1 { "frozen" } else { "plain" };
                if copies == 1 {
                    self.run.emit("frozen-rerun.start", serde_json::json!({}));
                }
                self.run_in(dir, cmds, what).await
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
            work_git::restore::Rerun::Red { restored, run, plain } => {
                self.run.emit("frozen-rerun.end", serde_json::json!({"restored": restored, "green": false}));
                // Red with the frozen checks is never green. A plain copy of the agent's tree
                // says whether the copy itself can run the suite — for the reason only.
                let plain = match plain {
                    Ok((true, _)) => "green in a plain copy of the agent's tree".to_string(),
                    Ok((false, p)) => format!(
                        "red in a plain copy of the agent's tree too (`{}` {}): if the suite needs something a copy lacks, restore the frozen checks in the tree and run it there",
                        p.command, p.end
                    ),
                    Err(why) => why,
                };
                let reason = format!(
                    "the suite passes in the agent's tree but fails with the frozen checks restored ({}: `{}` {}; {plain}); an added line changed what an existing test runs — adding tests is the only change allowed: fix the code, not the test, and run again",
                    written_back(&restored),
                    run.command,
                    run.end
                );
                Rerun::Tampered { reason, restored, run }
            }
        }
    }

    /// The verdict of [`Env::frozen_rerun`] for a green run: `Some((reason, blocked_detail))`
    /// when it is BLOCKED `check-tampered`; an inconclusive rerun is pushed onto `concerns`.
    pub async fn frozen_verdict(
        &self,
        surface: &CheckSurface,
        cmds: &[String],
        concerns: &mut Vec<String>,
    ) -> Option<(String, serde_json::Value)> {
        match self.frozen_rerun(surface, cmds).await {
            Rerun::Unchanged | Rerun::Green(_) => None,
            Rerun::Inconclusive(why) => {
                concerns.push(why);
                None
            }
            Rerun::Tampered { reason, restored, run } => {
                self.run.emit("check-surface.changed", serde_json::json!({"restored": restored}));
                let detail = serde_json::json!({"kind": "check-tampered", "reason": reason, "restored": restored, "frozen_run": run});
                Some((reason, detail))
            }
        }
    }

    /// Runs `cmds` in `dir` (a copy of the tree) in order until one fails: `(green, the last
    /// run)`.
    async fn run_in(&self, dir: &std::path::Path, cmds: &[String], what: &str) -> (bool, GateRun) {
        let mut last = None;
        for cmd in cmds {
            let run = self.gate_in(&format!("suite ({what} copy)"), cmd, dir).await;
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
