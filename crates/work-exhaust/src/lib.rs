//! `work exhaust`: discovery until dry.
//!
//! Rounds of parallel finders (one per angle, in waves under a cap) meet at a barrier where
//! the engine — never an agent — re-reads every `PATH:LINE` (gate 2), dedups against
//! everything ever seen (accepted or rejected; an oracle's item against the accepted ones
//! only, so a rejected finder item never hides an oracle's hit), and updates the dry counter with the
//! False-DRY guard. Gate 1 seeds `seen` from oracle commands; gate 3 runs the final oracles
//! before the K-th qualifying dry round commits. Every round is committed to the journal (an
//! appended record on a snapshot, [`store`]), which is the resume source.
//!
//! - [`angles`]: the built-in sweep pool;
//! - [`items`]: dedup keys, and gate 2 (re-exported from `work_git::evidence`, which `loop run`
//!   shares for an adjudicator's evidence);
//! - [`oracle`]: oracle commands and their output;
//! - [`journal`]: the journal and master object;
//! - [`item`]: an accepted item as kept in memory (its compact JSON text);
//! - [`keyset`]: the dedup keys, kept small (locations by interned path and line);
//! - [`store`]: the journal on disk (snapshot + append-only log);
//! - [`head`]: what a rerun of a finished task reads instead of the whole journal;
//! - [`engine`]: the round loop.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

mod angle_sets;
pub mod angles;
pub mod engine;
pub mod head;
pub mod item;
pub mod items;
pub mod journal;
pub mod keyset;
pub mod oracle;
pub mod store;

pub use engine::{Engine, ExhaustError, Params, finder_schema};
pub use item::Item;
pub use journal::Journal;
/// Prose locations and quoted evidence (moved to `work_git::locate`, shared with `loop run`).
pub use work_git::locate;
