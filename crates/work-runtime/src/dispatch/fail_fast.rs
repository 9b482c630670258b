//! Fail fast: a run whose agent keeps failing for one cause stops instead of burning its
//! pool of angles, attempts or tasks.
//!
//! Every dispatcher of a run shares one [`FailStreak`]. A dispatch that fails (exit code,
//! transport, a refused login — not a timeout, which is one dispatch's own trouble) with the
//! same cause as the dispatch that failed right before it, for a different subject (its
//! label: another angle, attempt or task), trips the streak: the run's agent is failing.
//! From then on a dispatch is not run at all; it fails at once with that cause, and the
//! workflow stops with the stop reason `agent-failing`. Any answer (valid or not) breaks
//! the streak.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// How many different subjects must fail in a row with one cause.
pub const FAIL_FAST_SUBJECTS: usize = 2;

/// The stop reason of a run whose agent is failing.
pub const AGENT_FAILING: &str = crate::outcome::StopReason::AgentFailing.as_str();

/// The failure streak of one run.
#[derive(Debug, Default)]
pub struct FailStreak {
    state: Mutex<Streak>,
}

#[derive(Debug, Default)]
struct Streak {
    /// The cause of the consecutive failures, and the subjects they came from.
    cause: Option<(String, BTreeSet<String>)>,
    /// Set once the streak covered [`FAIL_FAST_SUBJECTS`] subjects.
    tripped: Option<String>,
}

/// True for a failure that says nothing about the agent as a whole (a hang or a slow answer).
pub fn is_timeout(reason: &str) -> bool {
    reason.contains("timed out")
}

impl FailStreak {
    /// The cause when the agent is failing (the streak tripped), else `None`.
    pub fn failing(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.tripped.clone())
    }

    /// Records an answer: the streak is broken.
    pub fn answered(&self) {
        if let Ok(mut s) = self.state.lock() {
            *s = Streak::default();
        }
    }

    /// Records a failure of `subject` for `cause`; true when this failure trips the streak.
    pub fn failed(&self, subject: &str, cause: &str) -> bool {
        let Ok(mut s) = self.state.lock() else { return false };
        if is_timeout(cause) {
            *s = Streak::default();
            return false;
        }
        let mut subjects = match s.cause.take() {
            Some((c, subjects)) if c == cause => subjects,
            _ => BTreeSet::new(),
        };
        subjects.insert(subject.to_string());
        let trips = subjects.len() >= FAIL_FAST_SUBJECTS && s.tripped.is_none();
        if subjects.len() >= FAIL_FAST_SUBJECTS {
            s.tripped = Some(cause.to_string());
        }
        s.cause = Some((cause.to_string(), subjects));
        trips
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cause_from_two_subjects_in_a_row_trips() {
        let s = FailStreak::default();
        assert!(!s.failed("a", "Invalid API key"));
        assert!(!s.failed("a", "Invalid API key"), "the same subject twice is that subject's trouble");
        assert_eq!(s.failing(), None);
        assert!(s.failed("b", "Invalid API key"));
        assert_eq!(s.failing().as_deref(), Some("Invalid API key"));
        assert!(!s.failed("c", "Invalid API key"), "trips once");
    }

    #[test]
    fn an_answer_another_cause_or_a_timeout_breaks_the_streak() {
        let s = FailStreak::default();
        s.failed("a", "x");
        s.answered();
        assert!(!s.failed("b", "x"));
        assert!(!s.failed("c", "y"), "another cause starts over");
        assert!(!s.failed("d", "timed out after 5.0s"));
        assert!(!s.failed("e", "y"), "a timeout broke it");
        assert!(s.failed("f", "y"));
        s.answered();
        assert_eq!(s.failing(), None, "an answer after the trip: the agent works again");
    }
}
