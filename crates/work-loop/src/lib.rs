//! `work loop`: the work-loop deterministic scripts — the engine state
//! machine, the cohort bookkeeping, the spec-status lint, the workspace preflight and the
//! base-freshness check — plus the plan parser shared with `work implement` ([`plan`]).
//!
//! No agent runs here: every rule is code, every path from outside is confined to the
//! repository root before any read or write, and every state file is written atomically.
//!
//! Where the design had to be interpreted (retry caps, review round counting, the adjudication
//! artifact, the plan-locked and wave guards, `--intent-incomplete`, `pending_human_wait`,
//! cycle ids, plan review tracking, approve-plan baselines, the status vocabulary, deferral
//! anchors, the workspace.toml layout and finding codes, base-freshness rules, init/reset, the
//! lock, older state files, `--spec-dir`), the reading is written down in
//! `docs/loop-interpretations.md`; the state table as implemented is `docs/loop-state-table.md`.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod adjudication;
pub mod canonical;
pub mod cohort;
pub mod common;
pub mod engine;
pub mod events;
pub mod freshness;
pub mod lint;
pub mod lint_refs;
pub mod lock;
pub mod plan;
pub mod report;
pub mod schedule;
pub mod table;
pub mod touches;
pub mod workspace;
mod workspace_entry;

pub use common::{LoopError, LoopResult, Outcome, SpecDir};
