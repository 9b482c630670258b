//! `-q` on every command, as README's Output section defines it: a workflow run prints
//! nothing on stdout but its `--json` document (unchanged) and, without `--json`, one final
//! line on stderr (outcome · spent · next); a command whose result is data (a listing, a
//! report's path, completions, a man page) prints it as without `-q`; a command that only
//! says what it did (`init`, `runs gc`) prints nothing; errors are always printed.

use crate::support::Scenario;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(rel)
}

fn agent(name: &str) -> String {
    format!("command:python3 {}", example(&format!("agents/{name}")).display())
}

fn repo() -> Scenario {
    let s = Scenario::new();
    s.write(".git/info/exclude", ".work/\n");
    s.write("PLAN.md", "## Task 1: Add the greeting\nCreate `hello.txt` containing `hi`.\n");
    s.write("GOAL.toml", &std::fs::read_to_string(example("goals/greet.toml")).expect("the example goal"));
    s.write("lib.sh", "greet_user() { echo \"hi $1\"; }\n");
    s.write("main.sh", ". ./lib.sh\ngreet_user world\n");
    s.commit("fixtures");
    s
}

/// Every workflow, as a person would start it: (name, arguments without `--json`).
fn workflows() -> Vec<(&'static str, Vec<String>)> {
    let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        ("until", v(&["until", "file NOTES.md exists", "--goal", "notes", "--agent", &agent("until_worker.py")])),
        (
            "implement",
            v(&[
                "implement",
                "--plan",
                "PLAN.md",
                "--iter-id",
                "it-1",
                "--test-cmd",
                "grep -q hi hello.txt",
                "--agent",
                &agent("implement_roles.py"),
            ]),
        ),
        (
            "edit",
            v(&[
                "edit",
                "--description",
                "Rename `greet_user` to `welcome_user`",
                "--def-site",
                "lib.sh:1",
                "--test-cmd",
                "sh main.sh",
                "--agent",
                &agent("editor.py"),
            ]),
        ),
        ("ultra", v(&["ultra", "GOAL.toml", "--agent", &agent("ultra_implementer.py")])),
        (
            "loop run",
            v(&[
                "loop",
                "run",
                "docs/specs/greeting",
                "--light",
                "--test-cmd",
                "true",
                "--agent",
                &agent("loop_roles.py"),
            ]),
        ),
    ]
}

fn run(s: &Scenario, args: &[String]) -> (i32, String, String) {
    if args.iter().any(|a| a == "docs/specs/greeting") {
        std::fs::create_dir_all(s.path("docs/specs/greeting")).expect("mkdir");
    }
    s.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn a_quiet_workflow_run_prints_nothing_on_stdout_and_one_final_line_on_stderr() {
    for (name, args) in workflows() {
        let s = repo();
        let quiet: Vec<String> = ["-q".to_string()].into_iter().chain(args.clone()).collect();
        let (code, out, err) = run(&s, &quiet);
        assert!(code == 0 || code == 3, "{name}: {err}");
        assert_eq!(out, "", "{name}: no human result lines under -q");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: one final line: {err}");
        assert!(
            lines[0].contains(" · spent ")
                && lines[0].contains(" tokens ")
                && (lines[0].contains(" · $") || lines[0].contains(" · cost unknown")),
            "{err}"
        );
        assert!(lines[0].contains(" · next: "), "{name}: what to run next: {err}");
        // Without -q the same run prints its human result on stdout.
        let s = repo();
        let (_, out, err) = run(&s, &args);
        assert!(!out.is_empty(), "{name}: the human result without -q ({err})");
        assert!(err.contains("\nspent: ") && err.contains("\nnext: "), "{name}: the summary: {err}");
    }
}

/// The document with the values that differ between two runs (run ids, their paths, commit
/// ids) left out.
fn shape(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !k.contains("run") && !k.contains("iter_id") && *k != "path" && *k != "files")
                .map(|(k, v)| (k.clone(), shape(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        Value::String(s) if s.contains("/tmp") || s.contains("/.work/") || s.contains("edit-") => Value::Null,
        // Commit ids and fingerprints: the two scenarios' commits differ in time.
        Value::String(s)
            if s.len() >= 16 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-' || c == 'f' || c == 'p') =>
        {
            Value::Null
        }
        other => other.clone(),
    }
}

#[test]
fn quiet_leaves_a_json_document_as_it_is_and_stderr_empty() {
    for (name, mut args) in workflows() {
        args.push("--json".into());
        let s = repo();
        let (_, loud, _) = run(&s, &args);
        let loud: Value = serde_json::from_str(&loud).unwrap_or_else(|e| panic!("{name}: {e}: {loud}"));
        let s = repo();
        let quiet: Vec<String> = ["-q".to_string()].into_iter().chain(args).collect();
        let (_, out, err) = run(&s, &quiet);
        assert_eq!(err, "", "{name}: nothing but the document");
        let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}: {out}"));
        assert_eq!(shape(&doc), shape(&loud), "{name}: -q does not change the document");
    }
}

#[test]
fn quiet_keeps_the_data_a_command_prints_drops_what_it_says_it_did_and_keeps_errors() {
    let s = repo();
    let (code, _, err) = run(&s, &workflows()[0].1);
    assert_eq!(code, 0, "{err}");
    // Data: the same with and without -q.
    for args in [
        vec!["runs", "list"],
        vec!["show", "notes"],
        vec!["report", "notes", "-o", "r.html"],
        vec!["completions", "bash"],
        vec!["man"],
        vec!["until", "list"],
        vec!["loop", "--help"],
    ] {
        let (c1, loud, _) = s.run(&args);
        let quiet: Vec<&str> = ["-q"].into_iter().chain(args.iter().copied()).collect();
        let (c2, out, err) = s.run(&quiet);
        assert_eq!((c1, c2), (0, 0), "{args:?}: {err}");
        assert!(!out.is_empty(), "{args:?} prints its result under -q");
        assert_eq!(out, loud, "{args:?}: the same result");
        assert_eq!(err, "", "{args:?}: nothing on stderr");
    }
    // What a command did: said without -q, left out with it (the files are written all the same).
    let (code, out, _) = s.run(&["-q", "init"]);
    assert_eq!((code, out.as_str()), (0, ""), "init under -q");
    assert!(s.path("work.toml").exists() && s.read(".gitignore").contains(".work/"));
    let (code, out, _) = s.run(&["init", "--force"]);
    assert!(code == 0 && out.contains("wrote "), "{out}");
    let (code, out, _) = s.run(&["-q", "runs", "gc", "--older-than", "1000d"]);
    assert_eq!((code, out.as_str()), (0, ""), "runs gc under -q");
    let (_, out, _) = s.run(&["runs", "gc", "--older-than", "1000d"]);
    assert!(out.contains("run(s) removed"), "{out}");
    // Errors are never quiet.
    let (code, _, err) = s.run(&["-q", "show", "no-such-run"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error: failed to "), "{err}");
}
