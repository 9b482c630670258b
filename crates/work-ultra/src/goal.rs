//! `GOAL.toml`: the binding contract of one goal, parsed and checked before anything runs.
//!
//! ```toml
//! id = "greeting"                      # optional; default: a slug of `name`, else of the objective
//! objective = "…"                      # the deliverable, at full detail
//! tier = "LIGHT"                       # LIGHT or HEAVY (any case)
//! tier_justification = "…"             # one line: why this tier
//! stop_line = "I'll stop right away when …"
//! max_attempts = 3                     # optional, per criterion and run (default 3)
//! scenario_timeout_secs = 300          # optional (default 300)
//!
//! [[criteria]]
//! id = "happy"                         # optional; default: a slug of `name`, else c1, c2, …
//! scenario = "./greet.sh world"        # `sh -c` in the repository root
//! pass = { exit_code = 0, stdout_contains = "hello, world" }   # or 0, or "exit 0 and stdout contains \"hello\""
//! evidence = ["stdout", "exit_code"]   # optional: a word, a list; absent ⇒ stdout, stderr and exit code
//! ```
//!
//! The schema is tolerant of the words a writer takes from CONTRACTS §7 (`justification`,
//! `stop`, `success_criteria`, `command`, `expect`, `goal_id`, an optional `[goal]` wrapper, …;
//! the full list is in docs/ultra.md) and strict about everything else: a truly unknown key is
//! refused by name, two spellings of one key are refused as a duplicate, a `pass` phrase
//! outside [`parse_phrase`]'s grammar is refused naming its criterion. Every refusal is one
//! line ([`GoalError`]); a goal that parses is one the engine can run.
//!
//! What is only advice in the seed is a note, not a refusal: the seed sizes criteria by tier
//! (LIGHT 1–2, HEAVY 3+) for the person or agent *writing* them; the engine runs whatever
//! criteria it is given and records the mismatch in the notepad ([`Goal::notes`]).

use regex::Regex;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fmt;

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

/// Parses a tier word, any case: `light` / `heavy`.
pub fn parse_tier(word: &str) -> Option<Tier> {
    match word.trim().to_ascii_lowercase().as_str() {
        "light" => Some(Tier::Light),
        "heavy" => Some(Tier::Heavy),
        _ => None,
    }
}

/// Parses a criterion kind, any case. `change` (also `behaviour`, `behavior`, `feature`, `fix`,
/// `happy`, `edge`, `adversarial`, `boundary`, `error`): RED first. `pin` (also `regression`,
/// `guard`, `characterization`, `characterisation`, `keep`): green throughout — the seed's
/// regression coverage "for behavior that is already correct".
pub fn parse_kind(word: &str) -> Option<CriterionKind> {
    match word.trim().to_ascii_lowercase().replace(['-', ' '], "_").as_str() {
        "change" | "behaviour" | "behavior" | "behaviour_change" | "behavior_change" | "feature" | "fix" | "happy"
        | "happy_path" | "edge" | "edge_case" | "adversarial" | "boundary" | "error" => Some(CriterionKind::Change),
        "pin" | "regression" | "guard" | "characterization" | "characterisation" | "keep" => Some(CriterionKind::Pin),
        _ => None,
    }
}

/// `tier = "LIGHT"` (any case) or `tier = { level = "HEAVY", justification = "…" }`.
#[derive(Debug)]
struct TierField {
    tier: Tier,
    justification: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TierTable {
    #[serde(alias = "name", alias = "value", alias = "tier")]
    level: String,
    #[serde(default, alias = "reason", alias = "why", alias = "rationale", alias = "tier_justification")]
    justification: Option<String>,
}

impl<'de> Deserialize<'de> for TierField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TierField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"LIGHT\" or \"HEAVY\" (any case), or { level = \"HEAVY\", justification = \"…\" }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TierField, E> {
                let tier = parse_tier(v).ok_or_else(|| E::custom(format!("unknown tier `{v}`: use LIGHT or HEAVY")))?;
                Ok(TierField { tier, justification: None })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TierField, A::Error> {
                let t = TierTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let tier = parse_tier(&t.level)
                    .ok_or_else(|| de::Error::custom(format!("unknown tier `{}`: use LIGHT or HEAVY", t.level)))?;
                Ok(TierField { tier, justification: t.justification })
            }
        }
        d.deserialize_any(V)
    }
}

/// `pass`: a table of checks, an exit code, a phrase, or a list of phrases.
#[derive(Debug)]
enum PassField {
    Table(PassTable),
    Code(i64),
    Phrases(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PassTable {
    #[serde(
        default,
        alias = "exit",
        alias = "exit_status",
        alias = "status",
        alias = "code",
        alias = "returncode",
        alias = "return_code",
        alias = "exitcode"
    )]
    exit_code: Option<i32>,
    #[serde(
        default,
        alias = "stdout",
        alias = "contains",
        alias = "output_contains",
        alias = "stdout_includes",
        alias = "output"
    )]
    stdout_contains: Option<String>,
    #[serde(
        default,
        alias = "stdout_regex",
        alias = "regex",
        alias = "matches",
        alias = "stdout_pattern",
        alias = "pattern",
        alias = "stdout_re"
    )]
    stdout_matches: Option<String>,
    #[serde(default, alias = "stderr", alias = "stderr_includes")]
    stderr_contains: Option<String>,
    /// Free text for a person; not a check.
    #[serde(default, alias = "note")]
    #[expect(dead_code, reason = "accepted so that a described observable parses; never a check")]
    description: Option<String>,
}

impl<'de> Deserialize<'de> for PassField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PassField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of checks, an exit code, or a phrase such as \"exit 0\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PassField, E> {
                Ok(PassField::Code(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PassField, E> {
                Ok(PassField::Code(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PassField, E> {
                Ok(PassField::Phrases(vec![v.to_string()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PassField, A::Error> {
                let mut v = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    v.push(s);
                }
                Ok(PassField::Phrases(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<PassField, A::Error> {
                Ok(PassField::Table(PassTable::deserialize(de::value::MapAccessDeserializer::new(map))?))
            }
        }
        d.deserialize_any(V)
    }
}

/// `evidence`: one word or phrase, or a list of them.
#[derive(Debug)]
struct EvidenceField(Vec<String>);

impl<'de> Deserialize<'de> for EvidenceField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EvidenceField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a word such as \"stdout\" or a list of them")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EvidenceField, E> {
                Ok(EvidenceField(vec![v.to_string()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EvidenceField, A::Error> {
                let mut v = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    v.push(s);
                }
                Ok(EvidenceField(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// `kind`: a word, any case ([`parse_kind`]).
#[derive(Debug)]
struct KindField(CriterionKind);

impl<'de> Deserialize<'de> for KindField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_kind(&s)
            .map(KindField)
            .ok_or_else(|| de::Error::custom(format!("unknown kind `{s}`: use \"change\" or \"pin\"")))
    }
}

/// `[[criteria]]` (a list) or `[criteria.<id>]` (a table keyed by id).
#[derive(Debug, Default)]
struct CriteriaField(Vec<RawCriterion>);

impl<'de> Deserialize<'de> for CriteriaField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CriteriaField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of criteria ([[criteria]]) or a table of them keyed by id ([criteria.<id>])")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CriteriaField, A::Error> {
                let mut v = Vec::new();
                while let Some(c) = seq.next_element::<RawCriterion>()? {
                    v.push(c);
                }
                Ok(CriteriaField(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CriteriaField, A::Error> {
                let mut v = Vec::new();
                while let Some((key, mut c)) = map.next_entry::<String, RawCriterion>()? {
                    c.key = Some(key);
                    v.push(c);
                }
                Ok(CriteriaField(v))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGoal {
    #[serde(default, alias = "goal_id", alias = "slug")]
    id: Option<String>,
    #[serde(default, alias = "title")]
    name: Option<String>,
    #[serde(alias = "goal", alias = "deliverable", alias = "description", alias = "summary")]
    objective: String,
    tier: TierField,
    #[serde(
        default,
        alias = "justification",
        alias = "tier_reason",
        alias = "tier_rationale",
        alias = "tier_why",
        alias = "rationale",
        alias = "why",
        alias = "reason"
    )]
    tier_justification: Option<String>,
    #[serde(
        alias = "stop",
        alias = "stop_when",
        alias = "stop_condition",
        alias = "stop_rule",
        alias = "stop_if",
        alias = "when_to_stop",
        alias = "stopline"
    )]
    stop_line: String,
    #[serde(default, alias = "attempts")]
    max_attempts: Option<u32>,
    #[serde(default, alias = "timeout_secs", alias = "timeout", alias = "timeout_seconds", alias = "scenario_timeout")]
    scenario_timeout_secs: Option<u64>,
    #[serde(default, alias = "success_criteria", alias = "criterion", alias = "scenarios")]
    criteria: CriteriaField,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCriterion {
    #[serde(default, alias = "criterion_id", alias = "slug", alias = "key")]
    id: Option<String>,
    #[serde(default, alias = "title", alias = "label")]
    name: Option<String>,
    #[serde(default, alias = "desc", alias = "summary", alias = "details")]
    description: Option<String>,
    #[serde(
        alias = "command",
        alias = "cmd",
        alias = "run",
        alias = "scenario_command",
        alias = "script",
        alias = "shell",
        alias = "invocation"
    )]
    scenario: String,
    #[serde(
        default,
        alias = "expect",
        alias = "expected",
        alias = "expectation",
        alias = "observable",
        alias = "pass_when",
        alias = "pass_if",
        alias = "passes_when",
        alias = "pass_condition",
        alias = "pass_fail",
        alias = "check"
    )]
    pass: Option<PassField>,
    #[serde(
        default,
        alias = "captures",
        alias = "capture",
        alias = "artifact",
        alias = "artifacts",
        alias = "evidence_captured"
    )]
    evidence: Option<EvidenceField>,
    #[serde(default, alias = "type")]
    kind: Option<KindField>,
    #[serde(default, alias = "failing_first_proof", alias = "red", alias = "red_proof")]
    failing_first: Option<String>,
    #[serde(default, alias = "attempts")]
    max_attempts: Option<u32>,
    #[serde(default, alias = "timeout", alias = "timeout_seconds", alias = "scenario_timeout_secs")]
    timeout_secs: Option<u64>,
    #[serde(default, alias = "teardown", alias = "cleanup_command")]
    cleanup: Option<String>,
    /// The table key, for `[criteria.<id>]`.
    #[serde(skip)]
    key: Option<String>,
}

/// The grammar of a `pass` phrase, for messages.
pub const PHRASE_GRAMMAR: &str = "write e.g. \"exit 0\", \"exit code 2\", \"stdout contains \\\"text\\\"\", \"stderr contains \\\"text\\\"\", \"stdout matches /regex/\", joined with `and`, or a table { exit_code = 0, stdout_contains = \"…\" }";

/// Parses a `pass` phrase into checks. The grammar (keywords in any case):
///
/// ```text
/// phrase  := clause (("and" | "&&" | ",") clause)*
/// clause  := EXIT [("=" | "==" | "is" | ":" | "with")] INT       EXIT := exit | exits | exit code | exit_code
///                                                                     | exit status | exit-code | status | returns
///          | "succeeds"                                                   (exit 0)
///          | ("stdout" | "output" | "stderr") ("contains" | "includes" | "has") TEXT
///          | ("stdout" | "output") ("matches" | "=~" | "~") REGEX
/// TEXT    := "double quoted" | 'single quoted' | bare text up to the next " and "
/// REGEX   := /slashed/ | TEXT
/// ```
pub fn parse_phrase(src: &str) -> Result<PassSpec, String> {
    let mut spec = PassSpec::default();
    let mut rest = src.trim();
    if rest.is_empty() {
        return Err("it is empty".into());
    }
    loop {
        rest = clause(rest, &mut spec)?.trim_start();
        if rest.is_empty() {
            return Ok(spec);
        }
        rest = strip_kw(rest, &["and", "&&", ","])
            .ok_or_else(|| format!("`{}` after a check (join checks with `and`)", first_words(rest)))?
            .trim_start();
    }
}

fn first_words(s: &str) -> String {
    let w: Vec<&str> = s.split_whitespace().take(4).collect();
    w.join(" ")
}

/// Strips the first keyword of `kws` (any case) that `s` starts with at a word boundary.
fn strip_kw<'a>(s: &'a str, kws: &[&str]) -> Option<&'a str> {
    for kw in kws {
        if s.len() >= kw.len() && s.is_char_boundary(kw.len()) && s[..kw.len()].eq_ignore_ascii_case(kw) {
            let rest = &s[kw.len()..];
            let word_kw = kw.chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if !word_kw || !rest.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Some(rest);
            }
        }
    }
    None
}

fn clause<'a>(s: &'a str, spec: &mut PassSpec) -> Result<&'a str, String> {
    const EXIT: &[&str] = &[
        "exit code",
        "exit_code",
        "exit-code",
        "exitcode",
        "exit status",
        "exit_status",
        "exits with code",
        "exits with",
        "exits",
        "exit",
        "return code",
        "returncode",
        "returns",
        "status",
    ];
    if let Some(r) = strip_kw(s, &["succeeds", "success"]) {
        set_once(&mut spec.exit_code, 0, "an exit code")?;
        return Ok(r);
    }
    if let Some(r) = strip_kw(s, EXIT) {
        let r = r.trim_start();
        let r = strip_kw(r, &["==", "=", ":", "is", "with"]).unwrap_or(r).trim_start();
        let end =
            r.char_indices().find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-'))).map_or(r.len(), |(i, _)| i);
        let code: i32 = r[..end].parse().map_err(|_| format!("no exit code after `{}`", first_words(s)))?;
        set_once(&mut spec.exit_code, code, "an exit code")?;
        return Ok(&r[end..]);
    }
    let (stream, r) = if let Some(r) = strip_kw(s, &["stdout", "output"]) {
        ("stdout", r)
    } else if let Some(r) = strip_kw(s, &["stderr"]) {
        ("stderr", r)
    } else {
        return Err(format!("`{}` is not a check", first_words(s)));
    };
    let r = r.trim_start();
    if let Some(r) = strip_kw(r, &["contains", "includes", "has"]) {
        let (text, rest) = operand(r.trim_start(), false)?;
        if text.is_empty() {
            return Err(format!("`{stream} contains` with empty text"));
        }
        let slot = if stream == "stdout" { &mut spec.stdout_contains } else { &mut spec.stderr_contains };
        set_once(slot, text, &format!("`{stream} contains`"))?;
        return Ok(rest);
    }
    if let Some(r) = strip_kw(r, &["matches", "=~", "~"]) {
        if stream == "stderr" {
            return Err("`stderr matches` is not a check (use `stderr contains`)".into());
        }
        let (re, rest) = operand(r.trim_start(), true)?;
        set_once(&mut spec.stdout_matches, re, "`stdout matches`")?;
        return Ok(rest);
    }
    Err(format!("`{stream}` must be followed by `contains` or `matches`"))
}

fn set_once<T>(slot: &mut Option<T>, v: T, what: &str) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("it names {what} twice (use a table, or a regex)"));
    }
    *slot = Some(v);
    Ok(())
}

/// A quoted, slashed (regex only) or bare operand, and what follows it.
fn operand(s: &str, regex: bool) -> Result<(String, &str), String> {
    let mut chars = s.char_indices();
    match chars.next() {
        Some((_, q @ ('"' | '\'' | '/'))) if q != '/' || regex => {
            let mut out = String::new();
            let mut escaped = false;
            for (i, c) in chars {
                if escaped {
                    // `\q` is the quote itself; `\\` is a backslash inside quotes; anything else
                    // (a regex escape such as `\d`) is kept as written.
                    if !(c == q || (c == '\\' && q != '/')) {
                        out.push('\\');
                    }
                    out.push(c);
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    return Ok((out, &s[i + c.len_utf8()..]));
                } else {
                    out.push(c);
                }
            }
            Err(format!("`{q}` is never closed"))
        }
        _ => {
            // Bare text: up to the next ` and ` (any case), or the end.
            let lower = s.to_ascii_lowercase();
            let end = lower.find(" and ").or_else(|| lower.find(" && ")).unwrap_or(s.len());
            Ok((s[..end].trim().to_string(), &s[end..]))
        }
    }
}

/// Reads `evidence` words: what is captured, and the free text that named nothing known.
fn evidence_words(items: &[String]) -> (BTreeSet<EvidenceKind>, Vec<String>) {
    use EvidenceKind::{ExitCode, Stderr, Stdout};
    let mut kinds = BTreeSet::new();
    let mut unknown = Vec::new();
    for item in items {
        let pieces: Vec<String> = item
            .to_ascii_lowercase()
            .replace(" and ", ",")
            .split([',', '+', ';'])
            .map(|p| p.trim().replace(['-', ' '], "_"))
            .filter(|p| !p.is_empty())
            .collect();
        let mut got = BTreeSet::new();
        let mut all_known = !pieces.is_empty();
        for p in &pieces {
            let k: &[EvidenceKind] = match p.as_str() {
                "stdout" | "out" | "standard_output" => &[Stdout],
                "stderr" | "err" | "standard_error" => &[Stderr],
                "exit_code" | "exitcode" | "exit" | "exit_status" | "status" | "code" | "returncode"
                | "return_code" => &[ExitCode],
                "output" | "streams" => &[Stdout, Stderr],
                "all" | "everything" => &[Stdout, Stderr, ExitCode],
                _ => {
                    all_known = false;
                    &[]
                }
            };
            got.extend(k.iter().copied());
        }
        if all_known {
            kinds.extend(got);
        } else if !item.trim().is_empty() {
            unknown.push(item.trim().to_string());
        }
    }
    (kinds, unknown)
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
    /// the observable reads; all three when `evidence` is absent or free text.
    pub evidence: Vec<EvidenceKind>,
    /// `evidence` as written when it was free text rather than known words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_note: Option<String>,
    /// The failing-first proof as the writer named it (a note; RED is the engine's own run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_first: Option<String>,
    /// Attempts per run before the criterion stops the goal.
    pub max_attempts: u32,
    /// The scenario's timeout in seconds.
    pub timeout_secs: u64,
    /// The paired teardown (seed: "CLEANUP (PAIRED — NEVER SKIP)"), run with `sh -c` after
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
    /// applied, criteria not sized as the seed sizes the tier); recorded in the notepad.
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

/// Shortens serde's "unknown field `x`, expected one of <every key and alias>" to the
/// canonical keys of that table.
fn short_unknown(msg: String) -> String {
    const TABLES: &[(&str, &str)] = &[
        (
            "`scenario`",
            "id, name, description, scenario, pass, evidence, kind, failing_first, max_attempts, timeout_secs, cleanup",
        ),
        ("`stdout_contains`", "exit_code, stdout_contains, stdout_matches, stderr_contains, description"),
        ("`level`", "level, justification"),
        (
            "`stop_line`",
            "id, name, objective, tier, tier_justification, stop_line, max_attempts, scenario_timeout_secs, criteria",
        ),
    ];
    let Some((head, expected)) = msg.split_once(", expected one of ") else { return msg };
    match TABLES.iter().find(|(key, _)| expected.contains(key)) {
        Some((_, keys)) => format!("{head} (keys: {keys}; other accepted spellings: docs/ultra.md)"),
        None => msg,
    }
}

fn toml_message(e: &toml::de::Error, text: Option<&str>) -> String {
    let msg = short_unknown(one_line(e.message()));
    match (text, e.span()) {
        (Some(text), Some(span)) => format!("line {}: {msg}", line_of(text, span.start)),
        _ => msg,
    }
}

/// Reads the raw goal: straight from the text (messages carry line numbers), or, when a
/// `[goal]` table wraps the keys, from the merged table.
fn read_raw(text: &str, file: &str) -> Result<RawGoal, GoalError> {
    let perr = |message: String| GoalError::Parse { file: file.to_string(), message };
    let mut table: toml::Table = toml::from_str(text).map_err(|e| perr(toml_message(&e, Some(text))))?;
    if !matches!(table.get("goal"), Some(toml::Value::Table(_))) {
        return toml::from_str(text).map_err(|e| perr(toml_message(&e, Some(text))));
    }
    let Some(toml::Value::Table(inner)) = table.remove("goal") else {
        return Err(perr("`goal` is not a table".into()));
    };
    for (k, v) in inner {
        if table.contains_key(&k) {
            return Err(perr(format!("`{k}` is set both in `[goal]` and at the top level")));
        }
        table.insert(k, v);
    }
    table.try_into().map_err(|e: toml::de::Error| perr(format!("in `[goal]`: {}", toml_message(&e, None))))
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
    let tier = raw.tier.tier;
    let tier_justification = match (raw.tier_justification, raw.tier.justification) {
        (Some(_), Some(_)) => {
            return Err(bad("the tier's justification is given twice (in `tier` and as `tier_justification`)".into()));
        }
        (Some(j), None) | (None, Some(j)) => j.trim().to_string(),
        (None, None) => String::new(),
    };
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
    let goal_max = raw.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
    if !(1..=MAX_MAX_ATTEMPTS).contains(&goal_max) {
        return Err(bad(format!("`max_attempts` = {goal_max} is out of range 1..={MAX_MAX_ATTEMPTS}")));
    }
    let goal_timeout = raw.scenario_timeout_secs.unwrap_or(DEFAULT_SCENARIO_TIMEOUT_SECS);
    if goal_timeout == 0 {
        return Err(bad("`scenario_timeout_secs` is 0".into()));
    }
    if raw.criteria.0.is_empty() {
        return Err(bad("it has no `[[criteria]]` (a goal needs at least one success criterion)".into()));
    }

    let mut seen = BTreeSet::new();
    let mut criteria = Vec::new();
    for (i, c) in raw.criteria.0.into_iter().enumerate() {
        let n = i + 1;
        let cname = c.name.map(|s| one_line(&s)).filter(|s| !s.is_empty());
        let cid = match (c.id, c.key) {
            (Some(id), Some(key)) if id.trim() != key => {
                return Err(bad(format!("criterion `{key}` says `id = \"{}\"` (use one of them)", id.trim())));
            }
            (Some(id), _) => {
                let id = id.trim().to_string();
                check_id(&id).map_err(|e| bad(format!("criterion id: {e}")))?;
                id
            }
            (None, Some(key)) => {
                check_id(&key).map_err(|e| bad(format!("criterion id: {e}")))?;
                key
            }
            (None, None) => {
                let slug = cname.as_deref().map(slugify).filter(|s| check_id(s).is_ok() && !seen.contains(s));
                slug.unwrap_or_else(|| format!("c{n}"))
            }
        };
        if !seen.insert(cid.clone()) {
            return Err(bad(format!("criterion id `{cid}` is used twice")));
        }
        let scenario = c.scenario.trim().to_string();
        if scenario.is_empty() {
            return Err(bad(format!("criterion `{cid}`: `scenario` is empty (name the literal command)")));
        }
        let pass = match c.pass {
            None => {
                notes.push(format!("criterion `{cid}` names no `pass`: PASS when the exit code is 0"));
                PassSpec { exit_code: Some(0), ..PassSpec::default() }
            }
            Some(PassField::Code(code)) => {
                let code = i32::try_from(code)
                    .map_err(|_| bad(format!("criterion `{cid}`: `pass` = {code} is not an exit code")))?;
                PassSpec { exit_code: Some(code), ..PassSpec::default() }
            }
            Some(PassField::Phrases(phrases)) => {
                let joined = phrases.join(" and ");
                parse_phrase(&joined).map_err(|why| {
                    bad(format!(
                        "criterion `{cid}`: `pass` = {:?} is not a PASS phrase ({why}); {PHRASE_GRAMMAR}",
                        one_line(&joined)
                    ))
                })?
            }
            Some(PassField::Table(t)) => PassSpec {
                exit_code: t.exit_code,
                stdout_contains: t.stdout_contains,
                stdout_matches: t.stdout_matches,
                stderr_contains: t.stderr_contains,
            },
        };
        let reads = pass.reads();
        if reads.is_empty() {
            return Err(bad(format!(
                "criterion `{cid}`: `pass` names no observable (use exit_code, stdout_contains, stdout_matches or stderr_contains)"
            )));
        }
        if let Some(re) = &pass.stdout_matches {
            compile_matcher(re)
                .map_err(|e| bad(format!("criterion `{cid}`: `pass.stdout_matches`: {}", one_line(&e.to_string()))))?;
        }
        for (key, text) in [("stdout_contains", &pass.stdout_contains), ("stderr_contains", &pass.stderr_contains)] {
            if text.as_deref().is_some_and(str::is_empty) {
                return Err(bad(format!("criterion `{cid}`: `pass.{key}` is empty (it would always hold)")));
            }
        }
        let all = [EvidenceKind::Stdout, EvidenceKind::Stderr, EvidenceKind::ExitCode];
        let (mut evidence, evidence_note) = match c.evidence {
            None => (all.into_iter().collect::<BTreeSet<_>>(), None),
            Some(EvidenceField(items)) => {
                let (kinds, unknown) = evidence_words(&items);
                if unknown.is_empty() && !kinds.is_empty() {
                    (kinds, None)
                } else {
                    // Free text ("the stdout of the command"): capturing everything costs nothing.
                    (all.into_iter().collect(), Some(one_line(&items.join("; "))).filter(|s| !s.is_empty()))
                }
            }
        };
        // The observable must be decided on captured evidence: capture what it reads.
        evidence.extend(reads.iter().map(|(_, k)| *k));
        let evidence: Vec<EvidenceKind> = evidence.into_iter().collect();
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
            name: cname,
            description: c.description.map(|d| one_line(&d)).filter(|d| !d.is_empty()),
            kind: c.kind.map(|k| k.0).unwrap_or_default(),
            scenario,
            pass,
            evidence,
            evidence_note,
            failing_first: c.failing_first.map(|d| one_line(&d)).filter(|d| !d.is_empty()),
            max_attempts,
            timeout_secs,
            cleanup,
        });
    }

    let n = criteria.len();
    match tier {
        Tier::Light if n > 2 => notes.push(format!(
            "tier LIGHT with {n} criteria: the seed sizes LIGHT at 1-2 (happy path + the riskiest edge); every criterion is still held"
        )),
        Tier::Heavy if n < 3 => notes.push(format!(
            "tier HEAVY with {n} criteria: the seed sizes HEAVY at 3+ (happy, edge, regression, adversarial risk); run as given"
        )),
        _ => {}
    }
    if !criteria.iter().any(|c| c.kind == CriterionKind::Change) {
        return Err(bad("every criterion is a `pin`: name at least one behaviour change (kind = \"change\")".into()));
    }
    Ok(Goal { id, name, objective, tier, tier_justification, stop_line, criteria, notes })
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
        let e = err(&GOOD.replace("tier_justification", "justification = \"x\"\ntier_justification"));
        assert!(e.contains("duplicate field"), "{e}");
    }

    #[test]
    fn every_alias_family_is_read() {
        let g = ok(r#"
[goal]
goal_id = "g1"
name = "A greeting"
goal = "greet.sh greets"
tier = "heavy"
rationale = "the user asked for care"
stop_rule = "when it greets"
attempts = 4
timeout = 9

[[goal.success_criteria]]
title = "Happy path!"
cmd = "sh greet.sh"
expected = "exits 0 && stdout matches /^hello, (world|you)$/"
captures = "stdout"
type = "Edge"
teardown = "rm -f tmp.txt"
red = "greet.sh is missing"

[[goal.success_criteria]]
run = "sh greet.sh"
pass_when = ["exit_code == 0", "stderr contains 'warn'"]
artifacts = ["stderr", "exit code"]

[[goal.success_criteria]]
command = "cat README"
check = { status = 0, stdout = "keep" }
kind = "regression"
"#);
        assert_eq!(
            (g.id.as_str(), g.name.as_deref(), g.objective.as_str()),
            ("g1", Some("A greeting"), "greet.sh greets")
        );
        assert_eq!(
            (g.tier, g.tier_justification.as_str(), g.stop_line.as_str()),
            (Tier::Heavy, "the user asked for care", "when it greets")
        );
        let ids: Vec<&str> = g.criteria.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["happy-path", "c2", "c3"]);
        let [a, b, c] = &g.criteria[..] else { panic!("three") };
        assert_eq!((a.max_attempts, a.timeout_secs), (4, 9));
        assert_eq!(a.pass.describe(), "exit code = 0 and stdout matches /^hello, (world|you)$/");
        assert_eq!(a.evidence, vec![EvidenceKind::Stdout, EvidenceKind::ExitCode], "what pass reads is captured too");
        assert_eq!(
            (a.kind, a.cleanup.as_deref(), a.failing_first.as_deref()),
            (CriterionKind::Change, Some("rm -f tmp.txt"), Some("greet.sh is missing"))
        );
        assert_eq!(b.pass.describe(), "exit code = 0 and stderr contains \"warn\"");
        assert_eq!(b.evidence, vec![EvidenceKind::Stderr, EvidenceKind::ExitCode]);
        assert_eq!(
            (c.kind, c.pass.describe().as_str()),
            (CriterionKind::Pin, "exit code = 0 and stdout contains \"keep\"")
        );
        assert!(g.notes.is_empty(), "{:?}", g.notes);

        // A table keyed by id, a tier table, a bare exit code, free-text and absent evidence.
        let g = ok(r#"
objective = "o"
tier = { level = "Light", justification = "small" }
stop = "when done"
[criteria.happy]
scenario = "true"
pass = 3
evidence = "the stdout of the command"
[criteria.quiet]
scenario = "true"
"#);
        assert_eq!((g.tier, g.tier_justification.as_str()), (Tier::Light, "small"));
        let [h, q] = &g.criteria[..] else { panic!("two") };
        assert_eq!((h.id.as_str(), h.pass.exit_code), ("happy", Some(3)));
        let all = vec![EvidenceKind::Stdout, EvidenceKind::Stderr, EvidenceKind::ExitCode];
        assert_eq!((&h.evidence, h.evidence_note.as_deref()), (&all, Some("the stdout of the command")));
        assert_eq!((q.id.as_str(), &q.evidence, q.pass.describe().as_str()), ("quiet", &all, "exit code = 0"));
        assert!(g.notes.iter().any(|n| n.contains("`quiet` names no `pass`")), "{:?}", g.notes);
    }

    #[test]
    fn the_phrase_grammar_reads_its_forms_and_refuses_the_rest() {
        let d = |s: &str| parse_phrase(s).map(|p| p.describe());
        assert_eq!(d("exit 0").as_deref(), Ok("exit code = 0"));
        assert_eq!(d("Exit Code 2").as_deref(), Ok("exit code = 2"));
        assert_eq!(d("exit_code == -1").as_deref(), Ok("exit code = -1"));
        assert_eq!(d("succeeds").as_deref(), Ok("exit code = 0"));
        assert_eq!(d("stdout contains hello, world").as_deref(), Ok("stdout contains \"hello, world\""));
        assert_eq!(
            d(r#"exit 1 and stderr contains "usage: a and b" and stdout matches /^v\d+\/x$/"#).as_deref(),
            Ok(r#"exit code = 1 and stdout matches /^v\d+/x$/ and stderr contains "usage: a and b""#)
        );
        assert_eq!(d("output includes 'it''s'").ok(), None, "text after a closed quote is refused");
        for bad in [
            "prints hello",
            "",
            "exit",
            "exit zero",
            "stdout is hello",
            "exit 0 exit 1",
            "exit 0 and exit 1",
            "stderr matches x",
            "stdout contains \"open",
        ] {
            assert!(parse_phrase(bad).is_err(), "{bad:?} parsed");
        }
        let e = err(&GOOD.replace("pass = { exit_code = 0, stdout_contains = \"hello, world\" }", "pass = \"greets\""));
        assert!(e.contains("criterion `happy`: `pass` = \"greets\" is not a PASS phrase") && !e.contains('\n'), "{e}");
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
        assert!(err(&GOOD.replace("id = \"happy\"", "id = \"happy\"\nkind = \"sideways\"")).contains("unknown kind"));
        let e = err(&format!("stop_line = \"y\"\n{}", GOOD.replacen("objective", "[goal]\nobjective", 1)));
        assert!(e.contains("`stop_line` is set both in `[goal]` and at the top level"), "{e}");
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
        let tolerant = include_str!("../../../examples/goals/greet-tolerant.toml");
        let t = parse(tolerant, "examples/goals/greet-tolerant.toml").expect("the tolerant example parses");
        assert_eq!(defs(&t), defs(&g), "the tolerant spelling means the same goal");
    }

    #[test]
    fn slugs_are_path_safe() {
        assert_eq!(slugify("  Fix the *login* bug!  "), "fix-the-login-bug");
        assert_eq!(slugify("…"), "goal");
        assert!(check_id(&slugify(&"x".repeat(200))).is_ok());
    }
}
