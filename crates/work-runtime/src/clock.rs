//! Time, injectable. Workflows read the time only through a [`Clock`].

use chrono::{DateTime, SecondsFormat, Utc};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of wall-clock time.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;

    /// The current instant as RFC 3339 with millisecond precision (`2026-01-01T00:00:00.000Z`).
    fn now_rfc3339(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        #[expect(clippy::disallowed_methods, reason = "the system clock behind the injected one")]
        Utc::now()
    }
}

/// A fake clock for tests: starts at a fixed instant and advances by a fixed step on every read,
/// so that every timestamp is distinct and repeatable.
#[derive(Debug)]
pub struct FakeClock {
    start: DateTime<Utc>,
    step_ms: i64,
    reads: AtomicI64,
    manual: Mutex<i64>,
}

impl FakeClock {
    /// A clock that starts at `start` and advances `step_ms` milliseconds per read.
    pub fn new(start: DateTime<Utc>, step_ms: i64) -> Self {
        Self { start, step_ms, reads: AtomicI64::new(0), manual: Mutex::new(0) }
    }

    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: i64) {
        if let Ok(mut m) = self.manual.lock() {
            *m += ms;
        }
    }
}

impl Clock for FakeClock {
    fn now(&self) -> DateTime<Utc> {
        let n = self.reads.fetch_add(1, Ordering::SeqCst);
        let manual = self.manual.lock().map(|m| *m).unwrap_or(0);
        self.start + chrono::Duration::milliseconds(n * self.step_ms + manual)
    }
}

/// The clock selected by the environment: `WORK_FAKE_CLOCK=<RFC 3339 instant>` gives a
/// [`FakeClock`] stepping one millisecond per read (for repeatable test runs); otherwise the
/// system clock. An unparsable value is ignored in favour of the system clock.
pub fn from_env() -> Box<dyn Clock> {
    if let Ok(v) = std::env::var("WORK_FAKE_CLOCK")
        && let Ok(t) = DateTime::parse_from_rfc3339(v.trim())
    {
        return Box::new(FakeClock::new(t.with_timezone(&Utc), 1));
    }
    Box::new(SystemClock)
}

/// The system's wall clock, for comparing with the times the kernel stamps on files (mtime,
/// ctime): an injected [`Clock`] cannot move those, so a fake one must never stand in here. A
/// time a run records or decides a workflow by comes from a [`Clock`] instead.
pub fn file_time_now() -> std::time::SystemTime {
    #[expect(clippy::disallowed_methods, reason = "the chokepoint for the file-time clock")]
    std::time::SystemTime::now()
}

/// Nanoseconds since the epoch on the system's wall clock (0 before it): salt for a name that
/// must differ between calls and processes (a session id, a lock token), never a time shown.
pub fn nonce_nanos() -> u128 {
    file_time_now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_steps_and_advances() {
        let start = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").map(|t| t.with_timezone(&Utc)).expect("valid");
        let c = FakeClock::new(start, 1000);
        assert_eq!(c.now_rfc3339(), "2026-01-01T00:00:00.000Z");
        assert_eq!(c.now_rfc3339(), "2026-01-01T00:00:01.000Z");
        c.advance_ms(60_000);
        assert_eq!(c.now_rfc3339(), "2026-01-01T00:01:02.000Z");
    }
}
