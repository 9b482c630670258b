//! Test-only fault injection: a crash at a chosen state-changing call.
//!
//! When the environment variable `WORK_TEST_KILL_AT=<n>` is set, the process sends itself
//! `SIGKILL` at the n-th state-changing call (1-based): each [`crate::fsx::write_atomic`]
//! just before its rename, and each dispatch just before the agent is invoked. The crash
//! soak (`crates/work-cli/tests/cli/soak.rs`) runs a scenario with n = 1, 2, … until a run
//! ends without being killed, so every state-changing call is a crash point once.
//!
//! Without the variable this costs one load of a cached `None`. It is never set outside
//! tests and is not a user-facing setting.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static KILL_AT: OnceLock<Option<u64>> = OnceLock::new();
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Counts one state-changing call and kills the process when it is the one named by
/// `WORK_TEST_KILL_AT`.
pub fn state_change() {
    let at = KILL_AT.get_or_init(|| std::env::var("WORK_TEST_KILL_AT").ok().and_then(|v| v.trim().parse().ok()));
    let Some(at) = *at else { return };
    if CALLS.fetch_add(1, Ordering::SeqCst) + 1 == at {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}
