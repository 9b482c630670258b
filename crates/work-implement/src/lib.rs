//! `work implement` and `work edit` (CONTRACTS §6; seed: implement-pipeline-changelog.md):
//! the per-task implementer → spec review → quality review pipeline that no agent can fool.
//!
//! Every defence the seed's changelog records is code here, not an agent's judgement:
//!
//! - [`carrier`]: carrier guards before any dispatch (#24);
//! - [`tree`]: the folded preflight (#29), diff fingerprints, task-boundary snapshots (#23),
//!   the untracked-aware `files_touched` (#12);
//! - [`extract`]: the deterministic plan parser, or the agent index/extract under cardinality
//!   guards (#22, #29);
//! - [`task_loop`]: the per-task loop with the unclear route, the minor valve, the HOLD clause
//!   and the fingerprint exit (#10, #29);
//! - [`standard`], [`mini`], [`edit`]: the three modes with their end gates (#11, #12, #29);
//! - [`artifacts`]: stats.json / BLOCKED.md from templates in code (#finalize).
//!
//! Workflows reach the outside world only through [`work_runtime`] and [`work_git`].
//!
//! # Roles and answers
//!
//! Every dispatch carries `context.task_id` (`index`, `all`, a task id, `mini`, `edit`) and
//! `context.phase`; each role has its own model/effort pin. Answers (schemas in [`prompts`]):
//!
//! | role | access | context.phase | answer |
//! |---|---|---|---|
//! | `plan-index` | read-only | – | `{total_tasks, tasks: [{id, title, est_bytes}]}` |
//! | `plan-extract` | read-only | – (`task_id` `all` + `task_ids`, or one id) | `{tasks: [{id, text}]}` / `{id, text}` |
//! | `implementer` | write | `implement`, `spec-repair`, `quality-repair`, `mini` | `{status: DONE\|DONE_WITH_CONCERNS\|BLOCKED\|NEEDS_CONTEXT, summary, applied_changes, concerns, held, reason}` |
//! | `spec-reviewer` | read-only | `spec-review` | `{status: compliant\|non_compliant\|unclear, issues, ambiguity}` |
//! | `quality-reviewer` | read-only | `quality-review` | `{verdict: approved\|changes_requested, issues: [{severity: important\|minor, text}]}` |
//! | `tester` | write | `e2e` | `{status: DONE\|FAILED\|BLOCKED, fixtures, summary}` |
//! | `editor` | write | – (`round`) | `{status: DONE\|HOLE\|BLOCKED, applied_changes, sites, hole: {route: specify\|tdd, detail}}` |
//!
//! A task is E2E when its title has the word `E2E` or its body a line `E2E: yes`.

pub mod artifacts;
pub mod carrier;
pub mod edit;
mod env;
pub mod extract;
pub mod mini;
pub mod prompts;
pub mod report;
pub mod standard;
pub mod task_loop;
pub mod tree;

pub use env::{Counter, Env, GateRun, RoleDispatch, Settings};
