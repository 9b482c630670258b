//! What a read-only role (the E2E tester, the plan indexer and extractor) changed: every path the
//! whole-tree snapshot shows changed (tracked and untracked, hashed through a temporary index, so
//! an index flag hides nothing), and anything under `.git/` or the state directory. Ignored
//! scratch files are not evidence and are let be. Taken before the dispatch, compared after it.

use crate::env::Env;
use work_runtime::tree_guard::TreeSnapshot;

/// The tree before a read-only dispatch.
pub(crate) struct Guard {
    tree: Result<String, work_git::GitError>,
    walk: std::io::Result<TreeSnapshot>,
    keep_out: Vec<std::path::PathBuf>,
}

impl Guard {
    /// Takes the tree now; `keep_out` are directories the role may write (the run's own).
    pub(crate) fn take(env: &Env, keep_out: &[std::path::PathBuf]) -> Guard {
        Guard {
            tree: env.tree.snapshot_tree(),
            walk: TreeSnapshot::take(&env.run.root, keep_out),
            keep_out: keep_out.to_vec(),
        }
    }

    /// What changed since [`Guard::take`], each as `~path` (content), the walk's `+`/`-`/`~`
    /// for git's files and the state directory, or `?why` when the tree could not be walked (a
    /// change, fail closed). Empty: nothing changed. A git that failed snapshotting or
    /// comparing the tree is no verdict: it is the run's failure ([`Env::fail_git`]).
    pub(crate) fn writes(self, env: &Env) -> Vec<String> {
        let after = (env.tree.snapshot_tree(), TreeSnapshot::take(&env.run.root, &self.keep_out));
        let mut out = Vec::new();
        match (self.tree, after.0) {
            (Ok(a), Ok(b)) if a == b => {}
            (Ok(a), Ok(b)) => match env.tree.git().tree_diff_names(&a, &b) {
                Ok(names) => out.extend(names.into_iter().map(|n| format!("~{n}"))),
                Err(e) => env.fail_git(e),
            },
            (Err(e), _) | (_, Err(e)) => env.fail_git(e),
        }
        let state = env.run.state_dir.strip_prefix(&env.run.root).ok().map(|p| p.to_string_lossy().into_owned());
        match (self.walk, after.1) {
            (Ok(b), Ok(a)) => out.extend(b.changes(&a).into_iter().filter(|c| {
                let p = &c[1..];
                p == ".git"
                    || p.starts_with(".git/")
                    || state.as_deref().is_some_and(|s| !s.is_empty() && (p == s || p.starts_with(&format!("{s}/"))))
            })),
            (Err(e), _) | (_, Err(e)) => out.push(format!("?the tree could not be read: {e}")),
        }
        out
    }
}
