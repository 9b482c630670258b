//! One run's summary, folded from its event log.

use crate::events::{EventsRead, str_field};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use work_runtime::events::EventKind;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    /// `run.end` was logged; the outcome is the workflow's word for how it ended.
    Ended,
    /// No `run.end` yet and the process named in the run id is alive.
    Running,
    /// No `run.end` and that process is gone: killed, crashed or cut off.
    Interrupted,
    /// The log was changed after its run ended (it no longer matches the seal `work` recorded
    /// when the run ended): nothing in it is believed; the outcome reads `altered`.
    Altered,
}

/// What a run worked on: an exhaust task, an until session, an ultra goal, implement tasks,
/// an implement iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subject {
    /// `task`, `session`, `goal`, `tasks`.
    pub kind: String,
    /// The id (for `tasks`, the ids joined by `,`).
    pub id: String,
}

/// One dispatch attempt.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// The dispatch id (`d0001-finder-error-paths`).
    pub dispatch_id: String,
    /// 1 or 2.
    pub attempt: u64,
    /// The role.
    pub role: String,
    /// The model pin.
    pub model: String,
    /// When it started.
    pub started: Option<String>,
    /// When it ended (none: still in flight, or cut off).
    pub ended: Option<String>,
    /// Milliseconds from start to end.
    pub latency_ms: Option<i64>,
    /// `ok`, `malformed`, `failed`, or `unfinished`.
    pub outcome: String,
    /// Why it was not ok.
    pub reason: Option<String>,
    /// Input plus output tokens.
    pub tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// False when its cost is unknown (the backend priced nothing, or reported no usage).
    pub priced: bool,
    /// Where the dispatch record is: `dispatches.jsonl:<line>`, relative to the run directory.
    pub record: Option<String>,
}

/// What a role spent in this run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RoleSpend {
    /// Dispatch attempts.
    pub dispatches: u64,
    /// Tokens.
    pub tokens: u64,
    /// US dollars.
    pub cost_usd: f64,
    /// Attempts whose cost is unknown (`cost_usd` leaves them out).
    pub unpriced: u64,
}

/// A failed dispatch: failed, malformed (one attempt), dropped, over budget or cut off.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The dispatch id.
    pub dispatch_id: String,
    /// The attempt (0 when the failure is of the whole dispatch: dropped, over budget).
    pub attempt: u64,
    /// The role, when known.
    pub role: String,
    /// `failed`, `malformed`, `dropped`, `over-budget`, `unfinished`.
    pub outcome: String,
    /// The reason.
    pub reason: String,
    /// Where the dispatch record is: `dispatches.jsonl:<line>`, relative to the run directory.
    pub record: Option<String>,
}

/// Everything `runs list` and `show` say about one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// The run id.
    pub run_id: String,
    /// The workflow (`exhaust`, `until`, `implement`, `edit`, `ultra`, `loop`, …).
    pub workflow: String,
    /// What it worked on.
    pub subject: Option<Subject>,
    /// When it started (RFC 3339).
    pub started: Option<String>,
    /// The last event's time.
    pub last_event: Option<String>,
    /// Milliseconds from start to the last event.
    pub duration_ms: Option<i64>,
    /// The outcome: the workflow's word from `run.end`, else `running` or `interrupted`.
    pub outcome: String,
    /// Where the run stands.
    pub state: RunState,
    /// `run.end`'s detail (reason, stop detail).
    pub end_detail: Value,
    /// Dispatch attempts started in this run.
    pub dispatches: u64,
    /// Tokens of this run's attempts.
    pub tokens: u64,
    /// Cost of this run's attempts in US dollars.
    pub cost_usd: f64,
    /// Attempts whose cost is unknown (`cost_usd` leaves them out).
    pub unpriced: u64,
    /// Per role.
    pub spent_by_role: BTreeMap<String, RoleSpend>,
    /// Every attempt, in start order.
    pub attempts: Vec<Attempt>,
    /// Failed dispatches, in order.
    pub failures: Vec<Failure>,
    /// The run directory.
    pub run_dir: PathBuf,
    /// The event log.
    pub events_path: PathBuf,
    /// Lines of the log that did not parse (a torn last line).
    pub skipped_lines: usize,
    /// The log was longer than the read cap.
    pub truncated: bool,
}

/// Parses an RFC 3339 instant.
pub fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

/// Milliseconds from `a` to `b`.
pub fn ms_between(a: &str, b: &str) -> Option<i64> {
    Some((parse_ts(b)? - parse_ts(a)?).num_milliseconds())
}

/// The pid a run id names (`<ts>-<workflow>-<hex pid>`).
pub fn pid_of_run_id(run_id: &str) -> Option<i32> {
    let hex = run_id.rsplit('-').next()?;
    i32::from_str_radix(hex, 16).ok()
}

fn usage_of(e: &Value) -> (u64, f64) {
    let u = &e["usage"];
    let tokens = u["input_tokens"].as_u64().unwrap_or(0) + u["output_tokens"].as_u64().unwrap_or(0);
    (tokens, u["cost_usd"].as_f64().unwrap_or(0.0))
}

/// Folds an event log into a summary. `alive(pid)` tells a running run from an interrupted one.
pub fn summarize(run_id: &str, run_dir: PathBuf, read: &EventsRead, alive: &dyn Fn(i32) -> bool) -> RunSummary {
    let mut s = RunSummary {
        run_id: run_id.to_string(),
        workflow: run_id.split('-').nth(1).unwrap_or("").to_string(),
        subject: None,
        started: None,
        last_event: None,
        duration_ms: None,
        outcome: String::new(),
        state: RunState::Interrupted,
        end_detail: Value::Null,
        dispatches: 0,
        tokens: 0,
        cost_usd: 0.0,
        unpriced: 0,
        spent_by_role: BTreeMap::new(),
        attempts: Vec::new(),
        failures: Vec::new(),
        events_path: run_dir.join("events.jsonl"),
        run_dir,
        skipped_lines: read.skipped_lines,
        truncated: read.truncated,
    };
    let mut ended = false;
    for e in &read.events {
        if let Some(ts) = str_field(e, "ts") {
            if s.started.is_none() {
                s.started = Some(ts.to_string());
            }
            s.last_event = Some(ts.to_string());
        }
        match EventKind::of(e) {
            Some(EventKind::RunStart) => {
                if let Some(w) = str_field(e, "workflow") {
                    s.workflow = w.to_string();
                }
                s.started = str_field(e, "ts").map(str::to_string).or(s.started.take());
            }
            Some(EventKind::RunEnd) => {
                ended = true;
                s.outcome = str_field(e, "outcome").unwrap_or("ended").to_string();
                s.end_detail = e.get("detail").cloned().unwrap_or(Value::Null);
            }
            Some(EventKind::DispatchStart) => on_start(&mut s, e),
            Some(EventKind::DispatchEnd) => on_end(&mut s, e),
            Some(EventKind::DispatchDropped) | Some(EventKind::DispatchOverBudget) => on_whole_failure(&mut s, e),
            _ => {}
        }
        note_subject(&mut s, e);
    }
    for a in s.attempts.iter().filter(|a| a.outcome == "unfinished") {
        s.failures.push(Failure {
            dispatch_id: a.dispatch_id.clone(),
            attempt: a.attempt,
            role: a.role.clone(),
            outcome: "unfinished".into(),
            reason: "no dispatch.end in the log (still in flight, or the run was cut off)".into(),
            record: None,
        });
    }
    if let (Some(a), Some(b)) = (&s.started, &s.last_event) {
        s.duration_ms = ms_between(a, b);
    }
    if !ended {
        let running = pid_of_run_id(run_id).is_some_and(alive);
        s.state = if running { RunState::Running } else { RunState::Interrupted };
        s.outcome = if running { "running" } else { "interrupted" }.into();
    } else {
        s.state = RunState::Ended;
    }
    if let Some(why) = &read.altered {
        s.state = RunState::Altered;
        s.outcome = "altered".into();
        s.end_detail = serde_json::json!({ "reason": why });
    }
    s
}

fn on_start(s: &mut RunSummary, e: &Value) {
    let role = str_field(e, "role").unwrap_or("").to_string();
    s.dispatches += 1;
    s.spent_by_role.entry(role.clone()).or_default().dispatches += 1;
    s.attempts.push(Attempt {
        dispatch_id: str_field(e, "dispatch_id").unwrap_or("").to_string(),
        attempt: e["attempt"].as_u64().unwrap_or(1),
        role,
        model: str_field(e, "model").unwrap_or("").to_string(),
        started: str_field(e, "ts").map(str::to_string),
        ended: None,
        latency_ms: None,
        outcome: "unfinished".into(),
        reason: None,
        tokens: 0,
        cost_usd: 0.0,
        priced: true,
        record: None,
    });
}

fn on_end(s: &mut RunSummary, e: &Value) {
    let id = str_field(e, "dispatch_id").unwrap_or("");
    let attempt = e["attempt"].as_u64().unwrap_or(1);
    let (tokens, cost) = usage_of(e);
    s.tokens += tokens;
    s.cost_usd += cost;
    let Some(a) = s.attempts.iter_mut().rev().find(|a| a.dispatch_id == id && a.attempt == attempt) else {
        return;
    };
    a.ended = str_field(e, "ts").map(str::to_string);
    a.latency_ms = match (&a.started, &a.ended) {
        (Some(x), Some(y)) => ms_between(x, y),
        _ => None,
    };
    a.outcome = str_field(e, "outcome").unwrap_or("ok").to_string();
    a.reason = str_field(e, "reason").map(str::to_string);
    a.tokens = tokens;
    a.cost_usd = cost;
    // A log written before `priced` was logged reads as priced.
    a.priced = e["priced"].as_bool().unwrap_or(true);
    a.record = record_of(e);
    let unpriced = u64::from(!a.priced);
    s.unpriced += unpriced;
    let r = s.spent_by_role.entry(a.role.clone()).or_default();
    r.tokens += tokens;
    r.cost_usd += cost;
    r.unpriced += unpriced;
    if a.outcome != "ok" {
        s.failures.push(Failure {
            dispatch_id: a.dispatch_id.clone(),
            attempt,
            role: a.role.clone(),
            outcome: a.outcome.clone(),
            reason: a.reason.clone().unwrap_or_default(),
            record: a.record.clone(),
        });
    }
}

fn on_whole_failure(s: &mut RunSummary, e: &Value) {
    let id = str_field(e, "dispatch_id").unwrap_or("").to_string();
    let role = s.attempts.iter().rev().find(|a| a.dispatch_id == id).map(|a| a.role.clone()).unwrap_or_default();
    let dropped = EventKind::of(e) == Some(EventKind::DispatchDropped);
    s.failures.push(Failure {
        dispatch_id: id,
        attempt: 0,
        role,
        outcome: if dropped { "dropped" } else { "over-budget" }.into(),
        reason: if dropped {
            str_field(e, "reason").unwrap_or("malformed twice").to_string()
        } else {
            "the budget refused the dispatch".into()
        },
        record: None,
    });
}

/// Where a `dispatch.end` says its record is: `dispatches.jsonl:<line>` (a log written before
/// the records were one file names the attempt's own file).
fn record_of(e: &Value) -> Option<String> {
    let file = str_field(e, "record")?;
    Some(match e.get("record_line").and_then(Value::as_u64) {
        Some(line) => format!("{file}:{line}"),
        None => file.to_string(),
    })
}

fn file_stem(path: &str) -> Option<String> {
    std::path::Path::new(path).file_stem().map(|s| s.to_string_lossy().into_owned())
}

fn note_subject(s: &mut RunSummary, e: &Value) {
    let subject = match EventKind::of(e) {
        Some(EventKind::ExhaustStart) => str_field(e, "journal")
            .and_then(file_stem)
            .map(|stem| stem.strip_prefix("work-exhaust-").unwrap_or(&stem).to_string())
            .map(|id| ("task", id)),
        Some(EventKind::UntilIterationStart) => str_field(e, "session").map(|id| ("session", id.to_string())),
        Some(EventKind::UltraObserve) => str_field(e, "goal_id").map(|id| ("goal", id.to_string())),
        Some(EventKind::PlanSelected) => e["tasks"]
            .as_array()
            .filter(|t| !t.is_empty())
            .map(|t| ("tasks", t.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","))),
        Some(EventKind::RunEnd) => {
            let d = &e["detail"];
            str_field(d, "session")
                .map(|id| ("session", id.to_string()))
                .or_else(|| str_field(d, "goal_id").map(|id| ("goal", id.to_string())))
        }
        _ => None,
    };
    if let Some((k, id)) = subject
        && s.subject.is_none()
    {
        s.subject = Some(Subject { kind: k.into(), id });
    }
}

impl RunSummary {
    /// Whether `needle` names this run's subject (an exhaust task, session, goal or one of
    /// its implement tasks).
    pub fn matches_subject(&self, needle: &str) -> bool {
        self.subject.as_ref().is_some_and(|s| s.id == needle || s.id.split(',').any(|t| t == needle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::parse_lines;

    const LOG: &str = r#"{"ts":"2026-01-01T00:00:00.000Z","run_id":"r","seq":1,"kind":"run.start","workflow":"exhaust"}
{"ts":"2026-01-01T00:00:00.001Z","seq":2,"kind":"exhaust.start","journal":"/x/.work/quality-journals/work-exhaust-jobs.json"}
{"ts":"2026-01-01T00:00:01.000Z","seq":3,"kind":"dispatch.start","dispatch_id":"d0001-finder-a","attempt":1,"role":"finder","model":"m"}
{"ts":"2026-01-01T00:00:03.000Z","seq":4,"kind":"dispatch.end","dispatch_id":"d0001-finder-a","attempt":1,"outcome":"failed","reason":"exit 3","usage":{"input_tokens":10,"output_tokens":5,"cost_usd":0.25},"record":"dispatches.jsonl","record_line":1}
{"ts":"2026-01-01T00:00:04.000Z","seq":5,"kind":"dispatch.start","dispatch_id":"d0002-finder-b","attempt":1,"role":"finder","model":"m"}
{"ts":"2026-01-01T00:00:0"#;

    #[test]
    fn a_log_cut_off_mid_dispatch_is_interrupted_with_an_unfinished_failure() {
        let read = parse_lines(LOG, false);
        let s = summarize("20260101T000000000Z-exhaust-7fffffff", PathBuf::from("/r"), &read, &|_| false);
        assert_eq!(s.state, RunState::Interrupted);
        assert_eq!(s.outcome, "interrupted");
        assert_eq!(s.skipped_lines, 1);
        assert_eq!(s.dispatches, 2);
        assert_eq!(s.tokens, 15);
        assert_eq!(s.subject, Some(Subject { kind: "task".into(), id: "jobs".into() }));
        assert_eq!(s.attempts[0].latency_ms, Some(2000));
        let outcomes: Vec<&str> = s.failures.iter().map(|f| f.outcome.as_str()).collect();
        assert_eq!(outcomes, ["failed", "unfinished"]);
        assert_eq!(s.failures[0].record.as_deref(), Some("dispatches.jsonl:1"), "the record's file and line");
        assert_eq!(s.duration_ms, Some(4000));
    }

    #[test]
    fn a_live_pid_without_run_end_is_running() {
        let read = parse_lines(LOG, false);
        let s = summarize("20260101T000000000Z-exhaust-1a", PathBuf::from("/r"), &read, &|pid| pid == 0x1a);
        assert_eq!(s.state, RunState::Running);
        assert_eq!(pid_of_run_id("20260101T000000000Z-loop-run-ff"), Some(255));
    }
}
