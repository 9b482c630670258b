//! `work ultra`: the evidence-driven goal runner, through the real binary with scripted agents.

use crate::support::{Scenario, assert_one_line_error, fallback_only, refused};
use serde_json::Value;

pub(crate) const LIGHT: &str = r#"
id = "greet"
objective = "greet.sh prints hello, world"
tier = "LIGHT"
tier_justification = "one script following a known pattern"
stop_line = "I'll stop right away when sh greet.sh prints hello, world"

[[criteria]]
id = "happy"
scenario = "sh greet.sh"
evidence = ["stdout", "stderr", "exit_code"]
pass = { exit_code = 0, stdout_contains = "hello, world" }
"#;

/// An implementer that records what it got and when it ran, then writes greet.sh.
const FIXER: &str = r#"
n = bump('calls')
seen = {'ran_at': time.time(), 'req': req}
open(state_path('call-%d.json' % n), 'w').write(json.dumps(seen))
open('greet.sh', 'w').write('echo "hello, world"\n')
print(json.dumps({"status": "done", "summary": "wrote greet.sh", "claims": [{"criterion": "happy", "claim": "greet.sh prints the greeting"}], "cleanup": []}))
"#;

/// An implementer that claims success and changes nothing.
const LIAR: &str = r#"
bump('calls')
print(json.dumps({"status": "done", "summary": "fixed everything", "claims": [{"criterion": "happy", "claim": "it passes now"}], "cleanup": []}))
"#;

fn calls(s: &Scenario) -> u32 {
    std::fs::read_to_string(s.path(".agent-state/calls")).map(|t| t.trim().parse().expect("count")).unwrap_or(0)
}

fn goal_dir(s: &Scenario, id: &str) -> std::path::PathBuf {
    s.path(&format!(".work/goals/{id}"))
}

fn criterion<'a>(out: &'a Value, id: &str) -> &'a Value {
    out["criteria"].as_array().expect("criteria").iter().find(|c| c["id"] == id).expect("criterion present")
}

fn read_path(v: &Value) -> String {
    std::fs::read_to_string(v.as_str().expect("a path")).expect("evidence file exists")
}

#[test]
fn all_green_path_captures_red_before_the_dispatch_and_green_after() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let agent = s.agent("fixer.py", FIXER);
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 0);
    assert_eq!(out["goal_id"], "greet");
    assert_eq!(out["status"], "DONE");
    assert_eq!(out["stop_reason"], "all-green");
    assert_eq!(out["attempts"], 1);
    assert_eq!(calls(&s), 1);

    // RED was written before the implementer ran: the failing-first proof came first (read by
    // time, which a confined agent, which never sees `.work/`, can record too).
    let seen: Value = serde_json::from_str(&s.read(".agent-state/call-1.json")).expect("json");
    let red_written = std::fs::metadata(criterion(&out, "happy")["red"]["evidence"]["json"].as_str().expect("a path"))
        .and_then(|m| m.modified())
        .expect("RED's evidence file")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    assert!(red_written <= seen["ran_at"].as_f64().expect("ran_at"), "RED was written after the dispatch: {seen}");
    let req = &seen["req"];
    assert_eq!(req["role"], "implementer");
    assert_eq!(req["access"], "workspace-write");
    assert_eq!(req["workflow"], "ultra");
    assert_eq!(req["context"]["goal_id"], "greet");
    assert_eq!(req["context"]["criteria"], serde_json::json!(["happy"]));
    assert_eq!(req["context"]["attempt"], 1);
    let prompt = req["prompt"].as_str().expect("prompt");
    for part in ["TASK:", "DELIVERABLE:", "SCOPE", "VERIFY:", "STOP WHEN: I'll stop right away when", "sh greet.sh"] {
        assert!(prompt.contains(part), "the brief lacks {part:?}:\n{prompt}");
    }

    let c = criterion(&out, "happy");
    assert_eq!(c["status"], "green");
    assert_eq!(c["red"]["verdict"], "fail");
    assert_eq!(c["green"]["verdict"], "pass");
    let red: Value = serde_json::from_str(&read_path(&c["red"]["evidence"]["json"])).expect("red json");
    assert_eq!(red["verdict"], "fail");
    assert_ne!(red["exit_code"], 0);
    assert!(read_path(&c["red"]["evidence"]["stderr"]).contains("greet.sh"), "sh's complaint is the RED evidence");
    assert_eq!(read_path(&c["green"]["evidence"]["stdout"]), "hello, world\n");
    let green: Value = serde_json::from_str(&read_path(&c["green"]["evidence"]["json"])).expect("green json");
    assert_eq!((green["verdict"].as_str(), green["exit_code"].as_i64()), (Some("pass"), Some(0)));

    let dir = goal_dir(&s, "greet");
    let pad = std::fs::read_to_string(dir.join("notepad.md")).expect("notepad");
    for part in [
        "# Ultrawork Notepad",
        "LIGHT — one script following a known pattern",
        "RED captured: `happy`",
        "Self-review",
        "Stop: DONE",
    ] {
        assert!(pad.contains(part), "notepad lacks {part:?}:\n{pad}");
    }
    let receipts: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("receipts.json")).expect("receipts")).expect("json");
    assert!(!receipts["receipts"].as_array().expect("list").is_empty());
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).expect("state")).expect("json");
    assert_eq!(state["status"], "DONE");
}

#[test]
fn an_agent_that_lies_done_stays_red_and_the_goal_stops_blocked() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let agent = s.agent("liar.py", LIAR);
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 1);
    assert_eq!(out["status"], "BLOCKED");
    assert_eq!(out["stop_reason"], "same-failure-repeated");
    assert_eq!(calls(&s), 2, "the identical failure twice stops the run (2 identical failed attempts)");
    let c = criterion(&out, "happy");
    assert_eq!(c["status"], "red");
    assert_eq!(c["green"]["verdict"], "fail");
    assert!(!s.path(".work/goals/greet/evidence/happy/green.json").exists(), "no final pass without green");
    let pad = s.read(".work/goals/greet/notepad.md");
    assert!(pad.contains("claim `happy`: it passes now — engine observed FAIL"), "{pad}");
    assert!(pad.contains("Stop: BLOCKED (same-failure-repeated)"), "{pad}");
}

#[test]
fn attempts_are_bounded_even_when_each_failure_differs() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    // Each attempt changes the output but never fixes it.
    let agent = s.agent(
        "fidget.py",
        r#"n = bump('calls')
open(state_path('prompt-%d.txt' % n), 'w').write(req['prompt'])
open('greet.sh', 'w').write('echo try %d; exit 1\n' % n)
print(json.dumps({"status": "partial", "summary": "try %d" % n, "claims": [], "cleanup": []}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--max-attempts", "2", "--json"], 1);
    assert_eq!(out["stop_reason"], "attempts-exhausted");
    assert_eq!(calls(&s), 2);
    // The second brief carries what was tried and the engine's own observation of it.
    let second = s.read(".agent-state/prompt-2.txt");
    assert!(
        second.contains("WHAT WAS TRIED") && second.contains("attempt 1 (happy): agent said partial: try 1"),
        "{second}"
    );
    assert!(second.contains("try 1"), "the latest stdout is in the brief");
    assert!(!s.read(".agent-state/prompt-1.txt").contains("WHAT WAS TRIED"));
}

#[test]
fn a_criterion_already_green_at_red_time_stops_before_any_dispatch() {
    let s = Scenario::new();
    s.write("greet.sh", "echo 'hello, world'\n");
    s.write("GOAL.toml", LIGHT);
    let agent = s.agent("fixer.py", FIXER);
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 1);
    assert_eq!(out["status"], "BLOCKED");
    assert_eq!(out["stop_reason"], "already-green");
    assert_eq!(out["dispatched"], false);
    assert_eq!(calls(&s), 0, "no implementation dispatch without a failing-first proof");
    let c = criterion(&out, "happy");
    assert_eq!(c["red"]["verdict"], "pass");
    assert!(out["stop_detail"].as_str().expect("detail").contains("no failing-first proof"));
    assert!(s.path(".work/goals/greet/evidence/happy/red.json").exists());
}

#[test]
fn heavy_goes_one_criterion_at_a_time_and_a_pin_must_hold_throughout() {
    let s = Scenario::new();
    s.write("README", "keep me\n");
    s.write(
        "GOAL.toml",
        r#"
id = "two-files"
objective = "create a.txt and b.txt without touching README"
tier = "HEAVY"
tier_justification = "the user asked for care"
stop_line = "I'll stop right away when both files exist and README is intact"

[[criteria]]
id = "a"
scenario = "cat a.txt"
evidence = ["stdout"]
pass = { stdout_contains = "A" }

[[criteria]]
id = "b"
scenario = "cat b.txt"
evidence = ["stdout", "exit_code"]
pass = { exit_code = 0, stdout_matches = "^B+$" }

[[criteria]]
id = "readme"
kind = "pin"
scenario = "cat README"
evidence = ["stdout"]
pass = { stdout_contains = "keep me" }
"#,
    );
    let agent = s.agent(
        "one.py",
        r#"n = bump('calls')
open(state_path('ctx-%d.json' % n), 'w').write(json.dumps(ctx))
which = ctx['criterion']
open(which + '.txt', 'w').write(which.upper() + '\n')
print(json.dumps({"status": "done", "summary": "wrote " + which, "claims": [{"criterion": which, "claim": "done"}], "cleanup": []}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 0);
    assert_eq!(out["status"], "DONE");
    assert_eq!(calls(&s), 2);
    let first: Value = serde_json::from_str(&s.read(".agent-state/ctx-1.json")).expect("ctx");
    let second: Value = serde_json::from_str(&s.read(".agent-state/ctx-2.json")).expect("ctx");
    assert_eq!((first["criterion"].as_str(), second["criterion"].as_str()), (Some("a"), Some("b")));
    assert!(first.get("criteria").is_none());
    assert_eq!(criterion(&out, "readme")["red"]["verdict"], "pass", "a pin passes on unchanged code");
    assert_eq!(criterion(&out, "readme")["attempts"], 0, "a passing pin is never a target");
}

#[test]
fn bad_goal_files_are_refused_with_one_line_and_nothing_written() {
    let s = Scenario::new();
    let agent = s.agent("fixer.py", FIXER);
    let cases: Vec<(&str, String, &str)> = vec![
        ("unknown key", LIGHT.replace("tier = \"LIGHT\"", "tier = \"LIGHT\"\ncolour = \"red\""), "colour"),
        (
            "missing stop line",
            LIGHT.replace("stop_line = \"I'll stop right away when sh greet.sh prints hello, world\"", ""),
            "stop_line",
        ),
        ("no criteria", LIGHT.split("[[criteria]]").next().expect("head").to_string(), "no `[[criteria]]`"),
        (
            "duplicate ids",
            format!(
                "{LIGHT}\n[[criteria]]\nid = \"happy\"\nscenario = \"true\"\nevidence = [\"exit_code\"]\npass = {{ exit_code = 0 }}\n"
            ),
            "used twice",
        ),
        ("empty scenario", LIGHT.replace("scenario = \"sh greet.sh\"", "scenario = \"\""), "`scenario` is empty"),
        ("empty justification", LIGHT.replace("one script following a known pattern", ""), "tier_justification"),
        (
            "a pass that is not a table",
            LIGHT.replace(
                "pass = { exit_code = 0, stdout_contains = \"hello, world\" }",
                "pass = \"prints a greeting\"",
            ),
            "invalid type",
        ),
        ("not toml", "objective = \n".to_string(), "parse goal"),
    ];
    for (what, text, needle) in cases {
        s.write("GOAL.toml", &text);
        let (code, out, err) = s.run(&["ultra", "GOAL.toml", "--agent", &agent, "--json"]);
        assert_eq!(code, 2, "{what}: exit code\n{err}");
        assert_one_line_error(&err);
        assert!(err.contains(needle), "{what}: {err}");
        assert!(out.is_empty(), "{what}: stdout {out}");
        assert!(!s.path(".work").exists(), "{what}: state was written");
        assert_eq!(calls(&s), 0);
    }
    let (code, _, err) = s.run(&["ultra", "missing.toml", "--agent", &agent]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    assert!(err.contains("read goal `missing.toml`: no such file"), "{err}");
    s.write("GOAL.toml", LIGHT);
    let (code, _, err) = s.run(&["ultra", "GOAL.toml"]);
    assert_eq!(code, 2, "no agent configured");
    assert_one_line_error(&err);
    assert!(!s.path(".work").exists());
}

#[test]
fn the_notepad_is_append_only_across_a_resume_and_red_is_kept() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let liar = s.agent("liar.py", LIAR);
    s.run_json(&["ultra", "GOAL.toml", "--agent", &liar, "--json"], 1);
    let pad1 = std::fs::read(s.path(".work/goals/greet/notepad.md")).expect("notepad");
    let red1 = std::fs::read(s.path(".work/goals/greet/evidence/happy/red.json")).expect("red");

    let fixer = s.agent("fixer.py", FIXER);
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &fixer, "--json"], 0);
    assert_eq!(out["status"], "DONE");
    assert_eq!(out["runs"], 2);
    assert_eq!(out["attempts"], 3, "attempt numbers continue across runs");
    let pad2 = std::fs::read(s.path(".work/goals/greet/notepad.md")).expect("notepad");
    assert!(pad2.len() > pad1.len() && pad2.starts_with(&pad1), "earlier notepad bytes changed");
    let text = String::from_utf8_lossy(&pad2);
    assert!(text.contains("Resume (run 2"), "{text}");
    assert_eq!(text.matches("RED captured").count(), 1, "the RED is kept, not re-captured:\n{text}");
    assert_eq!(std::fs::read(s.path(".work/goals/greet/evidence/happy/red.json")).expect("red"), red1);
    assert!(s.path(".work/goals/greet/evidence/happy/attempt-3.json").exists());
    assert_eq!(criterion(&out, "happy")["red"]["verdict"], "fail");

    // A third run of a finished goal re-verifies without dispatching, still only appending.
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &fixer, "--json"], 0);
    assert_eq!((out["status"].as_str(), out["dispatched"].as_bool()), (Some("DONE"), Some(false)));
    let pad3 = std::fs::read(s.path(".work/goals/greet/notepad.md")).expect("notepad");
    assert!(pad3.starts_with(&pad2));
    assert_eq!(calls(&s), 2 + 1);
}

#[test]
fn a_false_cleanup_claim_keeps_the_goal_from_done() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let agent = s.agent(
        "messy.py",
        r#"bump('calls')
os.makedirs('qa-tmp', exist_ok=True)
open('greet.sh', 'w').write('echo "hello, world"\n')
print(json.dumps({"status": "done", "summary": "fixed", "claims": [], "cleanup": [{"resource": "qa temp dir", "action": "rm -rf qa-tmp", "path": "qa-tmp"}, {"resource": "a note", "action": "forgotten"}]}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 1);
    assert_eq!(out["stop_reason"], "leftover-state");
    assert_eq!(criterion(&out, "happy")["status"], "green");
    assert!(out["stop_detail"].as_str().expect("detail").contains("`qa-tmp` still exists"));
    let receipts = s.read_json(".work/goals/greet/receipts.json");
    let agent_receipts: Vec<&Value> =
        receipts["receipts"].as_array().expect("list").iter().filter(|r| r["source"] == "agent").collect();
    assert_eq!(agent_receipts.len(), 2);
    assert_eq!(agent_receipts[0]["verified"], false);
    assert_eq!(agent_receipts[1]["verified"], Value::Null, "a claim with nothing to check is recorded as such");

    // Torn down by a person: the next run finishes.
    std::fs::remove_dir(s.path("qa-tmp")).expect("rm");
    let fixer = s.agent("fixer.py", FIXER);
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &fixer, "--json"], 0);
    assert_eq!(out["status"], "DONE");
}

#[test]
fn a_tier_never_goes_down_on_a_later_run() {
    let s = Scenario::new();
    let heavy = r#"
id = "g"
objective = "three files"
tier = "HEAVY"
tier_justification = "new module"
stop_line = "I'll stop right away when x, y and z exist"
[[criteria]]
id = "x"
scenario = "test -f x"
evidence = ["exit_code"]
pass = { exit_code = 0 }
[[criteria]]
id = "y"
scenario = "test -f y"
evidence = ["exit_code"]
pass = { exit_code = 0 }
[[criteria]]
id = "z"
scenario = "test -f z"
evidence = ["exit_code"]
pass = { exit_code = 0 }
"#;
    s.write("GOAL.toml", heavy);
    let liar = s.agent("liar.py", LIAR);
    s.run_json(&["ultra", "GOAL.toml", "--agent", &liar, "--json"], 1);
    let light = heavy.replace("\"HEAVY\"", "\"LIGHT\"");
    let light: String = light
        .split("[[criteria]]\nid = \"z\"")
        .next()
        .expect("cut")
        .replace("[[criteria]]\nid = \"y\"", "[[criteria]]\nid = \"y2\"");
    s.write("GOAL.toml", &light);
    let before = std::fs::read(s.path(".work/goals/g/notepad.md")).expect("notepad");
    let (code, _, err) = s.run(&["ultra", "GOAL.toml", "--agent", &liar]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("only ratchets up"), "{err}");
    assert_eq!(std::fs::read(s.path(".work/goals/g/notepad.md")).expect("notepad"), before);
}

#[test]
fn a_crashing_or_blocked_agent_never_reads_as_done() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let crash = s.agent("crash.py", "bump('calls')\nsys.stderr.write('boom')\nsys.exit(3)");
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &crash, "--json"], 1);
    assert_eq!(out["status"], "BLOCKED");
    assert_eq!(criterion(&out, "happy")["status"], "red");
    let pad = s.read(".work/goals/greet/notepad.md");
    assert!(pad.contains(": failed:"), "the failed dispatch is recorded as such:\n{pad}");

    let blocked = s.agent(
        "blocked.py",
        r#"bump('calls')
print(json.dumps({"status": "blocked", "summary": "cannot", "claims": [], "cleanup": [], "blocker": "greet.sh needs a decision on the locale"}))"#,
    );
    let before = calls(&s);
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &blocked, "--json"], 1);
    assert_eq!(out["stop_reason"], "agent-blocked");
    assert_eq!(calls(&s), before + 1, "a blocked agent stops the run at once");
    assert!(out["stop_detail"].as_str().expect("detail").contains("needs a decision on the locale"));
}

/// A goal has one spelling per key: another name is refused before anything runs, naming the
/// canonical key; a word outside its list names the valid words.
#[test]
fn other_spellings_of_a_goal_key_are_refused_with_the_canonical_name() {
    let s = Scenario::new();
    let agent = s.agent("fixer.py", FIXER);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "stop_when",
            LIGHT.replace("stop_line =", "stop_when ="),
            "unknown key `stop_when` in GOAL.toml; did you mean `stop_line`?",
        ),
        ("command", LIGHT.replace("scenario =", "command ="), "unknown key `command` in a [[criteria]] entry"),
        ("a [goal] wrapper", format!("[goal]\n{LIGHT}"), "unknown key `goal` in GOAL.toml"),
        ("a tier that is no tier", LIGHT.replace("\"LIGHT\"", "\"medium\""), "is not one of LIGHT, HEAVY"),
    ];
    for (what, text, needle) in cases {
        s.write("GOAL.toml", &text);
        let (code, out, err) = s.run(&["ultra", "GOAL.toml", "--agent", &agent, "--json"]);
        assert_eq!(code, 2, "{what}: exit code\n{err}");
        assert_one_line_error(&err);
        assert!(err.contains(needle), "{what}: {err}");
        assert!(out.is_empty() && !s.path(".work").exists(), "{what}: something was written");
    }
}

/// Whether a process runs (a zombie does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            !matches!(stat.rsplit(')').next().map(str::trim_start).and_then(|r| r.chars().next()), Some('Z' | 'X'))
        }
        Err(_) => false,
    }
}

/// Kills the processes a test started (by pid), whatever the assertions say.
fn kill(pids: &[i32]) {
    for pid in pids {
        #[expect(clippy::disallowed_methods, reason = "the test tears down the processes its fixtures leaked")]
        let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

fn pids_in(s: &Scenario, rel: &str) -> Vec<i32> {
    std::fs::read_to_string(s.path(rel)).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

#[test]
fn a_process_the_implementer_leaves_running_is_gone_before_the_engine_observes() {
    let _unconfined = fallback_only(crate::containment::SWEEP);
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let agent = s.agent(
        "leaky.py",
        r#"import subprocess
bump('calls')
p = subprocess.Popen(['sleep', '120'], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(state_path('pids'), 'a').write('%d\n' % p.pid)
open('greet.sh', 'w').write('echo "hello, world"\n')
print(json.dumps({"status": "done", "summary": "fixed", "claims": [], "cleanup": [{"resource": "qa server", "action": "kill", "pid": p.pid}]}))"#,
    );
    let (code, out, err) = s.run(&["ultra", "GOAL.toml", "--agent", &agent, "--json"]);
    let pids = pids_in(&s, ".agent-state/pids");
    let survivors: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    kill(&survivors);
    assert_eq!(pids.len(), 1, "{err}");
    // The process left its session, but the runtime contains every dispatch: it is killed when
    // the implementer's dispatch ends, so nothing it left can answer a criterion afterwards,
    // and the claimed cleanup is verified by the engine.
    assert!(survivors.is_empty(), "the implementer's detached process {survivors:?} outlived its dispatch");
    let out: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["stop_reason"], "all-green");
    let receipts = s.read_json(".work/goals/greet/receipts.json");
    let claim = receipts["receipts"].as_array().expect("list").iter().find(|r| r["source"] == "agent").cloned();
    assert_eq!(claim.map(|r| r["verified"].clone()), Some(Value::Bool(true)), "{receipts}");
}

#[test]
fn a_process_a_scenario_detaches_is_found_and_killed_by_the_engine() {
    let s = Scenario::new();
    // The scenario runs on the engine's copy: it records its leaks in the tree by absolute path.
    let state = s.path(".agent-state").display().to_string();
    s.write(
        ".agents/leak.py",
        &format!(
            "import os, subprocess\nos.makedirs({state:?}, exist_ok=True)\n\
             p = subprocess.Popen(['sleep', '120'], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n\
             open(os.path.join({state:?}, 'leaks'), 'a').write('%d\\n' % p.pid)\n"
        ),
    );
    s.write(
        "GOAL.toml",
        &LIGHT.replace("scenario = \"sh greet.sh\"", "scenario = \"python3 .agents/leak.py && sh greet.sh\""),
    );
    let agent = s.agent("fixer.py", FIXER);
    let (code, out, err) = s.run(&["ultra", "GOAL.toml", "--agent", &agent, "--json"]);
    let leaks = pids_in(&s, ".agent-state/leaks");
    let survivors: Vec<i32> = leaks.iter().copied().filter(|p| alive(*p)).collect();
    kill(&survivors);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(leaks.len(), 3, "red, attempt-1 and green each leaked one");
    // The runtime kills what a scenario detached when the scenario ends; the engine's own
    // sweep afterwards is a second line of defence that finds nothing left.
    assert!(survivors.is_empty(), "the scenario's detached processes {survivors:?} outlived it");
}

#[test]
fn a_second_concurrent_run_of_one_goal_is_refused() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    // The first call waits for `go`; any later call (a second run) answers at once.
    let agent = s.agent(
        "slow.py",
        r#"n = bump('calls')
if n == 1:
    open(state_path('started'), 'w').write('1')
    while not os.path.exists(state_path('go')):
        time.sleep(0.05)
open('greet.sh', 'w').write('echo "hello, world"\n')
print(json.dumps({"status": "done", "summary": "wrote greet.sh", "claims": [], "cleanup": []}))"#,
    );
    struct Release<'a>(&'a Scenario, std::process::Child);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            let _ = std::fs::write(self.0.path(".agent-state/go"), "1");
            let _ = self.1.kill();
            let _ = self.1.wait();
        }
    }
    let child = s
        .work_std()
        .args(["ultra", "GOAL.toml", "--agent", &agent, "--json"])
        .current_dir(s.root())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn work");
    let mut first = Release(&s, child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !s.path(".agent-state/started").exists() {
        assert!(std::time::Instant::now() < deadline, "the first run never dispatched");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pad = std::fs::read(s.path(".work/goals/greet/notepad.md")).expect("notepad");
    let runs = std::fs::read_dir(s.path(".work/runs")).expect("runs").count();

    let (code, out, err) = s.run(&["ultra", "GOAL.toml", "--agent", &agent, "--json"]);
    assert_eq!(code, 2, "the second run must not run\n{out}\n{err}");
    assert_one_line_error(&err);
    assert!(err.contains("held by another run"), "{err}");
    assert!(out.is_empty());
    assert_eq!(calls(&s), 1, "the second run dispatched");
    assert_eq!(std::fs::read(s.path(".work/goals/greet/notepad.md")).expect("notepad"), pad);
    assert_eq!(std::fs::read_dir(s.path(".work/runs")).expect("runs").count(), runs, "the second run started a run");

    std::fs::write(s.path(".agent-state/go"), "1").expect("go");
    let status = first.1.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    assert!(s.path(".work/goals/greet/lock").exists(), "the lock file is kept");
}

#[test]
fn an_agent_that_rewrites_the_notepad_or_the_red_evidence_is_caught() {
    let _unconfined = fallback_only(refused::STATE);
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let agent = s.agent(
        "forger.py",
        r#"bump('calls')
open(state_path('pad-before'), 'w').write(open('.work/goals/greet/notepad.md').read())
open('.work/goals/greet/notepad.md', 'w').write('# rewritten\n')
open('.work/goals/greet/evidence/happy/red.json', 'w').write('{}')
open('greet.sh', 'w').write('echo "hello, world"\n')
print(json.dumps({"status": "done", "summary": "fixed", "claims": [], "cleanup": []}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 1);
    assert_eq!(out["status"], "BLOCKED");
    assert_eq!(out["stop_reason"], "evidence-tampered");
    let detail = out["stop_detail"].as_str().expect("detail");
    assert!(detail.contains("notepad.md") && detail.contains("evidence/happy/red.json"), "{detail}");
    // The engine's records are restored: the notepad keeps its earlier bytes, RED its proof.
    let before = s.read(".agent-state/pad-before");
    let pad = s.read(".work/goals/greet/notepad.md");
    assert!(pad.starts_with(&before) && !pad.contains("# rewritten"), "{pad}");
    assert!(pad.contains("Stop: BLOCKED (evidence-tampered)"), "{pad}");
    let red = s.read_json(".work/goals/greet/evidence/happy/red.json");
    assert_eq!(red["verdict"], "fail");
}

#[test]
fn a_minimal_answer_is_read_once_not_retried() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let agent = s.agent(
        "terse.py",
        r#"bump('calls')
open('greet.sh', 'w').write('echo "hello, world"\n')
print(json.dumps({"status": "done"}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--json"], 0);
    assert_eq!(out["status"], "DONE");
    assert_eq!(calls(&s), 1, "a valid minimal answer was dispatched again");
    assert!(s.read(".work/goals/greet/notepad.md").contains("agent says done"));
}

#[test]
fn a_dispatch_budget_stops_with_reason_budget_and_the_refused_attempt_is_not_counted() {
    let s = Scenario::new();
    s.write("GOAL.toml", LIGHT);
    let agent = s.agent("liar.py", LIAR);
    let out = s.run_json(
        &["ultra", "GOAL.toml", "--agent", &agent, "--max-attempts", "5", "--budget-dispatches", "1", "--json"],
        1,
    );
    assert_eq!(out["status"], "BLOCKED");
    assert_eq!(out["stop_reason"], "budget", "{out}");
    assert_eq!(calls(&s), 1, "exactly the allowed dispatch");
    assert_eq!(out["attempts"], 1, "the refused attempt is not counted: {out}");
    assert_eq!(criterion(&out, "happy")["attempts"], 1);
    let detail = out["stop_detail"].as_str().expect("detail");
    assert!(detail.contains("the dispatches budget (1) is spent") && detail.contains("not counted"), "{detail}");

    // The budget is per run: running the goal again with a budget continues.
    let out = s.run_json(
        &["ultra", "GOAL.toml", "--agent", &agent, "--max-attempts", "5", "--budget-dispatches", "1", "--json"],
        1,
    );
    assert_eq!(out["stop_reason"], "budget", "{out}");
    assert_eq!((calls(&s), out["attempts"].as_u64()), (2, Some(2)));

    let (code, _, err) = s.run(&["ultra", "GOAL.toml", "--agent", &agent, "--budget-tokens", "0"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
}

/// A goal judged by a committed check script, and a test the implementer may add to.
const CHECKED: &str = r#"
id = "checked"
objective = "greet.sh prints hello, world"
tier = "LIGHT"
tier_justification = "one script"
stop_line = "I'll stop right away when sh check.sh passes"

[[criteria]]
id = "happy"
scenario = "sh check.sh"
evidence = ["stdout", "exit_code"]
pass = { exit_code = 0 }
"#;

fn checked_repo() -> Scenario {
    let s = Scenario::new();
    s.write("GOAL.toml", CHECKED);
    s.write("check.sh", "test \"$(sh greet.sh 2>/dev/null)\" = 'hello, world'\n");
    s.write("tests/test_greet.sh", "test -f greet.sh\n");
    s.commit("goal and its check");
    s
}

#[test]
fn an_implementer_that_rewrites_the_check_script_is_blocked_and_its_honest_twin_is_not() {
    let unconfined = fallback_only(refused::FROZEN);
    let s = checked_repo();
    let liar = s.agent(
        "liar.py",
        r#"bump('calls')
open('check.sh', 'w').write('exit 0\n')
print(json.dumps({"status": "done", "summary": "fixed", "claims": [], "cleanup": []}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &liar, "--json"], 1);
    assert_eq!(out["status"], "BLOCKED", "{out}");
    assert_eq!(out["stop_reason"], "check-tampered");
    assert!(out["stop_detail"].as_str().is_some_and(|d| d.contains("check.sh")), "{out}");

    // Running the goal again with the rewritten script in place compares it with the goal's
    // freeze and stops before anything runs: the rewritten script is never the new baseline.
    let calls = s.read(".agent-state/calls");
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &liar, "--json"], 1);
    assert_eq!(out["stop_reason"], "check-tampered", "{out}");
    assert!(out["stop_detail"].as_str().is_some_and(|d| d.contains("check.sh") && d.contains("--fresh")), "{out}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
    // Started over on purpose, RED is captured against the rewritten script — and a criterion
    // that passes before any work is no failing-first proof.
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &liar, "--fresh", "--json"], 1);
    assert_eq!(out["stop_reason"], "already-green", "{out}");

    drop(unconfined);
    // The honest twin writes the code and adds a test; the existing test and the check stay.
    let s = checked_repo();
    let honest = s.agent(
        "honest.py",
        r#"bump('calls')
open('greet.sh', 'w').write('echo "hello, world"\n')
open('tests/test_greet.sh', 'a').write('grep -q hello greet.sh\n')
print(json.dumps({"status": "done", "summary": "wrote greet.sh", "claims": [], "cleanup": []}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &honest, "--json"], 0);
    assert_eq!(out["stop_reason"], "all-green", "{out}");
}

#[test]
fn an_implementer_that_deletes_or_weakens_a_test_is_blocked() {
    let s = checked_repo();
    let liar = s.agent(
        "liar.py",
        r#"bump('calls')
open('greet.sh', 'w').write('echo "hello, world"\n')
open('tests/test_greet.sh', 'w').write('true\n')
print(json.dumps({"status": "done", "summary": "fixed", "claims": [], "cleanup": []}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &liar, "--json"], 1);
    assert_eq!(out["stop_reason"], "check-tampered", "{out}");
    assert!(out["stop_detail"].as_str().is_some_and(|d| d.contains("tests/test_greet.sh")), "{out}");
}

#[test]
fn an_implementer_that_hides_a_change_from_git_is_blocked_and_its_honest_twin_is_not() {
    let unconfined = fallback_only(refused::GIT);
    for hide in [
        "open('.git/info/exclude', 'a').write('notes.txt\\n')",
        "import subprocess\nsubprocess.run(['git', 'update-index', '--assume-unchanged', 'check.sh'])",
    ] {
        let s = checked_repo();
        let liar = s.agent(
            "liar.py",
            &format!(
                "bump('calls')\nopen('greet.sh', 'w').write('echo \"hello, world\"\\n')\nopen('notes.txt', 'w').write('x')\n{hide}\nprint(json.dumps({{\"status\": \"done\", \"summary\": \"fixed\", \"claims\": [], \"cleanup\": []}}))"
            ),
        );
        let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &liar, "--json"], 1);
        assert_eq!(out["status"], "BLOCKED", "{hide}: {out}");
        assert_eq!(out["stop_reason"], "git-tampered", "{hide}: {out}");
    }
    drop(unconfined);
    let s = checked_repo();
    let honest = s.agent(
        "honest.py",
        r#"bump('calls')
open('greet.sh', 'w').write('echo "hello, world"\n')
open('notes.txt', 'w').write('x')
print(json.dumps({"status": "done", "summary": "wrote greet.sh", "claims": [], "cleanup": []}))"#,
    );
    let out = s.run_json(&["ultra", "GOAL.toml", "--agent", &honest, "--json"], 0);
    assert_eq!(out["stop_reason"], "all-green", "{out}");
}
