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
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use work_git::surface::CheckSurface;

/// Distinguishes the copies of one process.
static NEXT_COPY: AtomicU64 = AtomicU64::new(0);

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

/// Removes a copy when dropped.
struct Copy(PathBuf);

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Env {
    /// Runs `cmds` (each must exit 0) over the agent's tree with the frozen files of `surface`
    /// written back (see the module documentation).
    pub async fn frozen_rerun(&self, surface: &CheckSurface, cmds: &[String]) -> Rerun {
        let git = self.tree.git();
        let frozen = match self.frozen_tree.lock().ok().and_then(|t| t.clone()) {
            Some(t) => t,
            None => match self.tree.base_tree() {
                Ok(t) => t,
                Err(e) => return Rerun::Inconclusive(format!("the frozen tree could not be read: {e}")),
            },
        };
        let built = self.tree.snapshot_tree().and_then(|now| {
            let (restored_tree, restored) = git.restore_paths(&now, &frozen, &surface.paths())?;
            Ok((now, restored_tree, restored))
        });
        let (now, restored_tree, restored) = match built {
            Ok(b) => b,
            Err(e) => return Rerun::Inconclusive(format!("the tree with its frozen checks could not be built: {e}")),
        };
        if restored.is_empty() {
            return Rerun::Unchanged;
        }
        self.run.emit("frozen-rerun.start", serde_json::json!({"restored": restored}));
        let run = match self.run_in_copy(&restored_tree, cmds, "frozen").await {
            Ok(r) => r,
            Err(why) => return Rerun::Inconclusive(why),
        };
        self.run.emit("frozen-rerun.end", serde_json::json!({"restored": restored, "green": run.green}));
        if run.green {
            return Rerun::Green(restored);
        }
        // Red with the frozen checks is never green. A plain copy of the agent's tree says
        // whether the copy itself can run the suite — for the reason only: an agent could make
        // its own tree red in a copy, and that must not turn the verdict into a shrug.
        let plain = match self.run_in_copy(&now, cmds, "plain").await {
            Ok(p) if p.green => "green in a plain copy of the agent's tree".to_string(),
            Ok(p) => format!(
                "red in a plain copy of the agent's tree too (`{}` {}): if the suite needs something a copy lacks, restore the frozen checks in the tree and run it there",
                p.command, p.end
            ),
            Err(why) => why,
        };
        let reason = format!(
            "the suite passes in the agent's tree but fails with the frozen checks restored ({} written back as {} when the run started: `{}` {}; {plain}); an added line changed what an existing test runs — adding tests is the only change allowed: fix the code, not the test, and run again",
            restored.join(", "),
            if restored.len() == 1 { "it was" } else { "they were" },
            run.command,
            run.end
        );
        Rerun::Tampered { reason, restored, run }
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

    /// Writes `tree` into a fresh directory outside the repository (ignored dependencies linked
    /// in), runs `cmds` there in order until one fails, and removes the directory.
    async fn run_in_copy(&self, tree: &str, cmds: &[String], what: &str) -> Result<GateRun, String> {
        let n = NEXT_COPY.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("work-{what}-{}-{n}", self.run.run_id));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = work_runtime::fsx::ensure_dir(&dir) {
            return Err(format!("the copy of the tree could not be made: {e}"));
        }
        let copy = Copy(dir);
        self.tree
            .git()
            .materialize(tree, &copy.0)
            .map_err(|e| format!("the copy of the tree could not be written: {e}"))?;
        let exclude: Vec<String> = self
            .run
            .state_dir
            .strip_prefix(&self.run.root)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
            .into_iter()
            .collect();
        if let Ok(ignored) = self.tree.git().ignored_paths(&exclude) {
            work_git::restore::link_ignored(&self.run.root, &copy.0, &ignored);
        }
        let mut last = None;
        for cmd in cmds {
            let run = self.gate_in(&format!("suite ({what} copy)"), cmd, &copy.0).await;
            let green = run.green;
            last = Some(run);
            if !green {
                break;
            }
        }
        last.ok_or_else(|| "no command to run".to_string())
    }
}
