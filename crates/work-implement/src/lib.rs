//! `work implement` and `work edit`:
//! the per-task implementer → spec review → quality review pipeline that no agent can fool.
//!
//! Every defence the changelog records is code here, not an agent's judgement:
//!
//! - [`carrier`]: carrier guards before any dispatch (#24);
//! - [`tree`]: the folded preflight (#29), whole-tree fingerprints and task-boundary
//!   snapshots through a temporary index (#23, loss per path and per line), the task's own
//!   reviewer diff, the untracked-aware `files_touched` (#12);
//! - [`extract`]: the deterministic plan parser, or the agent index/extract under cardinality
//!   guards (#22, #29), held against the plan's own text by [`plan_text`];
//! - [`task_loop`]: the per-task loop with the unclear route, the minor valve, the HOLD clause
//!   and the fingerprint exit (#10, #29);
//! - [`standard`], [`mini`], [`edit`]: the three modes with their end gates (#11, #12, #29);
//!   [`rename`]: an edit's rename judged by where the old name stands before and after;
//! - [`artifacts`]: stats.json (serde_json) / BLOCKED.md (one-pass template fill) in code
//!   (#finalize), written for every BLOCKED / PARTIAL / NEEDS_CONTEXT run except the clean
//!   no-ops (`no-op`, `no-op-edit`) and the infra early exits;
//! - [`parts`]: a task diff too large for one reviewer brief reviewed in parts, the verdicts
//!   combined;
//! - [`answers`]: the lenient reading of every role's answer;
//! - [`state_write`]: a state write that fails stops the run at once, naming the file;
//! - [`resume`]: a killed run continued by the next run of its iteration, a finished one's
//!   report kept (standard mode and edit).
//!
//! Two more rules hold in every mode:
//!
//! - **One rule for HEAD** (`work_git::head`). The pipeline never commits; the HEAD recorded
//!   at the preflight is the run's base, and every measurement (diffs, fingerprints, the
//!   snapshot guard, `files_touched`) starts from its tree, so an agent's commits on top of it
//!   are its change. HEAD is judged after every write dispatch and at every task end: reset
//!   below the base, the base rewritten or another branch checked out is BLOCKED `head-moved`,
//!   naming the breach.
//! - **Only the agents' work is measured.** The state directory, and the plan file named on the
//!   command line when it is itself uncommitted (reported in `preflight.excluded_paths` and a
//!   concern), are outside every tree measurement; in mini mode so is whatever the engine's
//!   own RED run left in the tree.
//!
//! - **A budget stops explicitly.** A dispatch the run's budget (`--budget-dispatches`,
//!   `--budget-tokens`, `--budget-usd`) refuses is neither counted nor the agent's failure: the
//!   run ends BLOCKED with kind `budget`, `blocked_detail.refused` naming the refused dispatch
//!   and the reason (and `blocked_detail.not_done`) naming what was not done — the tasks not
//!   DONE and the end-verify suite run when it did not run.
//!
//! Workflows reach the outside world only through [`work_runtime`] and [`work_git`].
//!
//! # Roles and answers
//!
//! Every dispatch carries `context.task_id` (`index`, `all`, a task id, `mini`, `edit`) and
//! `context.phase`; each role has its own model/effort pin. Answers (schemas in [`prompts`], one
//! name per field, status words as enums; [`answers`] folds case and fills absent fields before
//! the engine reads them; docs/protocol.md shows each with an example):
//!
//! | role | access | context.phase | answer |
//! |---|---|---|---|
//! | `plan-index` | read-only | – | `{total_tasks, tasks: [{id, title, est_bytes}]}` |
//! | `plan-extract` | read-only | – (`task_id` `all` + `task_ids`, or one id) | `{tasks: [{id, text}]}` / `{id, text}` |
//! | `implementer` | write | `implement`, `spec-repair`, `quality-repair`, `mini` | `{status: DONE\|DONE_WITH_CONCERNS\|BLOCKED\|NEEDS_CONTEXT, summary, applied_changes: bool, concerns, held: [{finding, reason}], reason}` |
//! | `spec-reviewer` | read-only | `spec-review` | `{status: compliant\|non_compliant\|unclear, issues, ambiguity, files_read}` |
//! | `quality-reviewer` | read-only | `quality-review` | `{verdict: approved\|changes_requested, issues?: [{severity: important\|minor, text}], files_read}` |
//! | `tester` | read-only (fixtures under `context.fixtures_dir`, outside the tree; a large change in parts, `context.review_part`) | `e2e` | `{status: DONE\|FAILED\|BLOCKED, fixtures, summary}` |
//! | `editor` | write | – (`round`) | `{status: DONE\|HOLE\|BLOCKED, applied_changes: bool, sites, hole: null or {route: specify\|tdd, detail}}` |
//!
//! A task is E2E when its title has the word `E2E` or its body a line `E2E: yes`.
#![cfg_attr(test, allow(clippy::disallowed_methods, reason = "unit tests set up their fixtures directly"))]

pub mod answers;
pub mod artifacts;
pub mod carrier;
pub mod e2e;
pub mod edit;
mod env;
pub mod extract;
pub mod frozen;
pub mod mini;
pub mod parts;
pub mod plan_text;
pub mod progress;
pub mod prompts;
mod read_only;
pub mod rename;
pub mod report;
pub mod resume;
pub mod standard;
pub mod state_write;
pub mod task_loop;
pub mod tree;
pub mod waves;

pub use env::{Counter, Env, GateRun, RoleDispatch, Settings};
