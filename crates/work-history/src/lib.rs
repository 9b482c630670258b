//! Run history: what happened in past runs, read back from `.work/`.
//!
//! Every run leaves `.work/runs/<run-id>/events.jsonl` (one JSON object a line: `ts`,
//! `run_id`, `seq`, `kind`, …) and its dispatch records; workflows leave their own state
//! files (exhaust journals, until sessions, implement iterations, ultra goals). This crate
//! reads them — never writes, except [`store::gc`] which removes whole run directories — and
//! turns them into:
//!
//! - [`summary::RunSummary`]: one run's id, workflow, subject (task, session, goal), start,
//!   duration, outcome, dispatches, tokens, cost, failed dispatches, per-role spending;
//! - [`detail::Detail`]: the workflow's own view (exhaust rounds and items, until
//!   iterations, implement tasks, ultra observations);
//! - [`report::render`]: one self-contained HTML page with inline SVG charts.
//!
//! Reads are bounded ([`events::MAX_LOG_BYTES`], [`store::MAX_RUNS`]); a torn last line (a
//! run killed mid-write) is skipped and counted. A run without `run.end` is `running` when
//! the process named in its id is alive, else `interrupted`.
//!
//! Layer: above work-runtime (fsx reads, redaction, liveness), beside the workflow crates; it
//! reads their files as JSON values so an older or newer file degrades to fewer fields, never
//! to an error.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod detail;
pub mod duration;
pub mod events;
pub mod html;
pub mod report;
pub mod store;
pub mod summary;
pub mod svg;

pub use store::{Gc, HistoryError, Store};
pub use summary::{RunState, RunSummary};
