//! What the freeze records beyond the frozen files, and what it names from it.
//!
//! - **The test tree's own shape** ([`hidden`]): the directories a check command names and
//!   walks whole, and the paths it names that did not exist yet, so that the rerun with the
//!   frozen checks restored can move aside every file the run **added** to the test tree
//!   ([`CheckSurface::added_in_test_tree`]) and the frozen checks are judged without them.
//! - **Files that change what a runner does when they appear** ([`shadow`]): a runner's
//!   configuration in a directory on the way to a test (`pyproject.toml` with a pytest section,
//!   `setup.cfg`, `pytest.toml` …), a makefile that `make` reads before the frozen one, a package
//!   manager's configuration beside a frozen `package.json`, and a module that shadows the test
//!   runner or the standard library on a check's import path.
//! - **What Python loads unasked from outside the test tree** ([`import_path`]): the entries
//!   of the directories on a check's import path and the frozen files' imports, so that the
//!   rerun also moves aside a new `*.dist-info`, a new `__init__.py` above the tests, and a new
//!   top-level module the project does not import
//!   ([`CheckSurface::added_on_import_path`]).
//! - **Files outside the repository that a runner reads** ([`outside`]): runner configuration
//!   and `conftest.py` in the repository's parent directories, Python's user site startup
//!   files, the user's package-manager configuration, cargo's home configuration.
//! - **Files a frozen check includes or sources** ([`included`]): a makefile's `include`, a
//!   shell script's `source` — frozen, or, when not there yet, named when they appear.

mod hidden;
mod import_path;
mod included;
mod outside;
mod shadow;

pub use hidden::{named_by, names_inside};

use super::{CheckSurface, Named, SurfaceChange};
use std::collections::BTreeMap;
use std::path::Path;

/// The freeze's record beyond the frozen files (flattened into the surface's JSON; absent in a
/// freeze recorded before it, which then names nothing of it).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct More {
    /// Directories a check command names and that are walked whole as tests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    test_dirs: Vec<String>,
    /// Paths a check command names that did not exist at the freeze (the test the work is to
    /// write): never moved aside.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unborn: Vec<String>,
    /// The [`unborn`](More::unborn) paths named in one simple command with a frozen test (or a
    /// directory holding one): left empty for the rerun with the frozen checks restored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    emptied: Vec<String>,
    /// Files outside the repository a runner reads: absolute path ⇒ digest (`absent`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    outside: BTreeMap<String, String>,
    /// Modules named like the standard library on the import path at the freeze (the code
    /// under test may be one): not named as added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    stdlib_named: Vec<String>,
    /// Files a frozen makefile includes or a frozen script sources that did not exist at the
    /// freeze: path ⇒ which frozen file pulls it in ([`included`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    absent: BTreeMap<String, String>,
    /// The freeze pinned the files [`shadow`] names, so one added later is named.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    watch_shadows: bool,
    /// The import path's entries and the frozen files' imports at the freeze.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    import_path: Option<import_path::ImportPath>,
}

impl CheckSurface {
    /// Records what [`More`] holds, at the end of [`CheckSurface::freeze`].
    pub(super) fn freeze_more<S: AsRef<str>>(&mut self, root: &Path, commands: &[S], which: Named) {
        self.record_named(root, commands, which);
        self.pin_shadows(root);
        self.more.watch_shadows = true;
        // Fallback only: confined, no agent can write outside the repository.
        if !work_runtime::sandbox::run_is_confined() {
            self.more.outside = outside::record(root);
        }
        self.record_import_path(root);
    }

    /// Appends to `out` (the files [`CheckSurface::changes`] names as added) the runner files
    /// and shadows added since the freeze, and the files outside the repository that changed;
    /// a path already in `out` is not named twice.
    pub(super) fn more_added(&self, root: &Path, out: &mut Vec<SurfaceChange>) {
        let mut more = Vec::new();
        if self.more.watch_shadows {
            more.extend(self.added_shadows(root));
        }
        more.extend(outside::changes(root, &self.more.outside));
        more.extend(self.added_included(root));
        for c in more {
            if !out.iter().any(|o| o.path == c.path) {
                out.push(c);
            }
        }
    }
}
