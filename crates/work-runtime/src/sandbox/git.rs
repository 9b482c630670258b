//! A write role's private git directory: what a confined agent's `git` writes.
//!
//! A write role whose root is a git working tree gets, for one dispatch, a git directory of its
//! own in place of the real one: a scratch directory (removed with the dispatch's private
//! `/tmp`) holding copies of `HEAD`, the index, the configuration (`config`, `config.worktree`),
//! `refs/`, `packed-refs`, `shallow` and `info/` (so `git status` ignores what it ignores
//! outside), and an `objects/` whose `info/alternates` names the real object store, bound
//! read-only at [`OBJECTS_AT`]. There is no `hooks/` directory, and the copied configuration
//! ends with `core.hooksPath` set to a path that does not exist: no hook of the repository runs.
//!
//! So `git add`, `git commit`, `git stash` and `git checkout -b` succeed inside the sandbox and
//! land in the scratch directory; the user's `HEAD`, branch, index, refs, hooks and
//! configuration are never written (the real git directory is bound nowhere writable), and what
//! the agent committed is discarded with the scratch directory: what the engine judges is the
//! working tree against the run's base. The new objects the agent writes go to the scratch's
//! own `objects/`.
//!
//! Where `.git` is a directory the scratch directory is bound over it. Where it is a file (a
//! linked worktree: a parallel wave's task), `HEAD` and the index come from the worktree's git
//! directory and the rest from the common directory; the scratch directory is mounted at
//! [`DIR_AT`] and a one-line gitfile naming it is bound read-only over `<root>/.git`.
//! Submodules' git directories (`.git/modules`) stay read-only, bound at their place in the
//! scratch directory. Where any of this cannot be made (no `HEAD`, an unreadable gitfile, an
//! object store that is not a plain directory), `.git` is bound read-only as it is: a commit
//! then fails with `EROFS`.
//!
//! Only regular files and directories are copied (a symlink under `.git` is never followed:
//! it could name what the sandbox hides).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use crate::fsx;
use crate::scratch::ScratchDir;

/// Where the real object store is bound, read-only, inside the sandbox.
pub const OBJECTS_AT: &str = "/run/work-git/objects";

/// Where the private git directory is mounted inside the sandbox when `.git` is a gitfile.
pub const DIR_AT: &str = "/run/work-git/dir";

/// A hooks path that exists nowhere inside the sandbox: no repository hook runs.
const NO_HOOKS: &str = "/run/work-git/no-hooks";

/// Files of the worktree's own git directory (`HEAD`, the index, the state of a merge or
/// cherry-pick in progress), copied when present.
const WORKTREE_FILES: [&str; 10] = [
    "HEAD",
    "index",
    "config.worktree",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
];

/// Files of the common directory, copied when present.
const COMMON_FILES: [&str; 2] = ["packed-refs", "shallow"];

/// Directories of the common directory, copied when present (regular files only).
const COMMON_DIRS: [&str; 3] = ["refs", "info", "reftable"];

/// A dispatch's private git directory (see the module doc); removed when dropped.
#[derive(Debug)]
pub struct GitScratch {
    dir: ScratchDir,
    /// `<root>/.git`.
    dotgit: PathBuf,
    /// The real object store, bound read-only at [`OBJECTS_AT`].
    objects: PathBuf,
    /// The real submodules' git directories, bound read-only in the scratch, if any.
    modules: Option<PathBuf>,
    /// `.git` is a gitfile (a linked worktree).
    gitfile: bool,
}

impl GitScratch {
    /// The private git directory for a write role in `root`: `None` where `root` has no
    /// `.git` or the copy cannot be made from it (then `.git` stays read-only).
    pub fn new(root: &Path) -> io::Result<Option<Self>> {
        let dotgit = root.join(".git");
        let Some((gitdir, gitfile)) = locate(&dotgit)? else { return Ok(None) };
        let common = common_dir(&gitdir)?;
        let objects = common.join("objects");
        if !is_dir(&objects) || !is_file(&gitdir.join("HEAD")) {
            return Ok(None);
        }
        let dir = ScratchDir::new("work-gitdir-")?;
        let git = dir.path().join("git");
        fsx::ensure_dir(&git.join("objects").join("info"))?;
        fsx::ensure_dir(&git.join("refs"))?;
        for name in COMMON_DIRS {
            copy_tree(&common.join(name), &git.join(name))?;
        }
        for name in COMMON_FILES {
            copy_file(&common.join(name), &git.join(name))?;
        }
        if gitdir != common {
            // A worktree's own `info/` (its sparse-checkout) over the common one.
            copy_tree(&gitdir.join("info"), &git.join("info"))?;
        }
        for name in WORKTREE_FILES {
            copy_file(&gitdir.join(name), &git.join(name))?;
        }
        copy_shared_indexes(&gitdir, &git)?;
        write_config(&common.join("config"), &git.join("config"))?;
        fsx::plain::write(git.join("objects").join("info").join("alternates"), format!("{OBJECTS_AT}\n"))?;
        let modules = Some(gitdir.join("modules")).filter(|m| is_dir(m));
        if modules.is_some() {
            fsx::ensure_dir(&git.join("modules"))?;
        }
        if gitfile {
            fsx::plain::write(dir.path().join("gitfile"), format!("gitdir: {DIR_AT}\n"))?;
        }
        Ok(Some(Self { dir, dotgit, objects, modules, gitfile }))
    }

    /// The private git directory (on the host).
    pub fn git_dir(&self) -> PathBuf {
        self.dir.path().join("git")
    }

    /// The `bwrap` arguments that put the private git directory in place of `<root>/.git`.
    pub fn binds(&self) -> Vec<OsString> {
        let git = self.git_dir();
        let mut a: Vec<OsString> = Vec::new();
        let mut bind = |how: &str, from: &Path, to: &Path| {
            a.extend([OsString::from(how), from.as_os_str().to_os_string(), to.as_os_str().to_os_string()]);
        };
        let at = if self.gitfile { PathBuf::from(DIR_AT) } else { self.dotgit.clone() };
        bind("--bind", &git, &at);
        bind("--ro-bind", &self.objects, Path::new(OBJECTS_AT));
        if self.gitfile {
            bind("--ro-bind", &self.dir.path().join("gitfile"), &self.dotgit);
        }
        if let Some(m) = &self.modules {
            bind("--ro-bind", m, &at.join("modules"));
        }
        a
    }
}

/// The binds for `<root>/.git` in a write role: the private git directory, else `.git`
/// read-only as it is.
pub(super) fn binds(root: &Path, scratch: Option<&GitScratch>) -> Vec<OsString> {
    if let Some(s) = scratch.filter(|s| s.dotgit == root.join(".git")) {
        return s.binds();
    }
    let git = root.join(".git");
    if git.symlink_metadata().is_err() {
        return Vec::new();
    }
    vec!["--ro-bind".into(), git.clone().into_os_string(), git.into_os_string()]
}

fn is_dir(p: &Path) -> bool {
    p.symlink_metadata().is_ok_and(|m| m.is_dir())
}

fn is_file(p: &Path) -> bool {
    p.symlink_metadata().is_ok_and(|m| m.is_file())
}

/// The git directory `.git` names and whether it is a gitfile: `None` where there is none.
fn locate(dotgit: &Path) -> io::Result<Option<(PathBuf, bool)>> {
    if is_dir(dotgit) {
        return Ok(Some((dotgit.to_path_buf(), false)));
    }
    if !is_file(dotgit) {
        return Ok(None);
    }
    let (text, _) = fsx::read_text_capped(dotgit, 4096)?;
    let Some(target) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")).map(str::trim) else {
        return Ok(None);
    };
    let base = dotgit.parent().unwrap_or(Path::new("/"));
    let gitdir = base.join(target);
    Ok(is_dir(&gitdir).then_some((gitdir, true)))
}

/// The common directory of `gitdir` (its `commondir` file, else itself).
fn common_dir(gitdir: &Path) -> io::Result<PathBuf> {
    let file = gitdir.join("commondir");
    if !is_file(&file) {
        return Ok(gitdir.to_path_buf());
    }
    let (text, _) = fsx::read_text_capped(&file, 4096)?;
    std::fs::canonicalize(gitdir.join(text.trim()))
}

/// Copies `from` to `to` when it is a regular file.
fn copy_file(from: &Path, to: &Path) -> io::Result<()> {
    if is_file(from) {
        fsx::plain::copy(from, to)?;
    }
    Ok(())
}

/// Copies the regular files and directories under `from` to `to` (symlinks are skipped).
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    if !is_dir(from) {
        return Ok(());
    }
    fsx::ensure_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            fsx::plain::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// A split index's shared parts (`sharedindex.*`) beside the index.
fn copy_shared_indexes(gitdir: &Path, git: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(gitdir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("sharedindex.") && entry.file_type()?.is_file() {
            fsx::plain::copy(entry.path(), git.join(&name))?;
        }
    }
    Ok(())
}

/// The repository's configuration, then what keeps the copy inert: no hooks, no file-system
/// monitor daemon (its socket would be in the real git directory).
fn write_config(from: &Path, to: &Path) -> io::Result<()> {
    let mut bytes = if is_file(from) { std::fs::read(from)? } else { Vec::new() };
    bytes.extend_from_slice(format!("\n[core]\n\thooksPath = {NO_HOOKS}\n\tfsmonitor = false\n").as_bytes());
    fsx::plain::write(to, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@e", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        git(d.path(), &["init", "-q"]);
        std::fs::write(d.path().join("a.txt"), "a\n").expect("write");
        git(d.path(), &["add", "a.txt"]);
        git(d.path(), &["commit", "-q", "-m", "a"]);
        git(d.path(), &["branch", "keep"]);
        git(d.path(), &["pack-refs", "--all"]);
        git(d.path(), &["branch", "loose"]);
        std::fs::write(d.path().join(".git/info/exclude"), "ignored.txt\n").expect("exclude");
        std::fs::write(d.path().join(".git/hooks/pre-commit"), "exit 1\n").expect("hook");
        d
    }

    fn strings(a: &[OsString]) -> Vec<String> {
        a.iter().map(|x| x.to_string_lossy().into_owned()).collect()
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn a_git_directory_gets_a_private_copy_bound_over_it_with_the_objects_read_only() {
        let r = repo();
        let root = r.path();
        let s = GitScratch::new(root).expect("made").expect("a git tree");
        let g = s.git_dir();
        assert_eq!(read(&g.join("HEAD")), read(&root.join(".git/HEAD")));
        assert_eq!(std::fs::read(g.join("index")).ok(), std::fs::read(root.join(".git/index")).ok());
        assert!(read(&g.join("packed-refs")).contains("refs/heads/keep"), "packed refs copied");
        assert!(g.join("refs/heads/loose").is_file(), "loose refs copied");
        assert_eq!(read(&g.join("info/exclude")), "ignored.txt\n");
        assert_eq!(read(&g.join("objects/info/alternates")), format!("{OBJECTS_AT}\n"));
        assert!(!g.join("hooks").exists(), "no hooks directory");
        let config = read(&g.join("config"));
        assert!(config.starts_with(&read(&root.join(".git/config"))), "{config}");
        assert!(config.contains(&format!("hooksPath = {NO_HOOKS}")), "{config}");
        let args = strings(&s.binds());
        let dotgit = root.join(".git").display().to_string();
        let objects = root.join(".git/objects").display().to_string();
        assert_eq!(
            args,
            ["--bind", &g.display().to_string(), &dotgit, "--ro-bind", &objects, OBJECTS_AT],
            "the copy over .git, the real objects read-only"
        );
        assert_eq!(strings(&binds(root, Some(&s))), args);
        let kept = s.dir.path().to_path_buf();
        drop(s);
        assert!(!kept.exists(), "removed with the dispatch");
    }

    #[test]
    fn a_linked_worktree_gets_its_head_and_index_and_a_gitfile_naming_the_copy() {
        let r = repo();
        let wt = r.path().join(".git/work/trees/run/1");
        git(r.path(), &["worktree", "add", "--detach", "--quiet", &wt.display().to_string(), "HEAD"]);
        let s = GitScratch::new(&wt).expect("made").expect("a git tree");
        let g = s.git_dir();
        let head = git(r.path(), &["rev-parse", "HEAD"]);
        assert_eq!(read(&g.join("HEAD")), head, "the worktree's detached HEAD");
        assert!(read(&r.path().join(".git/HEAD")).starts_with("ref: "), "not the main tree's");
        assert!(read(&g.join("packed-refs")).contains("refs/heads/keep"), "refs from the common directory");
        assert!(g.join("index").is_file() && !g.join("commondir").exists() && !g.join("hooks").exists());
        assert_eq!(read(&s.dir.path().join("gitfile")), format!("gitdir: {DIR_AT}\n"));
        let args = strings(&s.binds());
        let objects = r.path().join(".git/objects").display().to_string();
        let gitfile = s.dir.path().join("gitfile").display().to_string();
        let dotgit = wt.join(".git").display().to_string();
        assert_eq!(
            args,
            [
                "--bind",
                &g.display().to_string(),
                DIR_AT,
                "--ro-bind",
                &objects,
                OBJECTS_AT,
                "--ro-bind",
                &gitfile,
                &dotgit
            ]
        );
    }

    #[test]
    fn without_a_copy_git_stays_read_only_and_a_tree_without_git_gets_nothing() {
        let r = repo();
        let dotgit = r.path().join(".git").display().to_string();
        assert_eq!(strings(&binds(r.path(), None)), ["--ro-bind", &dotgit, &dotgit]);
        let plain = tempfile::tempdir().expect("tempdir");
        assert!(binds(plain.path(), None).is_empty());
        assert!(GitScratch::new(plain.path()).expect("no error").is_none());
    }

    /// Every file under `dir` (path → bytes; a symlink as its target).
    fn files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
                let (p, t) = (e.path(), e.file_type().expect("type"));
                if t.is_dir() {
                    todo.push(p);
                } else if t.is_symlink() {
                    out.insert(p.clone(), std::fs::read_link(&p).expect("link").into_os_string().into_encoded_bytes());
                } else {
                    out.insert(p.clone(), std::fs::read(&p).expect("read"));
                }
            }
        }
        out
    }

    /// In the kernel sandbox (where this machine has it), an agent's commit, branch, stash,
    /// hook and configuration land in the copy; the real git directory is byte-for-byte as it was.
    #[test]
    fn in_the_sandbox_git_writes_land_in_the_copy_and_the_real_git_directory_is_untouched() {
        let crate::sandbox::Mode::Kernel { bwrap } = crate::sandbox::probe() else {
            eprintln!("no kernel sandbox here: nothing to run");
            return;
        };
        let r = repo();
        let trees = tempfile::tempdir().expect("trees");
        let wt = trees.path().join("1");
        git(r.path(), &["worktree", "add", "--detach", "--quiet", &wt.display().to_string(), "HEAD"]);
        let before = files(&r.path().join(".git"));
        let script = "set -e; g='git -c user.name=a -c user.email=a@b'; echo b > b.txt; $g add b.txt; \
            $g commit -q -m agent; $g checkout -q -b other; echo c > c.txt; $g stash push -q -u; \
            $g update-ref -d refs/heads/keep; $g config alias.x '!true'; echo 'exit 0' > .git/hooks/post-commit 2>/dev/null \
            || mkdir -p $($g rev-parse --git-dir)/hooks; $g log --oneline | grep -q agent; $g status --porcelain";
        for root in [r.path(), wt.as_path()] {
            let s = GitScratch::new(root).expect("made").expect("a git tree");
            let c = crate::sandbox::Confine::write(root, crate::sandbox::Network::None);
            let tmp = tempfile::tempdir().expect("tmp");
            let args = crate::sandbox::bwrap_args(&c, tmp.path(), root, [], Some(&s));
            let out = std::process::Command::new(&bwrap)
                .args(&args)
                .args(["--", "sh", "-c", script])
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .output()
                .expect("bwrap");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{}: {err}", root.display());
            assert_eq!(read(&s.git_dir().join("HEAD")), "ref: refs/heads/other\n", "the move is the copy's");
            assert!(root.join("b.txt").is_file(), "the change stays in the working tree");
        }
        let after = files(&r.path().join(".git"));
        let changed: Vec<_> = before.keys().chain(after.keys()).filter(|k| before.get(*k) != after.get(*k)).collect();
        assert!(changed.is_empty(), "the real git directory is byte-for-byte as it was: {changed:?}");
    }
}
