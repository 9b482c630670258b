//! Task selection: the deterministic plan parser (no agent, no truncation) for plans in the
//! documented form, and, for free-form plans, the agent index/extract with its
//! cardinality guards (#22, #29):
//!
//! - plan-index lists ids + titles + byte estimates and a `total_tasks` counted independently;
//!   (a) the list must hold exactly `total_tasks` distinct, non-blank ids;
//! - (b) a `--range A-B` must be covered exactly by the plan;
//! - a batched plan-extract runs only when the estimate is under the ceiling (20 kB, on bytes,
//!   never task count), and is accepted only with exactly the expected id set (count, every
//!   id, no empty text) — otherwise discarded whole, and the per-task fan-out runs instead,
//!   associated by the requested id, never by position in any answer;
//! - (c) every expected id must extract non-empty text;
//! - (d) the answers hold the plan's own text ([`plan_text`]): every extract is found in the
//!   plan, and every step of the plan's enumeration (step headings, a numbered list,
//!   checkboxes) is inside some task's text — else the index and extract are asked once more
//!   with the reason, then BLOCKED `extract-not-in-plan` / `cardinality`.
//!
//! Any breach is a hard BLOCKED "got N of M", never a silent short run.

use crate::env::{Counter, Env};
use crate::plan_text;
use crate::prompts;
use crate::task_loop::{TaskSpec, is_e2e};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use work_loop::plan::Plan;
use work_runtime::dispatch::Access;
use work_runtime::events::Event;

/// Why task selection stopped the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectBlocked {
    /// `cardinality`, `bad-range`, `dispatch-failed`, `extractor-wrote-tree`.
    pub kind: &'static str,
    /// "… got N of M …".
    pub reason: String,
    /// The evidence.
    pub detail: Value,
}

fn cardinality(reason: String, detail: Value) -> SelectBlocked {
    SelectBlocked { kind: "cardinality", reason, detail }
}

/// The ids `A..=B` of a range.
pub fn range_ids(range: (u64, u64)) -> Vec<String> {
    (range.0..=range.1).map(|n| n.to_string()).collect()
}

/// Checks that `available` covers every id of `range` exactly; returns them in range order.
pub fn cover_range(range: (u64, u64), available: &[String], what: &str) -> Result<Vec<String>, SelectBlocked> {
    let want = range_ids(range);
    let have: BTreeSet<&str> = available.iter().map(String::as_str).collect();
    let missing: Vec<&String> = want.iter().filter(|id| !have.contains(id.as_str())).collect();
    if missing.is_empty() {
        return Ok(want);
    }
    Err(cardinality(
        format!(
            "range {}-{} is not covered by {what}: got {} of {} tasks (missing {})",
            range.0,
            range.1,
            want.len() - missing.len(),
            want.len(),
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ),
        json!({"range": [range.0, range.1], "expected": want, "missing": missing}),
    ))
}

/// The tasks of a parsed plan to run, in wave order, restricted to `range`.
pub fn select_parsed(plan: &Plan, range: Option<(u64, u64)>) -> Result<Vec<TaskSpec>, SelectBlocked> {
    let ordered: Vec<&work_loop::plan::Task> = plan.wave_tasks().into_iter().flatten().collect();
    let keep: Option<BTreeSet<String>> = match range {
        Some(r) => {
            let ids: Vec<String> = plan.tasks().iter().map(|t| t.id.clone()).collect();
            Some(cover_range(r, &ids, "the plan")?.into_iter().collect())
        }
        None => None,
    };
    Ok(ordered
        .into_iter()
        .filter(|t| keep.as_ref().is_none_or(|k| k.contains(&t.id)))
        .map(|t| TaskSpec {
            id: t.id.clone(),
            title: t.title.clone(),
            text: format!("Task {}: {}\n\n{}", t.id, t.title, t.body),
            e2e: is_e2e(&t.title, &t.body),
        })
        .collect())
}

/// Indexes and extracts a free-form plan through agents, under the cardinality guards. The
/// plan-index and plan-extract roles are read-only: a tree they changed (tracked, untracked,
/// ignored, the state directory, git's own files) is BLOCKED `extractor-wrote-tree`, whatever
/// they answered — before anything else runs, so no later check is frozen from that tree.
pub async fn select_free_form(
    env: &Env,
    counter: &mut Counter,
    iter: &str,
    plan_path: &str,
    plan: &str,
    range: Option<(u64, u64)>,
) -> Result<Vec<TaskSpec>, SelectBlocked> {
    let guard = crate::read_only::Guard::take(env, &[env.run.run_dir()]);
    let selected = select_free_form_unguarded(env, counter, iter, plan_path, plan, range).await;
    let changed = guard.writes(env);
    if changed.is_empty() {
        return selected;
    }
    let what = work_git::inventory::describe_changes(&changed);
    Err(SelectBlocked {
        kind: "extractor-wrote-tree",
        reason: format!(
            "the plan-index/plan-extract agent changed the tree ({what}); those roles are read-only and their answers are dropped — undo the change and run again"
        ),
        detail: json!({"changed": changed}),
    })
}

/// Indexes and extracts, then holds the answers against the plan's own text
/// ([`plan_text::check`]): an extract not found in the plan, or a step of the plan's
/// enumeration no task holds, is asked once more with the reason, then BLOCKED.
async fn select_free_form_unguarded(
    env: &Env,
    counter: &mut Counter,
    iter: &str,
    plan_path: &str,
    plan: &str,
    range: Option<(u64, u64)>,
) -> Result<Vec<TaskSpec>, SelectBlocked> {
    let mut refused: Option<String> = None;
    let mut attempt = 1;
    loop {
        let tasks = select_attempt(env, counter, iter, plan_path, plan, range, refused.as_deref()).await?;
        let texts: BTreeMap<String, String> = tasks.iter().map(|t| (t.id.clone(), t.text.clone())).collect();
        let Err(refusal) = plan_text::check(plan, &texts, range.is_none()) else { return Ok(tasks) };
        let why = refusal.describe(plan_path);
        env.run.emit(Event::PlanAnswersRefused { attempt: json!(attempt), reason: json!(why) });
        if attempt == 2 {
            return Err(SelectBlocked {
                kind: refusal.kind(),
                reason: format!(
                    "{why}; asked once more, the plan-index/plan-extract answers still do not hold the plan's text (write the plan in the task format, docs/plan-format.md, to have it parsed without agents)"
                ),
                detail: json!({"refused": why, "tasks": texts}),
            });
        }
        env.run.progress(&format!("plan: answers refused ({why}); asking once more"));
        refused = Some(why);
        attempt += 1;
    }
}

async fn select_attempt(
    env: &Env,
    counter: &mut Counter,
    iter: &str,
    plan_path: &str,
    plan: &str,
    range: Option<(u64, u64)>,
    refused: Option<&str>,
) -> Result<Vec<TaskSpec>, SelectBlocked> {
    let failed = |r: String| SelectBlocked { kind: env.failed_kind(), reason: r, detail: Value::Null };
    env.run.progress("plan: free-form, indexing through plan-index");
    let index = env
        .ask(
            counter,
            "plan-index",
            Access::ReadOnly,
            prompts::after_refusal(prompts::plan_index(plan_path, plan), refused),
            prompts::index_schema(),
            json!({"task_id": "index", "iter_id": iter, "plan_path": plan_path}),
            "index",
        )
        .await
        .map_err(failed)?;
    let total = index["total_tasks"].as_u64().unwrap_or(0);
    let entries: Vec<Value> = index["tasks"].as_array().cloned().unwrap_or_default();
    let mut titles: BTreeMap<String, String> = BTreeMap::new();
    let mut est: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for e in &entries {
        let id = e["id"].as_str().unwrap_or("").trim().to_string();
        if id.is_empty() || titles.contains_key(&id) {
            continue;
        }
        titles.insert(id.clone(), e["title"].as_str().unwrap_or("").to_string());
        est.insert(id.clone(), e["est_bytes"].as_u64());
        order.push(id);
    }
    // Guard (a): the enumerate lists exactly total_tasks distinct ids.
    if order.len() as u64 != total || entries.len() as u64 != total || total == 0 {
        return Err(cardinality(
            format!(
                "plan index listed {} distinct task(s) ({} entries) but counted total_tasks {total}: got {} of {total}",
                order.len(),
                entries.len(),
                order.len()
            ),
            json!({"index": index}),
        ));
    }
    // Guard (b): a range is covered exactly.
    let expected = match range {
        Some(r) => cover_range(r, &order, "the plan index")?,
        None => order.clone(),
    };
    let m = expected.len();
    let estimate: Option<u64> = expected.iter().map(|id| est.get(id).copied().flatten()).sum();
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let mut batched = false;
    if let Some(bytes) = estimate
        && bytes < env.settings.batch_ceiling_bytes
    {
        env.run.progress(&format!("plan: extracting {m} task(s) in one call (estimate {bytes} bytes)"));
        let all = env
            .ask(
                counter,
                "plan-extract",
                Access::ReadOnly,
                prompts::after_refusal(prompts::plan_extract_all(plan_path, plan, &expected), refused),
                prompts::extract_all_schema(),
                json!({"task_id": "all", "task_ids": expected, "iter_id": iter, "plan_path": plan_path}),
                "all",
            )
            .await;
        match all {
            Ok(doc) => match exact_set(&doc, &expected) {
                Ok(t) => {
                    texts = t;
                    batched = true;
                }
                Err(why) => {
                    env.run.emit(Event::PlanBatchDiscarded { reason: json!(why) });
                    env.run.progress(&format!("plan: batched extract discarded ({why}); per-task fan-out"));
                }
            },
            Err(r) => env.run.emit(Event::PlanBatchDiscarded { reason: json!(r) }),
        }
    }
    if !batched {
        let specs = expected
            .iter()
            .map(|id| {
                env.spec(
                    "plan-extract",
                    Access::ReadOnly,
                    prompts::after_refusal(prompts::plan_extract_one(plan_path, plan, id), refused),
                    prompts::extract_one_schema(),
                    json!({"task_id": id, "iter_id": iter, "plan_path": plan_path}),
                    id,
                )
            })
            .collect::<Vec<_>>();
        let Some(rd) = env.roles.get("plan-extract") else {
            return Err(failed("no agent configured for role plan-extract".into()));
        };
        let outcomes = rd.dispatcher.dispatch_waves(specs, env.settings.concurrency).await;
        // A refused dispatch was not made: it is neither counted nor the agent's failure.
        counter.dispatches += outcomes
            .iter()
            .filter(|o| !matches!(o, work_runtime::dispatch::DispatchOutcome::OverBudget { .. }))
            .count() as u64;
        for (id, o) in expected.iter().zip(&outcomes) {
            if matches!(o, work_runtime::dispatch::DispatchOutcome::OverBudget { .. }) {
                env.note_budget_refused(&format!("plan-extract dispatch for task {id}"));
            }
        }
        // Association by the id bound to each request (outcomes come back in request order).
        for (id, o) in expected.iter().zip(outcomes) {
            if let work_runtime::dispatch::DispatchOutcome::Ok { output, usage, .. } = o {
                counter.tokens += usage.total_tokens();
                if let Some(t) = output["text"].as_str()
                    && !t.trim().is_empty()
                {
                    texts.insert(id.clone(), t.to_string());
                }
            }
        }
    }
    // Guard (c): every expected id extracted non-empty.
    let missing: Vec<&String> = expected.iter().filter(|id| !texts.contains_key(*id)).collect();
    if !missing.is_empty() {
        return Err(cardinality(
            format!(
                "plan extract: got {} of {m} task(s) (missing {})",
                m - missing.len(),
                missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
            json!({"expected": expected, "missing": missing}),
        ));
    }
    Ok(expected
        .iter()
        .map(|id| {
            let title = titles.get(id).cloned().unwrap_or_default();
            let text = texts.get(id).cloned().unwrap_or_default();
            TaskSpec { e2e: is_e2e(&title, &text), id: id.clone(), title, text }
        })
        .collect())
}

/// Accepts a batched extract only with exactly the expected id set and no empty text.
pub fn exact_set(doc: &Value, expected: &[String]) -> Result<BTreeMap<String, String>, String> {
    let items = doc["tasks"].as_array().cloned().unwrap_or_default();
    let mut got: BTreeMap<String, String> = BTreeMap::new();
    for it in &items {
        let id = it["id"].as_str().unwrap_or("").trim().to_string();
        let text = it["text"].as_str().unwrap_or("").to_string();
        if text.trim().is_empty() {
            return Err(format!("task `{id}` came back with empty text"));
        }
        if got.insert(id.clone(), text).is_some() {
            return Err(format!("task `{id}` came back twice"));
        }
    }
    let want: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    let have: BTreeSet<&str> = got.keys().map(String::as_str).collect();
    if items.len() != expected.len() || want != have {
        return Err(format!("got {} of {} expected task(s)", want.intersection(&have).count(), expected.len()));
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn batch_needs_the_exact_id_set() {
        let want = ids(&["1", "2", "3"]);
        let prefix = json!({"tasks": [{"id": "1", "text": "a"}]});
        assert_eq!(exact_set(&prefix, &want).expect_err("prefix"), "got 1 of 3 expected task(s)");
        let shuffled = json!({"tasks": [{"id": "3", "text": "c"}, {"id": "1", "text": "a"}, {"id": "2", "text": "b"}]});
        assert_eq!(exact_set(&shuffled, &want).expect("any order")["3"], "c");
        let empty = json!({"tasks": [{"id": "1", "text": "a"}, {"id": "2", "text": " "}, {"id": "3", "text": "c"}]});
        assert!(exact_set(&empty, &want).is_err());
        let dup = json!({"tasks": [{"id": "1", "text": "a"}, {"id": "1", "text": "a"}, {"id": "3", "text": "c"}]});
        assert!(exact_set(&dup, &want).is_err());
    }

    #[test]
    fn parsed_plans_select_in_wave_order_and_ranges_must_be_covered() {
        let plan =
            work_loop::plan::parse_plan("# P\n## Task 1: a\nx\n## Task 2: b\nDepends on: 3\n## Task 3: c (E2E)\nz\n")
                .expect("plan");
        let all = select_parsed(&plan, None).expect("all");
        assert_eq!(all.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), vec!["1", "3", "2"]);
        assert!(all[1].e2e);
        let r = select_parsed(&plan, Some((2, 3))).expect("range");
        assert_eq!(r.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), vec!["3", "2"]);
        let e = select_parsed(&plan, Some((2, 5))).expect_err("uncovered");
        assert!(e.reason.contains("got 2 of 4"), "{}", e.reason);
    }
}
