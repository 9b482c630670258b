//! Files a frozen check pulls in as part of itself: what a frozen makefile `include`s and what a
//! frozen shell script `source`s.
//!
//! A frozen `Makefile` with the common `-include .env` runs whatever a new, git-ignored `.env`
//! says (`PYTHON = true` turns `$(PYTHON) -m pytest` into `true`); a frozen `check.sh` that does
//! `. scripts/env.sh` ends green when `exit 0` is appended there. So, from every frozen check
//! file (a pinned file or a test-support module: a makefile by its name — `Makefile`,
//! `makefile`, `GNUmakefile`, `*.mk`, `*.make` — a shell script by its extension or its `#!`
//! line), the freeze follows:
//!
//! - a makefile's `include`, `-include` and `sinclude` lines (every word, relative to the root,
//!   where `make` runs; a word with a `$(…)` or a glob is left alone);
//! - a shell script's `source FILE` / `. FILE` (a plain path: from the root, where the check
//!   runs, or the script's directory; `"$(dirname "$0")/FILE"`, `${BASH_SOURCE%/*}/FILE`,
//!   `$DIR/FILE`: the script's directory);
//!
//! transitively (what an included makefile includes, what a sourced script sources), at most
//! [`MAX_DEPTH`] deep and [`MAX_FILES`] files. An included file that exists is frozen (pinned); one
//! that does not exist yet is recorded, and named `check-tampered` "added" when it appears. A
//! file the work's text names (see [`super::super::work_names`]) is the work, and left free.
//!
//! A sourced script that defines functions is a library the check calls — the code under test,
//! as often as not — so it is not pinned but held as [`Role::Sourced`]: the work may change it,
//! but a line it adds that ends the check early (`exit`, `exit 0`, `exec …`, a `trap` that exits)
//! is named, and the rerun with the frozen checks restored keeps the work's version.

use super::super::{CheckSurface, Role, SurfaceChange, read};
use crate::locate::normalize_rel;
use crate::support_modules::{after_variable, parent};
use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

/// How many includes deep the freeze follows.
const MAX_DEPTH: usize = 4;

/// The most included files followed.
const MAX_FILES: usize = 256;

/// The most bytes of one file read for what it includes.
const READ_CAP: u64 = 256 * 1024;

/// How a frozen file pulls others in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A makefile: `include`.
    Make,
    /// A shell script: `source` / `.`.
    Shell,
}

impl Kind {
    fn verb(self) -> &'static str {
        match self {
            Kind::Make => "includes",
            Kind::Shell => "sources",
        }
    }
}

/// What `rel` is, by its name (and, for a file with no extension, its `#!` line).
fn kind_of(rel: &str, text: &str) -> Option<Kind> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if matches!(name, "Makefile" | "makefile" | "GNUmakefile") || name.ends_with(".mk") || name.ends_with(".make") {
        return Some(Kind::Make);
    }
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("sh" | "bash" | "zsh" | "ksh" | "dash") => Some(Kind::Shell),
        Some(_) => None,
        None => {
            let first = text.lines().next()?.strip_prefix("#!")?;
            first.split(['/', ' ']).any(|w| matches!(w, "sh" | "bash" | "zsh" | "ksh" | "dash")).then_some(Kind::Shell)
        }
    }
}

/// The text of `rel` below `root` (no symlink followed; at most [`READ_CAP`] bytes).
fn text_of(root: &Path, rel: &str) -> Option<String> {
    let (bytes, _) = work_runtime::fsx::read_confined_prefix(root, rel, READ_CAP).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn join(dir: &str, rel: &str) -> Option<String> {
    normalize_rel(&crate::support_modules::join(dir, rel))
}

/// The files a makefile's `include` lines name (relative to the root).
fn make_includes(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('\t') {
            continue; // a recipe line
        }
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace();
        if !matches!(words.next(), Some("include" | "-include" | "sinclude")) {
            continue;
        }
        out.extend(
            words
                .filter(|w| !w.contains(['$', '*', '?', '[']) && !w.starts_with('/'))
                .filter_map(|w| normalize_rel(w.trim_start_matches("./"))),
        );
    }
    out
}

/// The files a shell script at `rel` sources: `(path, exists)`; a plain path that exists
/// neither from the root nor from the script's directory is taken from the root (where the
/// check runs).
fn shell_sources(root: &Path, rel: &str, text: &str) -> Vec<(String, bool)> {
    let dir = parent(rel);
    let exists = |p: &str| work_runtime::fsx::open_confined(root, p).is_ok();
    let mut out = Vec::new();
    for line in text.lines() {
        for stmt in line.split('#').next().unwrap_or_default().split([';', '&', '|']) {
            let stmt = stmt.trim();
            let Some(rest) = stmt.strip_prefix("source ").or_else(|| stmt.strip_prefix(". ")) else { continue };
            let words =
                shell_words::split(rest).unwrap_or_else(|_| rest.split_whitespace().map(String::from).collect());
            let Some(word) = words.first() else { continue };
            let candidates: Vec<String> = match after_variable(word) {
                Some(p) => join(dir, p).into_iter().collect(),
                None if word.contains('$') || word.starts_with('/') => continue,
                None => [join("", word), join(dir, word)].into_iter().flatten().collect(),
            };
            match candidates.iter().find(|c| exists(c)) {
                Some(found) => out.push((found.clone(), true)),
                None => out.extend(candidates.into_iter().next().map(|c| (c, false))),
            }
        }
    }
    out
}

/// True when a shell script defines a function (`name() {`, `function name`): a library whose
/// functions the check calls — the code under test — not a file of settings.
fn defines_function(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        if let Some(rest) = l.strip_prefix("function ") {
            return rest.trim_start().starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        }
        let Some((name, rest)) = l.split_once('(') else { return false };
        !name.is_empty()
            && name.trim_end().chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && rest.trim_start().starts_with(')')
    })
}

impl CheckSurface {
    /// Freezes what the frozen makefiles include and the frozen shell scripts source (see the
    /// module docs), except what `named` says the work names.
    pub(in crate::surface) fn pin_included(&mut self, root: &Path, named: &dyn Fn(&str) -> bool) {
        let mut queue: VecDeque<(String, Option<Kind>, usize)> = self
            .files
            .iter()
            .filter(|(_, f)| matches!(f.role, Role::Pinned | Role::Support))
            .map(|(p, _)| (p.clone(), None, 0))
            .collect();
        let mut seen: BTreeSet<String> = queue.iter().map(|(p, _, _)| p.clone()).collect();
        while let Some((file, kind, depth)) = queue.pop_front() {
            let Some(text) = text_of(root, &file) else { continue };
            let Some(kind) = kind.or_else(|| kind_of(&file, &text)) else { continue };
            let pulled: Vec<(String, bool)> = match kind {
                Kind::Make => {
                    make_includes(&text).into_iter().map(|p| (p.clone(), read(root, &p, false).is_some())).collect()
                }
                Kind::Shell => shell_sources(root, &file, &text),
            };
            for (inc, exists) in pulled {
                if named(&inc) || seen.len() >= MAX_FILES || !seen.insert(inc.clone()) {
                    continue;
                }
                if !exists {
                    self.more.absent.insert(inc, format!("the frozen `{file}` {} it", kind.verb()));
                    continue;
                }
                let role = match kind {
                    Kind::Shell if text_of(root, &inc).is_some_and(|t| defines_function(&t)) => Role::Sourced,
                    _ => Role::Pinned,
                };
                self.add(root, &inc, role);
                if depth + 1 < MAX_DEPTH {
                    queue.push_back((inc, Some(kind), depth + 1));
                }
            }
        }
    }

    /// The files a frozen check includes or sources that did not exist at the freeze and do now.
    pub(super) fn added_included(&self, root: &Path) -> Vec<SurfaceChange> {
        self.more
            .absent
            .iter()
            .filter(|(path, _)| read(root, path, false).is_some())
            .map(|(path, why)| SurfaceChange {
                path: path.clone(),
                role: Role::Pinned,
                what: format!("added: {why} (it changes what the frozen check runs)").into(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::write;
    use super::super::super::{CheckSurface, Named, TestEdits, describe};

    fn frozen(root: &std::path::Path, cmd: &str, work: &str) -> CheckSurface {
        let mut s = CheckSurface::freeze(root, &[cmd], Named::CheckLike);
        s.pin_unnamed_by(root, &[cmd], work);
        s
    }

    #[test]
    fn what_a_frozen_makefile_includes_is_frozen_and_one_that_appears_is_named() {
        let d = tempfile::tempdir().expect("tmp");
        let root = d.path();
        write(root, "Makefile", "-include .env\ninclude mk/common.mk\nsinclude $(HOME)/x.mk\n\nt:\n\tinclude no\n");
        write(root, "mk/common.mk", "PYTHON ?= python3\n-include mk/local.mk\n");
        let s = frozen(root, "make test", "fix lib.add");
        assert!(s.paths().contains(&"mk/common.mk"), "{:?}", s.paths());
        assert!(s.changes(root, TestEdits::Add).is_empty());
        write(root, ".env", "PYTHON = true\n");
        write(root, "mk/local.mk", "PYTHON = true\n");
        write(root, "no", "recipe text is no include\n");
        assert_eq!(
            describe(&s.changes(root, TestEdits::Add)),
            "check file `.env` added: the frozen `Makefile` includes it (it changes what the frozen check runs); check file `mk/local.mk` added: the frozen `mk/common.mk` includes it (it changes what the frozen check runs)"
        );
        write(root, "mk/common.mk", "PYTHON = true\n");
        assert!(describe(&s.changes(root, TestEdits::Add)).contains("check file `mk/common.mk` changed"));
        // The work names it: it is the work.
        std::fs::remove_file(root.join(".env")).expect("rm");
        let s = frozen(root, "make test", "write .env with the database URL");
        write(root, ".env", "DB = x\n");
        assert!(!describe(&s.changes(root, TestEdits::Add)).contains("`.env`"));
    }

    #[test]
    fn what_a_frozen_check_script_sources_is_frozen_transitively() {
        let d = tempfile::tempdir().expect("tmp");
        let root = d.path();
        write(
            root,
            "scripts/ci.sh",
            "#!/bin/sh\nset -e\n. scripts/env.sh\n[ -f .env.local ] && . ./.env.local\npython3 -m pytest\n",
        );
        write(root, "scripts/env.sh", "export LC_ALL=C\n. \"$(dirname \"$0\")/paths.sh\"\n");
        write(root, "scripts/paths.sh", "P=1\n");
        let s = frozen(root, "sh scripts/ci.sh", "fix lib.add so that scripts/ci.sh passes");
        let paths = s.paths();
        assert!(["scripts/ci.sh", "scripts/env.sh", "scripts/paths.sh"].iter().all(|p| paths.contains(p)), "{paths:?}");
        write(root, "scripts/env.sh", "export LC_ALL=C\nexit 0\n");
        write(root, ".env.local", "exit 0\n");
        let named = describe(&s.changes(root, TestEdits::Add));
        assert!(named.contains("check file `scripts/env.sh` changed"), "{named}");
        assert!(named.contains("`.env.local` added: the frozen `scripts/ci.sh` sources it"), "{named}");
        // A sourced library (it defines functions) is the code under test: it may change, but a
        // line that ends the check early is named.
        write(root, "scripts/env.sh", "export LC_ALL=C\n");
        write(root, "check.sh", ". ./greet.sh\n[ \"$(greet)\" = hello ]\n");
        write(root, "greet.sh", "greet() {\n  echo helo\n}\n");
        let s = frozen(root, "sh check.sh", "fix greet");
        assert!(s.paths().contains(&"greet.sh") && !s.restored_paths().contains(&"greet.sh"), "{:?}", s.paths());
        write(root, "greet.sh", "greet() {\n  echo hello\n}\n");
        assert!(s.changes(root, TestEdits::Add).is_empty(), "the fix is the work");
        write(root, "greet.sh", "greet() {\n  echo helo\n  exit 0\n}\n");
        let named = describe(&s.changes(root, TestEdits::Add));
        assert!(named.contains("sourced script `greet.sh` edited (a check ends early)"), "{named}");
        // A sourced script the work names is the work.
        let s = frozen(root, "sh scripts/ci.sh", "set LC_ALL in scripts/env.sh");
        assert!(!s.paths().contains(&"scripts/env.sh"));
    }
}
