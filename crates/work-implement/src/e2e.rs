//! The E2E tester of a task marked E2E: read-only in the tree, its fixtures in a temporary
//! directory of the engine's outside it, shown **all** of the run's change. A change that fits
//! one brief is shown whole, in one dispatch; a larger one in parts, one dispatch per part
//! (`context.review_part` = `{index, count}`, the brief saying "PART i OF n" and listing every
//! path of the change), split like the reviewers' ([`crate::parts::briefs`]) — never cut; a
//! change that cannot be shown even in parts is BLOCKED `too-large-to-review` before any tester
//! is asked. After every dispatch the tree is compared with the one the tester was shown: a
//! tester that changed it is BLOCKED `tester-wrote-tree`; FAILED is `e2e-failed`, BLOCKED
//! `e2e-blocked`, no answer `dispatch-failed`. Every part must answer DONE.

use crate::answers;
use crate::env::{Counter, Env};
use crate::parts::{self, Brief, Reader};
use crate::prompts;
use crate::report::{EndReport, Status};
use crate::task_loop::TaskSpec;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use work_runtime::dispatch::Access;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

/// Removes the tester's fixture directory however the tester ends.
struct Fixtures(PathBuf);

impl Drop for Fixtures {
    fn drop(&mut self) {
        let _ = work_runtime::fsx::plain::remove_dir_all(&self.0);
    }
}

/// Runs the E2E tester of task `t` (report index `i`) over the run's whole change. A tester
/// that changed the tree, answered FAILED or BLOCKED, or gave no answer — in any part — ends
/// the run BLOCKED (false is returned, the report says why); so does a change too large to
/// show even in parts.
pub async fn run(env: &Env, iter: &str, t: &TaskSpec, i: usize, report: &mut EndReport) -> bool {
    let safe: String = t.id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let fixtures = Fixtures(std::env::temp_dir().join(format!("work-e2e-{}-{safe}", env.run.run_id)));
    if let Err(e) = work_runtime::fsx::ensure_dir(&fixtures.0) {
        return blocked(report, t, "git", format!("create the tester's fixture directory: {e}"), Value::Null);
    }
    let d = match env.tree.task_diff(None) {
        Ok(d) => d,
        Err(e) => return blocked(report, t, "git", format!("read the change for the E2E tester: {e}"), Value::Null),
    };
    let briefs = match parts::briefs(&d, prompts::DIFF_CAP, Reader::Tester) {
        Ok(b) => b,
        Err(why) => {
            let reason = format!(
                "task {}: the change is too large for the E2E tester to read ({} bytes; a brief holds at most {}, in at most {} parts): {why}: {}; split the work or leave generated and bulk files out of the tree",
                t.id,
                d.text.len(),
                prompts::DIFF_CAP,
                parts::MAX_PARTS,
                d.paths.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
            );
            return blocked(report, t, "too-large-to-review", reason, json!(d.paths));
        }
    };
    let mut docs = Vec::new();
    for b in &briefs {
        match one(env, iter, (t, i), b, &fixtures.0, report).await {
            Some(doc) => docs.push(doc),
            None => return false,
        }
    }
    let doc = merge(&docs);
    if doc["fixtures"].as_u64() == Some(0) {
        report.concerns.push(format!("task {}: e2e status DONE with 0 fixture(s)", t.id));
    }
    report.tasks[i].e2e_result = Some(doc);
    true
}

/// One tester dispatch over brief `b`: its DONE answer, or `None` with the report BLOCKED.
async fn one(
    env: &Env,
    iter: &str,
    (t, i): (&TaskSpec, usize),
    b: &Brief,
    fixtures: &Path,
    report: &mut EndReport,
) -> Option<Value> {
    let keep_out = [env.run.run_dir(), fixtures.to_path_buf()];
    let mut context =
        json!({"task_id": t.id, "iter_id": iter, "phase": "e2e", "fixtures_dir": fixtures.display().to_string()});
    if let (Some((index, count)), Value::Object(o)) = (b.part, &mut context) {
        o.insert("review_part".into(), json!({"index": index, "count": count}));
        env.run.progress(&format!("task {}: the E2E tester reads part {index} of {count} of the change", t.id));
        env.run.emit(Event::E2ePart { task_id: json!(t.id), index: json!(index), count: json!(count) });
    }
    let guard = crate::read_only::Guard::take(env, &keep_out);
    let mut c = Counter::default();
    let prompt = prompts::tester(&t.id, &t.text, &b.diff, &fixtures.display().to_string());
    let r = env.ask(&mut c, "tester", Access::ReadOnly, prompt, prompts::tester_schema(), context, &t.id).await;
    let changed = guard.writes(env);
    let o = &mut report.tasks[i];
    o.spent.dispatches += c.dispatches;
    o.spent.tokens += c.tokens;
    if let Some(m) = env.head_moved() {
        report.kind = Some(StopReason::HeadMoved.into());
        report.reason = format!("during the E2E tester of task {}, {}", t.id, m.describe());
        report.blocked_detail = Some(json!({"task_id": t.id, "kind": StopReason::HeadMoved.as_str(), "head": m}));
        return None;
    }
    if !changed.is_empty() {
        let what = work_git::inventory::describe_changes(&changed);
        let reason = format!(
            "task {}: the E2E tester changed the tree ({what}); the tester is read-only: its fixtures belong in the directory the engine gives it, and the change it made is not evidence — undo it and run again",
            t.id
        );
        blocked(report, t, "tester-wrote-tree", reason, json!(changed));
        return None;
    }
    let doc = match r.map(|d| answers::tester(&d)) {
        Ok(doc) => doc,
        Err(reason) => {
            let reason = format!("task {}: e2e tester gave no answer: {reason}", t.id);
            blocked(report, t, "dispatch-failed", reason, Value::Null);
            return None;
        }
    };
    let status = doc["status"].as_str().unwrap_or("?").to_string();
    if status == "DONE" {
        return Some(doc);
    }
    report.tasks[i].e2e_result = Some(doc.clone());
    let kind = if status == "FAILED" { "e2e-failed" } else { "e2e-blocked" };
    let part = b.part.map(|(index, count)| format!(" (part {index} of {count} of the change)")).unwrap_or_default();
    let reason =
        format!("task {}: the E2E tester answered {status}{part}: {}", t.id, doc["summary"].as_str().unwrap_or(""));
    blocked(report, t, kind, reason, doc);
    None
}

/// The DONE answers of every part as one: fixtures summed, summaries tagged `part i/n`.
fn merge(docs: &[Value]) -> Value {
    if let [one] = docs {
        return one.clone();
    }
    let n = docs.len();
    let fixtures: u64 = docs.iter().filter_map(|d| d["fixtures"].as_u64()).sum();
    let summary: Vec<String> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d["summary"].as_str().map(|s| format!("part {}/{n}: {s}", i + 1)))
        .collect();
    json!({"status": "DONE", "fixtures": fixtures, "summary": summary.join("; ")})
}

fn blocked(report: &mut EndReport, t: &TaskSpec, kind: &str, reason: String, findings: Value) -> bool {
    report.status = Status::Blocked;
    report.kind = Some(kind.into());
    report.reason = reason;
    report.blocked_detail = Some(json!({"task_id": t.id, "kind": kind, "findings": findings}));
    false
}
