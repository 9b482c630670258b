//! The files a run added to the test tree: what the rerun with the frozen checks restored moves
//! aside (see `crate::restore`), so that the frozen checks are judged without them.
//!
//! A new test module, a new `__init__.py`, a new helper beside the tests can change what a
//! frozen test runs while no frozen file changed (`lib.add.__code__ = …` in a module the
//! runner collects, or in a package's `__init__.py`). An honest run's frozen tests pass without
//! the files it added; the added tests are judged by the agent's own tree as before.

use super::super::{CheckSurface, MAX_FILES, Named, Role, command_words, is_check_like, named_path, shell_split};
use std::fs;
use std::path::Path;

impl CheckSurface {
    /// Everything the rerun with the frozen checks restored moves aside: what the run added to
    /// the test tree ([`CheckSurface::added_in_test_tree`]) and what it added outside it that
    /// Python loads unasked ([`CheckSurface::added_on_import_path`]), sorted.
    pub fn to_move_aside(&self, root: &Path) -> Vec<String> {
        let mut out = self.added_in_test_tree(root);
        out.extend(self.added_on_import_path(root));
        out.sort();
        out.dedup();
        out
    }

    /// Records the check commands' named directories walked whole as tests, and the paths they
    /// name that do not exist yet (a test the work is to write, judged by name: never moved
    /// aside).
    pub(super) fn record_named<S: AsRef<str>>(&mut self, root: &Path, commands: &[S], which: Named) {
        for cmd in commands {
            self.record_emptied(root, cmd.as_ref());
            for w in command_words(cmd.as_ref()) {
                let w = w.split("::").next().unwrap_or_default();
                match named_path(root, w) {
                    Some(rel) => {
                        if root.join(&rel).is_dir()
                            && (which == Named::All || is_check_like(&rel))
                            && !self.more.test_dirs.contains(&rel)
                        {
                            self.more.test_dirs.push(rel);
                        }
                    }
                    None => {
                        let rel = w.trim_start_matches("./").trim_end_matches('/');
                        if looks_like_path(rel) && !self.more.unborn.iter().any(|u| u == rel) {
                            self.more.unborn.push(rel.to_string());
                        }
                    }
                }
            }
        }
    }

    /// Records the paths `cmd` names that do not exist yet, in a simple command (a part between
    /// `&&`, `||`, `;`, `|`; the script of `sh -c` split too) that also names a frozen test or
    /// a directory holding one: `pytest tests/test_sub.py tests/test_lib.py`, where the work
    /// writes `tests/test_sub.py`. The rerun with the frozen checks restored leaves such a file
    /// empty (see [`CheckSurface::emptied_in_rerun`]). A command that names only new tests
    /// judges no frozen one: its new tests are left as they are.
    fn record_emptied(&mut self, root: &Path, cmd: &str) {
        for part in crate::suite_report::split_parts(cmd) {
            let words = shell_split(&part);
            if let Some(script) = crate::suite_report::inner_script(&words) {
                self.record_emptied(root, script);
                continue;
            }
            let mut unborn = Vec::new();
            let mut judges_frozen = false;
            for w in command_words(&part) {
                let w = w.split("::").next().unwrap_or_default();
                match named_path(root, w) {
                    Some(rel) => judges_frozen |= self.holds_a_frozen_test(&rel),
                    None => {
                        let rel = w.trim_start_matches("./").trim_end_matches('/');
                        if looks_like_path(rel) {
                            unborn.push(rel.to_string());
                        }
                    }
                }
            }
            if judges_frozen {
                for rel in unborn {
                    if !self.more.emptied.contains(&rel) {
                        self.more.emptied.push(rel);
                    }
                }
            }
        }
    }

    /// True when `rel` is a frozen file (a test the command names is pinned), or a directory
    /// holding a frozen test.
    fn holds_a_frozen_test(&self, rel: &str) -> bool {
        let under = format!("{rel}/");
        self.files.contains_key(rel)
            || self.files.iter().any(|(p, f)| matches!(f.role, Role::Test | Role::Pinned) && p.starts_with(&under))
    }

    /// The files the rerun with the frozen checks restored leaves empty: a test a check names
    /// beside frozen tests that did not exist at the freeze and is a file (or a symlink) now
    /// (see [`CheckSurface::record_emptied`]). Its module body runs when the check imports it:
    /// `lib.add.__code__ = …` there would make the frozen tests beside it pass over unfixed
    /// code; its own tests were run by the check in the agent's tree.
    pub fn emptied_in_rerun(&self, root: &Path) -> Vec<String> {
        self.more
            .emptied
            .iter()
            .filter(|rel| fs::symlink_metadata(root.join(rel)).is_ok_and(|m| !m.is_dir()))
            .cloned()
            .collect()
    }

    /// The files under `root` (relative, sorted) that the freeze did not hold and that are in
    /// the test tree — under a test directory (`tests/`, `__tests__/` …, or one a check command
    /// walks whole), or named like a test — or that a runner loads on its own (`conftest.py`,
    /// `sitecustomize.py`, a `.pth` file); a path a check command names is left alone. Symlinks
    /// are listed, never followed.
    pub fn added_in_test_tree(&self, root: &Path) -> Vec<String> {
        let tree = crate::surface::project(root, "");
        let added = tree
            .files()
            .map(|(rel, _)| rel)
            .filter(|rel| self.in_test_tree(rel) && !self.files.contains_key(rel) && !self.names_unborn(rel));
        added.take(MAX_FILES).collect()
    }

    /// True when a check command names `rel` (or a directory holding it) that did not exist
    /// at the freeze.
    pub(in crate::surface) fn names_unborn(&self, rel: &str) -> bool {
        self.more.unborn.iter().any(|u| rel == u || rel.strip_prefix(u.as_str()).is_some_and(|r| r.starts_with('/')))
    }
}

/// True when one of `commands` names the file `rel` itself (`pytest tests/test_new.py`,
/// `pytest ./tests/test_new.py::test_x`): a test a check runs by name is the judged test, never
/// moved aside. (A directory it names may have been there before: what a run added under it is
/// moved aside — see [`CheckSurface::record_named`] for one that was not.)
pub fn named_by<S: AsRef<str>>(commands: &[S], rel: &str) -> bool {
    commands.iter().any(|cmd| {
        command_words(cmd.as_ref())
            .iter()
            .any(|w| w.split("::").next().unwrap_or_default().trim_start_matches("./") == rel)
    })
}

/// True when a word of one of `commands` is a path inside `rel` (`python3 scripts/server.py`
/// inside a new `scripts/`): the check runs a file there by name, so that directory is asked
/// for, not loaded unasked.
pub fn names_inside<S: AsRef<str>>(commands: &[S], rel: &str) -> bool {
    let dir = format!("{}/", rel.trim_end_matches('/'));
    commands
        .iter()
        .any(|cmd| command_words(cmd.as_ref()).iter().any(|w| w.trim_start_matches("./").starts_with(dir.as_str())))
}

/// True when a command word reads as a relative path (a `/` or an extension), not an option,
/// a URL or a path out of the root.
fn looks_like_path(w: &str) -> bool {
    !w.is_empty()
        && !w.starts_with('-')
        && !w.starts_with('/')
        && !w.contains("://")
        && !w.split('/').any(|s| s == ".." || s == ".")
        && (w.contains('/') || w.rsplit_once('.').is_some_and(|(stem, ext)| !stem.is_empty() && !ext.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::super::super::{CheckSurface, Named};

    use super::super::super::tests::write;

    #[test]
    fn the_files_a_run_adds_to_the_test_tree_are_listed_and_a_test_the_check_names_is_not() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        write(root, "lib.py", "x = 0\n");
        write(root, "tests/test_lib.py", "from lib import x\n");
        write(root, "checks/case_a.py", "assert True\n");
        let s = CheckSurface::freeze(
            root,
            &["python3 -m pytest tests && python3 -m pytest tests/test_new.py::test_x checks"],
            Named::CheckLike,
        );
        assert!(s.added_in_test_tree(root).is_empty());
        for rel in [
            "tests/test_zz_helpers.py",
            "tests/__init__.py",
            "tests/sub/helper.py",
            "checks/__init__.py",
            "app/tests.py",
            "app/conftest.py",
            "pkg/thing_tests.py",
            "src/widget.test.js",
            "tests/test_new.py",
            "src/newcode.py",
            "target/x_test.rs",
        ] {
            write(root, rel, "import lib\n");
        }
        assert_eq!(
            s.added_in_test_tree(root),
            [
                "app/conftest.py",
                "app/tests.py",
                "checks/__init__.py",
                "pkg/thing_tests.py",
                "src/widget.test.js",
                "tests/__init__.py",
                "tests/sub/helper.py",
                "tests/test_zz_helpers.py",
            ],
            "the code under test, a test the check names and a skipped directory are not listed"
        );
        // A new test named beside a frozen one is left empty for the rerun; one named alone,
        // or in a command of its own, is not.
        let s = CheckSurface::freeze(
            root,
            &[
                "python3 -m pytest -q tests/test_sub.py tests/test_lib.py && pytest tests/test_solo.py; sh -c 'pytest tests/test_x.py tests'",
            ],
            Named::CheckLike,
        );
        for rel in ["tests/test_sub.py", "tests/test_solo.py", "tests/test_x.py"] {
            write(root, rel, "import lib\n");
        }
        assert_eq!(s.emptied_in_rerun(root), ["tests/test_sub.py", "tests/test_x.py"]);
        let named = |cmd: &str, rel: &str| super::named_by(&[cmd], rel);
        assert!(named("python3 -m pytest ./tests/test_new.py::test_x", "tests/test_new.py"));
        assert!(named("sh -c 'pytest tests/test_a.py -q'", "tests/test_a.py"));
        assert!(!named("python3 -m pytest tests/unit", "tests/unit/test_zz.py"), "a directory may have been there");
        assert!(!named("python3 -m pytest tests", "tests/test_zz_helpers.py"), "a directory that was there");
        assert!(!named("python3 -m pytest tests/test_new.py", "tests/test_new.pyc"));
    }
}
