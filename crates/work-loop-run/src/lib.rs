//! `work loop run`: the agent-driven PLAN → EXECUTE → GATES → REVIEW → DECIDE loop of the
//! work-loop design, on top of the deterministic spine in
//! `work_loop` — every state change is an engine transition or a cohort verb, with their
//! guards and locks.
//!
//! - [`driver`]: the loop, one step per engine state; human gates pause (exit 3) and a later
//!   invocation resumes from `engine-state.json`. Every implementer step that ends with a change
//!   is a boundary snapshot; a later step's unplanned loss is `snapshot-loss` (`driver/boundary.rs`).
//! - [`risk`]: light or full mode, by risk triggers.
//! - [`prompts`]: the roles, their briefs and answer schemas.
//! - [`git_seal`]: git's view sealed when the code phase begins; a change is `git-tampered`.
//! - [`proof`]: reviewers prove they looked; refutations cite re-read evidence; a red gate's
//!   finding stays sustained.
//! - [`review_diff`]: a reviewer's diff travels whole, or the round stops `too-large-to-review`.
//! - [`state`]: `<spec-dir>/loop-run.json`, the driver's own progress.
//! - [`verdict`]: the `review-verdict.v1` record, one per review unit.
//! - [`status`]: rewriting spec.md / plan.md status lines.
//!
//! No process is spawned and no file written here except through the runtime (`RunContext`'s
//! spawner and atomic writes) and `work_git`.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod driver;
pub mod git_seal;
pub mod prompts;
pub mod proof;
pub mod review_diff;
pub mod risk;
pub mod state;
pub mod status;
pub mod verdict;

pub use driver::{Driver, HumanInput, Report, RoleDispatch, Settings, merge_adjudication, preflight};
pub use risk::ReviewMode;
