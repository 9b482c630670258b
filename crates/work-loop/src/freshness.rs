//! `work loop base-freshness [--target REMOTE/BRANCH]` (the seed's `check-base-freshness.py`):
//! exit 0 when HEAD already contains the target's tip, 1 with a JSON `message` otherwise —
//! the rebase command to run on a clean tree; what is wrong on a dirty tree, with several
//! remotes and no target, without a remote, or when the fetch fails.
//!
//! Untracked files do not make the tree dirty (a rebase carries them along).

use crate::common::{LoopError, LoopResult, Outcome};
use serde_json::json;
use std::path::Path;
use work_git::Git;
use work_runtime::ExitStatus;

fn stale(status: &str, target: Option<&str>, message: String, extra: serde_json::Value) -> LoopResult {
    let mut doc = json!({ "ok": false, "status": status, "target": target, "message": message });
    if let (Some(o), serde_json::Value::Object(e)) = (doc.as_object_mut(), extra) {
        for (k, v) in e {
            o.insert(k, v);
        }
    }
    Ok(Outcome::with(ExitStatus::Unsuccessful, doc, message))
}

/// Runs the check in the repository at `root`.
pub fn base_freshness(root: &Path, target: Option<&str>) -> LoopResult {
    let git = Git::new(root);
    if let Some(t) = target
        && t.split_once('/').is_none_or(|(r, b)| {
            r.is_empty()
                || b.is_empty()
                || r.starts_with('-')
                || b.starts_with('-')
                || b.contains("..")
                || t.contains(char::is_whitespace)
        })
    {
        return Err(LoopError::bad(format!("use `--target {t}`: expected REMOTE/BRANCH")));
    }
    if !git.is_repo() {
        return stale("not_a_repository", target, "not a git repository: nothing to compare against".into(), json!({}));
    }
    let remotes: Vec<String> = git
        .run(&["remote"])
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let (remote, branch) = match target {
        Some(t) => {
            let (r, b) = t.split_once('/').unwrap_or((t, ""));
            if !remotes.iter().any(|x| x == r) {
                return stale(
                    "unknown_remote",
                    target,
                    format!(
                        "remote `{r}` is not configured (remotes: {})",
                        if remotes.is_empty() { "none".into() } else { remotes.join(", ") }
                    ),
                    json!({ "remotes": remotes }),
                );
            }
            (r.to_string(), b.to_string())
        }
        None => {
            if remotes.is_empty() {
                return stale(
                    "no_remote",
                    None,
                    "no git remote is configured: add one or pass --target REMOTE/BRANCH".into(),
                    json!({ "remotes": remotes }),
                );
            }
            if remotes.len() > 1 {
                return stale(
                    "ambiguous_remote",
                    None,
                    format!("several remotes are configured ({}): pass --target REMOTE/BRANCH", remotes.join(", ")),
                    json!({ "remotes": remotes }),
                );
            }
            let r = remotes[0].clone();
            match default_branch(&git, &r) {
                Some(b) => (r, b),
                None => {
                    return stale(
                        "unknown_default_branch",
                        None,
                        format!("cannot tell the default branch of `{r}`: pass --target {r}/<branch>"),
                        json!({ "remotes": remotes }),
                    );
                }
            }
        }
    };
    let target_name = format!("{remote}/{branch}");
    let tref = target_name.as_str();
    if let Err(e) = git.run(&["fetch", "--quiet", &remote, &branch]) {
        return stale(
            "fetch_failed",
            Some(tref),
            format!("fetching {tref} failed ({e}); check the network and the remote, then retry"),
            json!({}),
        );
    }
    let Ok(upstream) = git.run(&["rev-parse", "--verify", "-q", "FETCH_HEAD^{commit}"]).map(|s| s.trim().to_string())
    else {
        return stale("fetch_failed", Some(tref), format!("{tref} did not resolve after fetching"), json!({}));
    };
    let head = git.head_sha();
    let Some(head) = head else {
        return stale("no_head", Some(tref), "HEAD has no commit yet".into(), json!({}));
    };
    let count = |range: &str| -> u64 {
        git.run(&["rev-list", "--count", range]).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    };
    let behind = count(&format!("{head}..{upstream}"));
    let ahead = count(&format!("{upstream}..{head}"));
    if behind == 0 {
        let doc = json!({ "ok": true, "status": "current", "target": tref, "behind": 0, "ahead": ahead, "head": head, "target_sha": upstream, "message": format!("HEAD is current with {tref}") });
        return Ok(Outcome::ok(doc, format!("HEAD is current with {tref}")));
    }
    let dirty: Vec<String> = git
        .status()
        .map_err(|e| LoopError::bad(format!("read git status: {e}")))?
        .into_iter()
        .filter(|e| e.code != "??")
        .map(|e| e.path)
        .collect();
    let extra = json!({ "behind": behind, "ahead": ahead, "head": head, "target_sha": upstream, "dirty_paths": dirty });
    if dirty.is_empty() {
        stale("behind", Some(tref), format!("HEAD is {behind} commit(s) behind {tref}; run: git rebase {tref}"), extra)
    } else {
        stale(
            "behind_dirty",
            Some(tref),
            format!(
                "HEAD is {behind} commit(s) behind {tref} and the working tree has uncommitted changes ({} path(s)); commit or stash them, then run: git rebase {tref}",
                dirty.len()
            ),
            extra,
        )
    }
}

fn default_branch(git: &Git, remote: &str) -> Option<String> {
    if let Ok(s) = git.run(&["symbolic-ref", "--short", "-q", &format!("refs/remotes/{remote}/HEAD")]) {
        let s = s.trim();
        if let Some(b) = s.strip_prefix(&format!("{remote}/")) {
            return Some(b.to_string());
        }
    }
    for b in ["main", "master"] {
        if git.run(&["rev-parse", "--verify", "-q", &format!("refs/remotes/{remote}/{b}")]).is_ok() {
            return Some(b.to_string());
        }
    }
    // Ask the remote itself (works for local and reachable remotes).
    let out = git.run(&["ls-remote", "--symref", remote, "HEAD"]).ok()?;
    out.lines()
        .find_map(|l| l.strip_prefix("ref: refs/heads/"))
        .and_then(|r| r.split_whitespace().next())
        .map(str::to_string)
}
