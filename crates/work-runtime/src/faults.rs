//! Test-only fault injection: a crash, or a failing write, at a chosen state-changing call.
//!
//! When the environment variable `WORK_TEST_KILL_AT=<n>` is set, the process sends itself
//! `SIGKILL` at the n-th state-changing call (1-based): each [`crate::fsx::write_atomic`]
//! just before its rename, each [`crate::fsx::append_line`] just before its write, and each
//! dispatch just before the agent is invoked. The crash soak
//! (`crates/work-cli/tests/cli/soak.rs`) runs a scenario with n = 1, 2, … until a run ends
//! without being killed, so every state-changing call is a crash point once.
//!
//! `WORK_TEST_FAIL_AT=<n>` makes the n-th state-changing call and every later one that writes a
//! file fail as a full disk would (`ENOSPC`; `WORK_TEST_FAIL_ERRNO=EIO` for an I/O error
//! instead): the write is not made and its caller gets the error. A dispatch is counted but
//! never fails. This is how a test shows that a failed state write stops a run at once, and
//! that the run resumes once the disk has room again (the same command without the variable).
//!
//! `WORK_TEST_TEAR_AT=<n>` tears the n-th state-changing call: when it is an append
//! ([`crate::fsx::append_line`]), only the first half of the line's bytes (no newline) reaches
//! the log, synced, and then the process sends itself `SIGKILL` — the write a power loss cuts;
//! any other call (a whole-file write, a cut, a rename, a dispatch) is killed as
//! `WORK_TEST_KILL_AT` would. The torn-write soak (`crates/work-cli/tests/cli/soak_torn.rs`)
//! tears every append of each workflow once and reruns the same command.
//!
//! `WORK_TEST_TEAR_RECORD_AT=<k>` tears the k-th dispatch record (`dispatches.jsonl`, the log
//! ultra and loop run resume a cut-off dispatch from): half the line, no newline, then
//! `SIGKILL`. Records are counted apart from the state-changing calls (a record is an audit line
//! the resume reads, never a state write that can fail), so no other soak's call numbers move.
//!
//! `WORK_TEST_FAULT_TRACE=<file>` appends one line `<n> <kind>` to `<file>` for each counted
//! call (`kind`: `append`, `write` or `dispatch`), and `<k> record` for each dispatch record,
//! so that a soak learns from one uninterrupted run which call numbers are appends.
//!
//! Without the variables this costs one load of a cached `None`. They are never set outside
//! tests and are not a user-facing setting.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the environment asks for, read once.
#[derive(Debug, Clone, Copy)]
struct Plan {
    kill_at: Option<u64>,
    fail_at: Option<u64>,
    tear_at: Option<u64>,
    tear_record_at: Option<u64>,
    errno: i32,
    trace: Option<&'static std::path::Path>,
}

/// What one counted call is to do.
enum Step {
    /// Go on.
    Go,
    /// Fail with this errno (the write is not made).
    Fail(i32),
    /// Write half of the line, then die ([`torn`]).
    Tear,
}

static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
static CALLS: AtomicU64 = AtomicU64::new(0);
static RECORDS: AtomicU64 = AtomicU64::new(0);

fn plan() -> Option<Plan> {
    *PLAN.get_or_init(|| {
        let num = |k: &str| std::env::var(k).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let (kill_at, fail_at) = (num("WORK_TEST_KILL_AT"), num("WORK_TEST_FAIL_AT"));
        let (tear_at, tear_record_at) = (num("WORK_TEST_TEAR_AT"), num("WORK_TEST_TEAR_RECORD_AT"));
        let errno = match std::env::var("WORK_TEST_FAIL_ERRNO").ok().as_deref().map(str::trim) {
            Some("EIO") => nix::errno::Errno::EIO as i32,
            _ => nix::errno::Errno::ENOSPC as i32,
        };
        let trace = std::env::var_os("WORK_TEST_FAULT_TRACE")
            .map(|p| &*Box::leak(std::path::PathBuf::from(p).into_boxed_path()));
        let any = kill_at.is_some() || fail_at.is_some() || tear_at.is_some() || tear_record_at.is_some();
        (any || trace.is_some()).then_some(Plan { kill_at, fail_at, tear_at, tear_record_at, errno, trace })
    })
}

/// Counts one state-changing call that writes no file (a dispatch) and kills the process when
/// it is the one named by `WORK_TEST_KILL_AT`.
pub fn state_change() {
    let _ = count(Kind::Dispatch);
}

/// What a counted call does (named in the trace).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Append,
    Write,
    Dispatch,
}

/// Counts one state-changing write: kills the process when it is the call named by
/// `WORK_TEST_KILL_AT`, and fails it (the write must not be made) from the call named by
/// `WORK_TEST_FAIL_AT` on.
pub fn state_write() -> io::Result<()> {
    match count(Kind::Write) {
        Step::Fail(errno) => Err(io::Error::from_raw_os_error(errno)),
        Step::Go | Step::Tear => Ok(()),
    }
}

/// [`state_write`] for an append: `Ok(true)` when this call is the one `WORK_TEST_TEAR_AT`
/// names — the caller writes the first half of its line, syncs it, and calls [`torn`].
pub fn state_append() -> io::Result<bool> {
    match count(Kind::Append) {
        Step::Fail(errno) => Err(io::Error::from_raw_os_error(errno)),
        Step::Go => Ok(false),
        Step::Tear => Ok(true),
    }
}

/// Counts one dispatch record: true when it is the one `WORK_TEST_TEAR_RECORD_AT` names — the
/// caller writes the first half of its line and calls [`torn`].
pub fn record_append() -> bool {
    let Some(plan) = plan() else { return false };
    let k = RECORDS.fetch_add(1, Ordering::SeqCst) + 1;
    trace(plan, k, "record");
    plan.tear_record_at == Some(k)
}

/// Ends the process after a torn append, as a power loss would.
pub fn torn() -> ! {
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    std::process::abort()
}

/// One call counted; what it is to do.
fn count(kind: Kind) -> Step {
    let Some(plan) = plan() else { return Step::Go };
    let n = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    trace(plan, n, &format!("{kind:?}").to_lowercase());
    if plan.tear_at == Some(n) {
        if matches!(kind, Kind::Append) {
            return Step::Tear;
        }
        torn();
    }
    if plan.kill_at == Some(n) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
    plan.fail_at.filter(|&at| n >= at).map_or(Step::Go, |_| Step::Fail(plan.errno))
}

/// One line `<n> <kind>` in the trace file, when there is one.
fn trace(plan: Plan, n: u64, kind: &str) {
    if let Some(path) = plan.trace {
        use std::io::Write;
        let _ = crate::fsx::plain::open(std::fs::OpenOptions::new().create(true).append(true), path)
            .and_then(|mut f| f.write_all(format!("{n} {kind}\n").as_bytes()));
    }
}
