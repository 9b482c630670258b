//! The suite's own report: which tests a test runner collected, ran, passed and skipped.
//!
//! Adding tests is the only change to a suite a workflow allows, and a file-level freeze (see
//! [`crate::surface`]) cannot see every way to take a test away: a `conftest.py` that deselects
//! it, a line appended to a test module that deletes it, a runner flag. So when a check command
//! runs a test runner that can describe its own run, the engine asks it to: before the first
//! dispatch (the baseline) and again when a verdict is green, and compares the two — a test id
//! that vanished, or a test that ran before and is skipped now, is a named change.
//!
//! | runner | detected from | report |
//! |---|---|---|
//! | cargo-nextest | `cargo nextest run …` | `--message-format libtest-json` (`NEXTEST_EXPERIMENTAL_LIBTEST_JSON=1`) on stdout |
//! | pytest | `pytest …`, `py.test …`, `python3 -m pytest …` | `--junitxml` written to the captured stdout |
//! | go test | `go test …` | `-json` on stdout |
//! | jest | `jest …`, `npx jest …` | `--json` on stdout |
//!
//! A command is split at `&&`, `||`, `;`, `|` and newlines (a quoted `sh -c` script is split
//! too); every part that starts with one of the runners above (after `VAR=value` assignments and
//! an `npx`/`yarn`/`pnpm`/`uv run`/`poetry run`/`pipenv run` launcher) is a [`Probe`]. A runner
//! hidden behind a script or `npm test` is not detected: its tests are guarded by the freeze alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;
use work_runtime::spawn::{ProcessOutput, ProcessSpec, Spawner};

/// A test runner that can report its own run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runner {
    /// `cargo nextest run`.
    Nextest,
    /// pytest.
    Pytest,
    /// `go test`.
    GoTest,
    /// jest.
    Jest,
}

/// How one test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// It ran and passed.
    Passed,
    /// It ran and failed (or errored).
    Failed,
    /// It was collected and not run (skipped, ignored, pending, todo).
    Skipped,
}

/// What a runner said about one run: every test it collected, by id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SuiteReport {
    /// The runner.
    pub runner: Runner,
    /// Each collected test's id and outcome.
    pub tests: BTreeMap<String, Outcome>,
    /// The test modules the runner could not collect (pytest's "collection failure": a module
    /// that imports what is not written yet), by id: no test, but a module that is skipped
    /// later never ran.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub uncollected: BTreeSet<String>,
}

impl SuiteReport {
    /// How many tests were collected.
    pub fn collected(&self) -> usize {
        self.tests.len()
    }

    /// How many ended `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.tests.values().filter(|o| **o == outcome).count()
    }
}

/// A runner invocation found in a check command, with the command that makes it report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Probe {
    /// The runner.
    pub runner: Runner,
    /// The part of the check command that runs it.
    pub part: String,
    /// A shell command that runs the same part with its report on stdout.
    pub report_command: String,
}

/// A test lost between the baseline and a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// The test's id in the runner's report.
    pub test: String,
    /// What happened to it.
    pub what: &'static str,
}

/// The runner invocations of `command` that can report.
pub fn detect(command: &str) -> Vec<Probe> {
    let mut out = Vec::new();
    for part in split_parts(command) {
        let Ok(words) = shell_words::split(&part) else { continue };
        if let Some(script) = inner_script(&words) {
            out.extend(detect(script));
            continue;
        }
        if let Some(p) = probe(&part, &words) {
            out.push(p);
        }
    }
    out
}

/// The probe of a check command that is one runner invocation and nothing else (directly, or
/// as the whole script of `sh -c SCRIPT`): running the probe's report command is running the
/// command, so one run gives both the check's outcome (and whatever it leaves in the tree) and
/// the runner's report. A compound command (`a && pytest`, `pytest; go test`) has none.
pub fn sole_probe(command: &str) -> Option<Probe> {
    let parts = split_parts(command);
    let [part] = parts.as_slice() else { return None };
    let words = shell_words::split(part).ok()?;
    if let Some(script) = inner_script(&words) {
        return if words.len() == 3 { sole_probe(script) } else { None };
    }
    probe(part, &words)
}

/// The script of `sh -c SCRIPT` / `bash -c SCRIPT`.
pub(crate) fn inner_script(words: &[String]) -> Option<&str> {
    let shell = words.first().map(|w| basename(w))?;
    (matches!(shell, "sh" | "bash" | "dash" | "zsh") && words.get(1).is_some_and(|w| w == "-c"))
        .then(|| words.get(2).map(String::as_str))
        .flatten()
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Splits a command line at `&&`, `||`, `;`, `|` and newlines outside quotes.
pub(crate) fn split_parts(command: &str) -> Vec<String> {
    let (mut parts, mut cur) = (Vec::new(), String::new());
    let (mut quote, mut chars) = (None::<char>, command.chars().peekable());
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '\\') => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                continue;
            }
            (None, ';' | '|' | '&' | '\n') => {
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts.into_iter().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

/// The probe for one part of a command, when it starts with a runner that can report.
fn probe(part: &str, words: &[String]) -> Option<Probe> {
    let mut i = words.iter().take_while(|w| is_assignment(w)).count();
    loop {
        match (words.get(i).map(|w| basename(w)), words.get(i + 1).map(String::as_str)) {
            (Some("pnpm"), Some("exec")) | (Some("uv" | "poetry" | "pipenv"), Some("run")) => i += 2,
            (Some("npx" | "yarn" | "pnpm"), _) => i += 1,
            _ => break,
        }
    }
    let at = |k: usize| words.get(i + k).map(String::as_str);
    let (runner, flag_at, flags): (Runner, usize, &[&str]) = match (at(0).map(basename), at(1), at(2)) {
        (Some("cargo"), Some("nextest"), Some("run")) => (Runner::Nextest, 3, &["--message-format", "libtest-json"]),
        (Some("pytest" | "py.test"), _, _) => (Runner::Pytest, 1, &["--junitxml=/dev/fd/3"]),
        (Some(py), Some("-m"), Some("pytest")) if py.starts_with("python") => {
            (Runner::Pytest, 3, &["--junitxml=/dev/fd/3"])
        }
        (Some("go"), Some("test"), _) => (Runner::GoTest, 2, &["-json"]),
        (Some("jest"), _, _) => (Runner::Jest, 1, &["--json"]),
        _ => return None,
    };
    if words.iter().any(|w| w.starts_with("--message-format") || w.starts_with("--junitxml") || w == "--json") {
        return None;
    }
    let mut with = words.to_vec();
    let at = (i + flag_at).min(with.len());
    with.splice(at..at, flags.iter().map(|f| (*f).to_string()));
    // Assignments stay assignments (a quoted `'A=b'` would be a command name).
    let joined = with
        .iter()
        .enumerate()
        .map(|(k, w)| match w.split_once('=') {
            Some((key, value)) if k < i && is_assignment(w) => format!("{key}={}", shell_words::quote(value)),
            _ => shell_words::quote(w).into_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let report_command = match runner {
        Runner::Nextest => format!("NEXTEST_EXPERIMENTAL_LIBTEST_JSON=1 {joined}"),
        // The report goes to the captured stdout; pytest's own output to stderr.
        Runner::Pytest => format!("{joined} 3>&1 1>&2"),
        Runner::GoTest | Runner::Jest => joined,
    };
    Some(Probe { runner, part: part.to_string(), report_command })
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Runs `probe`'s report command in `root` and reads its report (`None` when it gave none).
pub async fn run(spawner: &Spawner, root: &Path, probe: &Probe, timeout: Option<Duration>) -> Option<SuiteReport> {
    let out = spawner.run(&ProcessSpec::shell(&probe.report_command, root).with_timeout(timeout)).await.ok()?;
    read_output(probe, &out, root)
}

/// Reads `probe`'s report from a finished run of its report command (`None` when the run
/// timed out, its output was cut, or it holds no test).
pub fn read_output(probe: &Probe, out: &ProcessOutput, root: &Path) -> Option<SuiteReport> {
    if out.timed_out || out.stdout_truncated {
        return None;
    }
    parse(probe.runner, &out.stdout_text(), root)
}

/// Reads a runner's report (`None` when it holds no test and no module it could not collect).
pub fn parse(runner: Runner, text: &str, root: &Path) -> Option<SuiteReport> {
    let mut uncollected = BTreeSet::new();
    let tests = match runner {
        Runner::Nextest => parse_json_lines(text, |v| {
            (v["type"] == "test").then_some(())?;
            let outcome = match v["event"].as_str()? {
                "ok" => Outcome::Passed,
                "failed" | "timeout" => Outcome::Failed,
                "ignored" => Outcome::Skipped,
                _ => return None,
            };
            Some((v["name"].as_str()?.to_string(), outcome))
        }),
        Runner::GoTest => parse_json_lines(text, |v| {
            let test = v["Test"].as_str()?;
            let outcome = match v["Action"].as_str()? {
                "pass" => Outcome::Passed,
                "fail" => Outcome::Failed,
                "skip" => Outcome::Skipped,
                _ => return None,
            };
            Some((format!("{}/{test}", v["Package"].as_str().unwrap_or_default()), outcome))
        }),
        Runner::Jest => parse_jest(text, root),
        Runner::Pytest => parse_junit(text, &mut uncollected),
    };
    (!tests.is_empty() || !uncollected.is_empty()).then_some(SuiteReport { runner, tests, uncollected })
}

fn parse_json_lines(
    text: &str,
    read: impl Fn(&serde_json::Value) -> Option<(String, Outcome)>,
) -> BTreeMap<String, Outcome> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .filter_map(|v| read(&v))
        .collect()
}

fn parse_jest(text: &str, root: &Path) -> BTreeMap<String, Outcome> {
    let start = text.find('{').unwrap_or(0);
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text[start..].trim()) else { return BTreeMap::new() };
    let root = format!("{}/", root.display());
    let mut out = BTreeMap::new();
    for file in v["testResults"].as_array().into_iter().flatten() {
        let name = file["name"].as_str().unwrap_or_default();
        let name = name.strip_prefix(&root).unwrap_or(name);
        for t in file["assertionResults"].as_array().into_iter().flatten() {
            let outcome = match t["status"].as_str().unwrap_or_default() {
                "passed" => Outcome::Passed,
                "failed" => Outcome::Failed,
                _ => Outcome::Skipped,
            };
            out.insert(format!("{name} › {}", t["fullName"].as_str().unwrap_or_default()), outcome);
        }
    }
    out
}

/// Reads the `<testcase>` elements of a JUnit XML report (the subset pytest writes); a
/// collection failure is no test: its module's id goes to `uncollected`.
fn parse_junit(text: &str, uncollected: &mut BTreeSet<String>) -> BTreeMap<String, Outcome> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find("<testcase") {
        rest = &rest[at + "<testcase".len()..];
        let Some(tag_end) = rest.find('>') else { break };
        let tag = &rest[..tag_end];
        let body = if tag.ends_with('/') {
            ""
        } else {
            let end = rest.find("</testcase>").unwrap_or(rest.len());
            &rest[tag_end..end]
        };
        let (class, name) = (xml_attr(tag, "classname"), xml_attr(tag, "name"));
        // A module that could not be collected (it imports what is not written yet) is no test:
        // its tests appear once it imports.
        if class.is_empty() && body.contains("collection failure") {
            uncollected.insert(name);
            continue;
        }
        let outcome = if body.contains("<skipped") {
            Outcome::Skipped
        } else if body.contains("<failure") || body.contains("<error") {
            Outcome::Failed
        } else {
            Outcome::Passed
        };
        let id = if class.is_empty() { name } else { format!("{class}::{name}") };
        out.insert(id, outcome);
    }
    out
}

fn xml_attr(tag: &str, key: &str) -> String {
    let pat = format!(" {key}=\"");
    let Some(at) = tag.find(&pat) else { return String::new() };
    let v = &tag[at + pat.len()..];
    let v = &v[..v.find('"').unwrap_or(v.len())];
    v.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}

/// The tests of `before` that `after` lost — gone from the report, or skipped where they
/// ran — and the tests `after` added skipped (adding a test is adding one that runs): a module
/// `before` could not collect that `after` skips whole (pytest's "collection skipped": the code
/// under test raises `SkipTest` when the test imports it) was never run.
pub fn compare(before: &SuiteReport, after: &SuiteReport) -> Vec<Lost> {
    let lost = before.tests.iter().filter_map(|(test, was)| {
        let what = match after.tests.get(test) {
            None => "vanished from the suite's report",
            Some(Outcome::Skipped) if *was != Outcome::Skipped => "is skipped in the suite's report (it ran before)",
            _ => return None,
        };
        Some(Lost { test: test.clone(), what })
    });
    let added_skipped =
        after.tests.iter().filter(|(test, now)| **now == Outcome::Skipped && !before.tests.contains_key(*test)).map(
            |(test, _)| Lost {
                test: test.clone(),
                what: if before.uncollected.contains(test) {
                    "is skipped in the suite's report and could not be collected before (skipped, never ran)"
                } else {
                    "was added skipped"
                },
            },
        );
    let mut out: Vec<Lost> = lost.chain(added_skipped).collect();
    out.sort_by(|a, b| a.test.cmp(&b.test));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runners_are_detected_from_the_check_command() {
        let p = detect("cd x && uv run python3 -m pytest -q tests; go test ./... | tee log");
        let runners: Vec<_> = p.iter().map(|p| p.runner).collect();
        assert_eq!(runners, vec![Runner::Pytest, Runner::GoTest]);
        assert_eq!(p[0].report_command, "uv run python3 -m pytest '--junitxml=/dev/fd/3' -q tests 3>&1 1>&2");
        assert_eq!(p[1].report_command, "go test -json ./...");
        let n = detect("sh -c 'RUST_LOG=off cargo nextest run -p a -- --exact x'");
        assert_eq!(
            n[0].report_command,
            "NEXTEST_EXPERIMENTAL_LIBTEST_JSON=1 RUST_LOG=off cargo nextest run --message-format libtest-json -p a -- --exact x"
        );
        assert_eq!(detect("npx jest src")[0].report_command, "npx jest --json src");
        for none in ["sh check.sh", "npm test", "cargo test", "grep -q pytest notes.txt", "pytest --junitxml=r.xml"] {
            assert!(detect(none).is_empty(), "{none}");
        }
        // One runner invocation and nothing else: its report command is the command.
        for (cmd, runner) in [
            ("python3 -m pytest -q tests", Runner::Pytest),
            ("sh -c 'RUST_LOG=off cargo nextest run -p a'", Runner::Nextest),
            ("go test ./...", Runner::GoTest),
        ] {
            let p = sole_probe(cmd).expect(cmd);
            assert_eq!((p.runner, &p.report_command), (runner, &detect(cmd)[0].report_command), "{cmd}");
        }
        for not_sole in [
            "cd x && pytest -q",
            "pytest; go test ./...",
            "go test ./... | tee log",
            "sh -c 'pytest' extra",
            "sh check.sh",
        ] {
            assert!(sole_probe(not_sole).is_none(), "{not_sole}");
        }
    }

    #[test]
    fn every_runner_report_is_read_and_compared() {
        let root = Path::new("/r");
        let nextest = r#"{"type":"suite","event":"started","test_count":3}
{"type":"test","event":"started","name":"a::a$t::one"}
{"type":"test","event":"ok","name":"a::a$t::one","exec_time":0.1}
{"type":"test","event":"failed","name":"a::a$t::two","exec_time":0.1}
{"type":"test","event":"ignored","name":"a::a$t::three"}"#;
        let n = parse(Runner::Nextest, nextest, root).expect("nextest");
        assert_eq!((n.collected(), n.count(Outcome::Passed), n.count(Outcome::Skipped)), (3, 1, 1));
        let junit = r#"<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.test_a" name="test_one" time="0.1" />
<testcase classname="tests.test_a" name="test_two[a&amp;b]" time="0.1"><failure message="x">boom</failure></testcase>
<testcase classname="tests.test_a" name="test_three" time="0"><skipped type="pytest.skip" message="s">s</skipped></testcase>
<testcase classname="" name="tests.test_new" time="0"><error message="collection failure">ImportError</error></testcase>
</testsuite></testsuites>"#;
        let p = parse(Runner::Pytest, junit, root).expect("junit");
        assert_eq!(p.tests.get("tests.test_a::test_two[a&b]"), Some(&Outcome::Failed));
        assert_eq!((p.collected(), p.count(Outcome::Skipped)), (3, 1), "a collection failure is no test");
        let go = r#"{"Action":"run","Package":"m/p","Test":"TestA"}
{"Action":"output","Package":"m/p","Test":"TestA","Output":"ok"}
{"Action":"pass","Package":"m/p","Test":"TestA","Elapsed":0}
{"Action":"skip","Package":"m/p","Test":"TestB","Elapsed":0}
{"Action":"fail","Package":"m/p","Elapsed":0}"#;
        let g = parse(Runner::GoTest, go, root).expect("go");
        assert_eq!(g.tests.keys().collect::<Vec<_>>(), vec!["m/p/TestA", "m/p/TestB"]);
        let jest = r#"{"numTotalTests":2,"testResults":[{"name":"/r/a.test.js","assertionResults":[
{"fullName":"a adds","status":"passed"},{"fullName":"a later","status":"todo"}]}]}"#;
        let j = parse(Runner::Jest, jest, root).expect("jest");
        assert_eq!(j.tests.get("a.test.js › a adds"), Some(&Outcome::Passed));
        assert!(parse(Runner::Jest, "not json", root).is_none());

        // Before/after: a vanished test and a newly skipped one are named; an added one is fine.
        let mut after = p.clone();
        after.tests.remove("tests.test_a::test_one");
        after.tests.insert("tests.test_a::test_two[a&b]".into(), Outcome::Skipped);
        after.tests.insert("tests.test_a::test_four".into(), Outcome::Passed);
        after.tests.insert("tests.test_a::test_five".into(), Outcome::Skipped);
        let lost = compare(&p, &after);
        assert_eq!(
            lost.iter().map(|l| (l.test.as_str(), l.what)).collect::<Vec<_>>(),
            vec![
                ("tests.test_a::test_five", "was added skipped"),
                ("tests.test_a::test_one", "vanished from the suite's report"),
                ("tests.test_a::test_two[a&b]", "is skipped in the suite's report (it ran before)"),
            ]
        );
        assert!(compare(&p, &p).is_empty());
    }

    #[test]
    fn a_module_that_could_not_be_collected_and_is_skipped_later_never_ran() {
        let root = Path::new("/r");
        let error = r#"<testsuites><testsuite><testcase classname="" name="tests.test_mul" time="0"><error message="collection failure">ImportError</error></testcase></testsuite></testsuites>"#;
        let before = parse(Runner::Pytest, error, root).expect("a report of a collection failure alone is a report");
        assert_eq!((before.collected(), before.uncollected.len()), (0, 1));
        let skipped = r#"<testsuites><testsuite><testcase classname="" name="tests.test_mul" time="0"><skipped message="collection skipped">SkipTest</skipped></testcase>
<testcase classname="tests.test_lib" name="test_add" time="0" /></testsuite></testsuites>"#;
        let after = parse(Runner::Pytest, skipped, root).expect("report");
        let lost = compare(&before, &after);
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].test, "tests.test_mul");
        assert!(lost[0].what.contains("skipped, never ran"), "{lost:?}");
        // Collected and run now: nothing lost.
        let ran = r#"<testsuites><testsuite><testcase classname="tests.test_mul" name="test_mul" time="0" /></testsuite></testsuites>"#;
        assert!(compare(&before, &parse(Runner::Pytest, ran, root).expect("report")).is_empty());
    }
}
