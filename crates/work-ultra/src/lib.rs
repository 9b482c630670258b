//! `work ultra`: the evidence-driven goal runner.
//!
//! A goal ([`goal::Goal`], read from `GOAL.toml`) names an objective, a tier with its
//! justification, success criteria (a scenario command, a PASS/FAIL observable, the evidence
//! to capture) and a stop line. The engine ([`engine::drive`]):
//!
//! - captures every criterion RED before any implementation dispatch (a behaviour-change
//!   criterion that already passes stops the run: there is no failing-first proof);
//! - dispatches the implementer (workspace-write) with the brief, then re-runs every
//!   scenario itself: a criterion is green only by the engine's observation, never a claim;
//! - stops on the rules: all green (after a final full pass), the identical failure
//!   twice in a row, attempts exhausted, an agent blocker, leftover state (any failed cleanup
//!   receipt that still holds, including a scenario process that escaped its group and could
//!   not be killed), and the agent changing the engine's own records (`evidence-tampered`);
//! - keeps `state.json`, the append-only `notepad.md`, `receipts.json` (cleanup receipts,
//!   verified where a path or pid can be checked) and `evidence/<criterion>/<label>.*` under
//!   `<state>/goals/<goal-id>/` ([`state`]).
//!
//! Deterministic parts are code; the implementer's work is the only judgement, and it is
//! dispatched through the runtime's [`work_runtime::dispatch::Dispatcher`].
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod brief;
pub mod engine;
pub mod goal;
pub mod observe;
pub mod state;
