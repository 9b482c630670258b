//! How a run ended, and the ONE mapping from that to the process exit code.
//!
//! Every workflow's typed outcome becomes a [`RunStatus`] here (no wildcard arm anywhere: a
//! new variant is a compile error until it is given a code), and [`exit_code`] is the only
//! function that turns a [`RunStatus`] into a number.
//!
//! | code | status |
//! |---|---|
//! | 0 | [`ExitStatus::Done`] — finished as asked |
//! | 1 | [`ExitStatus::Unsuccessful`] — ended without success (the reason is in the result) |
//! | 2 | [`ExitStatus::BadInput`] — refused before any dispatch or state change |
//! | 3 | [`ExitStatus::Paused`] — paused for a person |
//! | 130 | [`Interrupt::Sigint`] ([`EXIT_SIGINT`], 128 + SIGINT) |
//! | 141 | [`Interrupt::ClosedPipe`] ([`EXIT_CLOSED_PIPE`], 128 + SIGPIPE: stdout's reader went away) |
//! | 143 | [`Interrupt::Sigterm`] ([`EXIT_SIGTERM`], 128 + SIGTERM) |

use crate::output::WriteFailure;
use work_implement::report::Status as IterationStatus;
use work_runtime::ExitStatus;
use work_ultra::state::GoalStatus;
use work_until::session::SessionStatus;

/// Exit code after SIGINT (Ctrl-C): 128 + 2.
pub const EXIT_SIGINT: i32 = 130;
/// Exit code when stdout's reader closed the pipe: 128 + 13, as if killed by SIGPIPE.
pub const EXIT_CLOSED_PIPE: i32 = 141;
/// Exit code after SIGTERM: 128 + 15.
pub const EXIT_SIGTERM: i32 = 143;

/// What interrupted a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// SIGINT (Ctrl-C).
    Sigint,
    /// SIGTERM.
    Sigterm,
    /// stdout's reader closed the pipe (`| head`).
    ClosedPipe,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// It ended by itself with this status.
    Ended(ExitStatus),
    /// It was interrupted.
    Interrupted(Interrupt),
}

/// The process exit code of a run: the one place a number is chosen.
pub fn exit_code(status: RunStatus) -> i32 {
    match status {
        RunStatus::Ended(ExitStatus::Done) => 0,
        RunStatus::Ended(ExitStatus::Unsuccessful) => 1,
        RunStatus::Ended(ExitStatus::BadInput) => 2,
        RunStatus::Ended(ExitStatus::Paused) => 3,
        RunStatus::Interrupted(Interrupt::Sigint) => EXIT_SIGINT,
        RunStatus::Interrupted(Interrupt::ClosedPipe) => EXIT_CLOSED_PIPE,
        RunStatus::Interrupted(Interrupt::Sigterm) => EXIT_SIGTERM,
    }
}

/// The final status once stdout's fate is known: a closed pipe is an interruption, any
/// other write failure makes a run that would have succeeded unsuccessful (the caller says
/// why on stderr).
pub fn with_output(status: RunStatus, failure: Option<&WriteFailure>) -> RunStatus {
    match (status, failure) {
        (s, None) => s,
        (RunStatus::Interrupted(i), Some(_)) => RunStatus::Interrupted(i),
        (RunStatus::Ended(_), Some(WriteFailure::ClosedPipe)) => RunStatus::Interrupted(Interrupt::ClosedPipe),
        (RunStatus::Ended(ExitStatus::Done), Some(WriteFailure::Failed(_))) => {
            RunStatus::Ended(ExitStatus::Unsuccessful)
        }
        (RunStatus::Ended(s), Some(WriteFailure::Failed(_))) => RunStatus::Ended(s),
    }
}

/// `work until`: a session's status after a run.
pub fn until(status: SessionStatus) -> ExitStatus {
    match status {
        SessionStatus::Done => ExitStatus::Done,
        SessionStatus::Paused => ExitStatus::Paused,
        SessionStatus::Active
        | SessionStatus::Running
        | SessionStatus::Blocked
        | SessionStatus::MaxReached
        | SessionStatus::InvalidReport
        | SessionStatus::Failed
        | SessionStatus::Budget => ExitStatus::Unsuccessful,
    }
}

/// `work implement` / `work edit`: the end-report's status.
pub fn iteration(status: IterationStatus) -> ExitStatus {
    match status {
        IterationStatus::Done => ExitStatus::Done,
        IterationStatus::Blocked | IterationStatus::Partial | IterationStatus::NeedsContext => ExitStatus::Unsuccessful,
    }
}

/// `work ultra`: the goal's status after a run.
pub fn goal(status: GoalStatus) -> ExitStatus {
    match status {
        GoalStatus::Done => ExitStatus::Done,
        GoalStatus::Running | GoalStatus::Blocked => ExitStatus::Unsuccessful,
    }
}

/// Why `work exhaust` stopped, typed from the journal's `stoppedReason` (`ExhaustStop::parse`).
pub use work_runtime::outcome::ExhaustStop;

/// `work exhaust`: dry (K rounds, or nothing left to try) is done — but only when every angle
/// was searched; a run that gave up an angle (its finder failed twice) did not look there,
/// which is never success, whichever of the two dry reasons it stopped with. A reason this
/// build does not know (`None`) is never success either.
pub fn exhaust(stop: Option<ExhaustStop>, covered: bool) -> ExitStatus {
    match (stop, covered) {
        (Some(ExhaustStop::KDry | ExhaustStop::Exhausted), true) => ExitStatus::Done,
        _ => ExitStatus::Unsuccessful,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_documented_code() {
        let e = |s| exit_code(RunStatus::Ended(s));
        assert_eq!(
            [e(ExitStatus::Done), e(ExitStatus::Unsuccessful), e(ExitStatus::BadInput), e(ExitStatus::Paused)],
            [0, 1, 2, 3]
        );
        assert_eq!(exit_code(RunStatus::Interrupted(Interrupt::Sigint)), 130);
        assert_eq!(exit_code(RunStatus::Interrupted(Interrupt::Sigterm)), 143);
        assert_eq!(exit_code(RunStatus::Interrupted(Interrupt::ClosedPipe)), 141);
    }

    #[test]
    fn output_failures_override_success_only() {
        let done = RunStatus::Ended(ExitStatus::Done);
        assert_eq!(with_output(done, None), done);
        assert_eq!(with_output(done, Some(&WriteFailure::ClosedPipe)), RunStatus::Interrupted(Interrupt::ClosedPipe));
        let full = WriteFailure::Failed("No space left on device".into());
        assert_eq!(with_output(done, Some(&full)), RunStatus::Ended(ExitStatus::Unsuccessful));
        let paused = RunStatus::Ended(ExitStatus::Paused);
        assert_eq!(with_output(paused, Some(&full)), paused);
    }

    #[test]
    fn exhaust_dry_reasons_agree() {
        for stop in [ExhaustStop::KDry, ExhaustStop::Exhausted] {
            assert_eq!(exhaust(Some(stop), true), ExitStatus::Done);
            assert_eq!(exhaust(Some(stop), false), ExitStatus::Unsuccessful);
        }
        assert_eq!(exhaust(ExhaustStop::parse("budget"), true), ExitStatus::Unsuccessful);
        assert_eq!(exhaust(ExhaustStop::parse("angles-and-oracles-exhausted"), true), ExitStatus::Done);
        assert_eq!(exhaust(ExhaustStop::parse("agent-failing"), true), ExitStatus::Unsuccessful);
        assert_eq!(exhaust(ExhaustStop::parse("a reason of a later build"), true), ExitStatus::Unsuccessful);
    }
}
