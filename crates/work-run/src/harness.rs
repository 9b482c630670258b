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
    /// What the run could not cover or do, each named (an exhaust angle given up, a
    /// completeness gap): never left out of the summary.
    pub gaps: Vec<String>,
    /// What the run spent.
    pub spent: Spent,
    /// The limits in force.
    pub budget: Budget,
    /// What to do next (a resume command, a file to read, the change to review); without one
    /// the summary names the commands that look at this run again.
    pub next: Option<String>,
    /// The run's event log.
    pub events: Option<PathBuf>,
}

impl Summary {
    /// The run id, read from the event log's directory (`runs/<run-id>/events.jsonl`).
    pub fn run_id(&self) -> Option<String> {
        let dir = self.events.as_ref()?.parent()?;
        dir.file_name().map(|n| n.to_string_lossy().into_owned())
    }

    /// What was spent, on one line: dispatches, tokens and cost.
    pub fn spent_line(&self) -> String {
        let u = &self.spent.usage;
        format!(
            "{} dispatch(es) · {} tokens ({} in, {} out) · {}",
            self.spent.dispatches,
            u.input_tokens + u.output_tokens,
            u.input_tokens,
            u.output_tokens,
            match work_runtime::budget::cost_text(u.cost_usd, self.spent.unpriced) {
                c if c == "unknown" => "cost unknown".to_string(),
                c => c,
            }
        )
    }

    /// What to run to look at this run again.
    fn look_back(&self) -> Option<String> {
        self.run_id().map(|id| format!("work show {id} · work report {id}"))
    }

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
        out.extend(self.gaps.iter().map(|g| format!("gap: {g}")));
        out.push(format!("spent: {}", self.spent_line()));
        let limits = budget_lines(&self.spent, &self.budget);
        if !limits.is_empty() {
            out.push(format!("budget: {}", limits.join(" · ")));
        }
        match (&self.next, self.look_back()) {
            (Some(n), look) => {
                out.push(format!("next: {n}"));
                out.extend(look.map(|l| format!("look back: {l}")));
            }
            (None, Some(l)) => out.push(format!("next: {l}")),
            (None, None) => {}
        }
        if let Some(e) = &self.events {
            out.push(format!("events: {}", e.display()));
        }
        out
    }

    /// The one line a quiet run ends with: the outcome, the spending (and any overshoot) and
    /// what to run next.
    pub fn final_line(&self) -> String {
        let mut line = format!("{} · spent {}", self.outcome, self.spent_line());
        if !self.gaps.is_empty() {
            line.push_str(&format!(" · {} gap(s): {}", self.gaps.len(), self.gaps.join("; ")));
        }
        let over: Vec<String> =
            budget_lines(&self.spent, &self.budget).into_iter().filter(|l| l.contains("(+")).collect();
        if !over.is_empty() {
            line.push_str(&format!(" · over budget: {}", over.join(", ")));
        }
        match (&self.next, self.look_back()) {
            (Some(n), _) => line.push_str(&format!(" · next: {n}")),
            (None, Some(l)) => line.push_str(&format!(" · next: {l}")),
            (None, None) => {}
        }
        line
    }

    /// Prints the summary for a person, on stderr beside the progress lines: stdout holds the
    /// command's result alone (its human lines, or the `--json` document). The live display
    /// is cleared first; a quiet run prints [`Summary::final_line`] alone, or nothing when its
    /// result was a `--json` document.
    pub fn print(&self) {
        crate::progress::finish();
        match crate::progress::verbosity() {
            crate::progress::Verbosity::Quiet if output::wrote_json() => {}
            crate::progress::Verbosity::Quiet => output::err_line(&self.final_line()),
            _ => self.lines().iter().for_each(|l| output::err_line(l)),
        }
    }
}

/// Each limit in force with what was spent against it, and how far past it the run went (a
/// dispatch in flight finishes after the limit): "spent $0.84 of $0.50 (+68%)".
fn budget_lines(spent: &Spent, budget: &Budget) -> Vec<String> {
    let pct = |used: f64, max: f64| {
        if used > max && max > 0.0 { format!(" (+{:.0}%)", (used - max) / max * 100.0) } else { String::new() }
    };
    let mut parts = Vec::new();
    if let Some(max) = budget.max_usd {
        let used = spent.usage.cost_usd;
        parts.push(format!("spent ${used:.2} of ${max:.2}{}", pct(used, max)));
    }
    if let Some(max) = budget.max_tokens {
        let used = spent.usage.input_tokens + spent.usage.output_tokens;
        parts.push(format!("spent {used} of {max} tokens{}", pct(used as f64, max as f64)));
    }
    if let Some(max) = budget.max_dispatches {
        let used = spent.dispatches;
        parts.push(format!("spent {used} of {max} dispatches{}", pct(used as f64, max as f64)));
    }
    parts
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
    fn the_summary_shows_tokens_cost_the_overshoot_and_what_to_run_next() {
        let usage = work_runtime::budget::Usage { input_tokens: 900, output_tokens: 300, cost_usd: 0.84 };
        let spent = Spent { dispatches: 3, usage, unpriced: 0 };
        let s = Summary {
            outcome: "budget".into(),
            spent,
            budget: Budget { max_usd: Some(0.5), max_tokens: Some(2000), ..Budget::default() },
            events: Some(PathBuf::from(".work/runs/r-1/events.jsonl")),
            ..Summary::default()
        };
        let lines = s.lines();
        assert!(
            lines.contains(&"spent: 3 dispatch(es) · 1200 tokens (900 in, 300 out) · $0.8400".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"budget: spent $0.84 of $0.50 (+68%) · spent 1200 of 2000 tokens".to_string()),
            "{lines:?}"
        );
        assert!(lines.contains(&"next: work show r-1 · work report r-1".to_string()), "{lines:?}");
        let last = s.final_line();
        assert!(
            last.starts_with("budget · spent 3 dispatch(es)")
                && last.contains("over budget: spent $0.84 of $0.50 (+68%)"),
            "{last}"
        );
        assert!(last.ends_with("next: work show r-1 · work report r-1"), "{last}");
        // With a next step, the look-back commands are a line of their own.
        let s = Summary { next: Some("work until resume s --max 20".into()), ..s };
        let lines = s.lines();
        assert!(lines.contains(&"next: work until resume s --max 20".to_string()), "{lines:?}");
        assert!(lines.contains(&"look back: work show r-1 · work report r-1".to_string()), "{lines:?}");
        assert!(s.final_line().ends_with(" · next: work until resume s --max 20"), "{}", s.final_line());
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
