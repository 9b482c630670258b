//! `GOAL.toml`: the binding contract of one goal, parsed and checked before anything runs.
//!
//! ```toml
//! id = "greeting"                      # optional; default: a slug of `name`, else of the objective
//! objective = "…"                      # the deliverable, at full detail
//! tier = "LIGHT"                       # LIGHT or HEAVY
//! tier_justification = "…"             # one line: why this tier
//! stop_line = "I'll stop right away when …"
//! max_attempts = 3                     # optional, per criterion and run (default 3)
//! scenario_timeout_secs = 300          # optional (default 300)
//!
//! [[criteria]]
//! id = "happy"                         # optional; default: a slug of `name`, else c1, c2, …
//! scenario = "./greet.sh world"        # `sh -c` in the repository root
//! pass = { exit_code = 0, stdout_contains = "hello, world" }
//! evidence = ["stdout", "exit_code"]   # optional; absent ⇒ stdout, stderr and exit code
//! ```
//!
//! Every key has one spelling (docs/ultra.md): an unknown key is refused naming the nearest
//! canonical one, a word (`tier`, `kind`, an `evidence` item) outside its list is refused
//! naming the valid words; only case and surrounding blanks of a word are folded. Every
//! refusal is one line ([`GoalError`]); a goal that parses is one the engine can run.
//!
//! Criteria counts are advice for whoever *writes* the goal (LIGHT 1–2, HEAVY 3+): the engine
//! runs whatever criteria it is given and records the mismatch in the notepad ([`Goal::notes`]).

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

/// The tier: sizes process, never honesty (tier triage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Tier {
    /// A known pattern with no open design decisions: 1–2 criteria, one dispatch for all of
    /// them per attempt, self-review in the notepad.
    #[serde(rename = "LIGHT")]
    Light,
    /// A fact that calls for care (new module, security, integration, schema, concurrency, …):
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
    /// A characterization pin: must PASS on the unchanged code and stay
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

/// Parses a tier word (case and surrounding blanks folded): `LIGHT` / `HEAVY`.
pub fn parse_tier(word: &str) -> Option<Tier> {
    match word.trim().to_ascii_lowercase().as_str() {
        "light" => Some(Tier::Light),
        "heavy" => Some(Tier::Heavy),
        _ => None,
    }
}

/// Parses a criterion kind (case and surrounding blanks folded): `change` (RED first) or
/// `pin` (green throughout — regression coverage for behaviour that is already correct).
pub fn parse_kind(word: &str) -> Option<CriterionKind> {
    match word.trim().to_ascii_lowercase().as_str() {
        "change" => Some(CriterionKind::Change),
        "pin" => Some(CriterionKind::Pin),
        _ => None,
    }
}

/// Parses an evidence word (case and surrounding blanks folded).
pub fn parse_evidence(word: &str) -> Option<EvidenceKind> {
    match word.trim().to_ascii_lowercase().as_str() {
        "stdout" => Some(EvidenceKind::Stdout),
        "stderr" => Some(EvidenceKind::Stderr),
        "exit_code" => Some(EvidenceKind::ExitCode),
        _ => None,
    }
}

/// The keys of the top level of `GOAL.toml`.
pub const GOAL_KEYS: [&str; 9] = [
    "id",
    "name",
    "objective",
    "tier",
    "tier_justification",
    "stop_line",
    "max_attempts",
    "scenario_timeout_secs",
    "criteria",
];
/// The keys of one `[[criteria]]` entry.
pub const CRITERION_KEYS: [&str; 11] = [
    "id",
    "name",
    "description",
    "kind",
    "scenario",
    "pass",
    "evidence",
    "failing_first",
    "max_attempts",
    "timeout_secs",
    "cleanup",
];
/// The keys of a criterion's `pass` table.
pub const PASS_KEYS: [&str; 4] = ["exit_code", "stdout_contains", "stdout_matches", "stderr_contains"];

/// A word field (`tier`, `kind`, an `evidence` item), checked after parsing so that the
/// refusal can suggest the nearest word.
type Word = String;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGoal {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    objective: String,
    tier: Word,
    #[serde(default)]
    tier_justification: Option<String>,
    stop_line: String,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    scenario_timeout_secs: Option<u64>,
    #[serde(default)]
    criteria: Vec<RawCriterion>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCriterion {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    scenario: String,
    #[serde(default)]
    pass: Option<PassSpec>,
    #[serde(default)]
    evidence: Option<Vec<Word>>,
    #[serde(default)]
    kind: Option<Word>,
    #[serde(default)]
    failing_first: Option<String>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    cleanup: Option<String>,
}

/// One success criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Criterion {
    /// Path-safe, unique within the goal.
    pub id: String,
    /// A name for a person (`name`/`title`), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A description for a person, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A behaviour change (RED first) or a pin (green throughout).
    pub kind: CriterionKind,
    /// The scenario command, run with `sh -c` in the repository root.
    pub scenario: String,
    /// The PASS/FAIL observable.
    pub pass: PassSpec,
    /// What is captured (sorted, without duplicates): what `evidence` named, plus whatever
    /// the observable reads; all three when `evidence` is absent.
    pub evidence: Vec<EvidenceKind>,
    /// The failing-first proof as the writer named it (a note; RED is the engine's own run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_first: Option<String>,
    /// Attempts per run before the criterion stops the goal.
    pub max_attempts: u32,
    /// The scenario's timeout in seconds.
    pub timeout_secs: u64,
    /// The paired teardown (cleanup is paired, never skipped), run with `sh -c` after
    /// every scenario run; a non-zero exit is a failed cleanup receipt.
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
    /// A name for a person, when given.
    pub name: Option<String>,
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
    /// What the engine decided about the file that a person should know (a default it
    /// applied, criteria not sized as the tier is sized); recorded in the notepad.
    pub notes: Vec<String>,
}

impl Goal {
    /// The criteria that are targets of implementation (kind `change`).
    pub fn change_criteria(&self) -> impl Iterator<Item = &Criterion> {
        self.criteria.iter().filter(|c| c.kind == CriterionKind::Change)
    }
}

/// Makes a kebab-case slug (at most 48 characters) from free text; `goal` when nothing is left.
pub fn slugify(text: &str) -> String {
    work_runtime::slug::kebab(text, 48, "goal")
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

/// Rewrites serde's "unknown field `x`, expected one of …" into one line naming the table and
/// the nearest canonical key.
fn unknown_key(msg: String, file: &str) -> String {
    let place = if msg.contains("`scenario`") {
        format!("a [[criteria]] entry of {file}")
    } else if msg.contains("`stdout_contains`") {
        format!("a `pass` table of {file}")
    } else {
        file.to_string()
    };
    work_runtime::suggest::rewrite_serde_unknown(&msg, "key", &place)
}

fn toml_message(e: &toml::de::Error, text: &str, file: &str) -> String {
    let msg = unknown_key(one_line(e.message()), file);
    match e.span() {
        Some(span) => format!("line {}: {msg}", line_of(text, span.start)),
        None => msg,
    }
}

fn read_raw(text: &str, file: &str) -> Result<RawGoal, GoalError> {
    toml::from_str(text).map_err(|e| GoalError::Parse { file: file.to_string(), message: toml_message(&e, text, file) })
}

/// Checks a word field against its valid words, folding case and surrounding blanks.
fn word<T>(given: &str, key: &str, valid: &[&str], parse: fn(&str) -> Option<T>) -> Result<T, String> {
    parse(given).ok_or_else(|| {
        let near = work_runtime::suggest::nearest(given, valid).map(|v| format!("; did you mean `{v}`?"));
        format!("`{key}` = {given:?} is not one of {}{}", valid.join(", "), near.unwrap_or_default())
    })
}

/// What every criterion inherits from the goal.
struct Defaults {
    max_attempts: u32,
    timeout_secs: u64,
}

/// Parses and checks a goal. `file` names the file in messages.
pub fn parse(text: &str, file: &str) -> Result<Goal, GoalError> {
    let raw = read_raw(text, file)?;
    let bad = |message: String| GoalError::Invalid { file: file.to_string(), message };
    let mut notes = Vec::new();

    let objective = raw.objective.trim().to_string();
    if objective.is_empty() {
        return Err(bad("`objective` is empty".into()));
    }
    let tier = word(&raw.tier, "tier", &["LIGHT", "HEAVY"], parse_tier).map_err(bad)?;
    let tier_justification = raw.tier_justification.map(|j| j.trim().to_string()).unwrap_or_default();
    if tier_justification.is_empty() {
        return Err(bad("`tier_justification` is missing or empty (record why this tier, in one line)".into()));
    }
    let stop_line = raw.stop_line.trim().to_string();
    if stop_line.is_empty() {
        return Err(bad("`stop_line` is empty (\"I'll stop right away when …\", one line)".into()));
    }
    if stop_line.contains('\n') {
        return Err(bad("`stop_line` spans several lines (write it in one line)".into()));
    }
    let name = raw.name.map(|n| one_line(&n)).filter(|n| !n.is_empty());
    let id = match raw.id {
        Some(id) => {
            let id = id.trim().to_string();
            check_id(&id).map_err(|e| bad(format!("`id`: {e}")))?;
            id
        }
        None => slugify(name.as_deref().unwrap_or(&objective)),
    };
    let max_attempts = raw.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
    if !(1..=MAX_MAX_ATTEMPTS).contains(&max_attempts) {
        return Err(bad(format!("`max_attempts` = {max_attempts} is out of range 1..={MAX_MAX_ATTEMPTS}")));
    }
    let timeout_secs = raw.scenario_timeout_secs.unwrap_or(DEFAULT_SCENARIO_TIMEOUT_SECS);
    if timeout_secs == 0 {
        return Err(bad("`scenario_timeout_secs` is 0".into()));
    }
    if raw.criteria.is_empty() {
        return Err(bad("it has no `[[criteria]]` (a goal needs at least one success criterion)".into()));
    }
    let defaults = Defaults { max_attempts, timeout_secs };
    let mut seen = BTreeSet::new();
    let mut criteria = Vec::new();
    for (i, c) in raw.criteria.into_iter().enumerate() {
        let cname = c.name.as_deref().map(one_line).filter(|s| !s.is_empty());
        let cid = match &c.id {
            Some(id) => {
                let id = id.trim().to_string();
                check_id(&id).map_err(|e| bad(format!("criterion id: {e}")))?;
                id
            }
            None => {
                let slug = cname.as_deref().map(slugify).filter(|s| check_id(s).is_ok() && !seen.contains(s));
                slug.unwrap_or_else(|| format!("c{}", i + 1))
            }
        };
        if !seen.insert(cid.clone()) {
            return Err(bad(format!("criterion id `{cid}` is used twice")));
        }
        let crit = criterion(c, cid.clone(), cname, &defaults, &mut notes)
            .map_err(|why| bad(format!("criterion `{cid}`: {why}")))?;
        criteria.push(crit);
    }

    let n = criteria.len();
    match tier {
        Tier::Light if n > 2 => notes.push(format!(
            "tier LIGHT with {n} criteria: LIGHT is sized at 1-2 (happy path + the riskiest edge); every criterion is still held"
        )),
        Tier::Heavy if n < 3 => notes.push(format!(
            "tier HEAVY with {n} criteria: HEAVY is sized at 3+ (happy, edge, regression, adversarial risk); run as given"
        )),
        _ => {}
    }
    if !criteria.iter().any(|c| c.kind == CriterionKind::Change) {
        return Err(bad("every criterion is a `pin`: name at least one behaviour change (kind = \"change\")".into()));
    }
    Ok(Goal { id, name, objective, tier, tier_justification, stop_line, criteria, notes })
}

/// Checks one criterion (its id already decided); the error reads after "criterion `ID`: ".
fn criterion(
    c: RawCriterion,
    id: String,
    name: Option<String>,
    defaults: &Defaults,
    notes: &mut Vec<String>,
) -> Result<Criterion, String> {
    let scenario = c.scenario.trim().to_string();
    if scenario.is_empty() {
        return Err("`scenario` is empty (name the literal command)".into());
    }
    let pass = match c.pass {
        None => {
            notes.push(format!("criterion `{id}` names no `pass`: PASS when the exit code is 0"));
            PassSpec { exit_code: Some(0), ..PassSpec::default() }
        }
        Some(p) => p,
    };
    let reads = pass.reads();
    if reads.is_empty() {
        return Err(format!("`pass` names no observable (use {})", PASS_KEYS.join(", ")));
    }
    if let Some(re) = &pass.stdout_matches {
        compile_matcher(re).map_err(|e| format!("`pass.stdout_matches`: {}", one_line(&e.to_string())))?;
    }
    for (key, text) in [("stdout_contains", &pass.stdout_contains), ("stderr_contains", &pass.stderr_contains)] {
        if text.as_deref().is_some_and(str::is_empty) {
            return Err(format!("`pass.{key}` is empty (it would always hold)"));
        }
    }
    let valid = [EvidenceKind::Stdout, EvidenceKind::Stderr, EvidenceKind::ExitCode];
    let mut evidence: BTreeSet<EvidenceKind> = match c.evidence {
        None => valid.into_iter().collect(),
        Some(words) => {
            let names = valid.map(EvidenceKind::as_str);
            words.iter().map(|w| word(w, "evidence", &names, parse_evidence)).collect::<Result<_, _>>()?
        }
    };
    // The observable must be decided on captured evidence: capture what it reads.
    evidence.extend(reads.iter().map(|(_, k)| *k));
    let kind = match &c.kind {
        Some(k) => word(k, "kind", &["change", "pin"], parse_kind)?,
        None => CriterionKind::Change,
    };
    let max_attempts = c.max_attempts.unwrap_or(defaults.max_attempts);
    if !(1..=MAX_MAX_ATTEMPTS).contains(&max_attempts) {
        return Err(format!("`max_attempts` = {max_attempts} is out of range 1..={MAX_MAX_ATTEMPTS}"));
    }
    let timeout_secs = c.timeout_secs.unwrap_or(defaults.timeout_secs);
    if timeout_secs == 0 {
        return Err("`timeout_secs` is 0".into());
    }
    let cleanup = match c.cleanup {
        Some(s) if s.trim().is_empty() => {
            return Err("`cleanup` is empty (omit it or name the teardown command)".into());
        }
        Some(s) => Some(s.trim().to_string()),
        None => None,
    };
    Ok(Criterion {
        id,
        name,
        description: c.description.map(|d| one_line(&d)).filter(|d| !d.is_empty()),
        kind,
        scenario,
        pass,
        evidence: evidence.into_iter().collect(),
        failing_first: c.failing_first.map(|d| one_line(&d)).filter(|d| !d.is_empty()),
        max_attempts,
        timeout_secs,
        cleanup,
    })
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

    fn ok(text: &str) -> Goal {
        parse(text, "GOAL.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn a_good_goal_parses_with_defaults() {
        let g = ok(GOOD);
        assert_eq!(g.id, "greet-the-world-from-greet-sh");
        assert_eq!(g.tier, Tier::Light);
        let c = &g.criteria[0];
        assert_eq!(c.evidence, vec![EvidenceKind::Stdout, EvidenceKind::ExitCode]);
        assert_eq!(c.max_attempts, DEFAULT_MAX_ATTEMPTS);
        assert_eq!(c.timeout_secs, DEFAULT_SCENARIO_TIMEOUT_SECS);
        assert_eq!(c.kind, CriterionKind::Change);
        assert_eq!(c.pass.describe(), "exit code = 0 and stdout contains \"hello, world\"");
        assert!(g.notes.is_empty(), "{:?}", g.notes);
    }

    #[test]
    fn unknown_and_missing_keys_are_refused_by_name() {
        let e = err(&GOOD.replace("tier = \"LIGHT\"", "tier = \"LIGHT\"\ncolour = 1"));
        assert!(e.contains("colour") && e.starts_with("parse goal `GOAL.toml`: line "), "{e}");
        let e = err(&GOOD.replace("pass = {", "pass = { exit_colour = 1,"));
        assert!(e.contains("exit_colour"), "{e}");
        let e = err(&GOOD.replace("id = \"happy\"", "id = \"happy\"\nflavour = 1"));
        assert!(e.contains("flavour"), "{e}");
        let e = err(&GOOD.replace("stop_line = \"I'll stop right away when greet.sh prints hello, world\"", ""));
        assert!(e.contains("missing field `stop_line`"), "{e}");
        let e = err(&GOOD.replace("\"LIGHT\"", "\"MEDIUM\""));
        assert!(e.contains("MEDIUM"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn other_spellings_are_refused_naming_the_canonical_key() {
        for (from, to, want) in [
            ("stop_line =", "stop_when =", "unknown key `stop_when` in GOAL.toml; did you mean `stop_line`?"),
            ("tier_justification =", "justification =", "did you mean `tier_justification`?"),
            ("objective =", "goal =", "unknown key `goal` in GOAL.toml"),
            ("[[criteria]]", "[[success_criteria]]", "unknown key `success_criteria`"),
            ("scenario =", "command =", "unknown key `command` in a [[criteria]] entry of GOAL.toml"),
            ("pass = {", "expect = {", "unknown key `expect` in a [[criteria]] entry"),
            (
                "exit_code = 0",
                "exit = 0",
                "unknown key `exit` in a `pass` table of GOAL.toml; did you mean `exit_code`?",
            ),
            ("stdout_contains", "stdout_contain", "did you mean `stdout_contains`?"),
        ] {
            let e = err(&GOOD.replace(from, to));
            assert!(e.contains(want) && !e.contains('\n'), "{to}: {e}");
        }
        for (from, to, want) in [
            ("\"LIGHT\"", "\"ligth\"", "`tier` = \"ligth\" is not one of LIGHT, HEAVY; did you mean `LIGHT`?"),
            (
                "\"stdout\", \"exit_code\"",
                "\"output\"",
                "`evidence` = \"output\" is not one of stdout, stderr, exit_code",
            ),
            (
                "id = \"happy\"",
                "id = \"happy\"\nkind = \"regression\"",
                "`kind` = \"regression\" is not one of change, pin",
            ),
        ] {
            let e = err(&GOOD.replace(from, to));
            assert!(e.contains(want), "{to}: {e}");
        }
        for (from, shape) in [
            ("pass = { exit_code = 0, stdout_contains = \"hello, world\" }", "pass = 0"),
            ("pass = { exit_code = 0, stdout_contains = \"hello, world\" }", "pass = \"exit 0\""),
            ("evidence = [\"stdout\", \"exit_code\", \"stdout\"]", "evidence = \"stdout\""),
        ] {
            let e = err(&GOOD.replace(from, shape));
            assert!(e.contains("invalid type"), "{shape}: {e}");
        }
        let e = err(&format!("[goal]\n{GOOD}"));
        assert!(e.contains("unknown key `goal`"), "{e}");
        // Case and surrounding blanks of a word are folded; the words themselves are not.
        let g = ok(&GOOD.replace("\"LIGHT\"", "\" light \"").replace("\"exit_code\"", "\"EXIT_CODE\""));
        assert_eq!(g.tier, Tier::Light);
        assert_eq!(g.criteria[0].evidence, vec![EvidenceKind::Stdout, EvidenceKind::ExitCode]);
    }

    #[test]
    fn rules_are_refused_with_one_line() {
        assert!(err(&GOOD.replace("one script following a known pattern", " ")).contains("tier_justification"));
        assert!(
            err(&GOOD.replace("tier_justification = \"one script following a known pattern\"", ""))
                .contains("tier_justification")
        );
        assert!(err(&GOOD.replace("scenario = \"sh greet.sh\"", "scenario = \"  \"")).contains("`scenario` is empty"));
        let no_criteria = GOOD.split("[[criteria]]").next().expect("head");
        assert!(err(no_criteria).contains("no `[[criteria]]`"));
        let twice = format!(
            "{GOOD}\n[[criteria]]\nid = \"happy\"\nscenario = \"true\"\nevidence = [\"exit_code\"]\npass = {{ exit_code = 0 }}\n"
        );
        assert!(err(&twice).contains("used twice"));
        assert!(
            err(&GOOD.replace("pass = { exit_code = 0, stdout_contains = \"hello, world\" }", "pass = {}"))
                .contains("names no observable")
        );
        assert!(
            err(&GOOD.replace("stdout_contains = \"hello, world\"", "stdout_matches = \"(\""))
                .contains("stdout_matches")
        );
        assert!(err(&GOOD.replace("objective", "id = \"../x\"\nobjective")).contains("not a valid id"));
        assert!(
            err(&GOOD.replace("id = \"happy\"", "id = \"happy\"\nkind = \"pin\""))
                .contains("every criterion is a `pin`")
        );
        assert!(err(&GOOD.replace("id = \"happy\"", "id = \"happy\"\nkind = \"sideways\"")).contains("`kind`"));
    }

    #[test]
    fn criteria_counts_off_the_tier_are_notes_not_refusals() {
        let extra =
            "\n[[criteria]]\nid = \"c{}\"\nscenario = \"true\"\nevidence = [\"exit_code\"]\npass = { exit_code = 0 }\n";
        let two = format!("{GOOD}{}", extra.replace("{}", "2"));
        assert!(ok(&two).notes.is_empty());
        let three = format!("{two}{}", extra.replace("{}", "3"));
        assert!(ok(&three).notes.iter().any(|n| n.contains("LIGHT with 3 criteria")));
        assert!(ok(&three.replace("\"LIGHT\"", "\"HEAVY\"")).notes.is_empty());
        let g = ok(&GOOD.replace("\"LIGHT\"", "\"HEAVY\""));
        assert_eq!(g.tier, Tier::Heavy);
        assert!(g.notes.iter().any(|n| n.contains("HEAVY with 1 criteria")), "{:?}", g.notes);
    }

    #[test]
    fn the_definition_fingerprint_follows_what_decides_the_criterion() {
        let a = ok(GOOD);
        let b = ok(&GOOD.replace("max_attempts", "x").replace("sh greet.sh", "sh greet.sh "));
        assert_eq!(a.criteria[0].definition_fingerprint(), b.criteria[0].definition_fingerprint());
        let c = ok(&GOOD.replace("hello, world\" }", "hello\" }"));
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
