//! The final full pass, run again with the frozen checks restored before DONE.
//!
//! The file-level freeze lets an implementer add tests, lines appended to an existing test
//! file included, and the suite's own report compares test ids and outcomes, not what a test
//! exercised: `f = lambda: 1` appended after `from lib import f` keeps every old line and id,
//! and the old test passes over unfixed code. So once every criterion passed the final full
//! pass (and the file-level freeze and the suite reports are satisfied), every criterion's
//! scenario runs once more on the engine's copy with every frozen check file put back
//! as it was when the goal's first run froze its checks (`work_git::restore`), each judged by
//! its own observable, the files the implementer added to the test tree left out unless a
//! scenario names them. A criterion that fails there
//! stops the goal BLOCKED `check-tampered`. A goal whose frozen files are unchanged pays
//! nothing.

use super::Runner;
use crate::observe;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use work_git::restore::Rerun;
use work_git::surface::{CheckSurface, TestEdits};
use work_runtime::events::Event;

impl Runner<'_, '_> {
    /// Why every criterion passing is not believed (the detail of a BLOCKED
    /// `check-tampered`), or `None` when the verdict stands.
    pub(super) async fn restored_detail(&self, root: &Path, frozen: &CheckSurface) -> Option<String> {
        let git = work_git::Git::new(root);
        let run = self.env.run;
        let exclude = run.state_exclude();
        let criteria = &self.goal.criteria;
        let mut frozen_checks = if git.is_repo() { frozen.frozen(&git, root, &exclude) } else { None };
        // A test a criterion runs by name (one added since the goal froze its checks too) is
        // the judged test, and a new directory holding a file a criterion runs by name
        // (`python3 scripts/server.py`) is what the criterion starts: never left out.
        let commands: Vec<&str> =
            criteria.iter().flat_map(|c| std::iter::once(c.scenario.as_str()).chain(c.cleanup.as_deref())).collect();
        if let Some(fz) = frozen_checks.as_mut() {
            fz.hide.retain(|p| {
                !work_git::surface::named_by(&commands, p) && !work_git::surface::names_inside(&commands, p)
            });
        }
        let outcome = match frozen_checks {
            Some(fz) => {
                fz.rerun(async |dir: &Path| {
                    for c in criteria {
                        let timeout = Duration::from_secs(c.timeout_secs);
                        let marker = format!("{}.{}.restored", run.run_id, c.id);
                        let obs = observe::run_marked(&run.spawner, &c.scenario, dir, timeout, Some(&marker)).await;
                        if let Some(cmd) = &c.cleanup {
                            observe::run_marked(&run.spawner, cmd, dir, timeout, Some(&marker)).await;
                        }
                        observe::sweep(&marker).await;
                        let verdict = observe::evaluate(&c.pass, &obs);
                        if !verdict.pass {
                            return (
                                false,
                                format!("criterion `{}` (`{}`) fails: {}", c.id, c.scenario, verdict.failures()),
                            );
                        }
                    }
                    (true, String::new())
                })
                .await
            }
            None => Rerun::FrozenGone(work_git::restore::no_tree(git.is_repo())),
        };
        if let Rerun::Green(restored) | Rerun::Red { restored, .. } = &outcome {
            let green = matches!(outcome, Rerun::Green(_));
            run.emit(Event::FrozenRerunEnd {
                goal_id: Some(json!(self.goal.id)),
                restored: json!(restored),
                hidden: None,
                emptied: None,
                green,
            });
        }
        let changed = !frozen.changes(root, TestEdits::None).is_empty();
        outcome.blocked_reason("every criterion", String::clone, changed)
    }
}
