//! `--dry-run`: what a workflow would do — each role's agent, model and timeout, the budget,
//! what it would work through (angles, tasks, criteria, the next phase) — printed after every
//! check of the input and before anything is locked, dispatched or written. With `-v` the
//! first briefs follow, exactly as the agents would get them; with `--json` one document.
//! Exit 0: the input is good and nothing ran.

use crate::CmdResult;
use crate::budget_args::BudgetArgs;
use serde_json::{Value, json};
use work_config::ResolvedRole;
use work_runtime::ExitStatus;
use work_runtime::dispatch::Agent;

/// One workflow's plan, as `--dry-run` prints it.
pub struct DryRun {
    workflow: &'static str,
    roles: Vec<Value>,
    role_rows: Vec<(String, String)>,
    rows: Vec<(String, String)>,
    prompts: Vec<(String, String)>,
}

impl DryRun {
    /// The plan of `work WORKFLOW`.
    pub fn new(workflow: &'static str) -> DryRun {
        DryRun { workflow, roles: Vec::new(), role_rows: Vec::new(), rows: Vec::new(), prompts: Vec::new() }
    }

    /// A role and what would run it: the backend, and the pins it sends (a `command:` program
    /// or an HTTP model names its own; a bare `claude`/`codex` runs the role's model).
    pub fn role(&mut self, role: &ResolvedRole, agent: &dyn Agent) -> &mut Self {
        let backend = agent.describe();
        let runs_the_pin = backend == "claude" || backend == "codex";
        let mut text = backend.clone();
        if runs_the_pin {
            text.push_str(&format!(" · model {}", role.model));
            if !role.effort.is_empty() {
                text.push_str(&format!(" · effort {}", role.effort));
            }
        }
        text.push_str(&format!(" · timeout {}s", role.timeout_secs));
        self.role_rows.push((role.role.clone(), text));
        self.roles.push(json!({
            "role": role.role,
            "agent": backend,
            "model": if runs_the_pin { Value::from(role.model.clone()) } else { Value::Null },
            "effort": if runs_the_pin && !role.effort.is_empty() { Value::from(role.effort.clone()) } else { Value::Null },
            "timeout_secs": role.timeout_secs,
        }));
        self
    }

    /// One line of the plan (`what`, `angles`, `task 1` …).
    pub fn row(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.rows.push((key.into(), value.into()));
        self
    }

    /// The budget line.
    pub fn budget(&mut self, b: &BudgetArgs) -> &mut Self {
        let mut parts = Vec::new();
        if let Some(n) = b.budget_dispatches {
            parts.push(format!("{n} dispatch(es)"));
        }
        if let Some(n) = b.budget_tokens {
            parts.push(format!("{n} tokens"));
        }
        if let Some(x) = b.budget_usd {
            parts.push(format!("${x:.2}"));
        }
        self.row("budget", if parts.is_empty() { "none".to_string() } else { parts.join(" · ") })
    }

    /// A brief the first dispatches would carry, shown with `-v` (and always in `--json`).
    pub fn prompt(&mut self, label: impl Into<String>, text: impl Into<String>) -> &mut Self {
        self.prompts.push((label.into(), text.into()));
        self
    }

    /// Prints the plan on stdout (the document asked for) and ends the command: exit 0.
    pub fn print(&self, json_out: bool) -> CmdResult {
        if json_out {
            let plan: serde_json::Map<String, Value> =
                self.rows.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect();
            let prompts: Vec<Value> = self.prompts.iter().map(|(l, t)| json!({"label": l, "text": t})).collect();
            crate::ctx::print_json(&json!({
                "dry_run": true,
                "workflow": self.workflow,
                "roles": self.roles,
                "plan": plan,
                "prompts": prompts,
            }));
            return Ok(ExitStatus::Done);
        }
        let out = work_run::output::line;
        out(format!("dry run of work {}: nothing was dispatched, locked or written", self.workflow));
        let rows = self.role_rows.iter().chain(&self.rows);
        let width = rows.clone().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
        for (k, v) in rows {
            out(format!("  {k:<width$}  {v}"));
        }
        if work_run::progress::verbosity() == work_run::progress::Verbosity::Verbose {
            for (label, text) in &self.prompts {
                out(format!("----- brief: {label} -----"));
                out(text.trim_end().to_string());
            }
        } else if !self.prompts.is_empty() {
            out(format!("  (-v shows the first brief{})", if self.prompts.len() > 1 { "s" } else { "" }));
        }
        Ok(ExitStatus::Done)
    }
}
