//! `work until`: one worker at a time until a checkable condition holds.
//!
//! The parent (this crate) keeps the until-clause and the ledger; the worker keeps the sweat;
//! the hand-off lives in session files under `<state>/sessions/<id>/`:
//!
//! - [`intent`] — the until-gate: refuse a clause nothing can check; derive a verify command
//!   where one is unambiguous;
//! - [`session`] — `meta.md` (the commit point), `init-session`, `resolve-resume`, listing;
//! - [`ledger`] — `master.md` (parse, merge, `compact-master`) and the iteration archive;
//! - [`store`] — the ledger on disk: a snapshot (`ledger.json`) and an append-only log
//!   (`ledger.jsonl`), the iteration's commit point;
//! - [`report`] — the worker's report schema and `validate-report`;
//! - [`templates`] — the hand-off, worker and recon briefs;
//! - [`workflow`] — the iteration loop, stall rules, human gate and git ground truth.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod intent;
pub mod ledger;
pub mod report;
mod seal;
pub mod session;
pub mod store;
pub mod templates;
pub mod workflow;

pub use intent::{Checkability, GateCommands, classify};
pub use session::{Meta, Mode, Session, SessionStatus};
pub use workflow::{LoopEnv, LoopOutcome, UntilError, drive};
