//! What a read-only role (the E2E tester, the plan indexer and extractor, a reviewer) changed:
//! `work_git::readonly`'s one meaning of read-only (HEAD, the snapshot tree, the index, git's
//! seal, the git directory's own files), with the state directory watched too. Ignored scratch
//! files are not evidence and are let be. Taken before the dispatch, compared after it.

use crate::env::Env;
use work_git::readonly::{View, Watch};

/// The tree before a read-only dispatch.
pub(crate) struct Guard {
    view: Result<View, work_git::GitError>,
    watch: Watch,
}

impl Guard {
    /// The tree now; `keep_out` (the run's own directory, a tester's fixtures) is never looked at.
    pub(crate) fn take(env: &Env, keep_out: &[std::path::PathBuf]) -> Guard {
        let state = &env.run.state_dir;
        let watched = state.starts_with(&env.run.root) && state != &env.run.root;
        let watch = Watch {
            exclude: env.tree.excluded().to_vec(),
            watched: if watched { vec![state.clone()] } else { Vec::new() },
            keep_out: keep_out.to_vec(),
        };
        Guard { view: env.tree.git().read_only_view(&watch), watch }
    }

    /// What the dispatch changed, each named; a git that failed is the run's error (`fail_git`).
    pub(crate) fn writes(self, env: &Env) -> Vec<String> {
        match self.view.and_then(|v| env.tree.git().read_only_changes(&v, &self.watch)) {
            Ok(changes) => changes,
            Err(e) => {
                env.fail_git(e);
                Vec::new()
            }
        }
    }
}
