//! The harness: one path from a command to an exit code.
//!
//! ```text
//! preflight (all bad input ⇒ exit 2, nothing dispatched, nothing written)
//!   ─▶ lock the workflow's own state ─▶ lock the working tree (write workflows)
//!   ─▶ drive (load-or-init, start the run under the run id, dispatch, finish)
//!   ─▶ render (the command's result on stdout, the run summary on stderr) through the one output writer
//!   ─▶ RunStatus ─▶ status::exit_code
//! ```
//!
//! A workflow refused as bad input after its locks were taken (a failing oracle, a corrupt
//! journal) leaves no lock file behind that it created.

use crate::lock::{self, Held, LockRefused};
use crate::output;
use std::path::PathBuf;
use work_runtime::ExitStatus;
use work_runtime::budget::{Budget, Spent};

/// The lock on a workflow's own state.
#[derive(Debug, Clone)]
pub struct StateKey {
    /// The lock file.
    pub lock: PathBuf,
    /// What it guards, for the refusal ("session `fix-lint`").
    pub what: String,
}

/// The working tree a write workflow changes.
#[derive(Debug, Clone)]
pub struct TreeKey {
    /// The repository root.
    pub root: PathBuf,
    /// The state directory (where the lock goes outside a git repository).
    pub state_dir: PathBuf,
}

/// What every run prints at its end: the outcome, what it found or changed, what it spent,
/// what to run next and where its event log is.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The outcome word and reason ("DONE", "k-consecutive-dry", "blocked: …").
    pub outcome: String,
    /// What the list below is ("found", "changed", "iterations").
    pub label: String,
    /// The items found or changed (already the top N the caller wants shown).
    pub items: Vec<String>,
    /// How many there are in all (more than `items` when cut).
    pub total: usize,
    /// What the run spent.
    pub spent: Spent,
    /// The limits in force.
    pub budget: Budget,
    /// The command to run next, when there is one.
    pub next: Option<String>,
    /// The run's event log.
    pub events: Option<PathBuf>,
}

impl Summary {
    /// The summary lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!("outcome: {}", self.outcome)];
        if !self.label.is_empty() {
            out.push(format!("{}: {}", self.label, self.total));
            out.extend(self.items.iter().map(|i| format!("  {i}")));
            if self.total > self.items.len() {
                out.push(format!("  … and {} more", self.total - self.items.len()));
            }
        }
        let u = &self.spent.usage;
        let cost = if u.cost_usd > 0.0 { format!(" · ${:.4}", u.cost_usd) } else { String::new() };
        out.push(format!(
            "spent: {} dispatch(es) · {} tokens ({} in, {} out){cost}{}",
            self.spent.dispatches,
            u.input_tokens + u.output_tokens,
            u.input_tokens,
            u.output_tokens,
            overshoot(&self.spent, &self.budget)
        ));
        if let Some(n) = &self.next {
            out.push(format!("next: {n}"));
        }
        if let Some(e) = &self.events {
            out.push(format!("events: {}", e.display()));
        }
        out
    }

    /// Prints the summary for a person, on stderr beside the progress lines: stdout holds the
    /// command's result alone (its human lines, or the `--json` document).
    pub fn print(&self) {
        for l in self.lines() {
            output::err_line(&l);
        }
    }
}

/// How far the spending went past a limit (a dispatch in flight finishes after the limit).
fn overshoot(spent: &Spent, budget: &Budget) -> String {
    let mut parts = Vec::new();
    if let Some(max) = budget.max_tokens {
        let used = spent.usage.input_tokens + spent.usage.output_tokens;
        if used > max {
            parts.push(format!("{} tokens over the {max}-token budget", used - max));
        }
    }
    if let Some(max) = budget.max_usd
        && spent.usage.cost_usd > max
    {
        parts.push(format!("${:.4} over the ${max} budget", spent.usage.cost_usd - max));
    }
    if parts.is_empty() { String::new() } else { format!(" ({})", parts.join(", ")) }
}

/// What `drive` hands back.
#[derive(Debug)]
pub struct Ended {
    /// The workflow's typed outcome, mapped (see [`crate::status`]).
    pub status: ExitStatus,
    /// The end-of-run summary (None for a command that is not a run, e.g. a listing).
    pub summary: Option<Summary>,
}

/// A workflow as the harness runs it.
pub trait Workflow {
    /// The command's error type (bad input is one kind of it).
    type Error: From<LockRefused>;
    /// The workflow's name (run ids, events).
    fn name(&self) -> &'static str;
    /// The lock on its own state, when it has state.
    fn state_key(&self) -> Option<StateKey>;
    /// The tree it writes, when it writes one.
    fn tree(&self) -> Option<TreeKey>;
    /// Every check of the input; an error here is exit 2 and nothing has happened.
    fn preflight(&mut self) -> Result<(), Self::Error>;
    /// Loads or initialises its state, starts the run under `run_id`, drives it, finishes it
    /// and renders its result through [`crate::output`].
    fn drive(self, run_id: String) -> Result<Ended, Self::Error>;
    /// True for an error that is bad input (the run then leaves no lock file it created).
    fn is_bad_input(e: &Self::Error) -> bool;
}

/// Runs a workflow: preflight → locks → drive → summary; the status goes to
/// [`crate::status::exit_code`] in `main`.
pub fn run<W: Workflow>(mut w: W, run_id: String) -> Result<ExitStatus, W::Error> {
    w.preflight()?;
    let state = match w.state_key() {
        Some(k) => Some(lock::acquire(&k.lock, &k.what, &run_id)?),
        None => None,
    };
    let tree = match w.tree() {
        Some(t) => match lock::lock_tree(&t.root, &t.state_dir, &run_id) {
            Ok(h) => Some(h),
            Err(e) => {
                release(state, true);
                return Err(e.into());
            }
        },
        None => None,
    };
    let result = w.drive(run_id);
    let bad = matches!(&result, Err(e) if W::is_bad_input(e));
    release(tree, bad);
    release(state, bad);
    let ended = result?;
    if let Some(s) = &ended.summary {
        s.print();
    }
    Ok(ended.status)
}

fn release(held: Option<Held>, discard: bool) {
    match (held, discard) {
        (Some(h), true) => lock::discard(h),
        (Some(h), false) => drop(h),
        (None, _) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[derive(Debug, thiserror::Error)]
    enum E {
        #[error("bad: {0}")]
        Bad(String),
        #[error(transparent)]
        Lock(#[from] LockRefused),
    }

    struct Fake<'a> {
        dir: &'a Path,
        bad_preflight: bool,
        bad_drive: bool,
        inner: Option<Box<dyn Fn() -> Result<ExitStatus, E> + 'a>>,
    }

    impl Workflow for Fake<'_> {
        type Error = E;
        fn name(&self) -> &'static str {
            "fake"
        }
        fn state_key(&self) -> Option<StateKey> {
            Some(StateKey { lock: self.dir.join("locks/fake.lock"), what: "the fake state".into() })
        }
        fn tree(&self) -> Option<TreeKey> {
            // Not a git repository: the tree lock falls back to the state directory.
            Some(TreeKey { root: self.dir.join("tree"), state_dir: self.dir.to_path_buf() })
        }
        fn preflight(&mut self) -> Result<(), E> {
            if self.bad_preflight { Err(E::Bad("preflight".into())) } else { Ok(()) }
        }
        fn drive(self, _run_id: String) -> Result<Ended, E> {
            if self.bad_drive {
                return Err(E::Bad("drive".into()));
            }
            let status = match &self.inner {
                Some(f) => f()?,
                None => ExitStatus::Done,
            };
            Ok(Ended { status, summary: None })
        }
        fn is_bad_input(e: &E) -> bool {
            matches!(e, E::Bad(_) | E::Lock(_))
        }
    }

    #[test]
    fn preflight_then_locks_then_drive_and_a_second_run_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::create_dir_all(d.join("tree")).expect("mkdir");
        let fake = |bad_preflight, bad_drive| Fake { dir: d, bad_preflight, bad_drive, inner: None };
        // Bad input in preflight: nothing locked, nothing created.
        assert!(matches!(run(fake(true, false), "r0".into()), Err(E::Bad(_))));
        assert!(!d.join("locks").join("fake.lock").exists());
        // Bad input while driving: the lock files this run created are gone again.
        assert!(matches!(run(fake(false, true), "r1".into()), Err(E::Bad(_))));
        assert!(!d.join("locks/fake.lock").exists() && !d.join("locks/tree.lock").exists());
        // A run inside a run of the same state is refused with the holder's run id.
        let nested = Fake {
            dir: d,
            bad_preflight: false,
            bad_drive: false,
            inner: Some(Box::new(|| match run(fake(false, false), "r3".into()) {
                Err(E::Lock(e)) => {
                    assert!(e.to_string().contains("run r2"), "{e}");
                    Ok(ExitStatus::Done)
                }
                other => panic!("the second run was not refused: {other:?}"),
            })),
        };
        assert_eq!(run(nested, "r2".into()).expect("first run"), ExitStatus::Done);
        // Released at the end: the next run proceeds.
        assert_eq!(run(fake(false, false), "r4".into()).expect("next run"), ExitStatus::Done);
    }
}
