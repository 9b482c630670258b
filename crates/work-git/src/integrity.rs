//! Git's own view of the tree, sealed for a run: what could make `git status` and `git diff`
//! lie about the working tree.
//!
//! `git status`, `git diff` and `git add` trust the index and a handful of files beside it. An
//! agent that can run git can hide a change from every one of them without touching the file
//! itself: `git update-index --assume-unchanged` or `--skip-worktree` on an edited file, a line in
//! `.git/info/exclude` or in the file `core.excludesFile` names, a `.gitattributes` that marks a
//! file `-diff` or gives it a clean filter, a filter or diff driver in the configuration, a hook.
//! [`Git::seal`] records all of it when a run starts; [`Seal::changes`] names what an agent
//! changed since, one line each:
//!
//! - the index flags (`assume-unchanged`, `skip-worktree`) of every entry (`git ls-files -v`);
//! - the content of `info/exclude`, `info/attributes`, `info/sparse-checkout`, every hook
//!   (wherever `core.hooksPath` puts them), the excludes and attributes files the configuration
//!   names (or git's defaults under `$XDG_CONFIG_HOME/git/`), and every `.gitattributes` in the
//!   tree, tracked, untracked or ignored;
//! - the configuration that changes what git shows: every `core.*`, `filter.*`, `diff.*`,
//!   `status.*`, `include.*`, `includeIf.*` and `extensions.*` key, in every scope.
//!
//! Files are hashed (sha256) without following symlinks out of the tree; a missing file is
//! recorded as absent, so creating one is a change too.

use crate::{Git, GitError, split_z};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The configuration keys that change what git shows (a regular expression for
/// `git config --get-regexp`).
const CONFIG_KEYS: &str = r"^(core|filter|diff|status|include|includeif|extensions)\.";

/// What a run started with (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Seal {
    /// Path ⇒ its index flags (`assume-unchanged`, `skip-worktree`, or both), for flagged
    /// entries only.
    flags: BTreeMap<String, String>,
    /// What a sealed file is (`info/exclude`, `hook pre-commit`, `.gitattributes docs/x`) ⇒ its
    /// digest (`absent` when there is none).
    files: BTreeMap<String, String>,
    /// Configuration key ⇒ its values, in the order git lists them.
    config: BTreeMap<String, String>,
}

const ABSENT: &str = "absent";

impl Git {
    /// Seals git's view of the tree (see [`Seal`]).
    pub fn seal(&self) -> Result<Seal, GitError> {
        let mut seal = Seal { flags: self.index_flags()?, ..Seal::default() };
        seal.config = self.view_config();
        for name in ["info/exclude", "info/attributes", "info/sparse-checkout"] {
            let path = self.git_path(name)?;
            seal.files.insert(name.to_string(), digest_file(&path));
        }
        let hooks = self.git_path("hooks")?;
        for (name, digest) in digest_dir(&hooks) {
            seal.files.insert(format!("hook {name}"), digest);
        }
        for (key, default) in [("core.excludesfile", "ignore"), ("core.attributesfile", "attributes")] {
            let path = match seal.config.get(key) {
                Some(v) => Some(expand_home(v.lines().last().unwrap_or_default())),
                None => xdg_git_file(default),
            };
            if let Some(path) = path {
                seal.files.insert(format!("{key} {}", path.display()), digest_file(&path));
            }
        }
        let attrs = self.run(&["ls-files", "-z", "--cached", "--others", "--", ":(glob)**/.gitattributes"])?;
        for rel in split_z(&attrs) {
            seal.files.insert(format!(".gitattributes {rel}"), digest_file(&self.root.join(&rel)));
        }
        Ok(seal)
    }

    /// The flagged index entries: path ⇒ `assume-unchanged`, `skip-worktree` or both.
    fn index_flags(&self) -> Result<BTreeMap<String, String>, GitError> {
        let out = self.run(&["ls-files", "-v", "-z"])?;
        let mut flags = BTreeMap::new();
        for entry in split_z(&out) {
            let mut chars = entry.chars();
            let Some(tag) = chars.next() else { continue };
            let path = chars.as_str().strip_prefix(' ').unwrap_or(chars.as_str());
            let mut what = Vec::new();
            if tag.is_ascii_lowercase() {
                what.push("assume-unchanged");
            }
            if tag.eq_ignore_ascii_case(&'S') {
                what.push("skip-worktree");
            }
            if !what.is_empty() {
                flags.insert(path.to_string(), what.join("+"));
            }
        }
        Ok(flags)
    }

    /// The configuration that changes what git shows (no match is an empty map).
    fn view_config(&self) -> BTreeMap<String, String> {
        let out = self.run(&["config", "-z", "--get-regexp", CONFIG_KEYS]).unwrap_or_default();
        let mut config: BTreeMap<String, String> = BTreeMap::new();
        for entry in split_z(&out) {
            let (key, value) = entry.split_once('\n').unwrap_or((entry.as_str(), ""));
            let slot = config.entry(key.to_ascii_lowercase()).or_default();
            if !slot.is_empty() {
                slot.push('\n');
            }
            slot.push_str(value);
        }
        config
    }

    /// `git rev-parse --git-path <name>`, absolute.
    fn git_path(&self, name: &str) -> Result<PathBuf, GitError> {
        let p = PathBuf::from(self.run(&["rev-parse", "--git-path", name])?.trim());
        Ok(if p.is_absolute() { p } else { self.root.join(p) })
    }
}

impl Seal {
    /// What changed from `self` (the run's start) to `now`, one line each, sorted.
    pub fn changes(&self, now: &Seal) -> Vec<String> {
        let mut out = Vec::new();
        for (path, flag) in &now.flags {
            match self.flags.get(path) {
                None => out.push(format!("index flag {flag} set on `{path}`")),
                Some(f) if f != flag => out.push(format!("index flags of `{path}` changed from {f} to {flag}")),
                Some(_) => {}
            }
        }
        for (path, flag) in &self.flags {
            if !now.flags.contains_key(path) {
                out.push(format!("index flag {flag} cleared on `{path}`"));
            }
        }
        for (what, digest) in &now.files {
            let before = self.files.get(what).map(String::as_str).unwrap_or(ABSENT);
            if before == digest {
                continue;
            }
            let verb = if before == ABSENT {
                "created"
            } else if digest == ABSENT {
                "deleted"
            } else {
                "changed"
            };
            out.push(format!("{what} {verb}"));
        }
        for (what, digest) in &self.files {
            if !now.files.contains_key(what) && digest != ABSENT {
                out.push(format!("{what} deleted"));
            }
        }
        for (key, value) in &now.config {
            match self.config.get(key) {
                None => out.push(format!("git config `{key}` set")),
                Some(v) if v != value => out.push(format!("git config `{key}` changed")),
                Some(_) => {}
            }
        }
        for key in self.config.keys() {
            if !now.config.contains_key(key) {
                out.push(format!("git config `{key}` unset"));
            }
        }
        out.sort();
        out
    }
}

/// One line naming the changes (at most eight).
pub fn describe(changes: &[String]) -> String {
    let shown = changes.iter().take(8).cloned().collect::<Vec<_>>().join("; ");
    match changes.len().saturating_sub(8) {
        0 => shown,
        more => format!("{shown} (and {more} more)"),
    }
}

/// The sha256 of a file's content (streamed), a symlink's target text, or [`ABSENT`].
fn digest_file(path: &Path) -> String {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return ABSENT.to_string() };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_default();
        return hex::encode(Sha256::digest(format!("symlink\0{target}").as_bytes()));
    }
    if !meta.is_file() {
        return format!("not a file ({:?})", meta.file_type());
    }
    let Ok(mut f) = work_runtime::fsx::open_user_file(path) else { return "unreadable".to_string() };
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match std::io::Read::read(&mut f, &mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(_) => return "unreadable".to_string(),
        }
    }
    hex::encode(h.finalize())
}

/// Name ⇒ digest of every entry of a directory (not recursive: hooks are files).
fn digest_dir(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            out.insert(name, digest_file(&e.path()));
        }
    }
    out
}

/// `~/x` ⇒ `$HOME/x`.
fn expand_home(value: &str) -> PathBuf {
    match (value.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(value),
    }
}

/// git's default location of a per-user file (`$XDG_CONFIG_HOME/git/<name>`, else
/// `~/.config/git/<name>`).
fn xdg_git_file(name: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("git").join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Git) {
        crate::scratch::repo_with(&[(
            "a.txt", "a
",
        )])
    }

    #[test]
    fn an_unchanged_repository_seals_the_same() {
        let (_d, g) = repo();
        let a = g.seal().expect("seal");
        assert!(a.changes(&g.seal().expect("seal")).is_empty());
        g.run(&["status"]).expect("status");
        assert!(a.changes(&g.seal().expect("seal")).is_empty(), "git status changes nothing sealed");
    }

    #[test]
    fn flags_excludes_attributes_hooks_and_config_are_named() {
        let (d, g) = repo();
        let a = g.seal().expect("seal");
        g.run(&["update-index", "--assume-unchanged", "a.txt"]).expect("flag");
        let now = g.seal().expect("seal");
        assert_eq!(a.changes(&now), vec!["index flag assume-unchanged set on `a.txt`"]);
        g.run(&["update-index", "--no-assume-unchanged", "a.txt"]).expect("flag");
        g.run(&["update-index", "--skip-worktree", "a.txt"]).expect("flag");
        assert_eq!(
            a.changes(&g.seal().expect("seal")),
            vec!["index flag skip-worktree set on `a.txt`"],
            "{:?}",
            g.run(&["ls-files", "-v"])
        );
        g.run(&["update-index", "--no-skip-worktree", "a.txt"]).expect("flag");

        std::fs::write(d.path().join(".git/info/exclude"), "secret.txt\n").expect("write");
        std::fs::write(d.path().join("sub.gitattributes"), "not one").expect("write");
        std::fs::create_dir_all(d.path().join("sub")).expect("mkdir");
        std::fs::write(d.path().join("sub/.gitattributes"), "*.rs -diff\n").expect("write");
        std::fs::write(d.path().join(".git/hooks/pre-commit"), "exit 0\n").expect("write");
        g.run(&["config", "diff.hide.textconv", "true"]).expect("config");
        let ch = a.changes(&g.seal().expect("seal"));
        assert_eq!(
            ch,
            vec![
                ".gitattributes sub/.gitattributes created",
                "git config `diff.hide.textconv` set",
                "hook pre-commit created",
                "info/exclude changed",
            ],
            "{ch:?}"
        );
        assert!(describe(&ch).contains("info/exclude changed"));
    }
}
