//! The process exit codes every `work` command keeps.

/// How a `work` command ended. The numeric values are the process exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitStatus {
    /// Finished as asked: DONE, dry, condition met, transition applied.
    Done = 0,
    /// Ended without success; the reason is in the result (BLOCKED, budget, max-reached, stalled, gate red).
    Unsuccessful = 1,
    /// Bad input, refused before any agent was dispatched and before any state changed.
    BadInput = 2,
    /// Paused for a person (human gate); the result says how to continue.
    Paused = 3,
}

impl ExitStatus {
    /// The numeric process exit code.
    pub fn code(self) -> i32 {
        self as i32
    }
}
