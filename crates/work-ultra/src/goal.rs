//! `GOAL.toml`: the binding contract of one goal, parsed and checked before anything runs.
//!
//! ```toml
//! id = "greeting"                      # optional; default: a slug of the objective
//! objective = "…"                      # the deliverable, at full detail
//! tier = "LIGHT"                       # LIGHT (1–2 criteria) or HEAVY (3+ criteria)
//! tier_justification = "…"             # one line: why this tier
//! stop_line = "I'll stop right away when …"
//! max_attempts = 3                     # optional, per criterion and run (default 3)
//! scenario_timeout_secs = 300          # optional (default 300)
//!
//! [[criteria]]
//! id = "happy"
//! scenario = "./greet.sh world"        # `sh -c` in the repository root
//! evidence = ["stdout", "exit_code"]   # what is captured: stdout, stderr, exit_code
//! pass = { exit_code = 0, stdout_contains = "hello, world" }
//! ```
//!
//! Every rule here is a refusal with a one-line reason ([`GoalError`]); a goal that parses is
//! one the engine can run: unknown keys are refused by name, ids are path-safe and unique,
//! each observable names only evidence the criterion captures, the tier's criterion count
//! holds (seed: LIGHT 1–2, HEAVY 3+).

use regex::Regex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

/// The default number of attempts per criterion and run.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The default scenario timeout in seconds.
pub const DEFAULT_SCENARIO_TIMEOUT_SECS: u64 = 300;
/// The most attempts a goal may ask for.
pub const MAX_MAX_ATTEMPTS: u32 = 50;

/// Why a goal file was refused. Each message reads after "failed to …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoalError {
    /// The TOML does not parse or does not fit the schema (missing or unknown key, bad type).
    #[error("parse goal `{file}`: {message}")]
    Parse {
        /// The file as given.
        file: String,
        /// One line: where and what.
        message: String,
    },
    /// The goal parses but breaks a rule.
    #[error("accept goal `{file}`: {message}")]
    Invalid {
        /// The file as given.
        file: String,
        /// One line: which rule.
        message: String,
    },
}

/// The tier: sizes process, never honesty (seed: "Tier triage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Tier {
    /// A known pattern with no open design decisions: 1–2 criteria, one dispatch for all of
    /// them per attempt, self-review in the notepad.
    #[serde(rename = "LIGHT")]
    Light,
    /// A fact the seed names (new module, security, integration, schema, concurrency, …):
    /// 3+ criteria, one criterion at a time (RED → GREEN each), every scenario re-run after
    /// every increment.
    #[serde(rename = "HEAVY")]
    Heavy,
}

impl Tier {
    /// `LIGHT` or `HEAVY`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Light => "LIGHT",
            Tier::Heavy => "HEAVY",
        }
    }
}

/// What a criterion proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CriterionKind {
    /// A behaviour change: must be observed FAILING before any implementation dispatch
    /// (the failing-first proof) and PASSING after.
    #[default]
    Change,
    /// A characterization pin (seed: "PIN"): must PASS on the unchanged code and stay
    /// passing; it becomes the target of a dispatch only when an attempt broke it.
    Pin,
}

impl CriterionKind {
    /// `change` or `pin`.
    pub fn as_str(self) -> &'static str {
        match self {
            CriterionKind::Change => "change",
            CriterionKind::Pin => "pin",
        }
    }
}

/// One captured piece of evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// The scenario's stdout, saved as `<label>.stdout`.
    Stdout,
    /// The scenario's stderr, saved as `<label>.stderr`.
    Stderr,
    /// The exit code (always in `<label>.json`; naming it lets `pass.exit_code` read it).
    ExitCode,
}

impl EvidenceKind {
    /// The spelling in `GOAL.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceKind::Stdout => "stdout",
            EvidenceKind::Stderr => "stderr",
            EvidenceKind::ExitCode => "exit_code",
        }
    }
}

/// The PASS/FAIL observable: every check given must hold (at least one is required).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PassSpec {
    /// The exit code must equal this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// stdout must contain this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_contains: Option<String>,
    /// stdout must match this regular expression (Rust `regex` syntax, unanchored,
    /// multi-line: `^` and `$` match at line boundaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_matches: Option<String>,
    /// stderr must contain this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_contains: Option<String>,
}

impl PassSpec {
    /// The evidence each check reads.
    pub fn reads(&self) -> Vec<(&'static str, EvidenceKind)> {
        let mut v = Vec::new();
        if self.exit_code.is_some() {
            v.push(("exit_code", EvidenceKind::ExitCode));
        }
        if self.stdout_contains.is_some() {
            v.push(("stdout_contains", EvidenceKind::Stdout));
        }
        if self.stdout_matches.is_some() {
            v.push(("stdout_matches", EvidenceKind::Stdout));
        }
        if self.stderr_contains.is_some() {
            v.push(("stderr_contains", EvidenceKind::Stderr));
        }
        v
    }

    /// One line a person (or an agent) reads: `exit code = 0 and stdout contains "x"`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.exit_code {
            parts.push(format!("exit code = {c}"));
        }
        if let Some(s) = &self.stdout_contains {
            parts.push(format!("stdout contains {s:?}"));
        }
        if let Some(s) = &self.stdout_matches {
            parts.push(format!("stdout matches /{s}/"));
        }
        if let Some(s) = &self.stderr_contains {
            parts.push(format!("stderr contains {s:?}"));
        }
        parts.join(" and ")
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGoal {
    id: Option<String>,
    objective: String,
    tier: Tier,
    tier_justification: String,
    stop_line: String,
    max_attempts: Option<u32>,
    scenario_timeout_secs: Option<u64>,
    #[serde(default)]
    criteria: Vec<RawCriterion>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCriterion {
    id: String,
    scenario: String,
    pass: PassSpec,
    evidence: Vec<EvidenceKind>,
    #[serde(default)]
    kind: CriterionKind,
    max_attempts: Option<u32>,
    timeout_secs: Option<u64>,
    cleanup: Option<String>,
}

/// One success criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Criterion {
    /// Path-safe, unique within the goal.
    pub id: String,
    /// A behaviour change (RED first) or a pin (green throughout).
    pub kind: CriterionKind,
    /// The scenario command, run with `sh -c` in the repository root.
    pub scenario: String,
    /// The PASS/FAIL observable.
    pub pass: PassSpec,
    /// What is captured (sorted, without duplicates).
    pub evidence: Vec<EvidenceKind>,
    /// Attempts per run before the criterion stops the goal.
    pub max_attempts: u32,
    /// The scenario's timeout in seconds.
    pub timeout_secs: u64,
    /// The paired teardown (seed: "CLEANUP (PAIRED — NEVER SKIP)"), run with `sh -c` after
    /// every scenario run; a non-zero exit is an unverified cleanup receipt.
    pub cleanup: Option<String>,
}

impl Criterion {
    /// A fingerprint of everything that decides the criterion (scenario, observable,
    /// evidence, kind, cleanup): a RED captured for another definition is not this one's.
    pub fn definition_fingerprint(&self) -> String {
        let doc = serde_json::json!({
            "kind": self.kind,
            "scenario": self.scenario,
            "pass": self.pass,
            "evidence": self.evidence,
            "cleanup": self.cleanup,
        });
        hex::encode(Sha256::digest(doc.to_string().as_bytes()))[..16].to_string()
    }

    /// Whether `kind` is captured.
    pub fn captures(&self, kind: EvidenceKind) -> bool {
        self.evidence.contains(&kind)
    }
}

/// A goal that passed every check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Goal {
    /// The goal id (directory name under `.work/goals/`).
    pub id: String,
    /// The objective.
    pub objective: String,
    /// The tier.
    pub tier: Tier,
    /// Why this tier (one line).
    pub tier_justification: String,
    /// "I'll stop right away when …" (one line).
    pub stop_line: String,
    /// The criteria, in file order.
    pub criteria: Vec<Criterion>,
}

impl Goal {
    /// The criteria that are targets of implementation (kind `change`).
    pub fn change_criteria(&self) -> impl Iterator<Item = &Criterion> {
        self.criteria.iter().filter(|c| c.kind == CriterionKind::Change)
    }
}

/// Makes a kebab-case slug (at most 48 characters) from free text; `goal` when nothing is left.
pub fn slugify(text: &str) -> String {
    let mut out = String::new();
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 48 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "goal".into() } else { out }
}

/// Checks an id used as a directory name: `[A-Za-z0-9][A-Za-z0-9._-]*`, at most 64 characters,
/// not ending in `.`.
pub fn check_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && !id.ends_with('.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{id}` is not a valid id (letters, digits, `-`, `_`, `.`; starts with a letter or digit; 64 at most)"
        ))
    }
}

/// Compiles a `stdout_matches` pattern: multi-line, so `^`/`$` match at line boundaries.
pub fn compile_matcher(pattern: &str) -> Result<Regex, regex::Error> {
    regex::RegexBuilder::new(pattern).multi_line(true).size_limit(1 << 20).build()
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).map(|p| p.matches('\n').count() + 1).unwrap_or(1)
}

/// Parses and checks a goal. `file` names the file in messages.
pub fn parse(text: &str, file: &str) -> Result<Goal, GoalError> {
    let raw: RawGoal = toml::from_str(text).map_err(|e| {
        let msg = one_line(e.message());
        let message = match e.span() {
            Some(span) => format!("line {}: {msg}", line_of(text, span.start)),
            None => msg,
        };
        GoalError::Parse { file: file.to_string(), message }
    })?;
    let bad = |message: String| GoalError::Invalid { file: file.to_string(), message };

    let objective = raw.objective.trim().to_string();
    if objective.is_empty() {
        return Err(bad("`objective` is empty".into()));
    }
    let tier_justification = raw.tier_justification.trim().to_string();
    if tier_justification.is_empty() {
        return Err(bad("`tier_justification` is empty (record why this tier, in one line)".into()));
    }
    let stop_line = raw.stop_line.trim().to_string();
    if stop_line.is_empty() {
        return Err(bad("`stop_line` is empty (\"I'll stop right away when …\", one line)".into()));
    }
    if stop_line.contains('\n') {
        return Err(bad("`stop_line` spans several lines (write it in one line)".into()));
    }
    let id = match raw.id {
        Some(id) => {
            let id = id.trim().to_string();
            check_id(&id).map_err(|e| bad(format!("`id`: {e}")))?;
            id
        }
        None => slugify(&objective),
    };
    let goal_max = raw.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
    if !(1..=MAX_MAX_ATTEMPTS).contains(&goal_max) {
        return Err(bad(format!("`max_attempts` = {goal_max} is out of range 1..={MAX_MAX_ATTEMPTS}")));
    }
    let goal_timeout = raw.scenario_timeout_secs.unwrap_or(DEFAULT_SCENARIO_TIMEOUT_SECS);
    if goal_timeout == 0 {
        return Err(bad("`scenario_timeout_secs` is 0".into()));
    }
    if raw.criteria.is_empty() {
        return Err(bad("it has no `[[criteria]]` (a goal needs at least one success criterion)".into()));
    }

    let mut seen = BTreeSet::new();
    let mut criteria = Vec::new();
    for c in raw.criteria {
        let cid = c.id.trim().to_string();
        check_id(&cid).map_err(|e| bad(format!("criterion id: {e}")))?;
        if !seen.insert(cid.clone()) {
            return Err(bad(format!("criterion id `{cid}` is used twice")));
        }
        let scenario = c.scenario.trim().to_string();
        if scenario.is_empty() {
            return Err(bad(format!("criterion `{cid}`: `scenario` is empty (name the literal command)")));
        }
        let reads = c.pass.reads();
        if reads.is_empty() {
            return Err(bad(format!(
                "criterion `{cid}`: `pass` names no observable (use exit_code, stdout_contains, stdout_matches or stderr_contains)"
            )));
        }
        if let Some(re) = &c.pass.stdout_matches {
            compile_matcher(re)
                .map_err(|e| bad(format!("criterion `{cid}`: `pass.stdout_matches`: {}", one_line(&e.to_string()))))?;
        }
        for (key, text) in [("stdout_contains", &c.pass.stdout_contains), ("stderr_contains", &c.pass.stderr_contains)]
        {
            if text.as_deref().is_some_and(str::is_empty) {
                return Err(bad(format!("criterion `{cid}`: `pass.{key}` is empty (it would always hold)")));
            }
        }
        if c.evidence.is_empty() {
            return Err(bad(format!(
                "criterion `{cid}`: `evidence` is empty (name what is captured: stdout, stderr, exit_code)"
            )));
        }
        let evidence: Vec<EvidenceKind> = c.evidence.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
        for (key, needs) in reads {
            if !evidence.contains(&needs) {
                return Err(bad(format!(
                    "criterion `{cid}`: `pass.{key}` reads {} but `evidence` does not capture it",
                    needs.as_str()
                )));
            }
        }
        let max_attempts = c.max_attempts.unwrap_or(goal_max);
        if !(1..=MAX_MAX_ATTEMPTS).contains(&max_attempts) {
            return Err(bad(format!(
                "criterion `{cid}`: `max_attempts` = {max_attempts} is out of range 1..={MAX_MAX_ATTEMPTS}"
            )));
        }
        let timeout_secs = c.timeout_secs.unwrap_or(goal_timeout);
        if timeout_secs == 0 {
            return Err(bad(format!("criterion `{cid}`: `timeout_secs` is 0")));
        }
        let cleanup = match c.cleanup {
            Some(s) if s.trim().is_empty() => {
                return Err(bad(format!(
                    "criterion `{cid}`: `cleanup` is empty (omit it or name the teardown command)"
                )));
            }
            Some(s) => Some(s.trim().to_string()),
            None => None,
        };
        criteria.push(Criterion {
            id: cid,
            kind: c.kind,
            scenario,
            pass: c.pass,
            evidence,
            max_attempts,
            timeout_secs,
            cleanup,
        });
    }

    let n = criteria.len();
    match raw.tier {
        Tier::Light if n > 2 => {
            return Err(bad(format!(
                "tier LIGHT allows 1-2 criteria (happy path + the riskiest edge), this goal has {n}: make it HEAVY or cut criteria"
            )));
        }
        Tier::Heavy if n < 3 => {
            return Err(bad(format!(
                "tier HEAVY needs 3+ criteria (happy, edge, regression, adversarial risk), this goal has {n}"
            )));
        }
        _ => {}
    }
    if !criteria.iter().any(|c| c.kind == CriterionKind::Change) {
        return Err(bad("every criterion is a `pin`: name at least one behaviour change (kind = \"change\")".into()));
    }
    Ok(Goal { id, objective, tier: raw.tier, tier_justification, stop_line, criteria })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
objective = "Greet the world from greet.sh"
tier = "LIGHT"
tier_justification = "one script following a known pattern"
stop_line = "I'll stop right away when greet.sh prints hello, world"

[[criteria]]
id = "happy"
scenario = "sh greet.sh"
evidence = ["stdout", "exit_code", "stdout"]
pass = { exit_code = 0, stdout_contains = "hello, world" }
"#;

    fn err(text: &str) -> String {
        parse(text, "GOAL.toml").expect_err("refused").to_string()
    }

    #[test]
    fn a_good_goal_parses_with_defaults() {
        let g = parse(GOOD, "GOAL.toml").expect("parses");
        assert_eq!(g.id, "greet-the-world-from-greet-sh");
        assert_eq!(g.tier, Tier::Light);
        let c = &g.criteria[0];
        assert_eq!(c.evidence, vec![EvidenceKind::Stdout, EvidenceKind::ExitCode]);
        assert_eq!(c.max_attempts, DEFAULT_MAX_ATTEMPTS);
        assert_eq!(c.timeout_secs, DEFAULT_SCENARIO_TIMEOUT_SECS);
        assert_eq!(c.kind, CriterionKind::Change);
        assert_eq!(c.pass.describe(), "exit code = 0 and stdout contains \"hello, world\"");
    }

    #[test]
    fn unknown_and_missing_keys_are_refused_by_name() {
        let e = err(&GOOD.replace("tier = \"LIGHT\"", "tier = \"LIGHT\"\ncolour = 1"));
        assert!(e.contains("colour") && e.starts_with("parse goal `GOAL.toml`: line "), "{e}");
        let e = err(&GOOD.replace("pass = {", "pass = { exit_status = 1,"));
        assert!(e.contains("exit_status"), "{e}");
        let e = err(&GOOD.replace("stop_line = \"I'll stop right away when greet.sh prints hello, world\"", ""));
        assert!(e.contains("missing field `stop_line`"), "{e}");
        let e = err(&GOOD.replace("\"LIGHT\"", "\"MEDIUM\""));
        assert!(e.contains("MEDIUM"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn rules_are_refused_with_one_line() {
        assert!(err(&GOOD.replace("one script following a known pattern", " ")).contains("tier_justification"));
        assert!(err(&GOOD.replace("scenario = \"sh greet.sh\"", "scenario = \"  \"")).contains("`scenario` is empty"));
        let no_criteria = GOOD.split("[[criteria]]").next().expect("head");
        assert!(err(no_criteria).contains("no `[[criteria]]`"));
        let twice = format!(
            "{GOOD}\n[[criteria]]\nid = \"happy\"\nscenario = \"true\"\nevidence = [\"exit_code\"]\npass = {{ exit_code = 0 }}\n"
        );
        assert!(err(&twice).contains("used twice"));
        assert!(
            err(&GOOD.replace("evidence = [\"stdout\", \"exit_code\", \"stdout\"]", "evidence = [\"exit_code\"]"))
                .contains("reads stdout but `evidence` does not capture it")
        );
        assert!(
            err(&GOOD.replace("pass = { exit_code = 0, stdout_contains = \"hello, world\" }", "pass = {}"))
                .contains("names no observable")
        );
        assert!(
            err(&GOOD.replace("stdout_contains = \"hello, world\"", "stdout_matches = \"(\""))
                .contains("stdout_matches")
        );
        assert!(err(&GOOD.replace("objective", "id = \"../x\"\nobjective")).contains("not a valid id"));
        assert!(err(&GOOD.replace("\"LIGHT\"", "\"HEAVY\"")).contains("HEAVY needs 3+"));
        assert!(
            err(&GOOD.replace("id = \"happy\"", "id = \"happy\"\nkind = \"pin\""))
                .contains("every criterion is a `pin`")
        );
    }

    #[test]
    fn light_allows_at_most_two_criteria() {
        let extra =
            "\n[[criteria]]\nid = \"c{}\"\nscenario = \"true\"\nevidence = [\"exit_code\"]\npass = { exit_code = 0 }\n";
        let two = format!("{GOOD}{}", extra.replace("{}", "2"));
        assert_eq!(parse(&two, "g").expect("two").criteria.len(), 2);
        let three = format!("{two}{}", extra.replace("{}", "3"));
        assert!(err(&three).contains("LIGHT allows 1-2"));
        let heavy = three.replace("\"LIGHT\"", "\"HEAVY\"");
        assert_eq!(parse(&heavy, "g").expect("heavy").tier, Tier::Heavy);
    }

    #[test]
    fn the_definition_fingerprint_follows_what_decides_the_criterion() {
        let a = parse(GOOD, "g").expect("a");
        let b = parse(&GOOD.replace("max_attempts", "x").replace("sh greet.sh", "sh greet.sh "), "g").expect("b");
        assert_eq!(a.criteria[0].definition_fingerprint(), b.criteria[0].definition_fingerprint());
        let c = parse(&GOOD.replace("hello, world\" }", "hello\" }"), "g").expect("c");
        assert_ne!(a.criteria[0].definition_fingerprint(), c.criteria[0].definition_fingerprint());
    }

    #[test]
    fn the_shipped_example_and_the_documented_example_parse() {
        let example = include_str!("../../../examples/goals/greet.toml");
        let g = parse(example, "examples/goals/greet.toml").expect("the example parses");
        assert_eq!((g.id.as_str(), g.tier, g.criteria.len()), ("greet", Tier::Light, 2));
        let doc = include_str!("../../../docs/ultra.md");
        let block = doc.split("```toml\n").nth(1).and_then(|b| b.split("```").next()).expect("a toml block");
        let d = parse(block, "docs/ultra.md").expect("the documented example parses");
        let defs = |g: &Goal| g.criteria.iter().map(Criterion::definition_fingerprint).collect::<Vec<_>>();
        assert_eq!(defs(&d), defs(&g), "the doc shows the shipped example's criteria");
    }

    #[test]
    fn slugs_are_path_safe() {
        assert_eq!(slugify("  Fix the *login* bug!  "), "fix-the-login-bug");
        assert_eq!(slugify("…"), "goal");
        assert!(check_id(&slugify(&"x".repeat(200))).is_ok());
    }
}
