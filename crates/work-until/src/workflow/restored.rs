//! `until`'s verify, run again with the frozen checks restored.
//!
//! The file-level freeze lets a worker add tests, lines appended to an existing test file
//! included, and the suite's own report compares test ids and outcomes, not what a test
//! exercised: `f = lambda: 1` appended after `from lib import f` keeps every old line and id,
//! and the old test passes over unfixed code. So a verify that exited 0 (with the file-level
//! freeze and the suite report satisfied) runs once more on the engine's copy with
//! every frozen check file written back as it was when the session froze its checks
//! (`work_git::restore`), the files the worker added to the test tree left out. Red there: BLOCKED
//! `check-tampered`. A session whose frozen files are unchanged pays nothing.

use super::Ctx;
use serde_json::json;
use work_git::restore::Rerun;
use work_git::surface::TestEdits;
use work_runtime::events::Event;

impl Ctx<'_, '_> {
    /// Why the green verify `cmd` is not believed (the reason of a BLOCKED `check-tampered`),
    /// or `None` when it stands.
    pub(super) async fn restored_verdict(&self, cmd: &str) -> Option<String> {
        let surface = self.surface.as_ref()?;
        let run = self.env.run;
        let timeout = Some(self.env.verify_timeout);
        let outcome = match self.git.as_ref().and_then(|g| surface.frozen(g, &run.root, &self.exclude)) {
            Some(frozen) => {
                frozen
                    .rerun(async |dir: &std::path::Path| match run.spawner.shell(cmd, dir, timeout).await {
                        Ok(out) => (out.success(), out.describe_end()),
                        Err(e) => (false, format!("could not start: {e}")),
                    })
                    .await
            }
            None => Rerun::FrozenGone(work_git::restore::no_tree(self.git.is_some())),
        };
        if let Rerun::Green(restored) | Rerun::Red { restored, .. } = &outcome {
            let green = matches!(outcome, Rerun::Green(_));
            run.emit(Event::UntilFrozenRerun { command: json!(cmd), restored: json!(restored), green });
        }
        let changed = !surface.changes(&run.root, TestEdits::None).is_empty();
        let why = outcome.blocked_reason(&format!("`{cmd}`"), |end| format!("`{cmd}` {end}"), changed)?;
        Some(format!("check-tampered: {why}"))
    }
}
