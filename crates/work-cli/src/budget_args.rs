//! The budget flags every agent-driven command shares (`--budget-dispatches`,
//! `--budget-tokens`, `--budget-usd`): one clap group, one validation, one refusal of a USD
//! budget that the agent could never reach. A budget stops a run explicitly, never silently:
//! each workflow turns the dispatcher's `OverBudget` outcome into its own `budget` stop.

use crate::ctx::CliError;
use work_runtime::budget::Budget;
use work_runtime::dispatch::Agent;

/// `--budget-dispatches N`, `--budget-tokens N`, `--budget-usd X` (flatten into a command's
/// arguments with `#[command(flatten)]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, clap::Args)]
pub struct BudgetArgs {
    /// Stop when N dispatches have been made.
    #[arg(long, value_name = "N")]
    pub budget_dispatches: Option<u64>,
    /// Stop when N tokens have been used.
    #[arg(long, value_name = "N")]
    pub budget_tokens: Option<u64>,
    /// Stop when X US dollars have been spent.
    #[arg(long, value_name = "X")]
    pub budget_usd: Option<f64>,
}

impl BudgetArgs {
    /// Checks the values before anything runs; `doing` prefixes the message ("start exhaust").
    pub fn validate(&self, doing: &str) -> Result<(), CliError> {
        if let Some(x) = self.budget_usd
            && !(x.is_finite() && x > 0.0)
        {
            return Err(CliError::bad(format!("{doing}: --budget-usd must be a positive number (got {x})")));
        }
        if self.budget_dispatches == Some(0) || self.budget_tokens == Some(0) {
            return Err(CliError::bad(format!("{doing}: a budget must be at least 1")));
        }
        Ok(())
    }

    /// Refuses `--budget-usd` with an agent that reports no cost: that budget could never be
    /// reached and would silently do nothing.
    pub fn check_agent(&self, agent: &dyn Agent) -> Result<(), CliError> {
        check_usd(self.budget_usd.is_some(), agent)
    }

    /// True when any limit is given.
    pub fn is_set(&self) -> bool {
        self.budget_dispatches.is_some() || self.budget_tokens.is_some() || self.budget_usd.is_some()
    }

    /// The runtime budget.
    pub fn budget(&self) -> Budget {
        Budget { max_dispatches: self.budget_dispatches, max_tokens: self.budget_tokens, max_usd: self.budget_usd }
    }
}

/// Refuses a USD budget (`usd` set) for an agent that cannot price its dispatches.
pub fn check_usd(usd: bool, agent: &dyn Agent) -> Result<(), CliError> {
    if usd && !agent.reports_cost() {
        return Err(CliError::bad(format!(
            "use --budget-usd with agent `{}`: it reports tokens but no cost; set input_usd_per_mtok and \
             output_usd_per_mtok on a named agent in work.toml ([agents.NAME]) so that cost is accounted",
            agent.describe()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_refuses_zero_and_non_positive_usd() {
        let ok = BudgetArgs { budget_dispatches: Some(1), budget_tokens: Some(5), budget_usd: Some(0.5) };
        assert!(ok.validate("x").is_ok());
        assert!(ok.is_set());
        assert_eq!(ok.budget().max_dispatches, Some(1));
        assert!(!BudgetArgs::default().is_set());
        for bad in [
            BudgetArgs { budget_dispatches: Some(0), ..Default::default() },
            BudgetArgs { budget_tokens: Some(0), ..Default::default() },
            BudgetArgs { budget_usd: Some(0.0), ..Default::default() },
            BudgetArgs { budget_usd: Some(-1.0), ..Default::default() },
            BudgetArgs { budget_usd: Some(f64::NAN), ..Default::default() },
        ] {
            let e = bad.validate("start x").expect_err("refused");
            assert!(matches!(e, CliError::BadInput(ref m) if m.starts_with("start x: ")), "{e}");
        }
    }
}
