//! The engine against the binding table: every (state, event) pair, every guard both ways,
//! the Session Resumption routing, random event sequences, cohort idempotency, caps, stasis,
//! and a concurrent-transition race.
#![allow(clippy::disallowed_methods, reason = "tests set up their fixtures directly")]

use serde_json::Value;
use std::path::{Path, PathBuf};
use work_loop::cohort::{self, Caps, CheckPhase, ReviewRecord, WaveExpect};
use work_loop::common::Lock;
use work_loop::engine::{self, TransitionOpts};
use work_loop::table::{self, Event, Guard, Mode, State};
use work_loop::{LoopError, SpecDir};
use work_runtime::ExitStatus;
use work_runtime::clock::FakeClock;

const DIR: &str = "docs/specs/feat";
const TWO_WAVES: &str = "**Status:** Approved\n\n## Task 1: a\n\n## Task 2: b\nDepends on: 1\n";
const ONE_WAVE: &str = "**Status:** Approved\n\n## Task 1: a\n";

struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    sd: SpecDir,
    clock: FakeClock,
}

impl Fx {
    fn new() -> Fx {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(tmp.path()).expect("canon");
        std::fs::create_dir_all(root.join(DIR)).expect("mkdir");
        let sd = SpecDir::open(&root, DIR).expect("spec dir");
        let clock = FakeClock::new("2026-01-01T00:00:00Z".parse().expect("time"), 1000);
        let fx = Fx { _tmp: tmp, root, sd, clock };
        fx.spec("Draft");
        fx.plan_text("**Status:** Drafting\n\n## Task 1: a\n");
        fx
    }
    fn spec(&self, status: &str) {
        std::fs::write(self.root.join(DIR).join("spec.md"), format!("# Feat\n\n**Status:** {status}\n")).expect("w");
    }
    fn plan_text(&self, text: &str) {
        std::fs::write(self.root.join(DIR).join("plan.md"), text).expect("w");
    }
    fn engine_path(&self) -> PathBuf {
        self.root.join(DIR).join("engine-state.json")
    }
    fn init(&self, mode: Mode) -> String {
        let o = engine::init(&self.sd, mode, &self.clock).expect("init");
        let run = o.json["run_id"].as_str().expect("run id").to_string();
        cohort::init(&self.sd, &run, Caps::default(), &self.clock).expect("cohort init");
        run
    }
    fn fire(&self, e: Event) -> Result<work_loop::Outcome, LoopError> {
        engine::transition(&self.sd, e.name(), with_wave_index(&self.sd, e, TransitionOpts::default()), &self.clock)
    }
    fn fire_ok(&self, e: Event) {
        self.fire(e).unwrap_or_else(|err| panic!("{e}: {err}"));
    }
    fn state(&self) -> Value {
        engine::status(&self.sd).expect("status").json
    }
    fn cohort(&self) -> Value {
        cohort::status(&self.sd).expect("cohort status").json
    }
    /// Forces the engine into `state` (as a resumed file would be).
    fn force(&self, state: &str) {
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(self.engine_path()).expect("r")).expect("j");
        v["state"] = Value::from(state);
        std::fs::write(self.engine_path(), serde_json::to_string(&v).expect("s")).expect("w");
    }
    fn bytes(&self) -> (Vec<u8>, Vec<u8>) {
        (
            std::fs::read(self.engine_path()).expect("engine"),
            std::fs::read(self.root.join(DIR).join("state.json")).unwrap_or_default(),
        )
    }
}

/// A fixture in `from` where the row's guard holds.
fn satisfied(row: &table::Transition) -> Fx {
    let fx = Fx::new();
    fx.spec("Approved");
    fx.plan_text(if row.guard == Guard::MoreWaves { TWO_WAVES } else { ONE_WAVE });
    fx.init(Mode::Code);
    cohort::approve_plan(&fx.sd, None, false, &fx.clock).expect("approve");
    cohort::schedule(&fx.sd, None).expect("schedule");
    match row.guard {
        Guard::SpecShipped | Guard::SpecShippedOrIntentIncomplete => fx.spec("Shipped"),
        _ => {}
    }
    fx.force(row.from.name());
    fx
}

/// wave-passed requires `--wave-index`: the cohort's current wave (0 without a cohort).
fn with_wave_index(sd: &SpecDir, e: Event, opts: TransitionOpts) -> TransitionOpts {
    if e != Event::WavePassed || opts.wave_index.is_some() {
        return opts;
    }
    let current = cohort::status(sd).ok().and_then(|o| o.json["current_wave_index"].as_u64()).unwrap_or(0);
    TransitionOpts { wave_index: Some(usize::try_from(current).unwrap_or(0)), ..opts }
}

fn assert_refused_unchanged(fx: &Fx, e: Event, opts: TransitionOpts, reason: &str) {
    let opts = with_wave_index(&fx.sd, e, opts);
    let before = fx.bytes();
    let err = engine::transition(&fx.sd, e.name(), opts, &fx.clock).expect_err("refused");
    match &err {
        LoopError::Refused { json, .. } => assert_eq!(json["reason"], reason, "{err}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(err.exit_status(), ExitStatus::Unsuccessful);
    assert_eq!(fx.bytes(), before, "a refused {e} changed a state file");
}

#[test]
fn every_state_event_pair_against_the_table() {
    let mut legal = 0;
    for from in State::ALL {
        for event in Event::ALL {
            match table::lookup(from, event) {
                Some(row) => {
                    legal += 1;
                    let fx = satisfied(row);
                    let seq0 = fx.state()["transition_sequence"].as_u64().expect("seq");
                    let out = fx.fire(event).unwrap_or_else(|e| panic!("{from} --{event}--> refused: {e}"));
                    assert_eq!(out.exit, ExitStatus::Done);
                    let st = fx.state();
                    assert_eq!(st["state"], row.to(Mode::Code).name(), "{from} --{event}");
                    assert_eq!(st["last_event"], event.name());
                    assert_eq!(st["transition_sequence"].as_u64(), Some(seq0 + 1));
                    assert_eq!(st["history"].as_array().map(Vec::len), Some(1));
                    match row.wait {
                        table::Wait::Set => assert_eq!(st["pending_human_wait"], true),
                        table::Wait::Clear => assert_eq!(st["pending_human_wait"], false),
                        table::Wait::Keep => {}
                    }
                }
                None => {
                    // Make every guard pass so only illegality can refuse.
                    let fx = Fx::new();
                    fx.spec("Shipped");
                    fx.init(Mode::Code);
                    fx.force(from.name());
                    assert_refused_unchanged(&fx, event, TransitionOpts::default(), "illegal_transition");
                }
            }
        }
    }
    assert_eq!(legal, table::TRANSITIONS.len());
}

#[test]
fn plan_locked_ends_a_spec_plan_run() {
    let fx = Fx::new();
    fx.spec("Approved");
    fx.plan_text(ONE_WAVE);
    fx.init(Mode::SpecPlan);
    cohort::approve_plan(&fx.sd, None, false, &fx.clock).expect("approve");
    fx.force("SPEC-PLAN-APPROVED");
    fx.fire_ok(Event::PlanLocked);
    assert_eq!(fx.state()["state"], "DONE");
}

#[test]
fn legacy_state_refuses_every_event() {
    let fx = Fx::new();
    fx.spec("Approved");
    fx.init(Mode::Code);
    fx.force("SPEC-PLAN-HUMAN-GATE");
    assert_eq!(fx.state()["legacy"], true);
    for e in Event::ALL {
        assert_refused_unchanged(&fx, e, TransitionOpts::default(), "illegal_transition");
    }
}

#[test]
fn init_refuses_an_existing_run_and_unknown_events_are_bad_input() {
    let fx = Fx::new();
    fx.init(Mode::Code);
    let before = fx.bytes();
    assert!(matches!(engine::init(&fx.sd, Mode::Code, &fx.clock), Err(LoopError::Refused { .. })));
    assert_eq!(fx.bytes(), before);
    assert!(matches!(fx.sd.read_optional("engine-state.json"), Ok(Some(_))));
    let bad = engine::transition(&fx.sd, "spec-readyy", TransitionOpts::default(), &fx.clock);
    assert!(matches!(bad, Err(LoopError::BadInput(_))));
    let opts = TransitionOpts { wave_index: Some(0), intent_incomplete: false };
    assert!(matches!(engine::transition(&fx.sd, "spec-ready", opts, &fx.clock), Err(LoopError::BadInput(_))));
    assert_eq!(fx.bytes(), before);
}

#[test]
fn status_of_a_missing_or_corrupt_state_is_bad_input() {
    let fx = Fx::new();
    assert!(matches!(engine::status(&fx.sd), Err(LoopError::BadInput(_))));
    std::fs::write(fx.engine_path(), "{not json").expect("w");
    assert!(matches!(engine::status(&fx.sd), Err(LoopError::BadInput(_))));
}

// ---- each guard both ways -------------------------------------------------------------

fn at(state: &str, spec: &str, plan: &str) -> Fx {
    let fx = Fx::new();
    fx.spec("Approved");
    fx.plan_text(plan);
    fx.init(Mode::Code);
    // A Drafting plan cannot be approved; the fixture then simply has no baseline.
    let _ = cohort::approve_plan(&fx.sd, None, false, &fx.clock);
    cohort::schedule(&fx.sd, None).expect("schedule");
    fx.spec(spec);
    fx.force(state);
    fx
}

#[test]
fn guard_spec_approved() {
    let fx = at("SPEC-HUMAN-GATE", "Draft", ONE_WAVE);
    assert_refused_unchanged(&fx, Event::SpecApproved, TransitionOpts::default(), "status");
    fx.spec("Approved");
    fx.fire_ok(Event::SpecApproved);
    assert_eq!(fx.state()["pending_human_wait"], true);
}

#[test]
fn guard_plan_approved() {
    let fx = at("PLAN-HUMAN-GATE", "Approved", "**Status:** Drafting\n## Task 1: a\n");
    assert_refused_unchanged(&fx, Event::PlanApproved, TransitionOpts::default(), "status");
    fx.plan_text("Status: Approved\n## Task 1: a\n");
    fx.fire_ok(Event::PlanApproved);
    assert_eq!(fx.state()["pending_human_wait"], false);
}

#[test]
fn guard_baseline_recorded() {
    // No cohort at all.
    let fx = Fx::new();
    fx.spec("Approved");
    fx.plan_text(ONE_WAVE);
    engine::init(&fx.sd, Mode::Code, &fx.clock).expect("init");
    fx.force("SPEC-PLAN-APPROVED");
    assert_refused_unchanged(&fx, Event::PlanLocked, TransitionOpts::default(), "no_cohort");
    // A cohort of another run.
    cohort::init(&fx.sd, "other-run", Caps::default(), &fx.clock).expect("cohort");
    assert_refused_unchanged(&fx, Event::PlanLocked, TransitionOpts::default(), "run_id_mismatch");
    cohort::reset(&fx.sd).expect("reset");
    let run = fx.state()["run_id"].as_str().expect("run").to_string();
    cohort::init(&fx.sd, &run, Caps::default(), &fx.clock).expect("cohort");
    // No baseline yet.
    assert_refused_unchanged(&fx, Event::PlanLocked, TransitionOpts::default(), "no_baseline");
    cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect("approve");
    // A baseline gone stale.
    fx.plan_text(&format!("{ONE_WAVE}\nedited\n"));
    assert_refused_unchanged(&fx, Event::PlanLocked, TransitionOpts::default(), "stale_baseline");
    fx.plan_text(ONE_WAVE);
    // Code mode needs the waves computed too.
    assert_refused_unchanged(&fx, Event::PlanLocked, TransitionOpts::default(), "no_schedule");
    cohort::schedule(&fx.sd, Some(&run)).expect("schedule");
    fx.fire_ok(Event::PlanLocked);
    assert_eq!(fx.state()["state"], "CODE-IMPLEMENTATION");
}

#[test]
fn guard_waves_more_and_last() {
    let fx = at("CODE-VERIFICATION", "Implementing", TWO_WAVES);
    assert_refused_unchanged(&fx, Event::GatesClean, TransitionOpts::default(), "more_waves_remain");
    let wrong = TransitionOpts { wave_index: Some(1), intent_incomplete: false };
    assert_refused_unchanged(&fx, Event::WavePassed, wrong, "wave_index");
    let right = TransitionOpts { wave_index: Some(0), intent_incomplete: false };
    engine::transition(&fx.sd, "wave-passed", right, &fx.clock).expect("wave-passed");
    assert_eq!(fx.state()["last_event_context"]["completed_wave_index"], 0);
    cohort::wave_advance(&fx.sd, 0, None).expect("advance");
    fx.fire_ok(Event::WaveComplete);
    assert_refused_unchanged(&fx, Event::WavePassed, TransitionOpts::default(), "no_more_waves");
    fx.fire_ok(Event::GatesClean);
    assert_eq!(fx.state()["state"], "CODE-REVIEW");
}

#[test]
fn guard_implementation_retry_cap() {
    let fx = at("CODE-VERIFICATION", "Implementing", ONE_WAVE);
    let run = fx.state()["run_id"].as_str().expect("run").to_string();
    for i in 0..cohort::DEFAULT_IMPLEMENTATION_RETRY_CAP {
        fx.fire_ok(Event::GatesFailed);
        let seq = fx.state()["transition_sequence"].as_u64().expect("seq");
        let cycle = fx.state()["last_event_context"]["cycle_id"].as_str().expect("cycle").to_string();
        assert_eq!(cycle, format!("{run}:{seq}"));
        cohort::record_attempt(&fx.sd, &cycle, Some(&run)).expect("record");
        assert_eq!(fx.cohort()["implementation_retry_count"], i + 1);
        fx.fire_ok(Event::WaveComplete);
    }
    let check = cohort::check(&fx.sd, Some(CheckPhase::GatesFailed), None).expect("check");
    assert_eq!(check.exit, ExitStatus::Unsuccessful);
    assert_eq!(check.json["conditions"][0]["code"], "implementation_retry_cap");
    assert_refused_unchanged(&fx, Event::GatesFailed, TransitionOpts::default(), "implementation_retry_cap");
    assert_eq!(cohort::check(&fx.sd, Some(CheckPhase::Review), None).expect("check").exit, ExitStatus::Done);
}

#[test]
fn guard_review_retry_cap() {
    let fx = at("CODE-REVIEW", "Implementing", ONE_WAVE);
    let cap = cohort::DEFAULT_REVIEW_RETRY_CAP;
    for i in 0..cap {
        fx.fire_ok(Event::FindingsRemain);
        let fp = format!("fp-{i}");
        cohort::review_record(&fx.root, &fx.sd, &ReviewRecord::Fingerprints(vec![fp]), None, &fx.clock)
            .expect("record");
        fx.fire_ok(Event::WaveComplete);
        fx.fire_ok(Event::GatesClean);
    }
    assert_eq!(fx.cohort()["review_retry_count"], cap);
    assert_eq!(fx.cohort()["review_round_count"], cap);
    assert_refused_unchanged(&fx, Event::FindingsRemain, TransitionOpts::default(), "review_retry_cap");
    let check = cohort::check(&fx.sd, Some(CheckPhase::Review), None).expect("check");
    assert_eq!(check.exit, ExitStatus::Unsuccessful);
}

#[test]
fn guard_reviewers_clean_and_intent_incomplete() {
    let fx = at("CODE-REVIEW", "Implementing", ONE_WAVE);
    assert_refused_unchanged(&fx, Event::ReviewersClean, TransitionOpts::default(), "status");
    let ii = TransitionOpts { wave_index: None, intent_incomplete: true };
    fx.spec("Draft");
    assert_refused_unchanged(&fx, Event::ReviewersClean, ii, "status");
    fx.spec("Implementing");
    engine::transition(&fx.sd, "reviewers-clean", ii, &fx.clock).expect("intent-incomplete");
    let st = fx.state();
    assert_eq!(st["state"], "CODE-HUMAN-GATE");
    assert_eq!(st["pending_human_wait"], true);
    // The guard context is in the history entry (last_event_context has the scripts' shape).
    let last = st["history"].as_array().and_then(|h| h.last()).cloned().unwrap_or_default();
    assert_eq!(last["context"]["intent_incomplete"], true);
    // done refuses until Shipped; blocker-applied starts the next unit.
    assert_refused_unchanged(&fx, Event::Done, TransitionOpts::default(), "status");
    fx.fire_ok(Event::BlockerApplied);
    fx.fire_ok(Event::WaveComplete);
    fx.fire_ok(Event::GatesClean);
    fx.spec("Shipped");
    fx.fire_ok(Event::ReviewersClean);
    fx.fire_ok(Event::Done);
    assert_eq!(fx.state()["state"], "DONE");
    assert_eq!(fx.state()["pending_human_wait"], false);
}

// ---- Session Resumption routing, replayed --------------------------------------------

fn route(fx: &Fx) -> (Value, String) {
    let o = engine::resume(&fx.sd).expect("resume");
    let action = o.json["route"]["action"].as_str().expect("action").to_string();
    (o.json, action)
}

#[test]
fn session_resumption_routing_table_replayed() {
    let fx = Fx::new();
    let run = fx.init(Mode::Code);
    assert_eq!(route(&fx).1, "resume-spec-plan-work");
    fx.fire_ok(Event::SpecReady);
    cohort::plan_check_current(&fx.sd, false, Some(&run))
        .map(|o| assert_eq!(o.exit, ExitStatus::Unsuccessful))
        .expect("pc");
    fx.fire_ok(Event::ReviewersClean);
    // reviewers-clean / SPEC-HUMAN-GATE: the spec-gate check per spec.md Status.
    let (doc, action) = route(&fx);
    assert_eq!((doc["last_event"].as_str(), doc["state"].as_str()), (Some("reviewers-clean"), Some("SPEC-HUMAN-GATE")));
    assert_eq!(doc["pending_human_wait"], true);
    assert_eq!(action, "wait-spec-approval");
    for (status, want) in [
        ("Implementing", "surface-spec-advanced"),
        ("Shipped", "surface-spec-advanced"),
        ("Archived", "surface-spec-archived"),
        ("Approved", "fire-spec-approved"),
    ] {
        fx.spec(status);
        assert_eq!(route(&fx).1, want, "spec {status}");
    }
    fx.fire_ok(Event::SpecApproved);
    // spec-approved / PLAN-HUMAN-GATE: the plan-gate check per plan.md Status.
    let (doc, action) = route(&fx);
    assert_eq!((doc["last_event"].as_str(), doc["state"].as_str()), (Some("spec-approved"), Some("PLAN-HUMAN-GATE")));
    assert_eq!(action, "wait-plan-approval");
    for (status, want) in
        [("Executing", "surface-plan-advanced"), ("Done", "surface-plan-advanced"), ("Approved", "fire-plan-approved")]
    {
        fx.plan_text(&format!("**Status:** {status}\n\n## Task 1: a\n\n## Task 2: b\nDepends on: 1\n"));
        assert_eq!(route(&fx).1, want, "plan {status}");
    }
    fx.fire_ok(Event::PlanApproved);
    let (doc, action) = route(&fx);
    assert_eq!(doc["pending_human_wait"], false);
    assert_eq!(action, "seal-baseline");
    cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect("approve");
    cohort::schedule(&fx.sd, Some(&run)).expect("schedule");
    fx.fire_ok(Event::PlanLocked);
    assert_eq!(route(&fx).1, "execute");
    fx.fire_ok(Event::WaveComplete);
    assert_eq!(route(&fx).1, "rerun-gates");
    engine::transition(
        &fx.sd,
        "wave-passed",
        TransitionOpts { wave_index: Some(0), intent_incomplete: false },
        &fx.clock,
    )
    .expect("wave-passed");
    let (doc, action) = route(&fx);
    assert_eq!(action, "reissue-wave-advance");
    assert_eq!(doc["last_event_context"]["completed_wave_index"], 0);
    assert!(doc["route"]["message"].as_str().expect("m").contains("--from-index 0"));
    cohort::wave_advance(&fx.sd, 0, Some(&run)).expect("advance");
    cohort::wave_advance(&fx.sd, 0, Some(&run)).expect("advance replay is a no-op");
    assert_eq!(fx.cohort()["current_wave_index"], 1);
    fx.fire_ok(Event::WaveComplete);
    fx.fire_ok(Event::GatesFailed);
    let (doc, action) = route(&fx);
    assert_eq!(action, "reissue-record-attempt");
    let seq = doc["transition_sequence"].as_u64().expect("seq");
    assert!(doc["route"]["message"].as_str().expect("m").contains(&format!("--cycle-id {run}:{seq}")));
    fx.fire_ok(Event::WaveComplete);
    fx.fire_ok(Event::GatesClean);
    assert_eq!(route(&fx).1, "rerun-review");
    fx.fire_ok(Event::FindingsRemain);
    assert_eq!(route(&fx).1, "surface-fingerprint-uncertain");
    fx.fire_ok(Event::WaveComplete);
    fx.fire_ok(Event::GatesClean);
    fx.spec("Shipped");
    fx.fire_ok(Event::ReviewersClean);
    let (doc, action) = route(&fx);
    assert_eq!((doc["last_event"].as_str(), doc["state"].as_str()), (Some("reviewers-clean"), Some("CODE-HUMAN-GATE")));
    assert_eq!(action, "wait-merge-decision");
    fx.fire_ok(Event::BlockerApplied);
    assert_eq!(route(&fx).1, "resume-implementation");
    fx.fire_ok(Event::WaveComplete);
    fx.fire_ok(Event::GatesClean);
    fx.fire_ok(Event::ReviewersClean);
    fx.fire_ok(Event::Done);
    assert_eq!(route(&fx).1, "terminal");
    // Legacy rows (plan-approved into CODE-IMPLEMENTATION / DONE), and the legacy state.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(fx.engine_path()).expect("r")).expect("j");
    v["last_event"] = Value::from("plan-approved");
    v["state"] = Value::from("CODE-IMPLEMENTATION");
    v["pending_human_wait"] = Value::from(false);
    std::fs::write(fx.engine_path(), v.to_string()).expect("w");
    assert_eq!(route(&fx).1, "execute-legacy");
    fx.force("DONE");
    assert_eq!(route(&fx).1, "spec-plan-terminal");
    fx.force("SPEC-PLAN-HUMAN-GATE");
    assert_eq!(route(&fx).1, "surface-legacy-state");
}

#[test]
fn spec_plan_terminal_route() {
    let fx = Fx::new();
    fx.init(Mode::SpecPlan);
    fx.spec("Approved");
    fx.plan_text(ONE_WAVE);
    for e in [Event::SpecReady, Event::ReviewersClean, Event::SpecApproved, Event::PlanApproved] {
        fx.fire_ok(e);
    }
    cohort::approve_plan(&fx.sd, None, false, &fx.clock).expect("approve");
    fx.fire_ok(Event::PlanLocked);
    let (doc, action) = route(&fx);
    assert_eq!((doc["last_event"].as_str(), doc["state"].as_str()), (Some("plan-locked"), Some("DONE")));
    assert_eq!(action, "spec-plan-terminal");
}

// ---- cohort idempotency, stasis ------------------------------------------------------

#[test]
fn record_attempt_is_idempotent_per_cycle_id() {
    let fx = Fx::new();
    let run = fx.init(Mode::Code);
    let (c1, c2, c3) = (format!("{run}:1"), format!("{run}:2"), format!("{run}:3"));
    let a = cohort::record_attempt(&fx.sd, &c1, Some(&run)).expect("first");
    assert_eq!(a.json["changed"], true);
    let before = fx.bytes();
    let b = cohort::record_attempt(&fx.sd, &c1, Some(&run)).expect("replay");
    assert_eq!(b.json["changed"], false);
    assert_eq!(fx.bytes(), before);
    cohort::record_attempt(&fx.sd, &c2, Some(&run)).expect("second");
    assert_eq!(fx.cohort()["implementation_retry_count"], 2);
    let err = cohort::record_attempt(&fx.sd, &c3, Some("another-run")).expect_err("mismatch");
    assert!(matches!(err, LoopError::Refused { .. }));
    // A cycle id of another run is refused too.
    let err = cohort::record_attempt(&fx.sd, "another-run:3", Some(&run)).expect_err("foreign id");
    assert!(matches!(err, LoopError::Refused { .. }));
    assert_eq!(fx.cohort()["implementation_retry_count"], 2);
}

#[test]
fn wave_advance_is_idempotent_and_refuses_out_of_order() {
    let fx = Fx::new();
    fx.plan_text("Status: Approved\n## Task 1: a\n## Task 2: b\nDepends on: 1\n## Task 3: c\nDepends on: 2\n");
    let run = fx.init(Mode::Code);
    cohort::schedule(&fx.sd, Some(&run)).expect("schedule");
    assert_eq!(fx.cohort()["schedule_waves"], serde_json::json!([["1"], ["2"], ["3"]]));
    assert!(matches!(cohort::wave_advance(&fx.sd, 1, None), Err(LoopError::Refused { .. })));
    cohort::wave_advance(&fx.sd, 0, None).expect("0→1");
    let before = fx.bytes();
    assert_eq!(cohort::wave_advance(&fx.sd, 0, None).expect("replay").json["changed"], false);
    assert_eq!(fx.bytes(), before);
    cohort::wave_advance(&fx.sd, 1, None).expect("1→2");
    assert!(matches!(cohort::wave_advance(&fx.sd, 2, None), Err(LoopError::Refused { .. })));
    assert_eq!(cohort::wave_check(&fx.sd, WaveExpect::Last, None, None).expect("c").exit, ExitStatus::Done);
    assert_eq!(cohort::wave_check(&fx.sd, WaveExpect::More, None, None).expect("c").exit, ExitStatus::Unsuccessful);
}

#[test]
fn approve_plan_guards_status_and_is_a_no_op_when_unchanged() {
    let fx = Fx::new();
    let run = fx.init(Mode::Code);
    assert!(matches!(cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock), Err(LoopError::Refused { .. })));
    fx.spec("Approved");
    assert!(matches!(cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock), Err(LoopError::Refused { .. })));
    fx.plan_text(ONE_WAVE);
    assert_eq!(cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect("a").json["changed"], true);
    let before = fx.bytes();
    assert_eq!(cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect("b").json["changed"], false);
    assert_eq!(fx.bytes(), before);
    assert_eq!(cohort::plan_check_current(&fx.sd, false, None).expect("pc").json["plan_review_status"], "approved");
    fx.plan_text(&format!("{ONE_WAVE}more\n"));
    // After approval, drift from the baseline is a refusal naming it.
    let pc = cohort::plan_check_current(&fx.sd, false, None).expect_err("drift");
    assert!(matches!(&pc, LoopError::Refused { json, .. } if json["reason"] == "stale_baseline"), "{pc:?}");
    fx.spec("Implementing");
    assert!(matches!(cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock), Err(LoopError::Refused { .. })));
}

#[test]
fn review_inspect_detects_stasis() {
    let fx = Fx::new();
    let run = fx.init(Mode::Code);
    let adj = "docs/specs/feat/adj-1.json";
    std::fs::write(
        fx.root.join(adj),
        r#"{"findings": [{"id": "F1", "severity": "blocker", "disposition": "sustained", "title": "Leak", "file": "a.rs"},
                          {"id": "F2", "disposition": "refuted", "title": "noise"}]}"#,
    )
    .expect("w");
    let first = cohort::review_inspect(&fx.root, &fx.sd, adj, Some(&run)).expect("inspect");
    assert_eq!(first.json["classification"], "findings");
    assert_eq!(first.json["matches_previous_round"], false);
    let fps: Vec<String> = first.json["fingerprints"]
        .as_array()
        .expect("fps")
        .iter()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    cohort::review_record(&fx.root, &fx.sd, &ReviewRecord::Fingerprints(fps), Some(&run), &fx.clock).expect("rec");
    let second = cohort::review_inspect(&fx.root, &fx.sd, adj, Some(&run)).expect("inspect");
    assert_eq!(second.json["matches_previous_round"], true);
    // A clean report is recorded; a non-clean one refused.
    assert!(matches!(
        cohort::review_record(&fx.root, &fx.sd, &ReviewRecord::CleanReport(adj.into()), None, &fx.clock),
        Err(LoopError::Refused { .. })
    ));
    std::fs::write(fx.root.join("docs/specs/feat/adj-2.json"), r#"{"findings": [{"disposition": "refuted"}]}"#)
        .expect("w");
    let rec = ReviewRecord::CleanReport("docs/specs/feat/adj-2.json".into());
    cohort::review_record(&fx.root, &fx.sd, &rec, None, &fx.clock).expect("clean");
    let c = fx.cohort();
    assert_eq!(c["review_round_count"], 2);
    assert_eq!(c["review_retry_count"], 1);
    assert_eq!(c["finding_fingerprints"], serde_json::json!([]));
    assert_eq!(c["previous_finding_fingerprints"].as_array().map(Vec::len), Some(1));
}

// ---- random sequences never leave the table -------------------------------------------

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

#[test]
fn random_event_sequences_stay_inside_the_table() {
    let specs = ["Draft", "Approved", "Implementing", "Shipped"];
    let plans = [TWO_WAVES, ONE_WAVE, "Status: Drafting\n## Task 1: a\n"];
    for seed in 0..24u64 {
        let mut rng = Lcg(seed);
        let fx = Fx::new();
        let mode = if seed % 5 == 0 { Mode::SpecPlan } else { Mode::Code };
        let run = fx.init(mode);
        for step in 0..60 {
            match rng.next() % 8 {
                0 => fx.spec(rng.pick(&specs)),
                1 => fx.plan_text(rng.pick(&plans)),
                2 => {
                    let _ = cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock);
                    let _ = cohort::schedule(&fx.sd, Some(&run));
                }
                3 => {
                    let i = fx.cohort()["current_wave_index"].as_u64().unwrap_or(0) as usize;
                    let _ = cohort::wave_advance(&fx.sd, i, Some(&run));
                }
                _ => {
                    let e = rng.pick(&Event::ALL);
                    let before = fx.bytes();
                    let from = State::parse(fx.state()["state"].as_str().expect("state")).expect("in table");
                    let opts = with_wave_index(
                        &fx.sd,
                        e,
                        TransitionOpts {
                            wave_index: None,
                            intent_incomplete: e == Event::ReviewersClean && rng.next() & 1 == 0,
                        },
                    );
                    match engine::transition(&fx.sd, e.name(), opts, &fx.clock) {
                        Ok(_) => {
                            let row = table::lookup(from, e)
                                .unwrap_or_else(|| panic!("seed {seed} step {step}: {from} --{e} moved"));
                            assert_eq!(fx.state()["state"], row.to(mode).name());
                            if e == Event::GatesFailed {
                                let cycle =
                                    fx.state()["last_event_context"]["cycle_id"].as_str().expect("c").to_string();
                                cohort::record_attempt(&fx.sd, &cycle, Some(&run)).expect("record");
                            }
                        }
                        Err(err) => {
                            assert!(matches!(err, LoopError::Refused { .. }), "{err:?}");
                            assert_eq!(fx.bytes(), before, "seed {seed} step {step}: refused {e} changed state");
                        }
                    }
                }
            }
            let st = fx.state();
            assert!(State::parse(st["state"].as_str().expect("state")).is_some(), "left the table: {st}");
            assert_eq!(st["history"].as_array().map(Vec::len), st["transition_sequence"].as_u64().map(|n| n as usize));
        }
    }
}

// ---- concurrency ---------------------------------------------------------------------

#[test]
fn a_transition_waits_for_a_held_lock_and_then_applies() {
    let fx = Fx::new();
    fx.init(Mode::Code);
    let before = fx.bytes();
    let lock = Lock::acquire(&fx.root.join(DIR).join("engine-state.json.lock")).expect("lock");
    std::thread::scope(|s| {
        let waiting = s.spawn(|| fx.fire(Event::SpecReady));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(fx.bytes(), before, "nothing is written while another holds the lock");
        drop(lock);
        waiting.join().expect("join").expect("the transition applies once the holder lets go");
    });
    assert_ne!(fx.bytes(), before);
}

#[test]
fn concurrent_transitions_cannot_both_succeed() {
    for _round in 0..5 {
        let fx = Fx::new();
        fx.init(Mode::Code);
        let root: &Path = &fx.root;
        let wins = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(move || {
                        let sd = SpecDir::open(root, DIR).expect("sd");
                        let clock = FakeClock::new("2026-01-01T00:00:00Z".parse().expect("t"), 1);
                        engine::transition(&sd, "spec-ready", TransitionOpts::default(), &clock).is_ok()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("join")).filter(|ok| *ok).count()
        });
        assert_eq!(wins, 1);
        let st = fx.state();
        assert_eq!(st["transition_sequence"], 1);
        assert_eq!(st["state"], "SPEC-PLAN-REVIEW");
    }
}

// ---- confinement ---------------------------------------------------------------------

#[test]
fn spec_dirs_are_confined() {
    let fx = Fx::new();
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), fx.root.join("docs/specs/escape")).expect("symlink");
    for bad in [
        "",
        "/tmp/x",
        "C:/x",
        "docs\\specs\\feat",
        "docs/specs/../feat",
        "./docs/specs/feat",
        "docs//specs",
        "docs/specs/escape",
        "docs/specs/escape/sub",
    ] {
        assert!(matches!(SpecDir::open(&fx.root, bad), Err(LoopError::BadInput(_))), "{bad:?} accepted");
    }
    assert!(outside.path().read_dir().expect("ls").next().is_none(), "something was written outside");
    // A spec.md symlinked outside the root is refused before it is read.
    std::fs::write(outside.path().join("spec.md"), "Status: Approved\n").expect("w");
    std::fs::remove_file(fx.root.join(DIR).join("spec.md")).expect("rm");
    std::os::unix::fs::symlink(outside.path().join("spec.md"), fx.root.join(DIR).join("spec.md")).expect("ln");
    assert!(matches!(fx.sd.read_optional("spec.md"), Err(LoopError::BadInput(_))));
}

// ---- review fixes: older files, stale locks, baselines, check, reset, cycle ids ---------

#[test]
fn a_minimal_hand_written_legacy_state_refuses_every_event_as_illegal() {
    let fx = Fx::new();
    std::fs::write(fx.engine_path(), r#"{"state":"SPEC-PLAN-HUMAN-GATE"}"#).expect("w");
    for e in Event::ALL {
        assert_refused_unchanged(&fx, e, TransitionOpts::default(), "illegal_transition");
    }
    let st = fx.state();
    assert_eq!(
        (st["legacy"].as_bool(), st["mode"].as_str(), st["run_id"].as_str()),
        (Some(true), Some("code"), Some(""))
    );
    // The same with a run id only.
    std::fs::write(fx.engine_path(), r#"{"state":"SPEC-PLAN-HUMAN-GATE","run_id":"r"}"#).expect("w");
    assert_refused_unchanged(&fx, Event::SpecReady, TransitionOpts::default(), "illegal_transition");
}

#[test]
fn older_state_files_load_with_defaults_and_keep_unknown_fields() {
    let fx = Fx::new();
    fx.plan_text(TWO_WAVES);
    // An older engine file: no mode, schema or created_at; a string sequence; an unknown field.
    std::fs::write(
        fx.engine_path(),
        r#"{"state":"CODE-VERIFICATION","run_id":"r1","transition_sequence":"4","python_only":{"x":1},
           "history":[{"event":"plan-locked","to":"CODE-IMPLEMENTATION","note":"kept"}]}"#,
    )
    .expect("w");
    // An older cohort file: no schema, created_at or caps.
    std::fs::write(
        fx.root.join(DIR).join("state.json"),
        r#"{"run_id":"r1","current_wave_index":0,"schedule_waves":[["1"],["2"]],"legacy_note":"keep"}"#,
    )
    .expect("w");
    let c = fx.cohort();
    // The scripts' default caps, 5 and 5.
    assert_eq!((c["max_implementation_retries"].as_u64(), c["max_review_retries"].as_u64()), (Some(5), Some(5)));
    assert_eq!(cohort::check(&fx.sd, Some(CheckPhase::GatesFailed), None).expect("check").exit, ExitStatus::Done);
    // The engine's wave guard reads that cohort.
    let opts = TransitionOpts { wave_index: Some(0), intent_incomplete: false };
    // A code transition first checks the schedule against plan.md; a file without a plan hash
    // is stale until scheduled again.
    let err = engine::transition(&fx.sd, "wave-passed", opts, &fx.clock).expect_err("no plan hash");
    assert!(matches!(&err, LoopError::Refused { json, .. } if json["reason"] == "stale_schedule"), "{err:?}");
    cohort::schedule(&fx.sd, Some("r1")).expect("schedule an older file");
    engine::transition(&fx.sd, "wave-passed", opts, &fx.clock).expect("wave-passed on an older file");
    cohort::wave_advance(&fx.sd, 0, Some("r1")).expect("advance on an older file");
    let e: Value = serde_json::from_str(&std::fs::read_to_string(fx.engine_path()).expect("r")).expect("j");
    assert_eq!((e["mode"].as_str(), e["transition_sequence"].as_u64()), (Some("code"), Some(5)));
    assert_eq!(e["python_only"], serde_json::json!({"x": 1}), "unknown engine field dropped: {e}");
    assert_eq!(e["history"][0]["note"], "kept", "unknown history field dropped: {e}");
    let c: Value =
        serde_json::from_str(&std::fs::read_to_string(fx.root.join(DIR).join("state.json")).expect("r")).expect("j");
    assert_eq!((c["legacy_note"].as_str(), c["current_wave_index"].as_u64()), (Some("keep"), Some(1)));
    // A spec-plan run is recognised from its history; a float sequence is read as an integer.
    std::fs::write(
        fx.engine_path(),
        r#"{"state":"DONE","transition_sequence":7.0,"history":[{"event":"plan-locked","to":"DONE"}]}"#,
    )
    .expect("w");
    let st = fx.state();
    assert_eq!((st["mode"].as_str(), st["transition_sequence"].as_u64()), (Some("spec-plan"), Some(7)));
    // A non-integer sequence is still bad input.
    std::fs::write(fx.engine_path(), r#"{"state":"DONE","transition_sequence":"x"}"#).expect("w");
    assert!(matches!(engine::status(&fx.sd), Err(LoopError::BadInput(_))));
}

#[test]
fn a_leftover_lock_file_does_not_wedge_the_spec() {
    let fx = Fx::new();
    fx.init(Mode::Code);
    let lock = fx.root.join(DIR).join("engine-state.json.lock");
    // Killed between creating the lock file and writing its record, long ago; then a bare pid
    // (what earlier releases left behind). Both are free, and the release removes the file.
    std::fs::write(&lock, "").expect("w");
    let old = std::time::SystemTime::now() - work_loop::lock::STALE_AFTER - std::time::Duration::from_secs(5);
    std::fs::File::options().write(true).open(&lock).expect("open").set_modified(old).expect("mtime");
    fx.fire_ok(Event::SpecReady);
    assert!(!lock.exists(), "the release removes the lock file");
    std::fs::write(&lock, "1073741823\n").expect("w");
    fx.fire_ok(Event::FindingsRemain);
    assert!(!lock.exists(), "the release removes the lock file");
}

#[test]
fn approve_plan_refuses_a_changed_baseline_unless_rebaseline() {
    let fx = Fx::new();
    fx.spec("Approved");
    fx.plan_text(ONE_WAVE);
    let run = fx.init(Mode::Code);
    cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect("first baseline");
    fx.plan_text(&format!("{ONE_WAVE}edited after approval\n"));
    let before = fx.bytes();
    let err = cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect_err("changed plan");
    match &err {
        LoopError::Refused { message, json } => {
            assert_eq!(json["reason"], "stale_baseline");
            assert_eq!(json["changed"], serde_json::json!(["plan.md"]));
            assert!(message.contains("plan_changed=True") && message.contains("--rebaseline"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(fx.bytes(), before, "a refused approve-plan changed the cohort");
    fx.spec("Approved\n\nmore scope");
    let err = cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect_err("both changed");
    assert!(err.to_string().contains("spec_changed=True, plan_changed=True"), "{err}");
    let out = cohort::approve_plan(&fx.sd, Some(&run), true, &fx.clock).expect("explicit rebaseline");
    assert_eq!((out.json["changed"].as_bool(), out.json["rebaselined"].as_bool()), (Some(true), Some(true)));
    assert_eq!(fx.cohort()["baseline_history"].as_array().map(Vec::len), Some(1));
    let again = cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect("unchanged");
    assert_eq!(again.json["changed"], false);
}

#[test]
fn check_reports_a_pending_plan_review_only_while_planning() {
    let fx = Fx::new();
    fx.spec("Approved");
    fx.plan_text(ONE_WAVE);
    let run = fx.init(Mode::Code);
    // Planning, plan never reviewed: pending fails check.
    let c = cohort::check(&fx.sd, None, Some(&run)).expect("check");
    assert_eq!(c.exit, ExitStatus::Unsuccessful);
    assert_eq!(c.json["conditions"][0]["code"], "plan_review_pending");
    cohort::approve_plan(&fx.sd, Some(&run), false, &fx.clock).expect("approve");
    cohort::schedule(&fx.sd, Some(&run)).expect("schedule");
    fx.force("SPEC-PLAN-APPROVED");
    fx.fire_ok(Event::PlanLocked);
    // After the seal the plan is edited (ticked tasks, Status: Done at finish): not a failure.
    fx.plan_text("**Status:** Done\n\n## Task 1: a\n- [x] done\n");
    for state in ["CODE-IMPLEMENTATION", "CODE-VERIFICATION", "CODE-REVIEW", "CODE-HUMAN-GATE", "DONE"] {
        fx.force(state);
        let c = cohort::check(&fx.sd, None, Some(&run)).expect("check");
        assert_eq!(c.exit, ExitStatus::Done, "{state}: {}", c.json);
        assert_eq!(c.json["plan_review_status"], "pending", "still reported");
    }
    // Back in a planning state (or without an engine file) it fails again.
    fx.force("SPEC-PLAN-REVIEW");
    assert_eq!(cohort::check(&fx.sd, None, None).expect("check").exit, ExitStatus::Unsuccessful);
    std::fs::remove_file(fx.engine_path()).expect("rm");
    assert_eq!(cohort::check(&fx.sd, None, None).expect("check").exit, ExitStatus::Unsuccessful);
}

#[test]
fn reset_of_a_missing_directory_or_state_is_a_no_op_and_creates_nothing() {
    let fx = Fx::new();
    let nope = SpecDir::open(&fx.root, "docs/specs/nope").expect("confined");
    for out in [engine::reset(&nope).expect("engine reset"), cohort::reset(&nope).expect("cohort reset")] {
        assert_eq!((out.exit, out.json["removed"].as_bool()), (ExitStatus::Done, Some(false)));
    }
    assert!(!fx.root.join("docs/specs/nope").exists(), "reset created the directory");
    // A transition there is bad input that says so, and creates nothing either.
    let err = engine::transition(&nope, "spec-ready", TransitionOpts::default(), &fx.clock).expect_err("missing");
    assert!(matches!(&err, LoopError::BadInput(m) if m.contains("no such file")), "{err:?}");
    let err = cohort::wave_advance(&nope, 0, None).expect_err("missing");
    assert!(matches!(err, LoopError::BadInput(_)), "{err:?}");
    assert!(!fx.root.join("docs/specs/nope").exists(), "a refused verb created the directory");
    // An existing directory without state: no lock file is left either.
    engine::reset(&fx.sd).expect("engine reset");
    cohort::reset(&fx.sd).expect("cohort reset");
    assert!(!fx.root.join(DIR).join("engine-state.json.lock").exists());
    assert!(!fx.root.join(DIR).join("state.json.lock").exists());
}

#[test]
fn cycle_ids_must_be_non_empty_and_of_a_sane_charset() {
    let fx = Fx::new();
    let run = fx.init(Mode::Code);
    let long = "a".repeat(cohort::MAX_CYCLE_ID_LEN + 1);
    let before = fx.bytes();
    for bad in ["", " ", "r 1", "r;rm -rf", "r/1", "r\n1", "é:1", long.as_str()] {
        let err = cohort::record_attempt(&fx.sd, bad, Some(&run)).expect_err(bad);
        assert!(matches!(err, LoopError::BadInput(_)), "{bad:?}: {err:?}");
    }
    assert_eq!(fx.bytes(), before);
    cohort::record_attempt(&fx.sd, &format!("{run}:12"), Some(&run)).expect("engine-shaped id");
    let at_limit = format!("{run}:{}", "1".repeat(cohort::MAX_CYCLE_ID_LEN - run.len() - 1));
    cohort::record_attempt(&fx.sd, &at_limit, Some(&run)).expect("at the limit");
}
