//! The gates, run again with the frozen checks restored before GATES counts as green.
//!
//! The file-level freeze lets an implementer add tests, lines appended to an existing test
//! file included, and the suite's own report compares test ids and outcomes, not what a test
//! exercised: `f = lambda: 1` appended after `from lib import f` keeps every old line and id,
//! and the old test passes over unfixed code. So once every gate is green (and the file-level
//! freeze and the suite report are satisfied), the pinned gates run once more in
//! the tree with every frozen check file written back as it was when the code phase froze its
//! checks (`work_git::restore`); tests the implementer added run there too. Red there: BLOCKED
//! `check-tampered`, before `wave-passed` or `gates-clean` is fired. A run whose frozen files
//! are unchanged pays nothing.

use super::{Driver, Report};
use serde_json::json;
use work_git::restore::Rerun;
use work_git::surface::TestEdits;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

impl Driver {
    /// The stop when the green gates are red with the frozen checks restored (or cannot be
    /// rerun so while a frozen file differs); `None` when the verdict stands.
    pub(super) async fn restored_stop(&self) -> Option<Report> {
        let surface = self.rs.check_surface.as_ref()?;
        let exclude: Vec<String> = self.state_prefix().into_iter().collect();
        let (gates, timeout, spawner) = (&self.s.gates, self.s.gate_timeout, &self.run.spawner);
        let outcome = match surface.frozen(&self.git, &self.run.root, &exclude) {
            Some(frozen) => {
                frozen
                    .rerun(async |dir: &std::path::Path| {
                        for (name, cmd) in gates {
                            let end = match spawner.shell(cmd, dir, timeout).await {
                                Ok(out) if out.success() => continue,
                                Ok(out) => out.describe_end(),
                                Err(e) => format!("could not start: {e}"),
                            };
                            return (false, format!("gate `{name}` (`{cmd}`) {end}"));
                        }
                        (true, String::new())
                    })
                    .await
            }
            None => Rerun::FrozenGone(work_git::restore::no_tree(true)),
        };
        if let Rerun::Green(restored) | Rerun::Red { restored, .. } = &outcome {
            let green = matches!(outcome, Rerun::Green(_));
            self.run.emit(Event::FrozenRerunEnd {
                goal_id: None,
                restored: json!(restored),
                hidden: None,
                emptied: None,
                green,
            });
        }
        let changed = !surface.changes(&self.run.root, TestEdits::None).is_empty();
        let why = outcome.blocked_reason("the gates", String::clone, changed)?;
        self.run.emit(Event::CheckSurfaceChanged { goal_id: None, changes: Some(json!(why)), restored: None });
        Some(self.blocked(StopReason::CheckTampered.as_str(), format!("{why} (then resume)")))
    }
}
