//! The until-gate: is an until-clause something a machine can check?
//!
//! The design refuses a vague until ("ask once; do not start"). The engine cannot ask, so it
//! refuses with examples (exit 2) unless the clause is checkable. This module is a small,
//! deterministic classifier over the clause's text:
//!
//! - **derived verify** — the clause names exactly one check the engine can run itself:
//!   a single command in backticks that "exits 0 / passes / succeeds"
//!   (`` `make lint` exits 0 `` ⇒ `make lint`), a plain "`CMD` exits 0" sentence, "file X exists"
//!   (⇒ `test -e 'X'`) or "file X does not exist" (⇒ `test ! -e 'X'`), "tests pass" naming one
//!   known runner (`cargo test`, `pytest`, `npm test`, `go test ./...`, …), or "tests pass" /
//!   "lint is clean" / "typecheck passes" when `work.toml` `[gates]` holds that command;
//! - **mechanical** — the clause mentions something checkable but not one unambiguous command
//!   (a backticked token, an exit code, `grep` / "no matches" / "no X in src/", a numeric
//!   threshold such as "coverage ≥ 80%", a build/compile outcome, a path with an existence or
//!   content verb). It is accepted; `done` is then accepted only with a `--verify` command
//!   (without one, a `done` report pauses the session for a person to check);
//! - **vague** — nothing of the above ("the code is nicer"): refused.
//!
//! `--verify CMD` always makes a clause checkable.

use regex::Regex;
use std::sync::LazyLock;

/// The project's own gate commands (`work.toml` `[gates]`), used to derive a verify command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateCommands {
    /// `[gates] test`.
    pub test: Option<String>,
    /// `[gates] lint`.
    pub lint: Option<String>,
    /// `[gates] typecheck`.
    pub typecheck: Option<String>,
}

/// A verify command the engine derived from the clause itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedVerify {
    /// The shell command (run with `sh -c` in the repository root).
    pub command: String,
    /// Where it came from, for the ledger (`backticked command`, `work.toml [gates] test`, …).
    pub source: String,
}

/// The classifier's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkability {
    /// Something mechanical is named; `derived` is set when one command checks it unambiguously.
    Mechanical {
        /// What made it mechanical (for messages and the ledger).
        signal: String,
        /// The derived verify command, if unambiguous.
        derived: Option<DerivedVerify>,
    },
    /// Nothing checkable.
    Vague,
}

impl Checkability {
    /// True unless vague.
    pub fn is_checkable(&self) -> bool {
        !matches!(self, Checkability::Vague)
    }
}

/// Examples of checkable clauses, shown when a vague one is refused.
pub const EXAMPLES: &str = "e.g. \"all tests pass\" --verify 'cargo test', \"`make lint` exits 0\", \
\"file docs/api.md exists\", \"no TODO left in src/\" --verify '! grep -rn TODO src'";

fn re(p: &str) -> Regex {
    // The patterns are constants of this module, exercised by the unit tests.
    Regex::new(p).expect("a valid constant pattern")
}

static BACKTICK: LazyLock<Regex> = LazyLock::new(|| re(r"`([^`]+)`"));
static PASS_VERB: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(exits?|returns?|ends?)\s+(with\s+)?((exit\s+)?(code|status)\s+)?0\b|\bexit\s+(code|status)\s+(is\s+)?0\b|\b(passes|pass|succeeds?|is\s+green|are\s+green|is\s+clean|runs\s+clean(ly)?|exits?\s+cleanly|without\s+(errors?|failures?))\b",
    )
});
static PLAIN_EXIT0: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:the\s+command\s+)?([a-z0-9_./][a-z0-9_./:=+-]*(?:\s+[a-z0-9_./:=+-]+)*)\s+(?:exits|returns|ends)\s+(?:with\s+)?(?:(?:exit\s+)?(?:code|status)\s+)?0\.?$",
    )
});
static FILE_EXISTS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:the\s+)?(file|directory|dir|folder)?\s*`?([A-Za-z0-9_./-]+)`?\s+(exists|is\s+present|is\s+there|does\s+not\s+exist|doesn't\s+exist|no\s+longer\s+exists|is\s+gone|is\s+deleted|is\s+removed)\.?$",
    )
});
static TESTS_PASS: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(tests?|test\s+suite|specs?|suite)\b.*\b(pass|passes|passing|green|succeed|succeeds)\b")
});
static LINT: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(lint|linter|linting|lints)\b"));
static LINT_TOOL: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(clippy|eslint|ruff|flake8|pylint|rubocop|golangci-lint|shellcheck)\b"));
static TYPECHECK: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(type[- ]?checks?|type[- ]?checking|types\s+check|tsc|mypy|pyright)\b"));
static CLEAN_WORD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(clean|cleanly|pass|passes|passing|green|succeeds?|no\s+(warnings?|errors?|findings?|issues?)|zero\s+(warnings?|errors?)|exits?\s+0)\b",
    )
});
static BUILD: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(builds?|compiles?|compiling|building)\b"));
static EXIT_CODE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\bexit(s|ed)?\s+(with\s+)?((code|status)\s+)?\d+\b|\bexit\s+(code|status)\b"));
static GREP: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(grep|rg|ripgrep)\b|\bno\s+(more\s+)?(matches|occurrences|hits|results)\b|\b(zero|0)\s+(matches|occurrences|hits)\b|\bno\s+\S+\s+(left\s+|remaining\s+)?in\s+\S*[/.]\S*",
    )
});
static THRESHOLD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(≥|≤|>=|<=|>|<|=)\s*\d|\b(at\s+least|at\s+most|under|below|above|over|fewer\s+than|less\s+than|more\s+than|no\s+more\s+than|within)\s+\d|\d+(\.\d+)?\s*%|\bcoverage\b",
    )
});
static PATH_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(\b[\w-]+(/[\w.-]+)+/?|\b[\w-]+/|\b[\w-]+\.(rs|py|md|ts|tsx|js|jsx|json|toml|yaml|yml|go|txt|c|h|cc|cpp|hpp|java|kt|rb|sh|css|html|lock|cfg|ini|xml|sql)\b)",
    )
});
static PATH_VERB: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(exists?|contains?|present|missing|deleted|removed|no\s+longer|empty|mentions?|lists?|defines?|includes?|has|have|is\s+gone)\b",
    )
});

/// Known test runners, as written in a clause; the first one found (longest first) is derived.
const RUNNERS: &[&str] = &[
    "cargo nextest run",
    "bundle exec rspec",
    "go test ./...",
    "cargo test",
    "npm test",
    "yarn test",
    "pnpm test",
    "go test",
    "make test",
    "make check",
    "mvn test",
    "gradle test",
    "pytest",
    "rspec",
    "jest",
    "vitest",
    "tox",
    "ctest",
];

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Classifies an until-clause (see the module docs).
pub fn classify(until: &str, gates: &GateCommands) -> Checkability {
    let text = until.trim();
    let mech =
        |signal: &str, derived: Option<DerivedVerify>| Checkability::Mechanical { signal: signal.into(), derived };
    let derive = |command: String, source: &str| Some(DerivedVerify { command, source: source.into() });

    // Backticked commands.
    let spans: Vec<&str> = BACKTICK.captures_iter(text).filter_map(|c| c.get(1)).map(|m| m.as_str().trim()).collect();
    if !spans.is_empty() {
        let outside = BACKTICK.replace_all(text, " ");
        if spans.len() == 1 && PASS_VERB.is_match(&outside) && !spans[0].is_empty() {
            if let Some(c) = FILE_EXISTS.captures(text)
                && c.get(3).is_some()
            {
                // "`docs/api.md` exists" is a file check, handled below.
            } else {
                return mech("a command in backticks", derive(spans[0].to_string(), "the backticked command"));
            }
        }
    }
    if let Some(c) = FILE_EXISTS.captures(text) {
        let kind = c.get(1).map(|m| m.as_str()).unwrap_or("");
        let path = c.get(2).map(|m| m.as_str()).unwrap_or("");
        let verb = c.get(3).map(|m| m.as_str().to_lowercase()).unwrap_or_default();
        let looks_like_path = !kind.is_empty() || path.contains('/') || path.contains('.');
        if looks_like_path && !path.is_empty() && !path.starts_with('-') {
            let negative = !(verb == "exists" || verb.starts_with("is present") || verb.starts_with("is there"));
            let command =
                if negative { format!("test ! -e {}", quote(path)) } else { format!("test -e {}", quote(path)) };
            return mech("a file check", derive(command, "the file check in the clause"));
        }
    }
    if spans.is_empty()
        && let Some(c) = PLAIN_EXIT0.captures(text)
        && let Some(cmd) = c.get(1)
    {
        return mech("an exit code", derive(cmd.as_str().to_string(), "the command in the clause"));
    }
    if TESTS_PASS.is_match(text) {
        let lower = text.to_lowercase();
        let found: Vec<&str> = RUNNERS.iter().copied().filter(|r| lower.contains(r)).collect();
        // "go test ./..." also contains "go test": keep the longest distinct ones.
        let distinct: Vec<&str> =
            found.iter().copied().filter(|r| !found.iter().any(|o| o != r && o.contains(r))).collect();
        if distinct.len() == 1 {
            return mech("a test run", derive(distinct[0].to_string(), "the named test runner"));
        }
        if distinct.is_empty()
            && let Some(t) = &gates.test
        {
            return mech("a test run", derive(t.clone(), "work.toml [gates] test"));
        }
        return mech("a test run", None);
    }
    if LINT.is_match(text) && CLEAN_WORD.is_match(text) && !LINT_TOOL.is_match(text) {
        return mech("a lint run", gates.lint.as_ref().and_then(|l| derive(l.clone(), "work.toml [gates] lint")));
    }
    if TYPECHECK.is_match(text) && CLEAN_WORD.is_match(text) {
        return mech(
            "a type check",
            gates.typecheck.as_ref().and_then(|l| derive(l.clone(), "work.toml [gates] typecheck")),
        );
    }
    if !spans.is_empty() {
        return mech("a command in backticks", None);
    }
    if LINT.is_match(text) || LINT_TOOL.is_match(text) {
        return mech("a lint run", None);
    }
    if EXIT_CODE.is_match(text) {
        return mech("an exit code", None);
    }
    if GREP.is_match(text) {
        return mech("a search with no matches", None);
    }
    if THRESHOLD.is_match(text) {
        return mech("a numeric threshold", None);
    }
    if BUILD.is_match(text) {
        return mech("a build outcome", None);
    }
    if PATH_TOKEN.is_match(text) && PATH_VERB.is_match(text) {
        return mech("a path check", None);
    }
    Checkability::Vague
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derived(until: &str, gates: &GateCommands) -> Option<String> {
        match classify(until, gates) {
            Checkability::Mechanical { derived, .. } => derived.map(|d| d.command),
            Checkability::Vague => panic!("{until:?} classified vague"),
        }
    }

    #[test]
    fn vague_clauses_are_refused() {
        let g = GateCommands::default();
        for v in [
            "the code is better",
            "it works",
            "everything is nice and tidy",
            "the refactor feels done",
            "users are happy",
            "make it good",
        ] {
            assert_eq!(classify(v, &g), Checkability::Vague, "{v}");
        }
    }

    #[test]
    fn mechanical_clauses_derive_only_when_unambiguous() {
        let g = GateCommands::default();
        assert_eq!(derived("`make lint` exits 0", &g).as_deref(), Some("make lint"));
        assert_eq!(derived("`cargo test -p x` passes", &g).as_deref(), Some("cargo test -p x"));
        assert_eq!(derived("make lint exits 0", &g).as_deref(), Some("make lint"));
        assert_eq!(derived("file docs/api.md exists", &g).as_deref(), Some("test -e 'docs/api.md'"));
        assert_eq!(derived("docs/api.md exists", &g).as_deref(), Some("test -e 'docs/api.md'"));
        assert_eq!(derived("file old.txt is gone", &g).as_deref(), Some("test ! -e 'old.txt'"));
        assert_eq!(derived("all tests pass with cargo test", &g).as_deref(), Some("cargo test"));
        assert_eq!(derived("go test ./... passes", &g).as_deref(), Some("go test ./..."));
        assert_eq!(derived("all tests pass", &g), None);
        assert_eq!(derived("no TODO left in src/", &g), None);
        assert_eq!(derived("coverage ≥ 80%", &g), None);
        assert_eq!(derived("lint is clean in src/", &g), None);
        assert_eq!(derived("the project builds without warnings", &g), None);
        assert_eq!(derived("`a` and `b` both exit 0", &g), None);
        assert_eq!(derived("grep finds no FIXME", &g), None);
        assert_eq!(derived("p95 latency under 200 ms", &g), None);
    }

    #[test]
    fn gates_from_work_toml_derive_tests_lint_and_typecheck() {
        let g = GateCommands {
            test: Some("make test".into()),
            lint: Some("make lint".into()),
            typecheck: Some("make types".into()),
        };
        assert_eq!(derived("all tests pass", &g).as_deref(), Some("make test"));
        assert_eq!(derived("lint is clean in src/", &g).as_deref(), Some("make lint"));
        assert_eq!(derived("typecheck passes", &g).as_deref(), Some("make types"));
        assert_eq!(derived("tests pass under pytest", &g).as_deref(), Some("pytest"));
    }

    #[test]
    fn derived_file_checks_quote_the_path() {
        let g = GateCommands::default();
        assert_eq!(derived("file a-b/c_d.md exists", &g).as_deref(), Some("test -e 'a-b/c_d.md'"));
    }
}
