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
//!   names (or git's defaults under `$XDG_CONFIG_HOME/git/`), every `.gitattributes` in the
//!   tree, tracked, untracked or ignored, and every `.gitignore` that can hide a file from the
//!   snapshots: one added or changed during the run is named (a nested `org/.gitignore` of `*`
//!   hides a new `org/` from the whole-tree snapshots, the files touched and the reviewers'
//!   diff), unless the work's text names it ([`Seal::allow_named_by`]: "add `build/` to
//!   `.gitignore`"). A `.gitignore` in a directory that is ignored anyway hides nothing the
//!   snapshots held, and one a tool writes into its own cache directory (`.pytest_cache/`,
//!   `.mypy_cache/`, `.ruff_cache/`, `.venv/` …) hides only that cache: neither is sealed;
//! - the configuration that changes what git shows: every `core.*`, `filter.*`, `diff.*`,
//!   `status.*`, `include.*`, `includeIf.*` and `extensions.*` key, in every scope; and the
//!   configuration that changes what git does for the user after the run, which no check
//!   looks at: every `alias.*`, `url.*`, `remote.*`, `credential.*` and `pager.*` key.
//!
//! Files are hashed (sha256) without following symlinks out of the tree; a missing file is
//! recorded as absent, so creating one is a change too.

mod inputs;

use crate::{Git, GitError, split_z};
pub use inputs::RACY;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The configuration keys that change what git shows, or what it does for the user after the
/// run (an alias, a rewritten remote URL, a credential helper, a pager): a regular expression
/// for `git config --get-regexp`.
const CONFIG_KEYS: &str =
    r"^(core|filter|diff|status|include|includeif|extensions|alias|url|remote|credential|pager)\.";

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
    /// The `.gitignore` files (relative paths) the work's text names: theirs is no finding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    allowed: Vec<String>,
}

const ABSENT: &str = "absent";

/// A seal and what it was read from ([`Git::read_seal`], [`Git::reread_seal`]).
#[derive(Debug, Clone)]
pub struct SealReading {
    /// The seal read.
    pub seal: Seal,
    /// Its inputs' metadata at the reading; `None` when it must be read again every time.
    inputs: Option<inputs::Inputs>,
    /// True when [`Git::reread_seal`] handed the earlier reading back (no git ran).
    reused: bool,
}

impl SealReading {
    /// True when [`Git::reread_seal`] handed the earlier reading back (no git ran).
    pub fn reused(&self) -> bool {
        self.reused
    }
}

/// The key prefix of a sealed `.gitignore`.
const GITIGNORE: &str = ".gitignore ";

/// Directories tools create for their own cache, with a `.gitignore` of `*` inside (the names
/// start with a dot: never a module Python can import).
const TOOL_CACHES: &[&str] =
    &[".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox", ".nox", ".venv", ".cache"];

impl Git {
    /// Seals git's view of the tree (see [`Seal`]).
    pub fn seal(&self) -> Result<Seal, GitError> {
        Ok(self.seal_and_inputs()?.0)
    }

    /// Seals git's view of the tree and stamps what the seal was read from.
    pub fn read_seal(&self) -> Result<SealReading, GitError> {
        let started = work_runtime::clock::file_time_now();
        let (seal, paths) = self.seal_and_inputs()?;
        let inputs = inputs::Inputs::read(self, &seal, paths, started);
        Ok(SealReading { seal, inputs, reused: false })
    }

    /// `prev` again (no git runs) when the tree did not change since it was read in a way that
    /// [`may_change_seal`] (`tree_unchanged`, which the caller's snapshots tell) and none of its
    /// inputs changed; else a fresh reading (see [`inputs`]).
    pub fn reread_seal(&self, prev: &SealReading, tree_unchanged: bool) -> Result<SealReading, GitError> {
        if tree_unchanged && prev.inputs.as_ref().is_some_and(inputs::Inputs::unchanged) {
            return Ok(SealReading { reused: true, ..prev.clone() });
        }
        self.read_seal()
    }

    /// The seal, and every file it was read from.
    fn seal_and_inputs(&self) -> Result<(Seal, Vec<PathBuf>), GitError> {
        let mut seal = Seal { flags: self.index_flags()?, ..Seal::default() };
        seal.config = self.view_config()?;
        // `commondir` says where the rest is found (a linked worktree's, or one an agent writes
        // into a git directory outside the tree): pointed elsewhere, every other path moves.
        let [exclude, attributes, sparse, hooks, index, config, worktree_config, commondir] = self.git_paths([
            "info/exclude",
            "info/attributes",
            "info/sparse-checkout",
            "hooks",
            "index",
            "config",
            "config.worktree",
            "commondir",
        ])?;
        let mut inputs = vec![index, config, worktree_config, commondir, hooks.clone()];
        for (name, path) in
            [("info/exclude", exclude), ("info/attributes", attributes), ("info/sparse-checkout", sparse)]
        {
            seal.files.insert(name.to_string(), digest_file(&path));
            inputs.push(path);
        }
        for (name, digest) in digest_dir(&hooks) {
            inputs.push(hooks.join(&name));
            seal.files.insert(format!("hook {name}"), digest);
        }
        for (key, default) in [("core.excludesfile", "ignore"), ("core.attributesfile", "attributes")] {
            let path = match seal.config.get(key) {
                Some(v) => Some(expand_home(v.lines().last().unwrap_or_default())),
                None => xdg_git_file(default),
            };
            if let Some(path) = path {
                seal.files.insert(format!("{key} {}", path.display()), digest_file(&path));
                inputs.push(path);
            }
        }
        let listed = self.run(&[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--",
            ":(glob)**/.gitattributes",
            ":(glob)**/.gitignore",
        ])?;
        let (attrs, ignores): (Vec<String>, Vec<String>) =
            split_z(&listed).into_iter().partition(|rel| rel.ends_with(".gitattributes"));
        for rel in attrs {
            seal.files.insert(format!(".gitattributes {rel}"), digest_file(&self.root.join(&rel)));
            inputs.push(self.root.join(&rel));
        }
        for rel in self.sealed_ignores(ignores)? {
            seal.files.insert(format!("{GITIGNORE}{rel}"), digest_file(&self.root.join(&rel)));
            inputs.push(self.root.join(&rel));
        }
        Ok((seal, inputs))
    }

    /// The `.gitignore` files of `found` that can hide a file from the snapshots: not in a
    /// tool's cache directory, and not in a directory ignored anyway (by the rules outside it).
    fn sealed_ignores(&self, found: Vec<String>) -> Result<Vec<String>, GitError> {
        let dir_of = |rel: &str| rel.rsplit_once('/').map(|(d, _)| d.to_string());
        let candidates: Vec<String> = found
            .into_iter()
            .filter(|rel| dir_of(rel).is_none_or(|d| !TOOL_CACHES.contains(&d.rsplit('/').next().unwrap_or_default())))
            .collect();
        let dirs: Vec<String> = candidates.iter().filter_map(|r| dir_of(r)).collect();
        let mut ignored = std::collections::BTreeSet::new();
        for chunk in dirs.chunks(200) {
            let mut args = vec!["-c", "core.quotePath=false", "check-ignore", "--"];
            args.extend(chunk.iter().map(String::as_str));
            // Exit 1: none ignored, every one stays sealed; a failing git is an error (a seal
            // read from a failure would differ from the run's and read as tampering).
            if let Some(out) = self.query(&args)? {
                ignored.extend(out.lines().map(str::to_string));
            }
        }
        Ok(candidates.into_iter().filter(|rel| dir_of(rel).is_none_or(|d| !ignored.contains(&d))).collect())
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

    /// The configuration that changes what git shows (no match, git's exit 1, is an empty map;
    /// a git that fails otherwise is an error, never an empty configuration).
    fn view_config(&self) -> Result<BTreeMap<String, String>, GitError> {
        let out = self.query(&["config", "-z", "--get-regexp", CONFIG_KEYS])?.unwrap_or_default();
        let mut config: BTreeMap<String, String> = BTreeMap::new();
        for entry in split_z(&out) {
            let (key, value) = entry.split_once('\n').unwrap_or((entry.as_str(), ""));
            let slot = config.entry(key.to_ascii_lowercase()).or_default();
            if !slot.is_empty() {
                slot.push('\n');
            }
            slot.push_str(value);
        }
        Ok(config)
    }

    /// Where git keeps each of `names` (`git rev-parse --git-path`, one git for all of them).
    fn git_paths<const N: usize>(&self, names: [&str; N]) -> Result<[PathBuf; N], GitError> {
        let mut args = vec!["rev-parse"];
        for name in names {
            args.extend(["--git-path", name]);
        }
        let out = self.run(&args)?;
        let mut lines = out.lines();
        let mut paths: [PathBuf; N] = std::array::from_fn(|_| PathBuf::new());
        for (slot, name) in paths.iter_mut().zip(names) {
            let Some(line) = lines.next() else {
                return Err(GitError::message(&args, &format!("no path for {name}")));
            };
            let p = PathBuf::from(line);
            *slot = if p.is_absolute() { p } else { self.root.join(p) };
        }
        Ok(paths)
    }
}

impl Seal {
    /// Records the `.gitignore` files `work` (the run's goal, task or plan) names — a word
    /// ending in `.gitignore` (`.gitignore` itself is the root's, `docs/.gitignore` that
    /// one's) — so that a change to them is the work, not a finding.
    pub fn allow_named_by(&mut self, work: &str) {
        for word in work.split(|c: char| c.is_whitespace() || "`'\"(),;:<>[]{}".contains(c)) {
            let word = word.trim_end_matches(['.', '!', '?']);
            let word = if word.ends_with(".gitignore") { word } else { continue };
            let rel = word.trim_start_matches("./").trim_start_matches('/').to_string();
            if !self.allowed.contains(&rel) {
                self.allowed.push(rel);
            }
        }
    }

    /// This seal without the `.gitattributes` and `.gitignore` files in `dir` (relative to the
    /// root) or below it: they apply to `dir`'s files only (a run's own directory, which the
    /// engine writes and no check reads through git).
    pub fn without_files_under(&self, dir: &str) -> Seal {
        let dir = dir.trim_end_matches('/');
        let under = |rel: &str| rel.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'));
        let mut out = self.clone();
        out.files.retain(|what, _| {
            let rel = what.strip_prefix(".gitattributes ").or_else(|| what.strip_prefix(GITIGNORE));
            !rel.is_some_and(under)
        });
        out
    }

    /// What changed from `self` (the run's start) to `now`, one line each, sorted.
    pub fn changes(&self, now: &Seal) -> Vec<String> {
        use crate::inventory::diff;
        let mut out: Vec<String> = diff(&self.flags, &now.flags)
            .into_iter()
            .filter_map(|(path, was, is)| match (was, is) {
                (Some(f), Some(t)) => Some(format!("index flags of `{path}` changed from {f} to {t}")),
                (None, Some(f)) => Some(format!("index flag {f} set on `{path}`")),
                (Some(f), None) => Some(format!("index flag {f} cleared on `{path}`")),
                (None, None) => None,
            })
            .collect();
        let allowed =
            |what: &str| what.strip_prefix(GITIGNORE).is_some_and(|rel| self.allowed.iter().any(|a| a == rel));
        for (what, was, is) in diff(&self.files, &now.files) {
            let (was, is) = (was.map_or(ABSENT, String::as_str), is.map_or(ABSENT, String::as_str));
            let verb = match (was, is) {
                _ if was == is || allowed(what) => continue,
                (ABSENT, _) => "created",
                (_, ABSENT) => "deleted",
                _ => "changed",
            };
            out.push(format!("{what} {verb}"));
        }
        out.extend(diff(&self.config, &now.config).into_iter().map(|(key, was, is)| match (was, is) {
            (None, _) => format!("git config `{key}` set"),
            (_, None) => format!("git config `{key}` unset"),
            _ => format!("git config `{key}` changed"),
        }));
        out.sort();
        out
    }
}

/// True when a change of the tree at `rel` (relative to the root) can change the seal in a way
/// its inputs' metadata does not show: anything in a `.git` (where git finds its files; a nested
/// one makes its directory another repository, whose files git no longer lists), and any
/// `.gitignore` or `.gitattributes` (a new one is no input yet).
pub fn may_change_seal(rel: &str) -> bool {
    rel.split('/').any(|c| c == ".git") || matches!(rel.rsplit('/').next(), Some(".gitignore" | ".gitattributes"))
}

/// One line naming the changes (at most eight).
pub fn describe(changes: &[String]) -> String {
    crate::inventory::describe(changes, 8, "; ")
}

/// The sha256 of a file's content (streamed), a symlink's target text, or [`ABSENT`].
fn digest_file(path: &Path) -> String {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return ABSENT.to_string() };
    if meta.file_type().is_symlink() {
        return crate::inventory::link_digest(
            &std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_default(),
        );
    }
    if !meta.is_file() {
        return format!("not a file ({:?})", meta.file_type());
    }
    let digest = work_runtime::fsx::open_user_file(path).ok().and_then(crate::inventory::digest);
    digest.unwrap_or_else(|| "unreadable".to_string())
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

    /// A seal is read again only when something it rests on changed: each change below is
    /// made after the inputs settled (past the racy window), and each is seen.
    #[test]
    fn a_reread_seal_is_reused_only_while_nothing_it_rests_on_changed() {
        let (d, g) = crate::scratch::repo_with(&[("a.txt", "a\n"), ("docs/.gitignore", "*.tmp\n")]);
        let settle = || std::thread::sleep(inputs::RACY + std::time::Duration::from_millis(100));
        settle();
        let first = g.read_seal().expect("seal");
        assert!(first.inputs.is_some(), "settled inputs are stamped");
        let mut last = g.reread_seal(&first, true).expect("reread");
        assert!(last.reused, "nothing changed: no git runs");
        let changes: [(&str, &dyn Fn()); 6] = [
            ("index flag assume-unchanged set on `a.txt`", &|| {
                g.run(&["update-index", "--assume-unchanged", "a.txt"]).map(drop).expect("flag")
            }),
            ("info/exclude changed", &|| std::fs::write(d.path().join(".git/info/exclude"), "x\n").expect("write")),
            ("hook post-checkout created", &|| {
                std::fs::write(d.path().join(".git/hooks/post-checkout"), "exit 0\n").expect("write")
            }),
            ("git config `diff.hide.textconv` set", &|| {
                g.run(&["config", "diff.hide.textconv", "true"]).map(drop).expect("config")
            }),
            (".gitignore docs/.gitignore changed", &|| {
                std::fs::write(d.path().join("docs/.gitignore"), "*\n").expect("write")
            }),
            ("hook post-checkout changed", &|| {
                // Same size, the mtime put back: the ctime still moves.
                let p = d.path().join(".git/hooks/post-checkout");
                let mtime = std::fs::metadata(&p).and_then(|m| m.modified()).expect("mtime");
                std::fs::write(&p, "exit 1\n").expect("write");
                std::fs::File::options().write(true).open(&p).and_then(|f| f.set_modified(mtime)).expect("touch");
            }),
        ];
        for (named, change) in changes {
            settle();
            // The last reading had a racy input (the change just made): read once more, settled.
            let settled = g.reread_seal(&last, true).expect("reread");
            let before = g.reread_seal(&settled, true).expect("reread");
            assert!(before.reused, "settled and unchanged before `{named}`");
            change();
            let now = g.reread_seal(&before, true).expect("reread");
            assert!(!now.reused, "`{named}` is read again");
            assert_eq!(before.seal.changes(&now.seal), vec![named.to_string()]);
            last = now;
        }
        // A change the inputs do not show (a new `.gitignore`) is the tree's: the caller says so.
        settle();
        std::fs::write(d.path().join("b.txt"), "b\n").expect("write");
        assert!(!g.reread_seal(&last, false).expect("reread").reused);
        // Just written: racy, so read again even with the tree unchanged.
        let fresh = g.read_seal().expect("seal");
        std::fs::write(d.path().join(".git/info/exclude"), "y\n").expect("write");
        assert!(fresh.inputs.is_none() || !g.reread_seal(&fresh, true).expect("reread").reused);
    }

    #[test]
    fn files_under_a_directory_are_left_out_on_request() {
        let (d, g) = repo();
        let a = g.seal().expect("seal");
        std::fs::create_dir_all(d.path().join(".work/runs/r1/blobs")).expect("mkdir");
        std::fs::write(d.path().join(".work/runs/r1/blobs/.gitattributes"), "* -diff\n").expect("write");
        std::fs::write(d.path().join(".work/runs/r1/.gitignore"), "*\n").expect("write");
        std::fs::write(d.path().join(".work/.gitattributes"), "* -diff\n").expect("write");
        let now = g.seal().expect("seal");
        assert_eq!(a.changes(&now).len(), 3, "{:?}", a.changes(&now));
        let left = ".work/runs/r1";
        assert_eq!(
            a.without_files_under(left).changes(&now.without_files_under(left)),
            [".gitattributes .work/.gitattributes created"],
            "only what lies under the directory is left out"
        );
    }

    #[test]
    fn tree_changes_that_can_change_a_seal() {
        for rel in [
            ".git",
            ".git/config",
            ".git/info/exclude",
            ".gitignore",
            "a/b/.gitignore",
            "x/.gitattributes",
            "vendor/.git",
            "vendor/.git/HEAD",
        ] {
            assert!(may_change_seal(rel), "{rel}");
        }
        for rel in [".work/exhaust/t/journal.jsonl", "src/a.rs", ".gitignore.bak", "a/.git-notes", "a.gitignore"] {
            assert!(!may_change_seal(rel), "{rel}");
        }
    }

    #[test]
    fn a_configuration_that_includes_files_is_read_every_time() {
        let (_d, g) = repo();
        g.run(&["config", "include.path", "/nonexistent/extra.gitconfig"]).expect("config");
        std::thread::sleep(inputs::RACY + std::time::Duration::from_millis(100));
        let first = g.read_seal().expect("seal");
        assert!(first.inputs.is_none());
        assert!(!g.reread_seal(&first, true).expect("reread").reused);
    }

    #[test]
    fn a_gitignore_that_can_hide_a_file_is_named_unless_the_work_names_it() {
        let (d, g) = crate::scratch::repo_with(&[("a.txt", "a\n"), (".gitignore", "node_modules/\n")]);
        let write = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        };
        write("docs/.gitignore", "*.tmp\n");
        let a = g.seal().expect("seal");
        // Hide nothing the snapshots held: a tool's cache, a directory ignored anyway.
        write(".pytest_cache/.gitignore", "# Created by pytest automatically.\n*\n");
        write("node_modules/pkg/.gitignore", "*\n");
        assert!(a.changes(&g.seal().expect("seal")).is_empty(), "{:?}", a.changes(&g.seal().expect("seal")));
        write("org/.gitignore", "*\n");
        write("org/__init__.py", "x = 1\n");
        write(".gitignore", "node_modules/\nNOTES.md\n");
        std::fs::remove_file(d.path().join("docs/.gitignore")).expect("rm");
        let now = g.seal().expect("seal");
        assert_eq!(
            a.changes(&now),
            [
                ".gitignore .gitignore changed",
                ".gitignore docs/.gitignore deleted",
                ".gitignore org/.gitignore created"
            ]
        );
        let mut named = a.clone();
        named.allow_named_by("Ignore the notes: add `NOTES.md` to .gitignore, and drop ./docs/.gitignore.");
        assert_eq!(named.changes(&now), [".gitignore org/.gitignore created"]);
    }
}
