//! Past runs, read from their event logs (`<state>/runs/<run-id>/events.jsonl`): the summary
//! `runs_list` returns (one object a run, newest first, with `run_id`, `workflow`, `started`,
//! `outcome`, `dispatches`, `tokens`, `cost_usd`) and the detail `run_show` returns. Used
//! when the binary has no `work runs list` / `work show` of its own.

use serde_json::{Value, json};
use std::path::Path;
use work_runtime::events::EventKind;

/// What one run's event log says.
#[derive(Debug, Default)]
struct Tally {
    workflow: String,
    started: String,
    ended: Option<String>,
    outcome: Option<String>,
    detail: Value,
    dispatches: u64,
    tokens: u64,
    cost_usd: f64,
    in_flight: i64,
    failures: Vec<Value>,
    progress: Vec<String>,
    events: u64,
}

fn tally(log: &str) -> Tally {
    let mut t = Tally::default();
    for ev in log.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        t.events += 1;
        let s = |k: &str| ev.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        if t.started.is_empty() {
            t.started = s("ts");
        }
        match EventKind::of(&ev) {
            Some(EventKind::RunStart) => t.workflow = s("workflow"),
            Some(EventKind::RunEnd) => {
                t.ended = Some(s("ts"));
                t.outcome = Some(s("outcome"));
                t.detail = ev.get("detail").cloned().unwrap_or(Value::Null);
            }
            Some(EventKind::DispatchStart) => {
                t.in_flight += 1;
                if ev.get("attempt").and_then(Value::as_u64).unwrap_or(1) == 1 {
                    t.dispatches += 1;
                }
            }
            Some(EventKind::DispatchEnd) => {
                t.in_flight -= 1;
                let u = &ev["usage"];
                t.tokens += u["input_tokens"].as_u64().unwrap_or(0) + u["output_tokens"].as_u64().unwrap_or(0);
                t.cost_usd += u["cost_usd"].as_f64().unwrap_or(0.0);
                if ev.get("outcome").and_then(Value::as_str) != Some("ok") {
                    t.failures.push(json!({"dispatch_id": s("dispatch_id"), "attempt": ev["attempt"],
                                           "outcome": s("outcome"), "reason": ev["reason"]}));
                }
            }
            Some(EventKind::DispatchDropped) => {
                t.failures.push(json!({"dispatch_id": s("dispatch_id"), "outcome": "dropped", "reason": ev["reason"]}))
            }
            Some(EventKind::Progress) => t.progress.push(s("line")),
            _ => {}
        }
    }
    t
}

fn summary(run_id: &str, t: &Tally) -> Value {
    json!({
        "run_id": run_id,
        "workflow": t.workflow,
        "started": t.started,
        "outcome": t.outcome.clone().unwrap_or_else(|| "unfinished".into()),
        "dispatches": t.dispatches,
        "tokens": t.tokens,
        "cost_usd": t.cost_usd,
    })
}

/// Every run under `state_dir`, newest first.
pub fn list(state_dir: &Path) -> Vec<Value> {
    let mut runs: Vec<(String, String, Value)> = std::fs::read_dir(state_dir.join("runs"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let id = e.file_name().to_str()?.to_string();
            let log = std::fs::read_to_string(e.path().join("events.jsonl")).ok()?;
            let t = tally(&log);
            Some((t.started.clone(), id.clone(), summary(&id, &t)))
        })
        .collect();
    runs.sort_by(|a, b| (&b.0, &b.1).cmp(&(&a.0, &a.1)));
    runs.into_iter().map(|(_, _, v)| v).collect()
}

/// A run id as a directory name: no separators, no `..`.
pub fn valid_run_id(id: &str) -> bool {
    !id.is_empty() && !id.starts_with('.') && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// One run in detail, or `None` when there is no such run.
pub fn show(state_dir: &Path, run_id: &str) -> Option<Value> {
    if !valid_run_id(run_id) {
        return None;
    }
    let dir = state_dir.join("runs").join(run_id);
    let log = std::fs::read_to_string(dir.join("events.jsonl")).ok()?;
    let t = tally(&log);
    let mut v = summary(run_id, &t);
    if let Value::Object(o) = &mut v {
        o.insert("ended".into(), json!(t.ended));
        o.insert("detail".into(), t.detail.clone());
        o.insert("failures".into(), json!(t.failures));
        o.insert("last_progress".into(), json!(t.progress.last()));
        o.insert("events".into(), json!(t.events));
        o.insert(
            "paths".into(),
            json!({"events": dir.join("events.jsonl"), "dispatches": dir.join(work_runtime::events::RECORDS_FILE)}),
        );
    }
    Some(v)
}

/// What a running child's log says so far: for progress notifications.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    /// Events read.
    pub events: u64,
    /// The progress lines so far, in order.
    pub lines: Vec<String>,
    /// Dispatches started and not yet ended.
    pub in_flight: i64,
    /// Dispatches started.
    pub dispatches: u64,
    /// Tokens used.
    pub tokens: u64,
    /// US dollars spent.
    pub cost_usd: f64,
}

/// The live figures of the run whose id ends in `-<pid in hex>` (the child's run), if its
/// log exists yet.
pub fn live(state_dir: &Path, pid: i32) -> Option<Live> {
    let suffix = format!("-{pid:x}");
    let dir = std::fs::read_dir(state_dir.join("runs"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(&suffix)))
        .max_by_key(|e| e.file_name())?;
    let t = tally(&std::fs::read_to_string(dir.path().join("events.jsonl")).ok()?);
    Some(Live {
        events: t.events,
        lines: t.progress,
        in_flight: t.in_flight.max(0),
        dispatches: t.dispatches,
        tokens: t.tokens,
        cost_usd: t.cost_usd,
    })
}

impl Live {
    /// One progress message: a line of the workflow's own (round n, iteration n, task n),
    /// then the dispatch figures.
    pub fn message(&self, line: Option<&str>) -> String {
        let figures = format!(
            "{} dispatch(es) in flight · {} started · {} tokens · ${:.4}",
            self.in_flight, self.dispatches, self.tokens, self.cost_usd
        );
        match line {
            Some(l) => format!("{l} · {figures}"),
            None => figures,
        }
    }

    /// The figures alone changed (same lines, other counts).
    pub fn figures_differ(&self, other: &Live) -> bool {
        (self.in_flight, self.dispatches, self.tokens) != (other.in_flight, other.dispatches, other.tokens)
            || self.cost_usd != other.cost_usd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"ts":"2026-01-01T00:00:00Z","run_id":"r1","seq":1,"kind":"run.start","workflow":"exhaust"}
{"ts":"2026-01-01T00:00:01Z","run_id":"r1","seq":2,"kind":"dispatch.start","dispatch_id":"d1","attempt":1}
{"ts":"2026-01-01T00:00:01Z","run_id":"r1","seq":3,"kind":"dispatch.start","dispatch_id":"d2","attempt":1}
{"ts":"2026-01-01T00:00:02Z","run_id":"r1","seq":4,"kind":"dispatch.end","dispatch_id":"d1","attempt":1,"outcome":"ok","usage":{"input_tokens":10,"output_tokens":5,"cost_usd":0.5}}
{"ts":"2026-01-01T00:00:03Z","run_id":"r1","seq":5,"kind":"progress","line":"Round 1: 1 new"}
"#;

    #[test]
    fn a_log_tallies_to_the_summary_and_the_live_figures() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("runs").join("20260101T000000000Z-exhaust-1f");
        std::fs::create_dir_all(&run).expect("mkdir");
        std::fs::write(run.join("events.jsonl"), LOG).expect("write");
        let all = list(dir.path());
        assert_eq!(all.len(), 1);
        assert_eq!(all[0]["workflow"], "exhaust");
        assert_eq!(all[0]["outcome"], "unfinished");
        assert_eq!(all[0]["dispatches"], 2);
        assert_eq!(all[0]["tokens"], 15);
        assert_eq!(all[0]["cost_usd"], 0.5);
        let l = live(dir.path(), 0x1f).expect("live");
        assert_eq!(l.in_flight, 1);
        assert_eq!(
            l.message(l.lines.last().map(String::as_str)),
            "Round 1: 1 new · 1 dispatch(es) in flight · 2 started · 15 tokens · $0.5000"
        );
        assert!(show(dir.path(), "../x").is_none());
        assert_eq!(show(dir.path(), "20260101T000000000Z-exhaust-1f").expect("shown")["events"], 5);
    }
}
