//! Budgets in dispatches, tokens and USD. A budget never stops a run silently: the
//! workflow asks [`BudgetTracker::exhausted`] and records why it stopped.

use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// Token and cost usage of one dispatch (or a sum of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Adds another usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
    }
}

/// The limits of a run; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    /// Agent invocations (every attempt counts).
    pub max_dispatches: Option<u64>,
    /// Input plus output tokens.
    pub max_tokens: Option<u64>,
    /// US dollars.
    pub max_usd: Option<f64>,
}

/// Which limit was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetKind {
    /// `--budget-dispatches`.
    Dispatches,
    /// `--budget-tokens`.
    Tokens,
    /// `--budget-usd`.
    Usd,
}

impl std::fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BudgetKind::Dispatches => "dispatches",
            BudgetKind::Tokens => "tokens",
            BudgetKind::Usd => "usd",
        })
    }
}

/// What has been spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Agent invocations started.
    pub dispatches: u64,
    /// Usage reported by the agents.
    pub usage: Usage,
    /// Attempts whose cost is unknown: the backend cannot price (no prices configured) or
    /// reported no usage at all. `usage.cost_usd` leaves them out, so it is then a lower bound
    /// and is shown as such ([`cost_text`]), never as a `$0.0000` that was not measured.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpriced: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A cost for a person: `$0.8400`; `unknown` when no attempt was priced; `$0.8400 + unknown
/// (N unpriced)` when some were not.
pub fn cost_text(cost_usd: f64, unpriced: u64) -> String {
    match unpriced {
        0 => format!("${cost_usd:.4}"),
        _ if cost_usd <= 0.0 => "unknown".to_string(),
        n => format!("${cost_usd:.4} + unknown ({n} unpriced)"),
    }
}

/// Tracks spending against a [`Budget`]; shared by all dispatches of a run. Spending is also
/// kept per role (`finder`, `implementer`, …) for the run's result and event log.
#[derive(Debug, Default)]
pub struct BudgetTracker {
    budget: Budget,
    spent: Mutex<Spent>,
    by_role: Mutex<std::collections::BTreeMap<String, Spent>>,
}

impl BudgetTracker {
    /// A tracker starting from `already` spent (a resumed run carries its spending over).
    pub fn new(budget: Budget, already: Spent) -> Self {
        Self { budget, spent: Mutex::new(already), by_role: Mutex::default() }
    }

    /// A tracker starting from `already` spent in total and `by_role` per role.
    pub fn with_roles(budget: Budget, already: Spent, by_role: std::collections::BTreeMap<String, Spent>) -> Self {
        Self { budget, spent: Mutex::new(already), by_role: Mutex::new(by_role) }
    }

    /// Charges one finished attempt of `role`: a dispatch and its usage, to the role's account
    /// (the run's total is charged by [`Self::try_reserve_dispatch`] and [`Self::record`]).
    pub fn record_role(&self, role: &str, usage: &Usage) {
        if let Ok(mut m) = self.by_role.lock() {
            let e = m.entry(role.to_string()).or_default();
            e.dispatches += 1;
            e.usage.add(usage);
        }
    }

    /// Counts one finished attempt of `role` whose cost is unknown (see [`Spent::unpriced`]).
    pub fn record_unpriced(&self, role: &str) {
        if let Ok(mut s) = self.spent.lock() {
            s.unpriced += 1;
        }
        if let Ok(mut m) = self.by_role.lock() {
            m.entry(role.to_string()).or_default().unpriced += 1;
        }
    }

    /// What each role has spent, by role name.
    pub fn spent_by_role(&self) -> std::collections::BTreeMap<String, Spent> {
        self.by_role.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// The limits.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Reserves one dispatch; false (and nothing reserved) when the dispatch budget is spent
    /// or another limit is already reached.
    pub fn try_reserve_dispatch(&self) -> bool {
        let Ok(mut s) = self.spent.lock() else { return false };
        if exhausted_kind(&self.budget, &s).is_some() {
            return false;
        }
        s.dispatches += 1;
        true
    }

    /// How many more dispatches fit (`u64::MAX` when unlimited).
    pub fn dispatches_left(&self) -> u64 {
        let s = self.spent();
        match self.budget.max_dispatches {
            Some(m) => m.saturating_sub(s.dispatches),
            None => u64::MAX,
        }
    }

    /// Records the usage of a finished dispatch.
    pub fn record(&self, usage: &Usage) {
        if let Ok(mut s) = self.spent.lock() {
            s.usage.add(usage);
        }
    }

    /// Raises what has been spent to `at_least` where it is lower: spending a committed
    /// record holds that the run's starting point did not count yet (a run killed between its
    /// commit and the file it started from).
    pub fn carry_to(&self, at_least: &Spent) {
        if let Ok(mut s) = self.spent.lock() {
            s.dispatches = s.dispatches.max(at_least.dispatches);
            s.usage.input_tokens = s.usage.input_tokens.max(at_least.usage.input_tokens);
            s.usage.output_tokens = s.usage.output_tokens.max(at_least.usage.output_tokens);
            s.usage.cost_usd = s.usage.cost_usd.max(at_least.usage.cost_usd);
            s.unpriced = s.unpriced.max(at_least.unpriced);
        }
    }

    /// What has been spent.
    pub fn spent(&self) -> Spent {
        self.spent.lock().map(|s| *s).unwrap_or_default()
    }

    /// The first limit reached, if any.
    pub fn exhausted(&self) -> Option<BudgetKind> {
        exhausted_kind(&self.budget, &self.spent())
    }

    /// One phrase naming the limit reached and what was spent, for a workflow's budget stop:
    /// "the dispatches budget (2) is spent (2 dispatch(es), 200 token(s), $0.50 spent)".
    pub fn stop_line(&self) -> String {
        let b = self.budget;
        let s = self.spent();
        let limit = match self.exhausted() {
            Some(BudgetKind::Dispatches) => {
                format!("the dispatches budget ({}) is spent", b.max_dispatches.unwrap_or(0))
            }
            Some(BudgetKind::Tokens) => format!("the tokens budget ({}) is spent", b.max_tokens.unwrap_or(0)),
            Some(BudgetKind::Usd) => format!("the USD budget ({}) is spent", b.max_usd.unwrap_or(0.0)),
            None => "the budget is spent".to_string(),
        };
        format!(
            "{limit} ({} dispatch(es), {} token(s), ${:.2} spent)",
            s.dispatches,
            s.usage.total_tokens(),
            s.usage.cost_usd
        )
    }
}

fn exhausted_kind(b: &Budget, s: &Spent) -> Option<BudgetKind> {
    if b.max_dispatches.is_some_and(|m| s.dispatches >= m) {
        return Some(BudgetKind::Dispatches);
    }
    if b.max_tokens.is_some_and(|m| s.usage.total_tokens() >= m) {
        return Some(BudgetKind::Tokens);
    }
    if b.max_usd.is_some_and(|m| s.usage.cost_usd >= m) {
        return Some(BudgetKind::Usd);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_cost_is_never_zero_dollars() {
        assert_eq!(cost_text(0.84, 0), "$0.8400");
        assert_eq!(cost_text(0.0, 0), "$0.0000", "priced at zero is zero");
        assert_eq!(cost_text(0.0, 3), "unknown");
        assert_eq!(cost_text(0.5, 2), "$0.5000 + unknown (2 unpriced)");
        let t = BudgetTracker::new(Budget::default(), Spent::default());
        t.record_unpriced("finder");
        assert_eq!(t.spent().unpriced, 1);
        assert_eq!(t.spent_by_role()["finder"].unpriced, 1);
    }

    #[test]
    fn spending_is_kept_per_role() {
        let t = BudgetTracker::new(Budget::default(), Spent::default());
        t.record_role("finder", &Usage { input_tokens: 5, output_tokens: 1, cost_usd: 0.5 });
        t.record_role("finder", &Usage { input_tokens: 5, output_tokens: 1, cost_usd: 0.5 });
        t.record_role("worker", &Usage::default());
        let m = t.spent_by_role();
        assert_eq!(m["finder"].dispatches, 2);
        assert_eq!(m["finder"].usage.total_tokens(), 12);
        assert_eq!(m["worker"].dispatches, 1);
    }

    #[test]
    fn each_limit_stops() {
        let t = BudgetTracker::new(Budget { max_dispatches: Some(2), ..Default::default() }, Spent::default());
        assert!(t.try_reserve_dispatch());
        assert!(t.try_reserve_dispatch());
        assert!(!t.try_reserve_dispatch());
        assert_eq!(t.exhausted(), Some(BudgetKind::Dispatches));
        assert!(t.stop_line().starts_with("the dispatches budget (2) is spent (2 dispatch(es)"), "{}", t.stop_line());

        let t = BudgetTracker::new(Budget { max_tokens: Some(100), ..Default::default() }, Spent::default());
        t.record(&Usage { input_tokens: 60, output_tokens: 40, cost_usd: 0.0 });
        assert_eq!(t.exhausted(), Some(BudgetKind::Tokens));
        assert!(!t.try_reserve_dispatch());

        let t = BudgetTracker::new(Budget { max_usd: Some(0.5), ..Default::default() }, Spent::default());
        t.record(&Usage { cost_usd: 0.25, ..Default::default() });
        assert_eq!(t.exhausted(), None);
        t.record(&Usage { cost_usd: 0.25, ..Default::default() });
        assert_eq!(t.exhausted(), Some(BudgetKind::Usd));
    }
}
