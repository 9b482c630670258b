//! The `review-verdict.v1` record: exactly one per review unit, at
//! `<spec-dir>/reviews/<unit>/review-verdict.json`, rewritten atomically as the unit's rounds
//! go (its last content is the unit's verdict).
//!
//! States, in precedence order (the first that applies wins):
//!
//! | state | when |
//! |---|---|
//! | `BLOCKED` | a mandatory reviewer or the adjudicator is missing, an adjudication is indeterminate or invalid, a retry cap or stasis stopped the unit |
//! | `CHANGES_REQUIRED` | a sustained finding is still open |
//! | `READY_WITH_RESIDUAL_RISK` | adjudicated clean, but something was not re-reviewed (light mode's accepted non-Blocker fixes) or a non-mandatory reviewer was a named skip |
//! | `READY` | every warranted reviewer's last report was adjudicated clean |
//!
//! No score exists, and none gates anything; the record never replaces the human merge decision
//! (`human_merge_decision` stays `pending` — the decision is the engine's `done` /
//! `blocker-applied` event).

use crate::state::{ReviewerOutcome, UnitFinding};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The schema tag.
pub const SCHEMA: &str = "review-verdict.v1";

/// A verdict state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VerdictState {
    /// The unit cannot proceed.
    Blocked,
    /// Sustained findings remain open.
    ChangesRequired,
    /// Clean with a named residual risk.
    ReadyWithResidualRisk,
    /// Clean.
    Ready,
}

/// What the state is derived from.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Why the unit is blocked, when it is.
    pub blocking_reason: Option<String>,
    /// Sustained findings still open.
    pub open_findings: usize,
    /// Residual risks.
    pub residual_risks: Vec<String>,
}

/// The state by precedence (see the module docs).
pub fn state_of(f: &Facts) -> VerdictState {
    if f.blocking_reason.is_some() {
        VerdictState::Blocked
    } else if f.open_findings > 0 {
        VerdictState::ChangesRequired
    } else if !f.residual_risks.is_empty() {
        VerdictState::ReadyWithResidualRisk
    } else {
        VerdictState::Ready
    }
}

/// What was reviewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The base commit the change is measured against (HEAD when the code phase began; `null`
    /// for a spec-plan unit or an unborn branch).
    #[serde(default)]
    pub base: Option<String>,
    /// The HEAD commit.
    pub head: Option<String>,
    /// sha256 of the working tree's change against the base (committed work and untracked
    /// files included).
    pub diff_fingerprint: Option<String>,
    /// The paths that differ from the base, outside the spec and state directories.
    pub changed_paths: Vec<String>,
}

/// The record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// [`SCHEMA`].
    pub schema: String,
    /// The review unit (`spec-1`, `code-1`, `code-2`, …).
    pub review_unit: String,
    /// The spec directory.
    pub spec_dir: String,
    /// The engine run id.
    pub run_id: String,
    /// `light` or `full`.
    pub review_mode: String,
    /// The verdict state.
    pub state: VerdictState,
    /// What was reviewed.
    pub target: Target,
    /// Review rounds in this unit.
    pub rounds: u32,
    /// Every reviewer outcome of the unit, by round.
    pub reviewers: Vec<ReviewerOutcome>,
    /// Every sustained finding of the unit and whether a fix round followed it.
    pub sustained_findings: Vec<UnitFinding>,
    /// Residual risks (READY_WITH_RESIDUAL_RISK).
    pub residual_risks: Vec<String>,
    /// Why BLOCKED.
    pub blocking_reason: Option<String>,
    /// The last gate runs before the review.
    pub gates: Vec<Value>,
    /// Always `pending`: the record informs, a person decides.
    pub human_merge_decision: String,
    /// When written.
    pub recorded_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence() {
        let mut f = Facts::default();
        assert_eq!(state_of(&f), VerdictState::Ready);
        f.residual_risks.push("x".into());
        assert_eq!(state_of(&f), VerdictState::ReadyWithResidualRisk);
        f.open_findings = 1;
        assert_eq!(state_of(&f), VerdictState::ChangesRequired);
        f.blocking_reason = Some("cap".into());
        assert_eq!(state_of(&f), VerdictState::Blocked);
        assert_eq!(
            serde_json::to_value(VerdictState::ReadyWithResidualRisk).ok(),
            Some("READY_WITH_RESIDUAL_RISK".into())
        );
    }
}
