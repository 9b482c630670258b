//! A workflow's own view of a run, from its state files and events: exhaust rounds and
//! items, until iterations, and a step timeline (implement, edit, loop run, ultra).
//!
//! State files are read from their fixed places under the state directory (a path in the log
//! is used only for its file name), each capped at [`MAX_STATE_BYTES`], and read as JSON
//! values: a missing or unreadable file leaves its section empty.

use crate::events::str_field;
use crate::summary::RunSummary;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use work_runtime::events::EventKind;

/// The most of one state file read.
pub const MAX_STATE_BYTES: u64 = 32 * 1024 * 1024;
/// The most until iteration archives read.
pub const MAX_REPORTS: usize = 1000;

/// One exhaust round.
#[derive(Debug, Clone, Serialize)]
pub struct RoundRow {
    /// The round number.
    pub n: u64,
    /// Angles run.
    pub angles: Vec<String>,
    /// New items accepted.
    pub new_items: u64,
    /// Items refused by gate 2.
    pub rejected: u64,
    /// The dry counter after the round.
    pub dry_counter_after: u64,
    /// Only used angles ran.
    pub soft_empty: bool,
    /// Finders that failed.
    pub failed_finders: u64,
    /// Gate 3 ran in this round: how many new items it found.
    pub gate3_new: Option<u64>,
    /// The engine's verdict.
    pub verdict: String,
}

/// An accepted exhaust item with the engine's re-read evidence.
#[derive(Debug, Clone, Serialize)]
pub struct Accepted {
    /// The item id.
    pub id: String,
    /// The finder's title.
    pub title: String,
    /// `PATH:LINE`.
    pub location: String,
    /// What the engine re-read there.
    pub evidence: String,
    /// The round it was accepted in (0: seeded by gate 1).
    pub round: u64,
}

/// A rejected exhaust item.
#[derive(Debug, Clone, Serialize)]
pub struct RejectedRow {
    /// The item id.
    pub id: String,
    /// The claimed location.
    pub location: String,
    /// Why gate 2 refused it.
    pub reason: String,
    /// The round.
    pub round: u64,
}

/// The exhaust journal's view.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExhaustDetail {
    /// The journal file.
    pub journal: Option<PathBuf>,
    /// What was searched for.
    pub what: String,
    /// K.
    pub k: u64,
    /// Why it stopped.
    pub stopped_reason: Option<String>,
    /// Rounds.
    pub rounds: Vec<RoundRow>,
    /// Accepted items.
    pub accepted: Vec<Accepted>,
    /// Rejected items.
    pub rejected: Vec<RejectedRow>,
    /// Angles given up and other gaps.
    pub completeness_gaps: Vec<String>,
    /// `confirmed` or `unconfirmed` (a `k-consecutive-dry` stop), as the journal says.
    pub completeness: Option<String>,
    /// The angles given up (their finder failed in two rounds).
    pub given_up: Vec<String>,
}

/// One until iteration.
#[derive(Debug, Clone, Serialize)]
pub struct IterationRow {
    /// The iteration number.
    pub n: u64,
    /// The worker's status.
    pub status: String,
    /// The engine's decision.
    pub decision: String,
    /// The verify command, when it ran.
    pub verify: Option<String>,
    /// Whether verify passed.
    pub verify_passed: Option<bool>,
    /// How verify ended.
    pub verify_end: Option<String>,
    /// Claimed but not changed (ground truth disagrees).
    pub false_claims: Vec<String>,
    /// Changed but not claimed.
    pub unclaimed: Vec<String>,
    /// Changed according to git.
    pub changed: Vec<String>,
}

/// The until session's view.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UntilDetail {
    /// The session id.
    pub session: String,
    /// The session directory.
    pub dir: Option<PathBuf>,
    /// Iterations, in order.
    pub iterations: Vec<IterationRow>,
}

/// One step of a run's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// When.
    pub ts: String,
    /// `dispatch`, `gate`, `task`, `review`, `repair`, `decision`, `transition`,
    /// `observation`, `snapshot`, `iteration`, `verify`.
    pub phase: String,
    /// What (role and label, gate name, task id).
    pub label: String,
    /// How it went (`ok`, `green`, `red`, a status word).
    pub status: String,
    /// More (a reason, a fingerprint, a changed-path list).
    pub note: String,
}

/// Everything workflow-specific about one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Detail {
    /// For exhaust.
    pub exhaust: Option<ExhaustDetail>,
    /// For until.
    pub until: Option<UntilDetail>,
    /// Every run's steps (dispatches, gates, tasks, reviews, decisions).
    pub timeline: Vec<Step>,
    /// Gate events of an exhaust run (`gate1`, `gate2-rejected`, `gate3`) with their round.
    pub gate_events: Vec<(u64, String)>,
    /// Implement's `stats.json` (fingerprints, repairs, …), when written.
    pub stats: Option<Value>,
}

fn read_json(path: &Path) -> Option<Value> {
    let (text, truncated) = work_runtime::fsx::read_text_capped(path, MAX_STATE_BYTES).ok()?;
    if truncated {
        return None;
    }
    serde_json::from_str(&text).ok()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

fn plain(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && !name.contains('\\') && !name.starts_with('.')
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Builds the detail of `run` from its events and the workflow's state files in `state_dir`.
pub fn load(state_dir: &Path, run: &RunSummary, events: &[Value]) -> Detail {
    let mut d = Detail { timeline: timeline(events), ..Detail::default() };
    for e in events {
        match EventKind::of(e) {
            Some(EventKind::ExhaustStart) if d.exhaust.is_none() => {
                d.exhaust = Some(exhaust(state_dir, e));
            }
            Some(EventKind::RoundStart)
            | Some(EventKind::OracleRan)
            | Some(EventKind::Gate2Rejected)
            | Some(EventKind::Gate3Failed) => gate_event(&mut d, e),
            Some(EventKind::ArtifactsWritten) if d.stats.is_none() => {
                let name = str_field(e, "dir")
                    .and_then(|p| Path::new(p).file_name())
                    .map(|n| n.to_string_lossy().into_owned());
                if let Some(n) = name.filter(|n| plain(n)) {
                    d.stats = read_json(&state_dir.join("iterations").join(n).join("stats.json"));
                }
            }
            _ => {}
        }
    }
    if let Some(s) = run.subject.as_ref().filter(|s| s.kind == "session") {
        d.until = Some(until(state_dir, &s.id));
    }
    d
}

fn gate_event(d: &mut Detail, e: &Value) {
    let round = d.gate_events.iter().filter(|(_, k)| k == "round").count() as u64;
    match EventKind::of(e) {
        Some(EventKind::RoundStart) => d.gate_events.push((e["round"].as_u64().unwrap_or(round + 1), "round".into())),
        Some(EventKind::OracleRan) => {
            let source = str_field(e, "source").unwrap_or("oracle");
            let gate = if source.contains("final") || source.contains('3') { "gate3" } else { "gate1" };
            d.gate_events.push((round, format!("{gate}: {} item(s)", e["items"].as_u64().unwrap_or(0))));
        }
        Some(EventKind::Gate2Rejected) => d.gate_events.push((round, "gate2-rejected".into())),
        _ => d.gate_events.push((round, "gate3-failed".into())),
    }
}

fn exhaust(state_dir: &Path, start: &Value) -> ExhaustDetail {
    let mut x = ExhaustDetail {
        what: str_field(start, "what").unwrap_or("").to_string(),
        k: start["k"].as_u64().unwrap_or(0),
        ..ExhaustDetail::default()
    };
    let name =
        str_field(start, "journal").and_then(|p| Path::new(p).file_name()).map(|n| n.to_string_lossy().into_owned());
    let Some(name) = name.filter(|n| plain(n)) else { return x };
    let path = state_dir.join("quality-journals").join(name);
    let Some(j) = read_json(&path) else { return x };
    x.journal = Some(path);
    x.stopped_reason = str_field(&j, "stoppedReason").map(str::to_string);
    x.completeness_gaps = strings(&j["completenessGaps"]);
    x.completeness = str_field(&j, "completeness").map(str::to_string);
    x.given_up = strings(&j["givenUp"]);
    for r in j["rounds"].as_array().into_iter().flatten() {
        x.rounds.push(RoundRow {
            n: r["n"].as_u64().unwrap_or(0),
            angles: strings(&r["anglesUsed"]),
            new_items: r["newItems"].as_array().map_or(0, |a| a.len() as u64),
            rejected: r["rejectedItems"].as_array().map_or(0, |a| a.len() as u64),
            dry_counter_after: r["dryCounterAfter"].as_u64().unwrap_or(0),
            soft_empty: r["softEmpty"].as_bool().unwrap_or(false),
            failed_finders: r["failedFinders"].as_u64().unwrap_or(0),
            gate3_new: r
                .get("gate3")
                .filter(|g| !g.is_null())
                .map(|g| g["newItems"].as_array().map_or(0, |a| a.len() as u64)),
            verdict: str_field(r, "verdict").unwrap_or("").to_string(),
        });
    }
    for it in j["items"].as_array().into_iter().flatten() {
        let reread = &it["reRead"];
        let evidence = match (str_field(reread, "source"), reread.get("text")) {
            (Some(s), Some(t)) => format!("{s}: {}", text_of(t)),
            _ => text_of(&it["reReadSources"]),
        };
        x.accepted.push(Accepted {
            id: text_of(&it["id"]),
            title: text_of(&it["title"]),
            location: text_of(&it["location"]),
            evidence,
            round: it["round"].as_u64().unwrap_or(0),
        });
    }
    for r in j["rejected"].as_array().into_iter().flatten() {
        x.rejected.push(RejectedRow {
            id: text_of(&r["id"]),
            location: text_of(&r["location"]),
            reason: text_of(&r["reason"]),
            round: r["round"].as_u64().unwrap_or(0),
        });
    }
    x
}

/// The last fenced `json` block of an iteration archive (its machine record).
fn machine_block(text: &str) -> Option<Value> {
    let start = text.rfind("```json\n")? + "```json\n".len();
    let len = text[start..].find("\n```")?;
    serde_json::from_str(&text[start..start + len]).ok()
}

fn until(state_dir: &Path, session: &str) -> UntilDetail {
    let mut u = UntilDetail { session: session.to_string(), ..UntilDetail::default() };
    if !plain(session) {
        return u;
    }
    let dir = state_dir.join("sessions").join(session);
    let mut names: Vec<String> = std::fs::read_dir(dir.join("reports"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".md") && n != "00.md")
        .collect();
    names.sort();
    names.truncate(MAX_REPORTS);
    for n in names {
        let Ok((text, _)) = work_runtime::fsx::read_text_capped(&dir.join("reports").join(&n), 4 * 1024 * 1024) else {
            continue;
        };
        let Some(r) = machine_block(&text) else { continue };
        let v = &r["verify"];
        u.iterations.push(IterationRow {
            n: r["iteration"].as_u64().unwrap_or(0),
            status: text_of(&r["report"]["status"]),
            decision: text_of(&r["decision"]),
            verify: str_field(v, "command").map(str::to_string),
            verify_passed: v["passed"].as_bool(),
            verify_end: str_field(v, "end").map(str::to_string),
            false_claims: strings(&r["false_claims"]),
            unclaimed: strings(&r["unclaimed"]),
            changed: strings(&r["changed"]),
        });
    }
    u.dir = Some(dir);
    u
}

fn step(e: &Value, phase: &str, label: String, status: String, note: String) -> Step {
    Step { ts: str_field(e, "ts").unwrap_or("").to_string(), phase: phase.into(), label, status, note }
}

/// A dispatch's phase: a reviewer's is a review; an implementer's (or editor's) dispatch for a
/// label that already had one is a repair.
fn dispatch_phase(role: &str, seen_before: bool) -> &'static str {
    if role.contains("review") {
        "review"
    } else if seen_before && matches!(role, "implementer" | "editor" | "worker") {
        "repair"
    } else {
        "dispatch"
    }
}

/// The steps of a run worth a row: dispatch ends, gates, tasks, reviews, decisions.
pub fn timeline(events: &[Value]) -> Vec<Step> {
    let mut out = Vec::new();
    let mut roles: std::collections::BTreeMap<String, String> = Default::default();
    let mut labels_seen: std::collections::BTreeSet<(String, String)> = Default::default();
    let mut repairs: std::collections::BTreeSet<String> = Default::default();
    for e in events {
        if EventKind::of(e) == Some(EventKind::DispatchStart) && e["attempt"].as_u64() == Some(1) {
            let id = str_field(e, "dispatch_id").unwrap_or("").to_string();
            let role = str_field(e, "role").unwrap_or("").to_string();
            // The label is what follows `dNNNN-<role>-` in the id.
            let label = id.split_once('-').map(|x| x.1).unwrap_or("").to_string();
            if !labels_seen.insert((role.clone(), label)) {
                repairs.insert(id.clone());
            }
            roles.insert(id, role);
        }
        let s = |k: &str| str_field(e, k).unwrap_or("").to_string();
        let row = match EventKind::of(e) {
            Some(EventKind::DispatchEnd) => {
                let id = s("dispatch_id");
                let role = roles.get(&id).map(String::as_str).unwrap_or("");
                let phase = dispatch_phase(role, repairs.contains(&id));
                Some(step(
                    e,
                    phase,
                    format!("{id} (attempt {})", e["attempt"].as_u64().unwrap_or(1)),
                    s("outcome"),
                    s("reason"),
                ))
            }
            Some(EventKind::GateEnd) => {
                let green = e["green"].as_bool().unwrap_or(false);
                Some(step(e, "gate", s("gate"), if green { "green" } else { "red" }.into(), s("end")))
            }
            Some(EventKind::UntilVerifyEnd) => {
                let ok = e["passed"].as_bool().unwrap_or(false);
                Some(step(e, "verify", s("command"), if ok { "passed" } else { "failed" }.into(), s("end")))
            }
            Some(EventKind::UntilIterationStart) => {
                Some(step(e, "iteration", format!("iteration {}", e["iteration"]), "started".into(), String::new()))
            }
            Some(EventKind::TaskEnd) => {
                // implement counts repairs and dispatches per task; loop run's task.end has neither.
                let counts = match (e["repairs"].as_u64(), e["dispatches"].as_u64()) {
                    (Some(r), Some(d)) => format!("repairs {r} · dispatches {d} "),
                    _ => String::new(),
                };
                Some(step(e, "task", s("task_id"), s("status"), format!("{counts}{}", s("reason")).trim().to_string()))
            }
            Some(EventKind::Snapshot) => Some(step(e, "snapshot", s("boundary"), "taken".into(), s("sha"))),
            Some(EventKind::IterationEnd) => Some(step(e, "iteration", s("kind"), s("status"), s("reason"))),
            Some(EventKind::LoopTransition) => Some(step(e, "transition", s("event"), String::new(), s("text"))),
            Some(EventKind::LoopDecision) => Some(step(e, "decision", s("unit"), s("decision"), s("reason"))),
            Some(EventKind::LoopVerdict) => Some(step(e, "review", s("path"), s("state"), String::new())),
            Some(EventKind::LoopTaskDone) => {
                Some(step(e, "task", s("label"), "done".into(), format!("{} → {}", s("base"), s("head"))))
            }
            Some(EventKind::LoopTaskUnchanged) => {
                Some(step(e, "task", s("label"), "unchanged".into(), format!("attempt {}", e["attempt"])))
            }
            Some(EventKind::UltraObserve) => {
                Some(step(e, "observation", s("criterion"), s("verdict"), format!("{} {}", s("label"), s("end"))))
            }
            Some(EventKind::HeadMoved) => {
                Some(step(e, "guard", "HEAD moved".into(), "blocked".into(), format!("{} → {}", s("from"), s("to"))))
            }
            Some(EventKind::BudgetStop) => Some(step(e, "budget", "budget".into(), "stopped".into(), s("refused"))),
            Some(EventKind::ExhaustStop) => Some(step(e, "stop", s("stoppedReason"), String::new(), s("detail"))),
            Some(EventKind::RunEnd) => Some(step(e, "end", "run".into(), s("outcome"), String::new())),
            _ => None,
        };
        out.extend(row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_implementer_dispatch_for_a_task_is_a_repair_and_reviewers_review() {
        let ev = |k: &str, id: &str, role: &str| serde_json::json!({"kind": k, "dispatch_id": id, "attempt": 1, "role": role, "outcome": "ok"});
        let events = vec![
            ev("dispatch.start", "d0001-implementer-1", "implementer"),
            ev("dispatch.end", "d0001-implementer-1", "implementer"),
            ev("dispatch.start", "d0002-quality-reviewer-1", "quality-reviewer"),
            ev("dispatch.end", "d0002-quality-reviewer-1", "quality-reviewer"),
            ev("dispatch.start", "d0003-implementer-1", "implementer"),
            ev("dispatch.end", "d0003-implementer-1", "implementer"),
            ev("dispatch.start", "d0004-implementer-2", "implementer"),
            ev("dispatch.end", "d0004-implementer-2", "implementer"),
        ];
        let phases: Vec<String> = timeline(&events).into_iter().map(|s| s.phase).collect();
        assert_eq!(phases, ["dispatch", "review", "repair", "dispatch"]);
    }

    #[test]
    fn machine_block_is_the_last_json_fence() {
        let t = "# x\n```json\n{\"a\":1}\n```\ntext\n```json\n{\"iteration\":2}\n```\n";
        assert_eq!(machine_block(t).map(|v| v["iteration"].clone()), Some(Value::from(2)));
        assert_eq!(machine_block("no block"), None);
    }

    #[test]
    fn a_journal_path_in_the_log_is_used_for_its_name_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outside = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("j.json"), r#"{"rounds":[{"n":1}]}"#).expect("write");
        let state = tmp.path().join("state");
        let start =
            serde_json::json!({"kind": "exhaust.start", "journal": outside.join("j.json").display().to_string()});
        let x = exhaust(&state, &start);
        assert!(x.rounds.is_empty() && x.journal.is_none());
    }
}
