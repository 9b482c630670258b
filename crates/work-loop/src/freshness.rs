//! `work loop base-freshness [--target REMOTE/BRANCH]` (the work-loop scripts'
//! `check-base-freshness.py`): is HEAD current with the merge target?
//!
//! The answer is always one JSON document on stdout, `{"status": "ok"|"surface", "message",
//! "target"}`: exit 0 with `ok` (HEAD is current, no remote is configured, or HEAD is detached),
//! exit 1 with `surface` and a message for a person otherwise — a rebase in progress, an
//! unborn HEAD, a bad or ambiguous `--target`, several remotes and no target, a failed fetch,
//! unrelated histories, unmerged files, uncommitted changes, or simply being behind (with the
//! rebase command to run). A bad `--target` value is a `surface` answer too, as in the scripts.

use crate::common::{LoopResult, Outcome};
use serde_json::json;
use std::path::Path;
use work_git::Git;
use work_runtime::ExitStatus;

fn answer(ok: bool, message: String, target: Option<&str>) -> LoopResult {
    let doc = json!({ "status": if ok { "ok" } else { "surface" }, "message": message, "target": target });
    let exit = if ok { ExitStatus::Done } else { ExitStatus::Unsuccessful };
    Ok(Outcome::with(exit, doc, message))
}

fn surface(message: impl Into<String>, target: Option<&str>) -> LoopResult {
    answer(false, message.into(), target)
}

/// A branch name git would accept and that cannot be read as an option or a range.
fn valid_branch(b: &str) -> bool {
    !b.is_empty()
        && !b.starts_with('-')
        && !b.contains("..")
        && !b.ends_with('/')
        && !b.ends_with(".lock")
        && !b.chars().any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(c))
}

/// Runs the check in the repository at `root`.
pub fn base_freshness(root: &Path, target: Option<&str>) -> LoopResult {
    let git = Git::new(root);
    for state in ["rebase-merge", "rebase-apply"] {
        if let Ok(p) = git.run(&["rev-parse", "--git-path", state]) {
            let p = root.join(p.trim());
            if !p.as_os_str().is_empty() && p.exists() {
                return surface("a rebase is already in progress: finish or abort it first", None);
            }
        }
    }
    let Ok(remotes) = git.run(&["remote"]) else {
        return surface("`git remote` failed: check the repository and its permissions", None);
    };
    let remotes: Vec<String> = remotes.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
    if let Some("") = target {
        return surface("--target is empty: pass REMOTE/BRANCH, e.g. origin/main", None);
    }
    if remotes.is_empty() {
        if let Some(t) = target {
            return surface(format!("--target {t} was given but this repository has no remote"), None);
        }
        return answer(true, "no remote configured".into(), None);
    }
    if git.head_sha().is_none() {
        return surface("HEAD does not resolve (no commit yet): make a first commit", None);
    }
    if git.branch().is_none() {
        return answer(true, "not on a branch (detached HEAD)".into(), None);
    }
    let (remote, branch) = match target {
        Some(t) => match pick_target(t, &remotes) {
            Ok(rb) => rb,
            Err(m) => return surface(m, None),
        },
        None if remotes.len() > 1 => {
            return surface(format!("multiple remotes ({}): pass --target REMOTE/BRANCH", remotes.join(", ")), None);
        }
        None => {
            let r = remotes[0].clone();
            match remote_head_branch(&git, &r) {
                Some(b) if valid_branch(&b) => (r, b),
                Some(b) => return surface(format!("the remote HEAD branch `{b}` is not valid: pass --target"), None),
                None => return surface(format!("cannot tell `{r}`'s HEAD branch: pass --target {r}/BRANCH"), None),
            }
        }
    };
    let target_name = format!("{remote}/{branch}");
    compare(&git, &remote, &branch, &target_name)
}

/// Splits `REMOTE/BRANCH` at the configured remote it starts with (remote names may hold
/// `/`): exactly one remote must match.
fn pick_target(t: &str, remotes: &[String]) -> Result<(String, String), String> {
    if !t.contains('/') {
        return Err(format!("--target {t} is not REMOTE/BRANCH"));
    }
    let matches: Vec<(String, String)> = remotes
        .iter()
        .filter_map(|r| t.strip_prefix(&format!("{r}/")).filter(|b| !b.is_empty()).map(|b| (r.clone(), b.to_string())))
        .collect();
    match matches.as_slice() {
        [] => Err(format!("--target {t} starts with no configured remote ({})", remotes.join(", "))),
        [(r, b)] if valid_branch(b) => Ok((r.clone(), b.clone())),
        [(_, b)] => Err(format!("--target names an invalid branch `{b}`")),
        many => Err(format!(
            "--target {t} is ambiguous: it can be read against several remotes ({}); rename the remotes",
            many.iter().map(|(r, b)| format!("remote {r} branch {b}")).collect::<Vec<_>>().join("; ")
        )),
    }
}

fn remote_head_branch(git: &Git, remote: &str) -> Option<String> {
    let out = git.run(&["ls-remote", "--symref", "--", remote, "HEAD"]).ok()?;
    out.lines()
        .find_map(|l| l.strip_prefix("ref: refs/heads/"))
        .and_then(|r| r.split('\t').next())
        .map(|s| s.trim().to_string())
}

fn compare(git: &Git, remote: &str, branch: &str, target: &str) -> LoopResult {
    let t = Some(target);
    let full_ref = format!("refs/remotes/{remote}/{branch}");
    let refspec = format!("+refs/heads/{branch}:{full_ref}");
    if let Err(e) = git.run(&["fetch", "--no-tags", "--recurse-submodules=no", "--", remote, &refspec]) {
        if e.to_string().to_lowercase().contains("couldn't find remote ref") {
            return surface(format!("fetching {remote}: branch {branch} not found on remote; check --target"), t);
        }
        return surface(format!("fetching {remote} failed: check network/auth"), t);
    }
    let Some(count) =
        git.run(&["rev-list", "--count", &format!("HEAD..{full_ref}")]).ok().and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return surface(format!("cannot compare HEAD with {full_ref}"), t);
    };
    if count == 0 {
        return answer(true, "head is current".into(), t);
    }
    if git.run(&["merge-base", "HEAD", &full_ref]).is_err() {
        return surface(
            format!(
                "the branch is {count} commit(s) behind {target} but shares no common ancestor with it: rebasing is unsafe; check the target and the history"
            ),
            t,
        );
    }
    let merges = git.run(&["log", "--merges", "--oneline", &format!("{full_ref}..HEAD")]).map(|s| !s.trim().is_empty());
    let hint = if merges.unwrap_or(false) {
        format!("run: git rebase --rebase-merges {full_ref} (the local range has merge commits)")
    } else {
        format!("run: git rebase {full_ref}")
    };
    let Ok(status) = git.status() else {
        return surface("`git status` failed: repair the repository before rebasing", t);
    };
    if status.is_empty() {
        return surface(format!("the branch is {count} commit(s) behind {target}: {hint}"), t);
    }
    const UNMERGED: [&str; 7] = ["UU", "AA", "DD", "AU", "UA", "DU", "UD"];
    if status.iter().any(|e| UNMERGED.contains(&e.code.as_str())) {
        return surface(
            format!(
                "the branch is {count} commit(s) behind {target} and has unmerged files: resolve the conflicts before rebasing (stashing refuses them, and git commit -a would commit the conflict markers)"
            ),
            t,
        );
    }
    let commit = if status.iter().any(|e| e.code == "??") {
        "git add -A, then git commit -m \"chore: wip\""
    } else {
        "git commit -a -m \"chore: wip\""
    };
    surface(
        format!(
            "the branch is {count} commit(s) behind {target} and has uncommitted changes: commit them on this branch (the stash is shared by every worktree of the repository; undo the wip commit after rebasing with git reset HEAD~1): {commit}, then {hint}"
        ),
        t,
    )
}
