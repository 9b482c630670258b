//! `stats.json` and `BLOCKED.md`, rendered from templates in code (seed: the finalize agent
//! is gone; the templates are the single source). Two runtime slots are filled at the end:
//! `{{DATE}}` (the clock's `%F`) and `{{FILES_TOUCHED}}` (`git status --porcelain`: the count
//! in stats.json, the listing in BLOCKED.md). Written atomically under
//! `<state>/iterations/<iter-id>/` on BLOCKED/PARTIAL/NEEDS_CONTEXT runs that left work in
//! the tree; null on DONE and clean no-ops.

use crate::report::{EndReport, Status};
use serde_json::{Value, json};
use std::path::Path;
use work_runtime::run::RunContext;

/// The stats.json template.
pub const STATS_TEMPLATE: &str = r#"{
  "iter_id": {{ITER_ID}},
  "mode": {{MODE}},
  "date": "{{DATE}}",
  "status": {{STATUS}},
  "kind": {{KIND}},
  "reason": {{REASON}},
  "files_touched": {{FILES_TOUCHED}},
  "suite_green": {{SUITE_GREEN}},
  "tasks": {{TASKS}},
  "stats": {{STATS}}
}
"#;

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

fn js(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// Renders both artifacts for a report.
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
    let stats = STATS_TEMPLATE
        .replace("{{ITER_ID}}", &js(&iter))
        .replace("{{MODE}}", &js(&report.mode))
        .replace("{{STATUS}}", &js(&report.status))
        .replace("{{KIND}}", &js(&report.kind))
        .replace("{{REASON}}", &js(&report.reason))
        .replace("{{SUITE_GREEN}}", &js(&report.suite_green))
        .replace("{{TASKS}}", &js(&tasks))
        .replace("{{STATS}}", &js(&report.stats))
        .replace("{{DATE}}", date)
        .replace("{{FILES_TOUCHED}}", &report.files_touched.unwrap_or(0).to_string());
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
    let md = BLOCKED_TEMPLATE
        .replace("{{ITER_ID}}", &iter)
        .replace("{{MODE}}", report.mode.as_str())
        .replace("{{STATUS}}", report.status.as_str())
        .replace("{{KIND}}", report.kind.as_deref().unwrap_or("-"))
        .replace("{{ROUTE}}", report.route.as_deref().unwrap_or("-"))
        .replace("{{REASON}}", &report.reason)
        .replace("{{TASKS}}", &or_none(task_lines))
        .replace("{{CONCERNS}}", &or_none(concerns))
        .replace("{{DETAIL}}", &detail)
        .replace("{{DATE}}", date)
        .replace("{{FILES_TOUCHED}}", &or_none(report.files.clone()));
    (stats, md)
}

/// Renders and writes the artifacts when the run calls for them (not DONE, work left in the
/// tree, an iteration id to file them under), filling `report.artifacts`.
pub fn finalize(run: &RunContext, report: &mut EndReport) {
    let wanted = report.status != Status::Done && report.files_touched.unwrap_or(0) > 0;
    let Some(iter) = report.iter_id.clone().filter(|_| wanted) else {
        return;
    };
    let date = run.clock.now().format("%F").to_string();
    let (stats, md) = render(report, &date);
    let dir = run.state_dir.join("iterations").join(&iter);
    let mut ok = true;
    for (name, text) in [("stats.json", &stats), ("BLOCKED.md", &md)] {
        if let Err(e) = run.write_text(&dir.join(name), text) {
            ok = false;
            report.concerns.push(format!("could not write {}: {e}", dir.join(name).display()));
        }
    }
    run.emit("artifacts.written", json!({"dir": dir.display().to_string(), "ok": ok}));
    report.artifacts.stats_json = Some(stats);
    report.artifacts.blocked_md = Some(md);
    report.artifacts.dir = Some(rel(&run.root, &dir));
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
        assert!(md.contains("- Date: 2026-01-01"));
        assert!(md.contains("?? new.txt\n M a.txt"));
        assert!(!md.contains("{{") && !stats.contains("{{"));
    }
}
