//! Notes a backend makes about one attempt while it runs (a tool call refused by the role's
//! access), which the dispatcher logs and shows: a `dispatch.note` event and a progress line
//! per note, after the attempt.
//!
//! The dispatcher runs each attempt in a scope ([`collect_notes`]); [`note`] called from the
//! attempt's own task (not from a task it spawned) adds to it, and does nothing outside one.

use std::cell::RefCell;
use std::future::Future;

tokio::task_local! {
    static NOTES: RefCell<Vec<String>>;
}

/// Adds a note to the attempt running on this task (nothing outside an attempt).
pub fn note(line: impl Into<String>) {
    let line = line.into();
    let _ = NOTES.try_with(|n| n.borrow_mut().push(line));
}

/// Runs `attempt`, returning its output and the notes made while it ran (what the dispatcher
/// does around each attempt; a backend's tests call it too).
pub async fn collect_notes<F: Future>(attempt: F) -> (F::Output, Vec<String>) {
    NOTES
        .scope(RefCell::new(Vec::new()), async {
            let out = attempt.await;
            let notes = NOTES.try_with(|n| n.take()).unwrap_or_default();
            (out, notes)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn notes_are_kept_per_attempt_and_dropped_outside_one() {
        note("outside");
        let ((), notes) = collect_notes(async { note("one") }).await;
        assert_eq!(notes, ["one"]);
        let ((), notes) = collect_notes(async {}).await;
        assert!(notes.is_empty());
    }
}
