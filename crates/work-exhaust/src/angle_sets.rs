//! Membership mirrors of the journal's angle lists (`anglesUsed`, `givenUp`, `retryQueue`).
//!
//! The journal keeps them as ordered lists (its JSON shape is fixed); the engine asks "is this
//! angle in it?" for every pick, so it keeps a set beside each list and changes both together,
//! through these methods only. Membership is O(1) whatever the number of angles.

use crate::journal::Journal;
use std::collections::HashSet;

/// The sets beside the journal's angle lists.
#[derive(Debug, Default)]
pub(crate) struct AngleSets {
    used: HashSet<String>,
    given_up: HashSet<String>,
    retry: HashSet<String>,
}

impl AngleSets {
    /// The sets of a journal's lists.
    pub(crate) fn of(j: &Journal) -> Self {
        Self {
            used: j.angles_used.iter().cloned().collect(),
            given_up: j.given_up.iter().cloned().collect(),
            retry: j.retry_queue.iter().cloned().collect(),
        }
    }

    pub(crate) fn is_used(&self, a: &str) -> bool {
        self.used.contains(a)
    }

    pub(crate) fn is_given_up(&self, a: &str) -> bool {
        self.given_up.contains(a)
    }

    pub(crate) fn is_queued(&self, a: &str) -> bool {
        self.retry.contains(a)
    }

    /// Appends `a` to `anglesUsed` unless it is there.
    pub(crate) fn mark_used(&mut self, j: &mut Journal, a: &str) {
        if self.used.insert(a.to_string()) {
            j.angles_used.push(a.to_string());
        }
    }

    /// Appends `a` to `givenUp` unless it is there.
    pub(crate) fn give_up(&mut self, j: &mut Journal, a: &str) {
        if self.given_up.insert(a.to_string()) {
            j.given_up.push(a.to_string());
        }
    }

    /// Appends `a` to the retry queue unless it is there.
    pub(crate) fn queue_retry(&mut self, j: &mut Journal, a: &str) {
        if self.retry.insert(a.to_string()) {
            j.retry_queue.push(a.to_string());
        }
    }

    /// Takes every angle of `names` off the retry queue, in one pass over it.
    pub(crate) fn unqueue<'n>(&mut self, j: &mut Journal, names: impl IntoIterator<Item = &'n str>) {
        let gone: HashSet<&str> = names.into_iter().filter(|a| self.retry.remove(*a)).collect();
        if !gone.is_empty() {
            j.retry_queue.retain(|r| !gone.contains(r.as_str()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_keep_their_order_and_the_sets_follow_them() {
        let mut j = Journal::new("t", "things", 2, vec!["a".into(), "b".into()]);
        j.retry_queue = vec!["x".into()];
        let mut s = AngleSets::of(&j);
        for a in ["b", "a", "b"] {
            s.mark_used(&mut j, a);
        }
        s.queue_retry(&mut j, "y");
        s.queue_retry(&mut j, "x");
        s.queue_retry(&mut j, "z");
        s.unqueue(&mut j, ["y", "nope"]);
        s.give_up(&mut j, "z");
        s.give_up(&mut j, "z");
        assert_eq!(j.angles_used, ["b", "a"]);
        assert_eq!(j.retry_queue, ["x", "z"]);
        assert_eq!(j.given_up, ["z"]);
        assert!(s.is_used("a") && !s.is_used("x") && s.is_queued("x") && !s.is_queued("y") && s.is_given_up("z"));
    }
}
