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
    errno: i32,
}

static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
static CALLS: AtomicU64 = AtomicU64::new(0);

fn plan() -> Option<Plan> {
    *PLAN.get_or_init(|| {
        let num = |k: &str| std::env::var(k).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let (kill_at, fail_at) = (num("WORK_TEST_KILL_AT"), num("WORK_TEST_FAIL_AT"));
        let errno = match std::env::var("WORK_TEST_FAIL_ERRNO").ok().as_deref().map(str::trim) {
            Some("EIO") => nix::errno::Errno::EIO as i32,
            _ => nix::errno::Errno::ENOSPC as i32,
        };
        (kill_at.is_some() || fail_at.is_some()).then_some(Plan { kill_at, fail_at, errno })
    })
}

/// Counts one state-changing call that writes no file (a dispatch) and kills the process when
/// it is the one named by `WORK_TEST_KILL_AT`.
pub fn state_change() {
    let _ = count();
}

/// Counts one state-changing write: kills the process when it is the call named by
/// `WORK_TEST_KILL_AT`, and fails it (the write must not be made) from the call named by
/// `WORK_TEST_FAIL_AT` on.
pub fn state_write() -> io::Result<()> {
    match count() {
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
        None => Ok(()),
    }
}

/// One call counted; the errno a write at this call fails with, if any.
fn count() -> Option<i32> {
    let plan = plan()?;
    let n = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    if plan.kill_at == Some(n) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
    plan.fail_at.filter(|&at| n >= at).map(|_| plan.errno)
}
