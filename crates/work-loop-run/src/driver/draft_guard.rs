//! The drafter writes the spec and the plan, nothing else (`drafter-wrote-tree`).
//!
//! The drafter is the one write-access role that runs before the code phase, so before the
//! check surface is frozen and git's view sealed: a test it weakened, or an index flag it set,
//! would be frozen as the baseline. The whole tree outside the spec and state directories is
//! hashed through a temporary index (so no index flag hides a change) before and after its
//! dispatch, and git's view is sealed across it; any difference stops the run BLOCKED, naming
//! the paths, before its drafts are read.
//!
//! Inside the spec directory the drafter writes markdown only (`*.md`): a `conftest.py`, a
//! `sitecustomize.py` or any other file a test runner may load, written there before the checks
//! are frozen, would be frozen as part of the baseline. Every other file there (the loop's own
//! state files aside) is hashed before and after, and a file added, changed or removed is
//! `drafter-wrote-tree` too.

use super::Driver;
use super::plumbing::git_failed;
use crate::Report;
use crate::state::STATE_FILE;
use std::collections::BTreeMap;
use std::path::Path;
use work_git::integrity::{Seal, describe};
use work_loop::LoopError;

/// The stop reason.
pub const DRAFTER_WROTE_TREE: &str = "drafter-wrote-tree";

/// The tree and git's view before a drafter dispatch.
pub(super) struct DraftGuard {
    tree: Result<String, work_git::GitError>,
    seal: Result<Seal, work_git::GitError>,
    spec_dir: BTreeMap<String, String>,
}

/// The loop's own files in the spec directory (guarded as loop state, not drafts).
const LOOP_FILES: [&str; 4] = ["engine-state.json", "state.json", STATE_FILE, "reviews"];

/// Every file under `dir` that is not markdown (the loop's own files aside): its path relative
/// to `dir` ⇒ its content digest (`symlink`, `unreadable`).
fn non_markdown(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().into_owned();
        if dir == root && LOOP_FILES.contains(&rel.as_str()) {
            continue;
        }
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(root, &p, out),
            Ok(t) if t.is_symlink() => {
                out.insert(rel, "symlink".into());
            }
            _ if rel.ends_with(".md") => {}
            _ => {
                let digest = std::fs::read(&p)
                    .map(|b| work_loop::common::sha256_hex(&b))
                    .unwrap_or_else(|_| "unreadable".into());
                out.insert(rel, digest);
            }
        }
    }
}

impl Driver {
    /// Takes the tree outside the spec and state directories, and git's view, now.
    pub(super) fn draft_guard(&self) -> DraftGuard {
        DraftGuard {
            tree: self.git.snapshot_tree(&self.review_excludes()),
            seal: self.git.seal(),
            spec_dir: non_markdown(self.sd.dir()),
        }
    }

    /// The stop, when the drafter changed anything outside the spec directory, or anything
    /// but markdown inside it. A git that fails reading the tree or its view again is the run's
    /// error (`reason` `git`), never a change the drafter made.
    pub(super) fn drafted_outside(&self, before: DraftGuard) -> Result<Option<Report>, LoopError> {
        let mut changed = Vec::new();
        let after = non_markdown(self.sd.dir());
        for (rel, digest) in &after {
            if before.spec_dir.get(rel) != Some(digest) {
                changed.push(format!("{} (not markdown)", self.rel(rel)));
            }
        }
        for rel in before.spec_dir.keys().filter(|r| !after.contains_key(*r)) {
            changed.push(format!("{} removed (not markdown)", self.rel(rel)));
        }
        let was = before.tree.map_err(git_failed)?;
        let is = self.git.snapshot_tree(&self.review_excludes()).map_err(git_failed)?;
        if was != is {
            changed.extend(self.git.tree_diff_names(&was, &is).map_err(git_failed)?);
        }
        let c = before.seal.map_err(git_failed)?.changes(&self.git.seal().map_err(git_failed)?);
        if !c.is_empty() {
            changed.push(format!("git's view: {}", describe(&c)));
        }
        if changed.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.blocked(
            DRAFTER_WROTE_TREE,
            format!(
                "the drafter changed the tree outside `{}` or wrote there what is not markdown ({}); it writes only markdown (spec.md, plan.md, notes) there, and a change made before the code phase would be frozen as the baseline: undo it, then resume",
                self.sd.rel(),
                changed.join(", ")
            ),
        )))
    }
}
