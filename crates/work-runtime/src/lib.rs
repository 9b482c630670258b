//! The `work` runtime: the one layer that touches the outside world.
//!
//! Every side effect of a workflow goes through this crate:
//!
//! - time through [`clock::Clock`] (a fake clock makes runs byte-for-byte repeatable),
//! - files through [`fsx`] (atomic writes, path confinement to the repository root),
//! - processes through [`spawn::Spawner`] (process groups, timeouts, capped output; a
//!   watched child that can be interrupted through [`spawn_stream`]),
//! - agent calls through [`dispatch::Dispatcher`] (schema validation, one retry,
//!   null-handling, waves under a cap, budgets),
//! - audit through [`events::EventLog`] (append-only, one JSON object a line, secrets redacted).
//!
//! The runtime knows nothing about any particular workflow or agent backend: backends
//! implement [`dispatch::Agent`], workflows consume [`run::RunContext`].
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod budget;
pub mod bytecode;
pub mod clock;
pub mod contain;
pub mod dispatch;
pub mod enum_fold;
#[allow(clippy::disallowed_methods, reason = "the event log's own directory and append handle")]
pub mod events;
pub mod exit;
pub mod faults;
#[allow(clippy::disallowed_methods, reason = "the chokepoint for file writes and removals")]
pub mod fsx;
pub mod outcome;
pub mod redact;
pub mod run;
pub mod sandbox;
#[allow(clippy::disallowed_methods, reason = "scratch files are created and removed by the runtime itself")]
pub mod scratch;
pub mod slug;
pub mod spawn;
pub mod spawn_stream;
#[cfg(test)]
mod spelling_tests;
#[allow(clippy::disallowed_methods, reason = "staged state directories are discarded by the runtime itself")]
pub mod stage;
pub mod suggest;

pub use exit::ExitStatus;
