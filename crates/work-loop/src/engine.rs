//! `work loop engine …`: the state machine (the `loop-engine.py`) over
//! `<spec-dir>/engine-state.json`, driven by the binding table in [`crate::table`].
//!
//! - `init` refuses when engine-state.json exists; it creates a run id.
//! - `transition` takes `engine-state.json.lock`, refuses an illegal pair or a failed guard
//!   (exit 1, nothing changed), otherwise moves, records the event, its context and the history,
//!   and writes atomically.
//! - A state name outside the table (a legacy state) refuses every event.
//! - Guards read the real files: spec.md / plan.md status lines and the cohort's state.json.

use crate::cohort::{self, CohortState};
use crate::common::{Lock, LoopError, LoopResult, Outcome, SpecDir, read_status, sha256_hex};
use crate::table::{self, Event, Guard, Mode, State, Wait};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use work_runtime::clock::Clock;
use work_runtime::fsx;

/// The engine file's name inside the spec directory.
pub const STATE_FILE: &str = "engine-state.json";
/// The schema tag written in the file.
pub const SCHEMA: &str = "work.loop.engine.v1";

/// One applied transition. Every field has a default, so a hand-written or older history loads.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The transition's sequence number (1-based).
    #[serde(default, deserialize_with = "lenient_u64")]
    pub seq: u64,
    /// The event.
    #[serde(default)]
    pub event: String,
    /// The state before.
    #[serde(default)]
    pub from: String,
    /// The state after.
    #[serde(default)]
    pub to: String,
    /// The event's context.
    #[serde(default)]
    pub context: Value,
    /// When.
    #[serde(default)]
    pub at: String,
    /// Fields this version does not know, kept on rewrite.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `schema_version` the work-loop scripts write and this version reads and writes.
pub const SCHEMA_VERSION: u64 = 1;

/// The question a human gate puts (the scripts' `gate_question`).
pub fn gate_question(state: &str) -> Option<&'static str> {
    match state {
        "SPEC-HUMAN-GATE" => Some("Does this spec define the right thing to build?"),
        "PLAN-HUMAN-GATE" => Some("Does this plan describe the right way to build it?"),
        "CODE-HUMAN-GATE" => Some("Are these changes correct and ready to merge?"),
        _ => None,
    }
}

/// `engine-state.json`.
///
/// Only `state` is required: every other field has a default, so an older or hand-written
/// file loads (a missing `mode` is inferred from the history, else `code`; a missing `run_id`
/// is empty). Fields this version does not know are kept in [`EngineState::extra`] and
/// written back unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineState {
    /// [`SCHEMA`].
    #[serde(default)]
    pub schema: String,
    /// The scripts' schema version ([`SCHEMA_VERSION`]); absent in files this project wrote
    /// before it was added. Any other value is refused (a newer format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<Value>,
    /// The spec directory's name.
    #[serde(default)]
    pub feature: String,
    /// The state's name (a name outside the table is a legacy state).
    pub state: String,
    /// When the last transition (or init) was applied, `YYYY-MM-DDTHH:MM:SSZ`.
    #[serde(default)]
    pub last_transition_at: String,
    /// The question of the human gate the state is, else null.
    #[serde(default)]
    pub gate_question: Option<String>,
    /// `code` or `spec-plan` (empty in the file ⇒ inferred on load).
    #[serde(default)]
    pub mode: String,
    /// The run id.
    #[serde(default)]
    pub run_id: String,
    /// When `init` ran.
    #[serde(default)]
    pub created_at: String,
    /// The last event applied.
    #[serde(default)]
    pub last_event: Option<String>,
    /// What the last event carried (`completed_wave_index`, `cycle_id`, …).
    #[serde(default)]
    pub last_event_context: Value,
    /// True while a person is awaited (the human gates).
    #[serde(default)]
    pub pending_human_wait: bool,
    /// How many transitions were applied (an integer, or an integer-valued float or string).
    #[serde(default, deserialize_with = "lenient_u64")]
    pub transition_sequence: u64,
    /// Every applied transition.
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
    /// Fields this version does not know, kept on rewrite.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Reads a non-negative integer written as a number (`3`, `3.0`), a string (`"3"`) or `null`.
fn lenient_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::de::Error;
    let v = Value::deserialize(d)?;
    let n = match &v {
        Value::Null => Some(0),
        Value::Number(n) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15).map(|f| f as u64))
        }
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    n.ok_or_else(|| D::Error::custom(format!("expected a non-negative integer, got {v}")))
}

/// The mode of a file that does not say: `spec-plan` when plan-locked led to DONE, else `code`.
fn infer_mode(st: &EngineState) -> &'static str {
    let spec_plan_seal = st.history.iter().any(|h| h.event == "plan-locked" && h.to == State::Done.name());
    if spec_plan_seal { Mode::SpecPlan.name() } else { Mode::Code.name() }
}

impl EngineState {
    /// The state, or `None` for a legacy state.
    pub fn parsed_state(&self) -> Option<State> {
        State::parse(&self.state)
    }

    /// The status document (`engine status --json`).
    pub fn to_json(&self) -> Value {
        let legal: Vec<&str> = match self.parsed_state() {
            Some(s) => table::TRANSITIONS.iter().filter(|t| t.from == s).map(|t| t.event.name()).collect(),
            None => Vec::new(),
        };
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(o) = &mut v {
            o.insert("legacy".into(), json!(self.parsed_state().is_none()));
            o.insert("legal_events".into(), json!(legal));
        }
        v
    }
}

/// Reads engine-state.json; `None` when absent. A corrupt file is bad input.
pub fn load(sd: &SpecDir) -> Result<Option<EngineState>, LoopError> {
    match sd.read_optional(STATE_FILE)? {
        None => Ok(None),
        Some(text) => {
            let bad = |e: serde_json::Error| LoopError::bad(format!("read `{}/{STATE_FILE}`: {e}", sd.rel()));
            let raw: Value = serde_json::from_str(&text).map_err(bad)?;
            let wait_given = raw.get("pending_human_wait").is_some_and(|v| !v.is_null());
            let mut st: EngineState = serde_json::from_value(raw).map_err(bad)?;
            if !wait_given {
                // A file without the field (the scripts derive it): a human gate awaits a person.
                st.pending_human_wait = matches!(
                    st.parsed_state(),
                    Some(State::SpecHumanGate | State::PlanHumanGate | State::CodeHumanGate)
                );
            }
            if let Some(v) = &st.schema_version
                && v.as_u64() != Some(SCHEMA_VERSION)
            {
                return Err(LoopError::refused(
                    format!(
                        "read `{}/{STATE_FILE}`: unsupported schema_version {v} (this version reads {SCHEMA_VERSION})",
                        sd.rel()
                    ),
                    json!({ "reason": "unsupported_schema_version", "schema_version": v }),
                ));
            }
            if st.mode.trim().is_empty() {
                st.mode = infer_mode(&st).into();
            }
            Ok(Some(st))
        }
    }
}

fn load_required(sd: &SpecDir) -> Result<EngineState, LoopError> {
    load(sd)?.ok_or_else(|| {
        LoopError::bad(format!("read `{}/{STATE_FILE}`: no such file (run `work loop engine init` first)", sd.rel()))
    })
}

fn require_state_file(sd: &SpecDir) -> Result<(), LoopError> {
    if sd.file(STATE_FILE)?.is_file() {
        Ok(())
    } else {
        Err(LoopError::bad(format!(
            "read `{}/{STATE_FILE}`: no such file (run `work loop engine init` first)",
            sd.rel()
        )))
    }
}

fn save(sd: &SpecDir, st: &EngineState) -> Result<(), LoopError> {
    let p = sd.file(STATE_FILE)?;
    fsx::write_json_atomic(&p, st).map_err(|e| LoopError::bad(format!("write `{}/{STATE_FILE}`: {e}", sd.rel())))
}

fn lock(sd: &SpecDir) -> Result<Lock, LoopError> {
    Lock::acquire(&sd.file(&format!("{STATE_FILE}.lock"))?)
}

/// `engine init <spec-dir> --mode M`: a new run in SPEC-PLAN-DRAFTING.
pub fn init(sd: &SpecDir, mode: Mode, clock: &dyn Clock) -> LoopResult {
    fsx::ensure_dir(sd.dir()).map_err(|e| LoopError::bad(format!("create `{}`: {e}", sd.rel())))?;
    let _lock = lock(sd)?;
    if let Some(existing) = load(sd)? {
        return Err(LoopError::refused(
            format!(
                "init the engine: `{}/{STATE_FILE}` already exists (run `{}`, state {}); resume it or reset it",
                sd.rel(),
                existing.run_id,
                existing.state
            ),
            json!({ "run_id": existing.run_id, "state": existing.state }),
        ));
    }
    let now = clock.now();
    let stamp = now.format("%Y%m%dT%H%M%SZ").to_string();
    let nanos = now.timestamp_nanos_opt().unwrap_or_default();
    let digest = sha256_hex(format!("{}|{}|{nanos}", sd.rel(), clock.now_rfc3339()).as_bytes());
    let run_id = format!("loop-{stamp}-{}", &digest[..8]);
    let st = EngineState {
        schema: SCHEMA.into(),
        schema_version: Some(json!(SCHEMA_VERSION)),
        feature: sd.feature(),
        last_transition_at: now.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        gate_question: None,
        state: State::SpecPlanDrafting.name().into(),
        mode: mode.name().into(),
        run_id: run_id.clone(),
        created_at: clock.now_rfc3339(),
        last_event: None,
        last_event_context: json!({}),
        pending_human_wait: false,
        transition_sequence: 0,
        history: Vec::new(),
        extra: Map::new(),
    };
    // The log and its `.gitignore` entry first: a run killed before the state is saved
    // starts again from init, and one killed after finds both in place.
    crate::events::init_log(sd.root());
    save(sd, &st)?;
    let mut doc = st.to_json();
    if let Value::Object(o) = &mut doc {
        o.insert("ok".into(), json!(true));
    }
    Ok(Outcome::ok(doc, run_id))
}

/// Options of `engine transition`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransitionOpts {
    /// `--wave-index N` (wave-passed, gates-clean): must equal the cohort's current wave.
    pub wave_index: Option<usize>,
    /// `--intent-incomplete` (reviewers-clean from CODE-REVIEW): accept `Status: Implementing`.
    pub intent_incomplete: bool,
}

/// `engine transition <spec-dir> <event>`.
pub fn transition(sd: &SpecDir, event_name: &str, opts: TransitionOpts, clock: &dyn Clock) -> LoopResult {
    let Some(event) = Event::parse(event_name) else {
        let names: Vec<&str> = Event::ALL.iter().map(|e| e.name()).collect();
        return Err(LoopError::bad(format!("parse event `{event_name}`: expected one of {}", names.join(", "))));
    };
    if opts.wave_index.is_some() && !matches!(event, Event::WavePassed | Event::GatesClean) {
        return Err(LoopError::bad(format!(
            "use `--wave-index` with `{event}`: only wave-passed and gates-clean take it"
        )));
    }
    if event == Event::WavePassed && opts.wave_index.is_none() {
        return Err(LoopError::bad("transition `wave-passed`: it requires --wave-index N (the wave just verified)"));
    }
    if opts.intent_incomplete && event != Event::ReviewersClean {
        return Err(LoopError::bad(format!("use `--intent-incomplete` with `{event}`: only reviewers-clean takes it")));
    }
    // A missing state is bad input before the lock: nothing is created for a missing run.
    require_state_file(sd)?;
    let _lock = lock(sd)?;
    let mut st = load_required(sd)?;
    let refuse_illegal = |why: String, st: &EngineState| {
        LoopError::refused(
            format!("transition `{event}`: illegal transition from {}{why}; nothing was changed", st.state),
            json!({ "state": st.state, "event": event.name(), "reason": "illegal_transition" }),
        )
    };
    let Some(from) = st.parsed_state() else {
        return Err(refuse_illegal(" (a legacy state outside the table: reset the run)".into(), &st));
    };
    run_id_preflight(sd, &st, event)?;
    let Some(row) = table::lookup(from, event) else {
        return Err(refuse_illegal(String::new(), &st));
    };
    if from.is_code() && event != Event::Done {
        schedule_precheck(sd, &st, event)?;
    }
    let Some(mode) = Mode::parse(&st.mode) else {
        return Err(LoopError::refused(
            format!("transition `{event}`: unknown mode `{}` in engine-state.json; nothing was changed", st.mode),
            json!({ "state": st.state, "event": event.name(), "reason": "unknown_mode" }),
        ));
    };
    let mut context = Map::new();
    context.insert("from".into(), json!(from.name()));
    check_guard(sd, &st, row.guard, event, opts, &mut context)?;
    let to = row.to(mode);
    let seq = st.transition_sequence + 1;
    if event == Event::GatesFailed {
        context.insert("cycle_id".into(), json!(format!("{}:{seq}", st.run_id)));
    }
    context.insert("to".into(), json!(to.name()));
    let context = Value::Object(context);
    let at = clock.now_rfc3339();
    st.history.push(HistoryEntry {
        seq,
        event: event.name().into(),
        from: from.name().into(),
        to: to.name().into(),
        context: context.clone(),
        at,
        extra: Map::new(),
    });
    st.state = to.name().into();
    st.schema_version = Some(json!(SCHEMA_VERSION));
    if st.feature.is_empty() {
        st.feature = sd.feature();
    }
    st.gate_question = gate_question(to.name()).map(str::to_string);
    st.last_transition_at = clock.now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    st.transition_sequence = seq;
    st.last_event = Some(event.name().into());
    // The scripts' shape: what the next step re-issues, nothing else (the whole context is in
    // the history entry).
    st.last_event_context = match event {
        Event::WavePassed => json!({ "completed_wave_index": context.get("completed_wave_index") }),
        Event::GatesFailed => json!({ "cycle_id": context.get("cycle_id") }),
        _ => Value::Null,
    };
    match row.wait {
        Wait::Keep => {}
        Wait::Set => st.pending_human_wait = true,
        Wait::Clear => st.pending_human_wait = false,
    }
    save(sd, &st)?;
    let mut env = Map::new();
    env.insert("seq".into(), json!(seq));
    env.insert("run_id".into(), json!(st.run_id));
    env.insert("spec".into(), json!(sd.rel()));
    env.insert("from".into(), json!(from.name()));
    env.insert("event".into(), json!(event.name()));
    env.insert("to".into(), json!(to.name()));
    env.insert("at".into(), json!(st.last_transition_at));
    env.insert("mode".into(), json!(st.mode));
    env.insert("feature".into(), json!(st.feature));
    env.insert("wave_index".into(), json!(opts.wave_index));
    env.insert("intent_incomplete".into(), json!(opts.intent_incomplete));
    env.insert("cycle_id".into(), st.last_event_context.get("cycle_id").cloned().unwrap_or(Value::Null));
    env.insert("gate_question".into(), json!(st.gate_question));
    env.insert("pending_human_wait".into(), json!(st.pending_human_wait));
    crate::events::append(sd.root(), &env);
    let mut doc = st.to_json();
    if let Value::Object(o) = &mut doc {
        o.insert("ok".into(), json!(true));
        o.insert("event".into(), json!(event.name()));
        o.insert("from".into(), json!(from.name()));
        o.insert("to".into(), json!(to.name()));
    }
    Ok(Outcome::ok(doc, format!("{from} -> {to} ({event})")))
}

fn guard_refusal(event: Event, st: &EngineState, reason: &str, msg: String) -> LoopError {
    LoopError::refused(
        format!("transition `{event}`: guard failed: {msg}; nothing was changed"),
        json!({ "state": st.state, "event": event.name(), "reason": reason, "detail": msg }),
    )
}

fn spec_status(sd: &SpecDir, file: &str) -> Result<Option<String>, LoopError> {
    Ok(sd.read_optional(file)?.as_deref().and_then(read_status))
}

/// Before every transition, as the scripts do: the cohort exists, is of a supported format
/// and belongs to the engine's run.
fn run_id_preflight(sd: &SpecDir, st: &EngineState, event: Event) -> Result<(), LoopError> {
    let c = cohort_for(sd, st, event).map_err(|e| preflight(e, "run_id preflight failed"))?;
    if let Some(why) = cohort::schema_problem(&c) {
        return Err(guard_refusal(event, st, "schema_version", format!("run_id preflight failed: {why}")));
    }
    Ok(())
}

/// Before every transition out of a CODE-* state but `done`: the schedule was computed from
/// plan.md as it is now (canonical hash) and plan.md's status is legal after approval.
fn schedule_precheck(sd: &SpecDir, st: &EngineState, event: Event) -> Result<(), LoopError> {
    let c = cohort_for(sd, st, event)?;
    cohort::schedule_current_of(sd, &c).map_err(|e| preflight(e, "schedule check-current failed"))
}

fn preflight(e: LoopError, what: &str) -> LoopError {
    match e {
        LoopError::Refused { message, json } => LoopError::Refused { message: format!("{what}: {message}"), json },
        other => other,
    }
}

fn cohort_for(sd: &SpecDir, st: &EngineState, event: Event) -> Result<CohortState, LoopError> {
    let Some(c) = cohort::load(sd)? else {
        return Err(guard_refusal(
            event,
            st,
            "no_cohort",
            format!("no cohort `{}/{}` (run `work loop cohort init`)", sd.rel(), cohort::STATE_FILE),
        ));
    };
    if c.run_id != st.run_id {
        return Err(guard_refusal(
            event,
            st,
            "run_id_mismatch",
            format!("the cohort belongs to run `{}`, the engine to `{}`", c.run_id, st.run_id),
        ));
    }
    Ok(c)
}

fn check_guard(
    sd: &SpecDir,
    st: &EngineState,
    guard: Guard,
    event: Event,
    opts: TransitionOpts,
    ctx: &mut Map<String, Value>,
) -> Result<(), LoopError> {
    let need_status = |file: &str, want: &str, ctx: &mut Map<String, Value>| -> Result<(), LoopError> {
        let got = spec_status(sd, file)?;
        ctx.insert(format!("{}_status", file.trim_end_matches(".md")), json!(got));
        if got.as_deref() == Some(want) {
            Ok(())
        } else {
            Err(guard_refusal(
                event,
                st,
                "status",
                format!("{file} Status is {}, not {want}", got.as_deref().unwrap_or("missing")),
            ))
        }
    };
    match guard {
        Guard::None => Ok(()),
        Guard::SpecApproved => need_status("spec.md", "Approved", ctx),
        Guard::PlanApproved => need_status("plan.md", "Approved", ctx),
        Guard::SpecShipped => need_status("spec.md", "Shipped", ctx),
        Guard::SpecShippedOrIntentIncomplete => {
            ctx.insert("intent_incomplete".into(), json!(opts.intent_incomplete));
            let want = if opts.intent_incomplete { "Implementing" } else { "Shipped" };
            need_status("spec.md", want, ctx)
        }
        Guard::BaselineRecorded => {
            let c = cohort_for(sd, st, event)?;
            let Some((b_spec, b_plan)) = c.approved_hashes() else {
                return Err(guard_refusal(
                    event,
                    st,
                    "no_baseline",
                    "no approved baseline (run `work loop cohort approve-plan`)".into(),
                ));
            };
            let (spec_sha, plan_sha, _, _) = cohort::artifacts(sd)?;
            // The canonical hashes ignore a status bump, so the statuses are checked apart.
            cohort::status_legal_after_approval(sd, "plan check-current")
                .map_err(|e| preflight(e, "plan check-current failed"))?;
            if Mode::parse(&st.mode) == Some(Mode::Code)
                && !c.schedule_waves.is_empty()
                && c.schedule_plan_sha256.as_deref() != Some(b_plan.as_str())
            {
                return Err(guard_refusal(
                    event,
                    st,
                    "stale_schedule",
                    "plan_hash != approved_plan_hash: the schedule was computed from another plan version (run `work loop cohort schedule` again)".into(),
                ));
            }
            if b_spec != spec_sha || b_plan != plan_sha {
                return Err(guard_refusal(
                    event,
                    st,
                    "stale_baseline",
                    "spec.md or plan.md changed since the baseline (run `work loop cohort approve-plan` again)".into(),
                ));
            }
            if Mode::parse(&st.mode) == Some(Mode::Code) && c.schedule_waves.is_empty() {
                // Code mode goes on to execute waves: it needs them computed first.
                return Err(guard_refusal(
                    event,
                    st,
                    "no_schedule",
                    "no schedule recorded (run `work loop cohort schedule`)".into(),
                ));
            }
            ctx.insert("spec_sha256".into(), json!(spec_sha));
            ctx.insert("plan_sha256".into(), json!(plan_sha));
            ctx.insert("schedule_waves".into(), json!(c.schedule_waves.len()));
            Ok(())
        }
        Guard::MoreWaves | Guard::LastWave => {
            let c = cohort_for(sd, st, event)?;
            if let Some(n) = opts.wave_index
                && n != c.current_wave_index
            {
                return Err(guard_refusal(
                    event,
                    st,
                    "wave_index",
                    format!("--wave-index {n} is not the current wave {}", c.current_wave_index),
                ));
            }
            let more = c.more_waves();
            ctx.insert("wave_count".into(), json!(c.schedule_waves.len()));
            if guard == Guard::MoreWaves {
                if !more {
                    return Err(guard_refusal(
                        event,
                        st,
                        "no_more_waves",
                        format!("wave {} is the last of {}", c.current_wave_index, c.schedule_waves.len()),
                    ));
                }
                ctx.insert("completed_wave_index".into(), json!(c.current_wave_index));
                ctx.insert("next_wave_index".into(), json!(c.current_wave_index + 1));
            } else {
                if more {
                    return Err(guard_refusal(
                        event,
                        st,
                        "more_waves_remain",
                        format!("wave {} is not the last of {}", c.current_wave_index, c.schedule_waves.len()),
                    ));
                }
                ctx.insert("wave_index".into(), json!(c.current_wave_index));
            }
            Ok(())
        }
        Guard::ImplementationRetryCap => {
            let c = cohort_for(sd, st, event)?;
            ctx.insert("implementation_retry_count".into(), json!(c.implementation_retry_count));
            ctx.insert("implementation_retry_cap".into(), json!(c.implementation_retry_cap));
            if c.implementation_retry_count >= c.implementation_retry_cap {
                return Err(guard_refusal(
                    event,
                    st,
                    "implementation_retry_cap",
                    format!(
                        "implementation retry cap reached ({}/{})",
                        c.implementation_retry_count, c.implementation_retry_cap
                    ),
                ));
            }
            Ok(())
        }
        Guard::ReviewRetryCap => {
            let c = cohort_for(sd, st, event)?;
            ctx.insert("review_retry_count".into(), json!(c.review_retry_count));
            ctx.insert("review_retry_cap".into(), json!(c.review_retry_cap));
            if c.review_retry_count >= c.review_retry_cap {
                return Err(guard_refusal(
                    event,
                    st,
                    "review_retry_cap",
                    format!("review retry cap reached ({}/{})", c.review_retry_count, c.review_retry_cap),
                ));
            }
            Ok(())
        }
    }
}

/// `engine status <spec-dir> --json`: bad input (exit 2) when the file is missing or unreadable.
pub fn status(sd: &SpecDir) -> LoopResult {
    let st = load_required(sd)?;
    let text = format!(
        "{} ({} mode, run {}){}; last event {}; {} transition(s)",
        st.state,
        st.mode,
        st.run_id,
        if st.pending_human_wait { ", waiting for a person" } else { "" },
        st.last_event.as_deref().unwrap_or("none"),
        st.transition_sequence
    );
    Ok(Outcome::ok(st.to_json(), text))
}

/// `engine reset <spec-dir>`: deletes engine-state.json. A no-op (exit 0) when the file or the
/// whole directory is absent: nothing is created then, not even the lock file.
pub fn reset(sd: &SpecDir) -> LoopResult {
    let p = sd.file(STATE_FILE)?;
    crate::events::remove_log(sd.root());
    if !p.exists() {
        return Ok(Outcome::ok(json!({ "ok": true, "removed": false }), "no engine state (no-op)"));
    }
    let _lock = lock(sd)?;
    let existed = p.exists();
    if existed {
        work_runtime::fsx::remove_state(&p)
            .map_err(|e| LoopError::bad(format!("remove `{}/{STATE_FILE}`: {e}", sd.rel())))?;
    }
    Ok(Outcome::ok(
        json!({ "ok": true, "removed": existed }),
        if existed { "engine state removed" } else { "no engine state (no-op)" },
    ))
}

/// Where a fresh session picks up (the Session Resumption protocol, steps 2–6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// A stable code (`wait-spec-approval`, `fire-spec-approved`, `reissue-wave-advance`, …).
    pub action: String,
    /// True when a person must act (or confirm) before the loop goes on.
    pub needs_human: bool,
    /// The event to fire now, when the route is to fire one.
    pub fire: Option<String>,
    /// What to do, in words (with the command to re-issue, when there is one).
    pub message: String,
}

fn route(action: &str, needs_human: bool, fire: Option<Event>, message: String) -> Route {
    Route { action: action.into(), needs_human, fire: fire.map(|e| e.name().into()), message }
}

/// Decides the resumption route from the engine state, the cohort and the artifacts' statuses.
pub fn resume_route(
    st: &EngineState,
    cohort: Option<&CohortState>,
    spec_status: Option<&str>,
    plan_status: Option<&str>,
    spec_dir: &str,
) -> Route {
    let Some(state) = st.parsed_state() else {
        return route(
            "surface-legacy-state",
            true,
            None,
            format!(
                "state {} is not in the state table: every event is illegal; with explicit confirmation run `work loop cohort reset {spec_dir}` then `work loop engine reset {spec_dir}` (spec.md and plan.md are kept) and re-init",
                st.state
            ),
        );
    };
    if let Some(c) = cohort
        && c.run_id != st.run_id
    {
        return route(
            "surface-identity-mismatch",
            true,
            None,
            format!("the cohort belongs to run {}, the engine to {}", c.run_id, st.run_id),
        );
    }
    if st.pending_human_wait {
        match state {
            State::SpecHumanGate => {
                return match spec_status {
                    Some("Approved") => route(
                        "fire-spec-approved",
                        false,
                        Some(Event::SpecApproved),
                        "spec.md is Approved: fire spec-approved (crash recovery)".into(),
                    ),
                    Some("Implementing") | Some("Shipped") => route(
                        "surface-spec-advanced",
                        true,
                        None,
                        "spec.md advanced past approval without completing the plan gate".into(),
                    ),
                    Some("Archived") => route(
                        "surface-spec-archived",
                        true,
                        None,
                        "spec.md is Archived: the run will not proceed".into(),
                    ),
                    _ => route(
                        "wait-spec-approval",
                        true,
                        None,
                        "wait: the spec approver writes Status: Approved in spec.md, then fire spec-approved".into(),
                    ),
                };
            }
            State::PlanHumanGate => {
                return match plan_status {
                    Some("Approved") => route(
                        "fire-plan-approved",
                        false,
                        Some(Event::PlanApproved),
                        "plan.md is Approved: fire plan-approved (crash recovery)".into(),
                    ),
                    Some("Executing") | Some("Done") => {
                        route("surface-plan-advanced", true, None, "plan.md advanced past the approval state".into())
                    }
                    _ => route(
                        "wait-plan-approval",
                        true,
                        None,
                        "wait: the plan approver writes Status: Approved in plan.md, then fire plan-approved".into(),
                    ),
                };
            }
            State::CodeHumanGate => {
                return route(
                    "wait-merge-decision",
                    true,
                    None,
                    "wait for the human merge decision: approved → fire done; changes requested → surface the review-record replay risk, then blocker-applied".into(),
                );
            }
            _ => {}
        }
    }
    let last = st.last_event.as_deref().unwrap_or("");
    let run = &st.run_id;
    match (last, state) {
        ("plan-approved", State::SpecPlanApproved) => route(
            "seal-baseline",
            false,
            None,
            format!(
                "run `work loop cohort approve-plan {spec_dir} --expect-run-id {run}`{}, then fire plan-locked",
                if st.mode == "code" { format!(", `work loop cohort schedule {spec_dir} --expect-run-id {run}`") } else { String::new() }
            ),
        ),
        ("plan-locked", State::CodeImplementation) => {
            route("execute", false, None, "new code run: write Status: Implementing before code, then EXECUTE".into())
        }
        ("plan-approved", State::CodeImplementation) => route(
            "execute-legacy",
            false,
            None,
            "legacy pre-split code run: ensure Status: Implementing before EXECUTE continues".into(),
        ),
        ("plan-locked", State::Done) | ("plan-approved", State::Done) => route(
            "spec-plan-terminal",
            true,
            None,
            "spec-plan run finished; implementation needs an explicitly confirmed reset and a re-init with --mode code".into(),
        ),
        ("done", State::Done) => route("terminal", false, None, "code run finished: PR/merge only".into()),
        ("wave-passed", State::CodeImplementation) => {
            let n = st.last_event_context.get("completed_wave_index").and_then(Value::as_u64).unwrap_or_default();
            route(
                "reissue-wave-advance",
                false,
                None,
                format!("re-issue `work loop cohort wave advance {spec_dir} --from-index {n} --expect-run-id {run}` (idempotent), then resume EXECUTE"),
            )
        }
        ("gates-failed", State::CodeImplementation) => route(
            "reissue-record-attempt",
            false,
            None,
            format!(
                "re-issue `work loop cohort record-attempt {spec_dir} --phase implement --cycle-id {run}:{} --expect-run-id {run}` (idempotent), then resume EXECUTE",
                st.transition_sequence
            ),
        ),
        ("findings-remain", State::CodeImplementation) => route(
            "surface-fingerprint-uncertain",
            true,
            None,
            "review record --fingerprint may not have run: stale fingerprint baseline, possible under-count; do not re-issue automatically".into(),
        ),
        ("blocker-applied", State::CodeImplementation) => {
            route("resume-implementation", false, None, "resume implementation directly (Status: Shipped stays)".into())
        }
        ("wave-complete", State::CodeVerification) => route(
            "rerun-gates",
            false,
            None,
            "re-run gates; fire wave-passed, gates-clean or gates-failed".into(),
        ),
        ("gates-clean", State::CodeReview) => {
            route("rerun-review", false, None, "re-run the reviewer fan-out and review inspect".into())
        }
        (_, State::SpecPlanDrafting | State::SpecPlanReview | State::SpecHumanGate | State::PlanHumanGate) => route(
            "resume-spec-plan-work",
            false,
            None,
            "resume spec/plan work; no pending cohort mutation".into(),
        ),
        _ => route(
            "surface-unrecognised",
            true,
            None,
            format!("no resumption route for last event `{last}` in state {state}"),
        ),
    }
}

/// `engine resume <spec-dir> --json`: the resumption route (an extension; read-only).
pub fn resume(sd: &SpecDir) -> LoopResult {
    let st = load_required(sd)?;
    let cohort = cohort::load(sd)?;
    let spec = spec_status(sd, "spec.md")?;
    let plan = spec_status(sd, "plan.md")?;
    let r = resume_route(&st, cohort.as_ref(), spec.as_deref(), plan.as_deref(), sd.rel());
    let doc = json!({
        "ok": true,
        "state": st.state,
        "last_event": st.last_event,
        "last_event_context": st.last_event_context,
        "run_id": st.run_id,
        "pending_human_wait": st.pending_human_wait,
        "transition_sequence": st.transition_sequence,
        "spec_status": spec,
        "plan_status": plan,
        "route": r,
    });
    Ok(Outcome::ok(doc, format!("{}: {}", r.action, r.message)))
}
