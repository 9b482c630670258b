//! `stats.json` and `BLOCKED.md`, rendered in code (the finalize agent is gone; the
//! templates are the single source). Two runtime slots are filled at the end: `{{DATE}}` (the
//! clock's `%F`) and `{{FILES_TOUCHED}}` (what differs from HEAD by content, labelled like
//! `git status --porcelain`: the count in stats.json, the listing in BLOCKED.md).
//!
//! Agent text (reasons, findings, concerns) can contain anything, `{{…}}` included, so:
//! `stats.json` is built with serde_json (never string templating), and `BLOCKED.md`'s slots
//! are filled in ONE pass over the template ([`fill`]): text put into a slot is never scanned
//! again.
//!
//! Written atomically under `<state>/iterations/<iter-id>/` for every BLOCKED, PARTIAL or
//! NEEDS_CONTEXT run (spec-ambiguous, implementer-blocked, "got N of M", red-test-not-red, …);
//! null on DONE and on the clean no-ops (kind `no-op`, `no-op-edit`: nothing to clean up) and
//! on the infra early exits (bad carrier, missing field, bad range, dirty tree), which end
//! before any dispatch with only `{status, iter_id, reason, kind}`.

use crate::carrier::Mode;
use crate::report::{EndReport, Stats, Status};
use crate::state_write::StateWriteError;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use work_runtime::events::Event;
use work_runtime::run::RunContext;

/// Kinds that end without artifacts: the clean no-ops and the infra early exits.
pub const NO_ARTIFACT_KINDS: [&str; 6] =
    ["no-op", "no-op-edit", "bad-carrier", "missing-field", "bad-range", "dirty-tree"];

/// `stats.json`, in this key order.
#[derive(Debug, Serialize)]
struct StatsFile<'a> {
    iter_id: &'a str,
    mode: Mode,
    date: &'a str,
    status: Status,
    kind: Option<&'a str>,
    reason: &'a str,
    files_touched: usize,
    suite_green: Option<bool>,
    tasks: Vec<Value>,
    stats: &'a Stats,
}

/// The BLOCKED.md template.
pub const BLOCKED_TEMPLATE: &str = "# BLOCKED: iteration {{ITER_ID}}

- Date: {{DATE}}
- Mode: {{MODE}}
- Status: {{STATUS}}
- Kind: {{KIND}}
- Route: {{ROUTE}}

## Reason

{{REASON}}

## Tasks

{{TASKS}}

## Concerns

{{CONCERNS}}

## Files touched

```
{{FILES_TOUCHED}}
```

## Detail

```json
{{DETAIL}}
```
";

/// Fills `{{NAME}}` slots of `template` from `slots` in one pass: a slot's text is never
/// scanned again, and an unknown `{{…}}` is kept as it is.
pub fn fill(template: &str, slots: &BTreeMap<&str, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) => match slots.get(&after[..close]) {
                Some(v) => {
                    out.push_str(v);
                    rest = &after[close + 2..];
                }
                None => {
                    out.push_str("{{");
                    rest = after;
                }
            },
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Renders both artifacts for a report: (`stats.json`, `BLOCKED.md`).
pub fn render(report: &EndReport, date: &str) -> (String, String) {
    let tasks: Vec<Value> = report
        .tasks
        .iter()
        .map(|t| {
            json!({"id": t.id, "status": t.status, "kind": t.kind, "reason": t.reason,
                        "dispatches": t.spent.dispatches, "tokens": t.spent.tokens})
        })
        .collect();
    let iter = report.iter_id.clone().unwrap_or_default();
    let file = StatsFile {
        iter_id: &iter,
        mode: report.mode,
        date,
        status: report.status,
        kind: report.kind.as_deref(),
        reason: &report.reason,
        files_touched: report.files_touched.unwrap_or(0),
        suite_green: report.suite_green,
        tasks,
        stats: &report.stats,
    };
    let stats = serde_json::to_string_pretty(&file).map(|s| s + "\n").unwrap_or_else(|_| "null\n".into());
    let task_lines: Vec<String> = report
        .tasks
        .iter()
        .map(|t| {
            let status = serde_json::to_value(t.status).ok().and_then(|v| v.as_str().map(str::to_string));
            let mut line = format!("- Task {}: {} — {}", t.id, t.title, status.unwrap_or_default());
            if let Some(r) = &t.reason {
                line.push_str(&format!(" ({r})"));
            }
            line
        })
        .collect();
    let or_none = |v: Vec<String>| if v.is_empty() { "(none)".to_string() } else { v.join("\n") };
    let concerns: Vec<String> = report.concerns.iter().map(|c| format!("- {c}")).collect();
    let detail = serde_json::to_string_pretty(&report.blocked_detail).unwrap_or_else(|_| "null".into());
    let slots: BTreeMap<&str, String> = BTreeMap::from([
        ("ITER_ID", iter.clone()),
        ("MODE", report.mode.as_str().to_string()),
        ("STATUS", report.status.as_str().to_string()),
        ("KIND", report.kind.clone().unwrap_or_else(|| "-".into())),
        ("ROUTE", report.route.clone().unwrap_or_else(|| "-".into())),
        ("REASON", report.reason.clone()),
        ("TASKS", or_none(task_lines)),
        ("CONCERNS", or_none(concerns)),
        ("DETAIL", detail),
        ("DATE", date.to_string()),
        ("FILES_TOUCHED", or_none(report.files.clone())),
    ]);
    (stats, fill(BLOCKED_TEMPLATE, &slots))
}

/// Whether a report gets artifacts: not DONE, not a clean no-op or infra early exit.
pub fn wanted(report: &EndReport) -> bool {
    report.status != Status::Done && !report.kind.as_deref().is_some_and(|k| NO_ARTIFACT_KINDS.contains(&k))
}

/// Renders and writes the artifacts when the run calls for them ([`wanted`], and an
/// iteration id to file them under), filling `report.artifacts`.
/// A write that fails stops the run ([`StateWriteError`]).
pub fn finalize(run: &RunContext, report: &mut EndReport) -> Result<(), StateWriteError> {
    let wanted = wanted(report);
    let Some(iter) = report.iter_id.clone().filter(|_| wanted) else {
        return Ok(());
    };
    let date = run.clock.now().format("%F").to_string();
    let (stats, md) = render(report, &date);
    let dir = run.state_dir.join("iterations").join(&iter);
    for (name, text) in [("stats.json", &stats), ("BLOCKED.md", &md)] {
        let path = dir.join(name);
        run.write_text(&path, text).map_err(StateWriteError::at(&path))?;
    }
    run.emit(Event::ArtifactsWritten { dir: dir.display().to_string(), ok: true });
    report.artifacts.stats_json = Some(stats);
    report.artifacts.blocked_md = Some(md);
    report.artifacts.dir = Some(rel(&run.root, &dir));
    Ok(())
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carrier::Mode;

    #[test]
    fn templates_fill_both_runtime_slots_and_stats_is_json() {
        let mut r = EndReport::new(Status::Blocked, Mode::Standard, Some("it-1".into()), "suite red".into());
        r.files_touched = Some(2);
        r.files = vec!["?? new.txt".into(), " M a.txt".into()];
        let (stats, md) = render(&r, "2026-01-01");
        let v: Value = serde_json::from_str(&stats).expect("stats.json is JSON");
        assert_eq!(v["date"], "2026-01-01");
        assert_eq!(v["files_touched"], 2);
        assert_eq!(v["status"], "BLOCKED");
        let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
        assert_eq!(keys[..4], ["iter_id", "mode", "date", "status"]);
        assert!(md.contains("- Date: 2026-01-01"));
        assert!(md.contains("?? new.txt\n M a.txt"));
        assert!(!md.contains("{{") && !stats.contains("{{"));
    }

    #[test]
    fn agent_text_with_slot_names_is_never_filled() {
        let reason = "cannot {{STATS}} finish {{DATE}} {{FILES_TOUCHED}} {{TASKS}} {{ \"x\": 1 }}";
        let mut r = EndReport::new(Status::Blocked, Mode::Standard, Some("it-1".into()), reason.into());
        r.concerns = vec!["{{REASON}} {{DETAIL}}".into()];
        r.files_touched = Some(1);
        r.files = vec!["?? {{DATE}}.txt".into()];
        let (stats, md) = render(&r, "2026-01-01");
        let v: Value = serde_json::from_str(&stats).expect("stats.json stays JSON");
        assert_eq!(v["reason"], reason);
        assert!(md.contains(reason), "{md}");
        assert!(md.contains("- {{REASON}} {{DETAIL}}"), "{md}");
        assert!(md.contains("?? {{DATE}}.txt"), "{md}");
        assert_eq!(fill("a {{X}} {{Y}} {{", &BTreeMap::from([("X", "{{Y}}".to_string())])), "a {{Y}} {{Y}} {{");
    }
}
