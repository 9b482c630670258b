//! Where the criteria's scenarios run: the engine's copy of the tree.
//!
//! Every observation — RED before the first dispatch, the checks after each attempt, the final
//! full pass, the suite reports the final pass is compared with — runs on a fresh engine copy
//! of the implementer's tree as it is (`work_git::Git::snapshot_copy`: its snapshot, the state
//! directory left out, the ignored entries copied in), so nothing a scenario writes (a log,
//! a cache, build output) lands in the implementer's tree. Outside a git repository there is
//! no copy to make: the scenario runs in the tree.

use super::Runner;
use crate::observe::{self, Observation};
use std::path::Path;
use std::time::Duration;
use work_git::copy::EngineCopy;
use work_runtime::spawn::Spawner;

impl Runner<'_, '_> {
    /// A fresh engine copy of the tree (`None` outside a git repository), or why it could not
    /// be made (the observation then fails, never runs in the tree).
    pub(super) fn check_copy(&self) -> Result<Option<EngineCopy>, String> {
        let git = work_git::Git::new(&self.env.run.root);
        if !git.is_repo() {
            return Ok(None);
        }
        git.snapshot_copy(&self.env.run.state_exclude())
            .map(Some)
            .map_err(|e| format!("the engine's copy could not be made: {e}"))
    }
}

/// The directory `copy` stands for: its root, or `root` when there is none.
pub(super) fn dir_of<'a>(copy: &'a Result<Option<EngineCopy>, String>, root: &'a Path) -> Result<&'a Path, &'a str> {
    match copy {
        Ok(Some(c)) => Ok(c.path()),
        Ok(None) => Ok(root),
        Err(why) => Err(why),
    }
}

/// [`observe::run_marked`] in `dir`; a copy that could not be made is a scenario that could
/// not be started.
pub(super) async fn run_on(
    spawner: &Spawner,
    cmd: &str,
    dir: Result<&Path, &str>,
    timeout: Duration,
    marker: &str,
) -> Observation {
    match dir {
        Ok(dir) => observe::run_marked(spawner, cmd, dir, timeout, Some(marker)).await,
        Err(why) => Observation { spawn_error: Some(why.to_string()), ..Observation::default() },
    }
}
