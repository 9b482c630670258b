//! Light or full mode (the "Select: light or full mode"): decided by risk, not size.
//!
//! The decision is deterministic and recorded with its reasons, in this order:
//!
//! 1. `--light` / `--full` on the command line (an explicit trusted invocation);
//! 2. a `Mode: light` / `Mode: full` line in spec.md (the persisted contract);
//! 3. the risk triggers this engine can check without judgement — any one routes to full:
//!    - *multi-feature or dependent tasks*: plan.md has more than one task, or any
//!      `Depends on:`;
//!    - *security boundary*, *destructive operation*, *persistent representation*,
//!      *new dependency*, *structural / public interface*: a trigger word in spec.md or plan.md
//!      (see [`TRIGGER_WORDS`]).
//!
//! No trigger ⇒ light. Text in the spec is data: it can route work *to* full mode (a trigger
//! word, `Mode: full`) but `Mode: light` only holds when no trigger fires.

use serde::{Deserialize, Serialize};
use work_loop::plan::parse_plan;

/// The review discipline of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewMode {
    /// Single bounded adversarial pass, no pre-EXECUTE spec review, no quality pass.
    Light,
    /// Pre-EXECUTE spec/plan review, adversarial + quality reviewers iterated to adjudicated clean.
    Full,
}

impl ReviewMode {
    /// `light` or `full`.
    pub fn name(self) -> &'static str {
        match self {
            ReviewMode::Light => "light",
            ReviewMode::Full => "full",
        }
    }
}

/// Trigger words (lowercase) and the trigger each stands for.
pub const TRIGGER_WORDS: &[(&str, &str)] = &[
    ("auth", "security boundary"),
    ("password", "security boundary"),
    ("secret", "security boundary"),
    ("credential", "security boundary"),
    ("token", "security boundary"),
    ("deserializ", "security boundary"),
    ("user input", "security boundary"),
    ("network", "security boundary"),
    ("delete", "destructive or irreversible operation"),
    ("drop table", "destructive or irreversible operation"),
    ("force-push", "destructive or irreversible operation"),
    ("migration", "persistent representation"),
    ("database schema", "persistent representation"),
    ("backfill", "persistent representation"),
    ("new dependency", "new dependency"),
    ("add a dependency", "new dependency"),
    ("public interface", "structural or public-interface change"),
    ("public api", "structural or public-interface change"),
    ("new module", "structural or public-interface change"),
];

/// The decision and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The mode.
    pub mode: ReviewMode,
    /// Why, one line each.
    pub reasons: Vec<String>,
}

fn declared_mode(spec: &str) -> Option<ReviewMode> {
    for line in spec.lines() {
        let t = line.trim().trim_start_matches(['-', '*', ' ']).trim_start_matches(['*', '_']);
        let Some(head) = t.get(..4) else { continue };
        if !head.eq_ignore_ascii_case("mode") {
            continue;
        }
        let rest = t[4..].trim_start_matches(['*', '_']).trim_start();
        let Some(v) = rest.strip_prefix(':') else { continue };
        let v = v.trim_start_matches(['*', '_', ' ', '`']).to_ascii_lowercase();
        if v.starts_with("light") {
            return Some(ReviewMode::Light);
        }
        if v.starts_with("full") {
            return Some(ReviewMode::Full);
        }
    }
    None
}

/// Decides the mode from the flag, spec.md and plan.md (see the module docs).
pub fn decide(flag: Option<ReviewMode>, spec: &str, plan: &str) -> Decision {
    if let Some(m) = flag {
        return Decision { mode: m, reasons: vec![format!("--{} on the command line", m.name())] };
    }
    let mut reasons = Vec::new();
    if let Ok(p) = parse_plan(plan) {
        if p.tasks().len() > 1 {
            reasons.push(format!("multi-feature or dependent tasks: plan.md has {} tasks", p.tasks().len()));
        } else if p.tasks().iter().any(|t| !t.depends_on.is_empty()) {
            reasons.push("multi-feature or dependent tasks: a task depends on another".into());
        }
    }
    let text = format!("{spec}\n{plan}").to_ascii_lowercase();
    for (word, trigger) in TRIGGER_WORDS {
        if text.contains(word) {
            reasons.push(format!("{trigger}: the spec or plan mentions `{word}`"));
        }
    }
    let declared = declared_mode(spec);
    if declared == Some(ReviewMode::Full) {
        reasons.insert(0, "spec.md declares Mode: full".into());
    }
    if reasons.is_empty() {
        let why = if declared == Some(ReviewMode::Light) {
            "spec.md declares Mode: light and no risk trigger fires"
        } else {
            "no risk trigger fires"
        };
        Decision { mode: ReviewMode::Light, reasons: vec![why.into()] }
    } else {
        Decision { mode: ReviewMode::Full, reasons }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_wins_then_triggers_then_light() {
        assert_eq!(decide(Some(ReviewMode::Light), "auth", "").mode, ReviewMode::Light);
        let one = "## Task 1: Add a greeting\n";
        assert_eq!(decide(None, "# Spec\nSay hello.", one).mode, ReviewMode::Light);
        let two = "## Task 1: a\n## Task 2: b\nDepends on: 1\n";
        let d = decide(None, "# Spec", two);
        assert_eq!(d.mode, ReviewMode::Full);
        assert!(d.reasons[0].contains("2 tasks"), "{d:?}");
        let d = decide(None, "# Spec\nStores the user's password.", one);
        assert_eq!(d.mode, ReviewMode::Full);
        assert!(d.reasons.iter().any(|r| r.contains("security boundary")));
        assert_eq!(decide(None, "**Mode:** full\n", one).mode, ReviewMode::Full);
        // A declared light mode does not silence a trigger.
        assert_eq!(decide(None, "Mode: light\nDrop table users", one).mode, ReviewMode::Full);
        assert_eq!(
            decide(None, "Mode: light\n", one).reasons[0],
            "spec.md declares Mode: light and no risk trigger fires"
        );
    }
}
