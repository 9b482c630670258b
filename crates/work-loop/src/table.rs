//! The engine's state table: states, events, and the one transition
//! each legal `(state, event)` pair takes, with its guard. Everything else is illegal.
//!
//! [`render_markdown`] prints the table as implemented; `docs/loop-state-table.md` is that
//! output, checked by a test.

use serde::Serialize;
use std::fmt;

/// An engine state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum State {
    /// Spec and plan are being written (the initial state).
    SpecPlanDrafting,
    /// Pre-EXECUTE reviewers run on the spec and plan.
    SpecPlanReview,
    /// Waiting for a person to approve the spec (`Status: Approved` in spec.md).
    SpecHumanGate,
    /// Waiting for a person to approve the plan (`Status: Approved` in plan.md).
    PlanHumanGate,
    /// Both approved; the cohort records the baseline, then `plan-locked` seals it.
    SpecPlanApproved,
    /// A wave of tasks is being implemented.
    CodeImplementation,
    /// Gates run on the finished wave.
    CodeVerification,
    /// Reviewers run on the whole change.
    CodeReview,
    /// Waiting for a person's merge decision.
    CodeHumanGate,
    /// Terminal.
    Done,
}

/// An event fired by `engine transition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Event {
    /// The spec and plan are ready for review.
    SpecReady,
    /// Adjudicated findings remain.
    FindingsRemain,
    /// Every reviewer is adjudicated clean.
    ReviewersClean,
    /// The spec approver wrote `Status: Approved`.
    SpecApproved,
    /// The spec was rejected.
    SpecRejected,
    /// The plan approver wrote `Status: Approved`.
    PlanApproved,
    /// The plan was rejected.
    PlanRejected,
    /// The cohort baseline is sealed.
    PlanLocked,
    /// Every task of the current wave is done.
    WaveComplete,
    /// Gates passed and more waves remain.
    WavePassed,
    /// Gates passed on the last wave.
    GatesClean,
    /// Gates failed.
    GatesFailed,
    /// A person asked for changes (or the next in-intent unit starts).
    BlockerApplied,
    /// A person approved the merge.
    Done,
}

/// The condition a transition checks against the real files before it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Guard {
    /// No condition.
    None,
    /// spec.md `Status: Approved`.
    SpecApproved,
    /// plan.md `Status: Approved`.
    PlanApproved,
    /// The cohort (state.json, same run id) has a baseline whose hashes still match spec.md and plan.md.
    BaselineRecorded,
    /// The cohort's schedule has a wave after the current one (`wave check --expect more`).
    MoreWaves,
    /// The current wave is the last one (`wave check --expect last`).
    LastWave,
    /// `implementation_retry_count < implementation_retry_cap`.
    ImplementationRetryCap,
    /// `review_retry_count < review_retry_cap`.
    ReviewRetryCap,
    /// spec.md `Status: Shipped`, or `Implementing` with `--intent-incomplete`.
    SpecShippedOrIntentIncomplete,
    /// spec.md `Status: Shipped`.
    SpecShipped,
}

/// What a transition does to `pending_human_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Wait {
    /// Leaves it as it is.
    Keep,
    /// Sets it (a person is now awaited).
    Set,
    /// Clears it.
    Clear,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Transition {
    /// The event.
    pub event: Event,
    /// The state it fires from.
    pub from: State,
    /// The state in code mode.
    pub to_code: State,
    /// The state in spec-plan mode (differs only for `plan-locked`).
    pub to_spec_plan: State,
    /// The guard.
    pub guard: Guard,
    /// The effect on `pending_human_wait`.
    pub wait: Wait,
}

/// The run's mode, fixed at `engine init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// Implementation work: `plan-locked` leads to CODE-IMPLEMENTATION.
    Code,
    /// Spec/plan-only work: `plan-locked` ends the run.
    SpecPlan,
}

impl Transition {
    /// The target state in `mode`.
    pub fn to(&self, mode: Mode) -> State {
        match mode {
            Mode::Code => self.to_code,
            Mode::SpecPlan => self.to_spec_plan,
        }
    }
}

const fn row(event: Event, from: State, to: State, guard: Guard, wait: Wait) -> Transition {
    Transition { event, from, to_code: to, to_spec_plan: to, guard, wait }
}

/// The whole table, in the documented order (docs/loop-state-table.md).
pub const TRANSITIONS: &[Transition] = &[
    row(Event::SpecReady, State::SpecPlanDrafting, State::SpecPlanReview, Guard::None, Wait::Keep),
    row(Event::FindingsRemain, State::SpecPlanReview, State::SpecPlanDrafting, Guard::None, Wait::Keep),
    row(Event::ReviewersClean, State::SpecPlanReview, State::SpecHumanGate, Guard::None, Wait::Set),
    row(Event::SpecApproved, State::SpecHumanGate, State::PlanHumanGate, Guard::SpecApproved, Wait::Set),
    row(Event::SpecRejected, State::SpecHumanGate, State::SpecPlanDrafting, Guard::None, Wait::Clear),
    row(Event::PlanApproved, State::PlanHumanGate, State::SpecPlanApproved, Guard::PlanApproved, Wait::Clear),
    row(Event::PlanRejected, State::PlanHumanGate, State::SpecPlanDrafting, Guard::None, Wait::Clear),
    Transition {
        event: Event::PlanLocked,
        from: State::SpecPlanApproved,
        to_code: State::CodeImplementation,
        to_spec_plan: State::Done,
        guard: Guard::BaselineRecorded,
        wait: Wait::Keep,
    },
    row(Event::WaveComplete, State::CodeImplementation, State::CodeVerification, Guard::None, Wait::Keep),
    row(Event::WavePassed, State::CodeVerification, State::CodeImplementation, Guard::MoreWaves, Wait::Keep),
    row(Event::GatesClean, State::CodeVerification, State::CodeReview, Guard::LastWave, Wait::Keep),
    row(
        Event::GatesFailed,
        State::CodeVerification,
        State::CodeImplementation,
        Guard::ImplementationRetryCap,
        Wait::Keep,
    ),
    row(Event::FindingsRemain, State::CodeReview, State::CodeImplementation, Guard::ReviewRetryCap, Wait::Keep),
    row(
        Event::ReviewersClean,
        State::CodeReview,
        State::CodeHumanGate,
        Guard::SpecShippedOrIntentIncomplete,
        Wait::Set,
    ),
    row(Event::BlockerApplied, State::CodeHumanGate, State::CodeImplementation, Guard::None, Wait::Clear),
    row(Event::Done, State::CodeHumanGate, State::Done, Guard::SpecShipped, Wait::Clear),
];

/// The row for `(from, event)`, or `None` when the pair is illegal.
pub fn lookup(from: State, event: Event) -> Option<&'static Transition> {
    TRANSITIONS.iter().find(|t| t.from == from && t.event == event)
}

impl State {
    /// CODE-IMPLEMENTATION, CODE-VERIFICATION, CODE-REVIEW or CODE-HUMAN-GATE.
    pub fn is_code(self) -> bool {
        matches!(self, State::CodeImplementation | State::CodeVerification | State::CodeReview | State::CodeHumanGate)
    }

    /// Every state, in flow order.
    pub const ALL: [State; 10] = [
        State::SpecPlanDrafting,
        State::SpecPlanReview,
        State::SpecHumanGate,
        State::PlanHumanGate,
        State::SpecPlanApproved,
        State::CodeImplementation,
        State::CodeVerification,
        State::CodeReview,
        State::CodeHumanGate,
        State::Done,
    ];

    /// The name written in engine-state.json (`SPEC-PLAN-DRAFTING`).
    pub fn name(self) -> &'static str {
        match self {
            State::SpecPlanDrafting => "SPEC-PLAN-DRAFTING",
            State::SpecPlanReview => "SPEC-PLAN-REVIEW",
            State::SpecHumanGate => "SPEC-HUMAN-GATE",
            State::PlanHumanGate => "PLAN-HUMAN-GATE",
            State::SpecPlanApproved => "SPEC-PLAN-APPROVED",
            State::CodeImplementation => "CODE-IMPLEMENTATION",
            State::CodeVerification => "CODE-VERIFICATION",
            State::CodeReview => "CODE-REVIEW",
            State::CodeHumanGate => "CODE-HUMAN-GATE",
            State::Done => "DONE",
        }
    }

    /// The state with this name; `None` for a name outside the table (a legacy state).
    pub fn parse(name: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl Event {
    /// Every event.
    pub const ALL: [Event; 14] = [
        Event::SpecReady,
        Event::FindingsRemain,
        Event::ReviewersClean,
        Event::SpecApproved,
        Event::SpecRejected,
        Event::PlanApproved,
        Event::PlanRejected,
        Event::PlanLocked,
        Event::WaveComplete,
        Event::WavePassed,
        Event::GatesClean,
        Event::GatesFailed,
        Event::BlockerApplied,
        Event::Done,
    ];

    /// The name used on the command line and in engine-state.json (`spec-ready`).
    pub fn name(self) -> &'static str {
        match self {
            Event::SpecReady => "spec-ready",
            Event::FindingsRemain => "findings-remain",
            Event::ReviewersClean => "reviewers-clean",
            Event::SpecApproved => "spec-approved",
            Event::SpecRejected => "spec-rejected",
            Event::PlanApproved => "plan-approved",
            Event::PlanRejected => "plan-rejected",
            Event::PlanLocked => "plan-locked",
            Event::WaveComplete => "wave-complete",
            Event::WavePassed => "wave-passed",
            Event::GatesClean => "gates-clean",
            Event::GatesFailed => "gates-failed",
            Event::BlockerApplied => "blocker-applied",
            Event::Done => "done",
        }
    }

    /// The event with this name.
    pub fn parse(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.name() == name)
    }
}

impl Mode {
    /// `code` or `spec-plan`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Code => "code",
            Mode::SpecPlan => "spec-plan",
        }
    }

    /// The mode with this name.
    pub fn parse(name: &str) -> Option<Mode> {
        [Mode::Code, Mode::SpecPlan].into_iter().find(|m| m.name() == name)
    }
}

impl Guard {
    /// The guard in words, as the table prints it.
    pub fn describe(self) -> &'static str {
        match self {
            Guard::None => "",
            Guard::SpecApproved => "spec.md `Status: Approved`",
            Guard::PlanApproved => "plan.md `Status: Approved`",
            Guard::BaselineRecorded => {
                "cohort baseline recorded (state.json of the same run_id; spec.md and plan.md hashes unchanged)"
            }
            Guard::MoreWaves => "more waves remain (`cohort wave check --expect more`); `--wave-index` = current wave",
            Guard::LastWave => "this was the last wave (`cohort wave check --expect last`)",
            Guard::ImplementationRetryCap => "implementation_retry_count < implementation_retry_cap",
            Guard::ReviewRetryCap => "review_retry_count < review_retry_cap",
            Guard::SpecShippedOrIntentIncomplete => {
                "spec.md `Status: Shipped` (or `Implementing` with `--intent-incomplete`)"
            }
            Guard::SpecShipped => "spec.md `Status: Shipped`",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The table as implemented, as markdown (the content of `docs/loop-state-table.md`).
pub fn render_markdown() -> String {
    let mut s = String::new();
    s.push_str("# `work loop engine` state table\n\n");
    s.push_str("Generated from `crates/work-loop/src/table.rs` by `work loop engine table`; a test keeps\n");
    s.push_str("this file equal to the code. Every `(state, event)` pair not listed here is an illegal\n");
    s.push_str("transition: it exits 1 and changes nothing. A state name outside this table (a legacy\n");
    s.push_str("state such as `SPEC-PLAN-HUMAN-GATE`) refuses every event.\n\n");
    s.push_str("| event | from | to | guard | pending_human_wait |\n|---|---|---|---|---|\n");
    s.push_str("| (init) | — | SPEC-PLAN-DRAFTING | no engine-state.json yet | false |\n");
    for t in TRANSITIONS {
        let to = if t.to_code == t.to_spec_plan {
            t.to_code.name().to_string()
        } else {
            format!("{} (code) / {} (spec-plan)", t.to_code, t.to_spec_plan)
        };
        let wait = match t.wait {
            Wait::Keep => "unchanged",
            Wait::Set => "set",
            Wait::Clear => "cleared",
        };
        s.push_str(&format!("| {} | {} | {} | {} | {} |\n", t.event, t.from, to, t.guard.describe(), wait));
    }
    s.push_str("\nStates: ");
    s.push_str(&State::ALL.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "));
    s.push_str(".\n\nEvents: ");
    s.push_str(&Event::ALL.iter().map(|e| format!("`{e}`")).collect::<Vec<_>>().join(", "));
    s.push_str(".\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_a_function_of_state_and_event() {
        for (i, a) in TRANSITIONS.iter().enumerate() {
            for b in &TRANSITIONS[i + 1..] {
                assert!(!(a.from == b.from && a.event == b.event), "duplicate row {a:?}");
            }
        }
        assert_eq!(TRANSITIONS.len(), 16);
    }

    #[test]
    fn names_round_trip() {
        for s in State::ALL {
            assert_eq!(State::parse(s.name()), Some(s));
        }
        for e in Event::ALL {
            assert_eq!(Event::parse(e.name()), Some(e));
        }
        assert_eq!(State::parse("SPEC-PLAN-HUMAN-GATE"), None);
    }

    #[test]
    fn docs_state_table_matches_the_code() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/loop-state-table.md");
        let doc = std::fs::read_to_string(&path).expect("docs/loop-state-table.md exists");
        assert_eq!(doc, render_markdown(), "regenerate with `work loop engine table > docs/loop-state-table.md`");
    }
}
