//! The one rule for HEAD during a run (implement, edit, until, ultra, loop run).
//!
//! The engine never commits and never moves the user's branch. An agent may commit its own
//! work on top of the run's base, on the branch the run started on: those commits are its
//! change, and every workflow judges the change against the base (the base's tree to the
//! working tree), whether or not it was committed. Anything else that moved HEAD is not an
//! honest commit and ends the run the same way everywhere, BLOCKED `head-moved` with the
//! [`HeadBreach`] named: HEAD reset below the base, the base's history rewritten (an amended
//! base, an unrelated commit), or another branch checked out (or HEAD detached).

use crate::{Git, GitError};
use serde::Serialize;

/// Where HEAD stood when a run started: its commit and its branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct HeadAt {
    /// The commit, or `None` on an unborn branch.
    pub sha: Option<String>,
    /// The branch, or `None` when detached.
    pub branch: Option<String>,
}

/// How HEAD moved in a way no honest commit moves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeadBreach {
    /// Another branch is checked out, or HEAD was detached or attached.
    BranchSwitched,
    /// HEAD is an ancestor of the base (`git reset HEAD~`): the base's commits are gone.
    BelowBase,
    /// HEAD does not descend from the base (`git commit --amend` of the base, a rebase, an
    /// unrelated commit, a deleted branch).
    HistoryRewritten,
}

impl HeadBreach {
    /// The canonical name (`branch-switched`, `below-base`, `history-rewritten`).
    pub fn as_str(self) -> &'static str {
        match self {
            HeadBreach::BranchSwitched => "branch-switched",
            HeadBreach::BelowBase => "below-base",
            HeadBreach::HistoryRewritten => "history-rewritten",
        }
    }
}

/// What [`Git::judge_head`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum HeadVerdict {
    /// HEAD is the base.
    Unmoved,
    /// The agent committed on top of the base, on the same branch: its change, judged
    /// against the base with the rest of the tree.
    Committed {
        /// The new commits, `sha subject`, oldest last (at most 20).
        commits: Vec<String>,
    },
    /// Not an honest commit.
    Breach {
        /// How HEAD moved.
        breach: HeadBreach,
        /// HEAD now (`None`: unborn or deleted).
        to: Option<String>,
        /// The branch now (`None`: detached).
        branch: Option<String>,
    },
}

impl HeadVerdict {
    /// The breach, when HEAD moved dishonestly.
    pub fn breach(&self) -> Option<HeadBreach> {
        match self {
            HeadVerdict::Breach { breach, .. } => Some(*breach),
            _ => None,
        }
    }

    /// One line for a BLOCKED `head-moved` reason (`None` when HEAD moved honestly).
    pub fn describe(&self, base: &HeadAt) -> Option<String> {
        let HeadVerdict::Breach { breach, to, branch } = self else { return None };
        let short = |s: &Option<String>| s.as_deref().map_or("(none)".to_string(), |x| x.chars().take(12).collect());
        let name = |b: &Option<String>| b.clone().unwrap_or_else(|| "(detached)".into());
        let what = match breach {
            HeadBreach::BranchSwitched => {
                format!("the branch was switched from {} to {}", name(&base.branch), name(branch))
            }
            HeadBreach::BelowBase => "HEAD was reset below the run's base".to_string(),
            HeadBreach::HistoryRewritten => {
                "HEAD no longer descends from the run's base (history rewritten: an amend, a rebase or an unrelated commit)"
                    .to_string()
            }
        };
        Some(format!(
            "{what} ({}: HEAD {} → {}); only commits on top of the base, on the run's branch, are accepted — the engine never moves a branch, so restore it (`git checkout {}` / `git reset --keep {}`) and run again",
            breach.as_str(),
            short(&base.sha),
            short(to),
            base.branch.as_deref().unwrap_or("<base>"),
            short(&base.sha),
        ))
    }
}

impl Git {
    /// Where HEAD stands now (a failing git reads as unborn and detached: see
    /// [`Git::try_head_at`] for a judgement).
    pub fn head_at(&self) -> HeadAt {
        HeadAt { sha: self.head_sha(), branch: self.branch() }
    }

    /// Where HEAD stands now; an error when git fails.
    pub fn try_head_at(&self) -> Result<HeadAt, GitError> {
        Ok(HeadAt { sha: self.try_head_sha()?, branch: self.try_branch()? })
    }

    /// Judges HEAD now against `base` by the one rule (see the module docs). A git that fails
    /// (exit 128, killed) is an error, never a breach: only git's documented `no` (exit 1 of
    /// `merge-base --is-ancestor`, of `symbolic-ref -q`, of `rev-parse --verify -q`) is an
    /// answer.
    pub fn judge_head(&self, base: &HeadAt) -> Result<HeadVerdict, GitError> {
        let now = self.try_head_at()?;
        let breach = |breach| HeadVerdict::Breach { breach, to: now.sha.clone(), branch: now.branch.clone() };
        if now.branch != base.branch {
            return Ok(breach(HeadBreach::BranchSwitched));
        }
        if now.sha == base.sha {
            return Ok(HeadVerdict::Unmoved);
        }
        let (Some(b), Some(n)) = (base.sha.as_deref(), now.sha.as_deref()) else {
            return Ok(match base.sha {
                // An unborn branch's first commits are all the agent's.
                None => HeadVerdict::Committed { commits: self.commits(now.sha.as_deref().unwrap_or_default())? },
                Some(_) => breach(HeadBreach::HistoryRewritten),
            });
        };
        Ok(if self.is_ancestor(b, n)? {
            HeadVerdict::Committed { commits: self.commits(&format!("{b}..{n}"))? }
        } else if self.is_ancestor(n, b)? {
            breach(HeadBreach::BelowBase)
        } else {
            breach(HeadBreach::HistoryRewritten)
        })
    }

    /// `git merge-base --is-ancestor a b`: exit 0 yes, exit 1 no, anything else an error.
    pub fn is_ancestor(&self, a: &str, b: &str) -> Result<bool, GitError> {
        Ok(self.query(&["merge-base", "--is-ancestor", a, b])?.is_some())
    }

    fn commits(&self, range: &str) -> Result<Vec<String>, GitError> {
        let t = self.run(&["log", "--format=%h %s", "--no-color", "-n", "20", range, "--"])?;
        Ok(t.lines().filter(|l| !l.is_empty()).map(str::to_string).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Git) {
        let d = tempfile::tempdir().expect("tmp");
        let g = Git::new(d.path());
        for a in [
            &["init", "-q", "-b", "main"][..],
            &["config", "user.email", "t@t"],
            &["config", "user.name", "t"],
            &["commit", "-q", "--allow-empty", "-m", "one"],
            &["commit", "-q", "--allow-empty", "-m", "two"],
        ] {
            g.run(a).expect("git");
        }
        (d, g)
    }

    #[test]
    fn a_commit_on_top_is_the_agents_change_and_every_other_move_is_named() {
        let (_d, g) = repo();
        let base = g.head_at();
        assert_eq!(g.judge_head(&base).expect("judged"), HeadVerdict::Unmoved);
        g.run(&["commit", "-q", "--allow-empty", "-m", "fix"]).expect("commit");
        assert!(
            matches!(g.judge_head(&base).expect("judged"), HeadVerdict::Committed { commits } if commits.len() == 1)
        );
        g.run(&["reset", "-q", "--hard", "HEAD~2"]).expect("reset");
        assert_eq!(g.judge_head(&base).expect("judged").breach(), Some(HeadBreach::BelowBase));
        g.run(&["reset", "-q", "--hard", base.sha.as_deref().expect("sha")]).expect("reset");
        g.run(&["commit", "-q", "--amend", "--allow-empty", "-m", "two, amended"]).expect("amend");
        assert_eq!(g.judge_head(&base).expect("judged").breach(), Some(HeadBreach::HistoryRewritten));
        g.run(&["checkout", "-q", "-b", "other"]).expect("branch");
        assert_eq!(g.judge_head(&base).expect("judged").breach(), Some(HeadBreach::BranchSwitched));
        assert!(g.judge_head(&base).expect("judged").describe(&base).expect("line").contains("branch-switched"));
    }

    #[test]
    fn a_failing_git_is_an_error_never_a_breach() {
        let (_d, g) = repo();
        let base = g.head_at();
        g.run(&["commit", "-q", "--allow-empty", "-m", "fix"]).expect("commit");
        // exit 1 is git's `no`; an unknown commit is exit 128: a failure, not an answer.
        let (b, n) = (base.sha.clone().expect("sha"), g.head_sha().expect("sha"));
        assert!(g.is_ancestor(&b, &n).expect("yes"));
        assert!(!g.is_ancestor(&n, &b).expect("no"));
        let missing = "0123456789abcdef0123456789abcdef01234567";
        let e = g.is_ancestor(missing, &n).expect_err("a missing commit fails git");
        assert_eq!(e.code(), Some(128), "{e}");
        assert!(
            e.to_string().contains("run git merge-base --is-ancestor") && e.to_string().contains("exit code 128"),
            "{e}"
        );
        // A base HEAD git cannot read fails the judgement instead of naming a breach.
        let gone = HeadAt { sha: Some(missing.into()), branch: base.branch.clone() };
        let e = g.judge_head(&gone).expect_err("not a breach");
        assert_eq!(e.code(), Some(128), "{e}");
        // A directory that is no repository at all: `rev-parse` exits 128, no `unborn` reading.
        let plain = tempfile::tempdir().expect("tmp");
        let e = Git::new(plain.path()).try_head_sha().expect_err("not a repository");
        assert_eq!(e.code(), Some(128), "{e}");
    }
}
