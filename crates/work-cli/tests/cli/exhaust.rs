//! `work exhaust` end to end: the worked example of the exhaust rules, every way a finder can fail or lie,
//! gate 2's refusals, budgets, resume after SIGKILL, and bad input.

use crate::support::{Scenario, assert_one_line_error, fallback_only};
use serde_json::Value;

/// A finder that answers from a per-angle table: `TABLE[angle]` is a list of items (or the
/// string "crash", "garbage", "hang", "garbage-once").
fn table_finder(s: &Scenario, table: &str) -> String {
    s.agent(
        "finder.py",
        &format!(
            r#"
TABLE = json.loads(r'''{table}''')
angle = ctx['angle']
entry = TABLE.get(angle, [])
if entry == 'crash':
    sys.stderr.write('finder blew up\n'); sys.exit(3)
if entry == 'garbage':
    print('this is not json'); sys.exit(0)
if entry == 'garbage-once' and req['attempt'] == 1:
    print('{{"angle": 1}}'); sys.exit(0)
if entry == 'garbage-once':
    entry = [{{"id": "late-" + angle, "title": "t", "location": "src/jobs.rs:1"}}]
if entry == 'hang':
    time.sleep(60)
bump('calls')
print(json.dumps({{"angle": angle, "items": entry, "roundNotes": "n"}}))
"#
        ),
    )
}

fn jobs_repo() -> Scenario {
    let s = Scenario::new();
    s.write(
        "src/jobs.rs",
        "fn a() { transition(1); }\nfn b() { transition(2); }\nfn c() { transition(3); }\nfn d() { transition(4); }\n\
         fn e() { if err { rollback() } }\nfn f() { retry() }\nfn g() { lock() }\n",
    );
    s.write("lib/orphan.rs", "fn h() { setState(9); }\n");
    s.commit("jobs");
    s
}

fn rounds(master: &Value) -> &Vec<Value> {
    master["rounds"].as_array().expect("rounds is an array")
}

fn counters(master: &Value) -> Vec<u64> {
    rounds(master).iter().map(|r| r["dryCounterAfter"].as_u64().expect("dryCounterAfter")).collect()
}

#[test]
fn worked_example_k2_soft_empty_gate3_reset_and_stop() {
    let s = jobs_repo();
    let agent = table_finder(
        &s,
        r#"{
 "error-paths": [
   {"id": "s5", "title": "swallowed error", "location": "src/jobs.rs:5", "severity": "high"},
   {"id": "s6", "title": "retry without limit", "location": "src/jobs.rs:6"},
   {"id": "moved", "title": "line moved", "location": "src/jobs.rs:99"}],
 "concurrency-races": [{"id": "s7", "title": "lock", "location": "src/jobs.rs:7"}]
}"#,
    );
    let master = s.run_json(
        &[
            "exhaust",
            "all job-state transition sites",
            "-k",
            "2",
            "--angles",
            "error-paths,concurrency-races,error-paths,event-emitters,cron-background-jobs,migrations,admin-tooling",
            "--seed-oracle",
            "grep -Hn 'transition(' src/jobs.rs",
            "--final-oracle",
            "grep -rn 'setState(' src lib",
            "--agent",
            &agent,
            "--json",
        ],
        0,
    );
    assert_eq!(master["stoppedReason"], "k-consecutive-dry");
    let seen = master["seen"].as_array().expect("seen");
    assert_eq!(seen.len(), 8, "s1..s8: {seen:?}");
    for id in ["src/jobs.rs:1", "src/jobs.rs:4", "s5", "s6", "s7", "lib/orphan.rs:1"] {
        assert!(seen.contains(&Value::from(id)), "{id} missing from {seen:?}");
    }
    assert_eq!(counters(&master), vec![0, 0, 0, 1, 0, 1, 2]);
    let r = rounds(&master);
    assert_eq!(r[0]["newItems"], serde_json::json!(["s5", "s6"]));
    assert_eq!(r[2]["softEmpty"], true, "round 3 re-ran an exhausted angle");
    assert_eq!(r[3]["softEmpty"], false);
    assert_eq!(r[4]["gate3"]["newItems"], serde_json::json!(["lib/orphan.rs:1"]), "gate 3 found s8");
    assert_eq!(r[6]["gate3"]["newItems"], serde_json::json!([]), "gate 3 clean before the stop");
    let rejected = master["rejected"].as_array().expect("rejected");
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0]["id"], "moved");
    // Gate 2 is the engine's re-read, recorded on every accepted item.
    for item in master["items"].as_array().expect("items") {
        assert_eq!(item["workDone"], true);
        assert_eq!(item["reReadSources"].as_array().map(Vec::len), Some(1), "{item}");
    }
    let s5 = master["items"].as_array().and_then(|a| a.iter().find(|i| i["id"] == "s5")).expect("s5");
    assert_eq!(s5["reRead"]["text"], "fn e() { if err { rollback() } }");
    // The journal is the same master object.
    let journal = s.read_json(".work/quality-journals/work-exhaust-all-job-state-transition-sites.json");
    assert_eq!(journal, master);
}

#[test]
fn one_progress_line_a_round_on_stderr() {
    let s = jobs_repo();
    let agent = table_finder(&s, r#"{"a": [{"id": "x", "title": "t", "location": "src/jobs.rs:2"}]}"#);
    let (code, out, err) = s.run(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &agent]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty(), "stdout must stay empty without --json: {out}");
    assert!(err.contains("Round 1: 1 new (1 total) · angle=a · dryCounter 0/2"), "{err}");
    assert!(err.contains("Round 2: 0 new (1 total) · angle=b · dryCounter 1/2"), "{err}");
    assert!(err.contains("Round 3: 0 new (1 total) · angle=c · dryCounter 2/2"), "{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("Round ")).count(), 3);
}

#[test]
fn a_failing_finder_is_never_dry_and_is_given_up_after_two_rounds() {
    let s = jobs_repo();
    let agent = table_finder(&s, r#"{"a": "crash"}"#);
    // Angle a was never searched: not success (exit 1).
    let master = s.run_json(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &agent, "--json"], 1);
    let r = rounds(&master);
    assert_eq!(r[0]["failedFinders"], 1);
    assert_eq!(r[0]["anglesUsed"], serde_json::json!(["a"]));
    assert_eq!(r[0]["verdict"], "all-finders-failed");
    assert_eq!(r[1]["anglesUsed"], serde_json::json!(["a"]), "the failed angle is retried");
    assert_eq!(counters(&master)[..2], [0, 0], "a dead finder never counts as dry");
    let gaps = master["completenessGaps"].as_array().expect("gaps");
    assert!(
        gaps.iter().any(|g| g.as_str().is_some_and(|g| g.contains("angle a") && g.contains("exit code 3"))),
        "{gaps:?}"
    );
    assert!(!master["anglesUsed"].as_array().expect("used").contains(&Value::from("a")));
    assert_eq!(master["stoppedReason"], "k-consecutive-dry");
}

/// An angle given up is never hidden: it keeps a dry with a clean final oracle `unconfirmed`,
/// the run does not end as done (exit 1), and the terminal summary and `work show` name it.
#[test]
fn a_given_up_angle_is_named_in_the_summary_and_show_and_the_dry_is_unconfirmed() {
    let s = jobs_repo();
    let agent = table_finder(&s, r#"{"a": "crash"}"#);
    let (code, out, err) = s.run(&[
        "exhaust",
        "things",
        "-k",
        "2",
        "--angles",
        "a,b,c",
        "--final-oracle",
        "true",
        "--agent",
        &agent,
        "--json",
    ]);
    assert_eq!(code, 1, "a given-up angle is not success:\n{err}");
    let master: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(master["stoppedReason"], "k-consecutive-dry");
    assert_eq!(master["givenUp"], serde_json::json!(["a"]));
    assert_eq!(master["completeness"], "unconfirmed", "{master:#}");
    assert!(err.contains("Dry, UNCONFIRMED: angle(s) a given up"), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("gap: angle a: given up, its finder failed in two rounds")),
        "the summary names the angle:\n{err}"
    );
    let (code, show, _) = s.run(&["show", "things"]);
    assert_eq!(code, 0);
    assert!(show.contains("stopped: k-consecutive-dry · unconfirmed"), "{show}");
    assert!(show.contains("Given up (their finder failed in two rounds): a"), "{show}");
    assert!(show.contains("Gaps:\n  angle a: given up"), "{show}");
}

#[test]
fn malformed_once_is_retried_with_the_error_and_accepted() {
    let s = jobs_repo();
    let agent = table_finder(&s, r#"{"a": "garbage-once"}"#);
    let master = s.run_json(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &agent, "--json"], 0);
    assert_eq!(master["seen"], serde_json::json!(["late-a"]));
    assert_eq!(rounds(&master)[0]["failedFinders"], 0);
    // The retry carried the validation error in its brief, as attempt 2.
    let runs = std::fs::read_dir(s.path(".work/runs")).expect("runs").next().expect("a run").expect("entry").path();
    let rec = work_runtime::events::find_record(&runs, "d0001-finder-a", 2).expect("read").expect("attempt 2 record");
    assert_eq!(rec["request"]["attempt"], 2);
    assert!(rec["request"]["prompt"].as_str().is_some_and(|p| p.contains("REJECTED")), "{rec}");
}

#[test]
fn always_malformed_is_dropped_not_dry() {
    let s = jobs_repo();
    let agent = table_finder(&s, r#"{"a": "garbage"}"#);
    // Angle a was given up: not success.
    let master = s.run_json(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &agent, "--json"], 1);
    let r = rounds(&master);
    assert_eq!(r[0]["verdict"], "all-finders-failed");
    assert_eq!(r[1]["verdict"], "all-finders-failed");
    let gaps = master["completenessGaps"].to_string();
    assert!(gaps.contains("malformed twice"), "{gaps}");
}

#[test]
fn a_hanging_finder_is_killed_at_its_timeout() {
    let s = jobs_repo();
    let agent = table_finder(&s, r#"{"a": "hang"}"#);
    let master = s.run_json(
        &[
            "-c",
            "timeouts.dispatch_secs=4",
            "exhaust",
            "things",
            "-k",
            "2",
            "--angles",
            "a,b,c",
            "--agent",
            &agent,
            "--json",
        ],
        1, // angle a was given up: not success
    );
    assert_eq!(rounds(&master)[0]["failedFinders"], 1);
    assert!(master["completenessGaps"].to_string().contains("timed out"), "{}", master["completenessGaps"]);
}

#[test]
fn gate2_refuses_every_escaping_or_missing_location() {
    let s = jobs_repo();
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.txt"), "secret\n").expect("write");
    std::os::unix::fs::symlink(outside.path(), s.path("escape")).expect("symlink");
    let agent = table_finder(
        &s,
        &format!(
            r#"{{"a": [
 {{"id": "abs", "title": "t", "location": "{abs}:1"}},
 {{"id": "climb", "title": "t", "location": "../secret.txt:1"}},
 {{"id": "sym", "title": "t", "location": "escape/secret.txt:1"}},
 {{"id": "missing-file", "title": "t", "location": "src/nope.rs:1"}},
 {{"id": "missing-line", "title": "t", "location": "src/jobs.rs:500"}},
 {{"id": "good", "title": "t", "location": "src/jobs.rs:2"}},
 {{"id": "concept", "title": "t", "location": "the retry policy"}}
]}}"#,
            abs = outside.path().join("secret.txt").display()
        ),
    );
    let master = s.run_json(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &agent, "--json"], 0);
    let rejected: Vec<(String, String)> = master["rejected"]
        .as_array()
        .expect("rejected")
        .iter()
        .map(|r| (r["id"].as_str().unwrap_or("").to_string(), r["reason"].as_str().unwrap_or("").to_string()))
        .collect();
    let reason = |id: &str| rejected.iter().find(|r| r.0 == id).map(|r| r.1.clone()).unwrap_or_default();
    assert!(reason("abs").contains("absolute"), "{rejected:?}");
    assert!(reason("climb").contains(".."), "{rejected:?}");
    assert!(reason("sym").contains("outside"), "{rejected:?}");
    assert!(reason("missing-file").contains("no file"), "{rejected:?}");
    assert!(reason("missing-line").contains("past the end"), "{rejected:?}");
    assert_eq!(rejected.len(), 5, "{rejected:?}");
    assert_eq!(master["seen"], serde_json::json!(["good", "concept"]));
    let good = &master["items"][0];
    assert_eq!(good["reReadSources"], serde_json::json!(["src/jobs.rs:2"]), "the engine's own re-read");
    assert_eq!(good["workDone"], true);
    assert_eq!(master["items"][1]["gate2"], "concept");
}

#[test]
fn dedup_covers_rejected_items_and_locations() {
    let s = jobs_repo();
    let agent = table_finder(
        &s,
        r#"{
 "a": [{"id": "bad", "title": "t", "location": "src/jobs.rs:900"}, {"id": "x", "title": "t", "location": "src/jobs.rs:2"}],
 "b": [{"id": "BAD", "title": "same id, now valid", "location": "src/jobs.rs:3"},
       {"id": "other-name", "title": "same place", "location": "./src/jobs.rs:2"}]
}"#,
    );
    let master = s.run_json(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &agent, "--json"], 0);
    assert_eq!(master["seen"], serde_json::json!(["x"]));
    assert_eq!(rounds(&master)[1]["duplicates"], 2);
    assert_eq!(rounds(&master)[1]["dryCounterAfter"], 1, "duplicates are not new");
}

#[test]
fn angles_and_oracles_exhausted() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    let master = s.run_json(&["exhaust", "things", "-k", "3", "--angles", "a,b", "--agent", &agent, "--json"], 0);
    assert_eq!(master["stoppedReason"], "angles-and-oracles-exhausted");
    assert_eq!(counters(&master), vec![1, 2]);
    // With a final oracle not yet run, it gets a round of its own first.
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    let master = s.run_json(
        &["exhaust", "things", "-k", "4", "--angles", "a,b", "--final-oracle", "true", "--agent", &agent, "--json"],
        0,
    );
    assert_eq!(master["stoppedReason"], "angles-and-oracles-exhausted");
    assert_eq!(rounds(&master)[2]["anglesUsed"], serde_json::json!(["gate-3"]));
}

#[test]
fn built_in_sweep_pool_when_no_angles_given() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    let master = s.run_json(&["exhaust", "things", "-k", "2", "--agent", &agent, "--json"], 0);
    assert_eq!(master["anglesUsed"], serde_json::json!(["direct-search", "error-paths"]));
}

#[test]
fn the_default_cap_is_eight_whatever_the_core_count() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    let angles = (0..10).map(|i| format!("a{i}")).collect::<Vec<_>>().join(",");
    let args = ["exhaust", "things", "-k", "2", "--angles", &angles, "--angles-per-round", "10", "--agent", &agent];
    s.run_json(&[&args[..], &["--json"]].concat(), 0);
    let runs = std::fs::read_dir(s.path(".work/runs")).expect("runs").next().expect("a run").expect("entry").path();
    let events = std::fs::read_to_string(runs.join("events.jsonl")).expect("events");
    let parsed: Vec<Value> = events.lines().map(|l| serde_json::from_str::<Value>(l).expect("json line")).collect();
    let start = parsed.iter().find(|e| e["kind"] == "exhaust.start").expect("exhaust.start");
    assert_eq!(start["cap"], 8, "the default cap does not follow the core count");
    let fanout = parsed.iter().find(|e| e["kind"] == "fanout.start").expect("a fan-out");
    assert!(fanout["cap"] == 8 && fanout["size"] == 10, "{fanout}");
}

#[test]
fn waves_respect_the_cap_and_log_it() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    let master = s.run_json(
        &[
            "exhaust",
            "things",
            "-k",
            "2",
            "--angles",
            "a,b,c,d,e,f,g,h,i,j",
            "--angles-per-round",
            "5",
            "--concurrency",
            "2",
            "--agent",
            &agent,
            "--json",
        ],
        0,
    );
    assert_eq!(rounds(&master)[0]["anglesUsed"].as_array().map(Vec::len), Some(5));
    let runs = std::fs::read_dir(s.path(".work/runs")).expect("runs").next().expect("a run").expect("entry").path();
    let events = std::fs::read_to_string(runs.join("events.jsonl")).expect("events");
    let parsed: Vec<Value> = events.lines().map(|l| serde_json::from_str::<Value>(l).expect("json line")).collect();
    let fanouts: Vec<&Value> = parsed.iter().filter(|e| e["kind"] == "fanout.start").collect();
    assert_eq!(fanouts.len(), 2, "one fan-out a round");
    assert!(fanouts.iter().all(|w| w["cap"] == 2 && w["size"] == 5 && w["queued"] == 3), "the cap is logged");
    let (mut in_flight, mut peak) = (0i64, 0i64);
    for e in &parsed {
        if e["kind"] == "dispatch.start" {
            in_flight += 1;
            peak = peak.max(in_flight);
        } else if e["kind"] == "dispatch.end" {
            in_flight -= 1;
        }
    }
    assert_eq!(peak, 2, "never more than the cap in flight, and the cap is used");
    let mut seq = 0;
    for line in events.lines() {
        let e: Value = serde_json::from_str(line).expect("json");
        assert!(e["ts"].is_string() && e["run_id"].is_string() && e["kind"].is_string());
        let n = e["seq"].as_u64().expect("seq");
        assert!(n > seq, "seq strictly increasing");
        seq = n;
    }
}

fn finder_with_usage(s: &Scenario) -> String {
    s.agent(
        "usage.py",
        r#"
angle = ctx['angle']
print(json.dumps({"work_result": {"angle": angle, "items": [{"id": "i-" + angle, "title": "t", "location": "src/jobs.rs:1"}] if angle != 'z' else []},
                  "usage": {"input_tokens": 60, "output_tokens": 40, "cost_usd": 0.25}}))
"#,
    )
}

#[test]
fn each_budget_stops_explicitly() {
    for (flag, value) in [("--budget-dispatches", "2"), ("--budget-tokens", "150"), ("--budget-usd", "0.5")] {
        let s = jobs_repo();
        let agent = finder_with_usage(&s);
        let master =
            s.run_json(&["exhaust", "things", "--angles", "a,b,c,d", flag, value, "--agent", &agent, "--json"], 1);
        assert_eq!(master["stoppedReason"], "budget", "{flag}");
        assert_eq!(rounds(&master).len(), 2, "{flag}");
        assert_eq!(master["droppedDueToBudget"], serde_json::json!(["c", "d"]), "{flag}");
        let notes = master["budgetNotes"].to_string();
        assert!(notes.contains("angle c: not run") && notes.contains("budget spent"), "{flag}: {notes}");
        assert_eq!(master["spent"]["dispatches"], 2, "{flag}");
        assert_eq!(master["spentByRole"]["finder"]["dispatches"], 2, "{flag}: spending per role");
        assert_eq!(master["spentByRole"]["finder"]["usage"]["input_tokens"], 120, "{flag}");
    }
}

#[test]
fn max_rounds_is_a_caller_target() {
    let s = jobs_repo();
    let agent = finder_with_usage(&s);
    let master =
        s.run_json(&["exhaust", "things", "--angles", "a,b,c", "--max-rounds", "1", "--agent", &agent, "--json"], 1);
    assert_eq!(master["stoppedReason"], "caller-target");
    assert_eq!(rounds(&master).len(), 1);
}

#[test]
fn a_finished_task_resumes_to_the_same_result_without_dispatching() {
    let s = jobs_repo();
    let agent = table_finder(&s, r#"{"a": [{"id": "x", "title": "t", "location": "src/jobs.rs:2"}]}"#);
    let args = ["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &agent, "--json"];
    let first = s.run_json(&args, 0);
    let calls = s.read(".agent-state/calls");
    let second = s.run_json(&args, 0);
    assert_eq!(first, second);
    assert_eq!(s.read(".agent-state/calls"), calls, "no dispatch on a finished journal");
    let third = s.run_json(&[&args[..], &["--fresh"]].concat(), 0);
    assert_eq!(first["seen"], third["seen"]);
    assert_ne!(s.read(".agent-state/calls"), calls, "--fresh starts over");
}

#[test]
fn sigkill_mid_run_then_rerun_ends_like_an_uninterrupted_run() {
    let table = r#"{"a": [{"id": "x", "title": "t", "location": "src/jobs.rs:5"}],
 "b": [{"id": "y", "title": "t", "location": "src/jobs.rs:6"}],
 "d": [{"id": "z", "title": "t", "location": "src/jobs.rs:7"}]}"#;
    let slow_body = |marker: &str| {
        format!(
            r#"
TABLE = json.loads(r'''{table}''')
angle = ctx['angle']
if angle == 'c' and not os.path.exists({marker:?}):
    open({marker:?}, 'w').write('slept')
    time.sleep(30)
print(json.dumps({{"angle": angle, "items": TABLE.get(angle, [])}}))
"#
        )
    };
    let args = |agent: &str| -> Vec<String> {
        [
            "exhaust",
            "things",
            "-k",
            "2",
            "--angles",
            "a,b,c,d,e,f",
            "--seed-oracle",
            "grep -Hn transition src/jobs.rs",
            "--agent",
            agent,
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    // Uninterrupted.
    let whole = jobs_repo();
    let marker = whole.path(".agent-state/marker");
    std::fs::create_dir_all(whole.path(".agent-state")).expect("mkdir");
    std::fs::write(&marker, "x").expect("marker");
    let agent = whole.agent("f.py", &slow_body(&marker.display().to_string()));
    let a: Vec<String> = args(&agent);
    let expected = whole.run_json(&a.iter().map(String::as_str).collect::<Vec<_>>(), 0);

    // Killed while round 3's finder sleeps, then run again.
    let s = jobs_repo();
    let marker = s.path(".agent-state/marker");
    let agent = s.agent("f.py", &slow_body(&marker.display().to_string()));
    let a: Vec<String> = args(&agent);
    let mut child = s
        .work_std()
        .args(&a)
        .current_dir(s.root())
        .env("WORK_FAKE_CLOCK", "2026-01-01T00:00:00Z")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn work");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marker.exists() {
        assert!(std::time::Instant::now() < deadline, "round 3 never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let mid = s.read_json(".work/quality-journals/work-exhaust-things.json");
    assert_eq!(
        mid["rounds"].as_array().map(Vec::len),
        Some(2),
        "the journal holds the rounds completed before the kill"
    );
    let resumed = s.run_json(&a.iter().map(String::as_str).collect::<Vec<_>>(), 0);
    assert_eq!(resumed, expected);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    let cases: Vec<Vec<&str>> = vec![
        vec!["exhaust"],
        vec!["exhaust", "x", "-k", "1", "--agent", &agent],
        vec!["exhaust", "x", "--agent", "nope:x"],
        vec!["exhaust", "x", "--agent", "unknown-name"],
        vec!["exhaust", "x", "--agent", &agent, "--seed-oracle", "echo boom >&2; exit 7"],
        vec!["exhaust", "x", "--agent", &agent, "--seed-oracle", "echo not a location"],
        vec!["exhaust", "x", "--agent", &agent, "--angles-per-round", "0"],
        vec!["exhaust", "x", "--agent", &agent, "--task", "../escape"],
        vec!["exhaust", "x", "--agent", &agent, "--budget-usd", "-1"],
        vec!["exhaust", "x", "--agent", &agent, "-k", "notanumber"],
        vec!["-c", "bogus_key=1", "exhaust", "x", "--agent", &agent],
        vec!["exhaust", "x"],
    ];
    for args in cases {
        let (code, out, err) = s.run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: stdout {out}");
        assert_one_line_error(&err);
        assert!(!s.path(".work/quality-journals").exists(), "{args:?} wrote a journal");
    }
    let (_, _, err) = s.run(&["-c", "bogus_key=1", "exhaust", "x", "--agent", &agent]);
    assert!(err.contains("bogus_key"), "the unknown key is named: {err}");
}

#[test]
fn a_corrupt_journal_is_named_and_left_untouched() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    s.write(".work/quality-journals/work-exhaust-things.json", "{\"seen\": [tru");
    let (code, _, err) = s.run(&["exhaust", "things", "--agent", &agent]);
    assert_eq!(code, 2);
    assert_one_line_error(&err);
    assert!(err.contains("work-exhaust-things.json") && err.contains("corrupt"), "{err}");
    assert_eq!(s.read(".work/quality-journals/work-exhaust-things.json"), "{\"seen\": [tru");
}

#[test]
fn no_secret_reaches_the_event_log_or_journal() {
    let s = jobs_repo();
    let agent = s.agent(
        "leaky.py",
        r#"
key = os.environ.get('OPENAI_API_KEY', '')
print(json.dumps({"angle": ctx['angle'], "items": [{"id": "leak", "title": "key " + key, "location": "src/jobs.rs:1"}], "roundNotes": key}))
"#,
    );
    let out = s
        .work()
        .env("OPENAI_API_KEY", "sk-canary-1234567890")
        // The agent is given the key (no agent sees one it is not given), and leaks it.
        .args(["-c", &format!("agents.leaky.spec={agent:?}"), "-c", "agents.leaky.env=[\"OPENAI_API_KEY\"]"])
        .args(["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", "leaky", "--json"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    let mut all = String::from_utf8_lossy(&out.stdout).into_owned();
    all.push_str(&String::from_utf8_lossy(&out.stderr));
    for entry in walk(&s.path(".work")) {
        all.push_str(&std::fs::read_to_string(entry).unwrap_or_default());
    }
    assert!(all.contains("[REDACTED]"), "the canary was seen and redacted");
    assert!(!all.contains("sk-canary-1234567890"), "the canary key leaked");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
        }
    }
    out
}

#[test]
fn locations_that_look_like_paths_but_do_not_parse_are_refused_not_concepts() {
    let s = jobs_repo();
    let agent = table_finder(
        &s,
        r#"{"a": [
 {"id": "overflow", "title": "t", "location": "/etc/passwd:18446744073709551616"},
 {"id": "dash", "title": "t", "location": "../../etc/passwd:1-"},
 {"id": "comma", "title": "t", "location": "/etc/passwd:1,2"},
 {"id": "letter", "title": "t", "location": "src/jobs.rs:L1"},
 {"id": "noline", "title": "t", "location": "src/jobs.rs"}
]}"#,
    );
    let master = s.run_json(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &agent, "--json"], 0);
    // `PATH:L1` is the prose form of `PATH:1`, re-read as such; the rest cannot be read.
    assert_eq!(master["seen"], serde_json::json!(["letter"]), "{}", master["items"]);
    assert_eq!(master["items"][0]["reReadSources"], serde_json::json!(["src/jobs.rs:1"]));
    assert_eq!(master["rejected"].as_array().map(Vec::len), Some(4));
}

#[test]
fn an_agent_that_cannot_run_is_bad_input() {
    let s = jobs_repo();
    s.write("noexec.py", "print('{}')\n");
    for spec in [format!("command:{}", s.path("noexec.py").display()), format!("command:{}", s.path("src").display())] {
        let (code, _, err) = s.run(&["exhaust", "things", "--agent", &spec]);
        assert_eq!(code, 2, "{spec}: {err}");
        assert_one_line_error(&err);
    }
}

#[test]
fn a_run_in_which_no_finder_ever_answered_is_not_success() {
    let s = jobs_repo();
    let agent = table_finder(&s, r#"{"a": "crash", "b": "crash"}"#);
    let master = s.run_json(&["exhaust", "things", "-k", "2", "--angles", "a,b", "--agent", &agent, "--json"], 1);
    // Both angles failed for one cause: the agent is failing, not the angles exhausted.
    assert_eq!(master["stoppedReason"], "agent-failing");
    assert!(master["completenessGaps"].to_string().contains("finder blew up"), "{}", master["completenessGaps"]);
}

#[test]
fn journals_are_per_discovery_and_a_mismatched_resume_is_refused() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    let (code, _, err) = s.run(&["exhaust", "所有错误", "-k", "2", "--angles", "a,b", "--agent", &agent]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = s.run(&["exhaust", "完全不同的东西", "-k", "2", "--angles", "a,b", "--agent", &agent]);
    assert_eq!(code, 0, "{err}");
    let journals = std::fs::read_dir(s.path(".work/quality-journals"))
        .expect("dir")
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
        .count();
    assert_eq!(journals, 2, "two discoveries, two journals");
    let (code, _, err) = s.run(&["exhaust", "something else", "--task", "shared", "--agent", &agent]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = s.run(&["exhaust", "another thing", "--task", "shared", "--agent", &agent]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("something else"), "{err}");
}

#[test]
fn a_journal_in_the_seeds_minimal_shape_resumes_without_resetting_seen_or_angles() {
    let s = jobs_repo();
    s.write(
        ".work/quality-journals/work-exhaust-mini.json",
        r#"{"seen": ["old-1"], "anglesUsed": ["a"], "dryCounter": 1, "rounds": [], "droppedDueToBudget": []}"#,
    );
    let agent = table_finder(
        &s,
        r#"{"a": [{"id": "rerun", "title": "t", "location": "src/jobs.rs:1"}],
            "b": [{"id": "OLD-1", "title": "already seen", "location": "src/jobs.rs:2"}]}"#,
    );
    let master = s
        .run_json(&["exhaust", "mini", "--task", "mini", "-k", "2", "--angles", "a,b", "--agent", &agent, "--json"], 0);
    assert_eq!(master["seen"], serde_json::json!(["old-1"]), "seen kept, old-1 deduped, a never re-run");
    assert_eq!(rounds(&master)[0]["anglesUsed"], serde_json::json!(["b"]));
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "the stored dryCounter 1 carried over");
}

#[test]
fn oracle_failures_and_search_misses() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    for args in [
        vec!["exhaust", "x", "--agent", &agent, "--seed-oracle", "false"],
        vec!["exhaust", "x", "--agent", &agent, "--final-oracle", "exit 1"],
        vec!["exhaust", "x", "--agent", &agent, "--final-oracle", "no-such-command-xyz"],
    ] {
        let (code, out, err) = s.run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty());
        assert_one_line_error(&err);
        assert!(!s.path(".work").exists(), "{args:?} left state behind");
        assert!(!s.path(".agent-state/calls").exists(), "{args:?} dispatched a finder");
    }
    // A search that finds nothing (grep's exit 1) is an empty answer, not a failure.
    let master = s.run_json(
        &[
            "exhaust",
            "x",
            "-k",
            "2",
            "--angles",
            "a,b",
            "--seed-oracle",
            "grep -rn nothing-matches-this src",
            "--final-oracle",
            "grep -rn neither src",
            "--agent",
            &agent,
            "--json",
        ],
        0,
    );
    assert_eq!(master["stoppedReason"], "k-consecutive-dry");
}

#[test]
fn a_background_child_holding_stdout_does_not_turn_an_answer_into_a_timeout() {
    let s = jobs_repo();
    let agent = s.agent(
        "bg.py",
        r#"
import subprocess
subprocess.Popen(['sleep', '30'])
print(json.dumps({"angle": ctx['angle'], "items": [{"id": "i-" + ctx['angle'], "title": "t", "location": "src/jobs.rs:1"}] if ctx['angle'] == 'a' else []}))
sys.stdout.flush()
"#,
    );
    let master = s.run_json(
        &[
            "-c",
            "timeouts.dispatch_secs=20",
            "exhaust",
            "x",
            "-k",
            "2",
            "--angles",
            "a,b,c",
            "--agent",
            &agent,
            "--json",
        ],
        0,
    );
    assert_eq!(master["seen"], serde_json::json!(["i-a"]));
    assert_eq!(rounds(&master)[0]["failedFinders"], 0);
}

#[test]
fn a_second_run_of_the_same_task_while_one_runs_is_refused() {
    let s = jobs_repo();
    let agent = table_finder(&s, "{}");
    let lock = s.path(".work/quality-journals/work-exhaust-x.json.lock");
    std::fs::create_dir_all(lock.parent().expect("dir")).expect("mkdir");
    // Another process holds the journal's flock while this run starts.
    #[expect(clippy::disallowed_methods, reason = "the test holds a lock from a second process")]
    let mut holder = std::process::Command::new("python3")
        .args([
            "-c",
            "import fcntl, sys, time\nf = open(sys.argv[1], 'w')\nfcntl.flock(f, fcntl.LOCK_EX)\nf.write('4242\\n'); f.flush()\nprint('held', flush=True)\ntime.sleep(30)",
            &lock.display().to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the holder");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.take().expect("stdout")), &mut line)
        .expect("read");
    assert_eq!(line.trim(), "held");
    let (code, _, err) = s.run(&["exhaust", "x", "--agent", &agent]);
    holder.kill().expect("kill the holder");
    holder.wait().expect("reap");
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("held by another run") && err.contains("4242"), "{err}");
    // A lock file left by a dead holder is no lock.
    let (code, _, err) = s.run(&["exhaust", "x", "-k", "2", "--angles", "a,b", "--agent", &agent]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn sigterm_stops_the_agents_too() {
    let _unconfined = fallback_only(crate::containment::SWEEP);
    let s = jobs_repo();
    let pidfile = s.path("agent.pid");
    let agent = s.agent(
        "hang.py",
        &format!("open({:?}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n", pidfile.display().to_string()),
    );
    let mut child = s
        .work_std()
        .args(["exhaust", "x", "--angles", "a", "--agent", &agent])
        .current_dir(s.root())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn work");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&pidfile).map(|p| p.trim().is_empty()).unwrap_or(true) {
        assert!(std::time::Instant::now() < deadline, "the agent never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let agent_pid: i32 = std::fs::read_to_string(&pidfile).expect("pid").trim().parse().expect("a pid");
    #[expect(clippy::disallowed_methods, reason = "the test sends SIGTERM with kill(1)")]
    let st = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(st.success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(143));
    // The agent's process group was killed with it (poll: the kernel reaps asynchronously).
    let gone = (0..200).any(|_| {
        let alive = std::path::Path::new(&format!("/proc/{agent_pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{agent_pid}/stat")).unwrap_or_default().contains(") Z");
        if alive {
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        !alive
    });
    assert!(gone, "the agent {agent_pid} outlived work");
}

#[test]
fn the_same_failure_in_two_all_failed_rounds_stops_the_run_with_its_cause() {
    let s = jobs_repo();
    let agent =
        s.agent("finder.py", "bump('calls')\nsys.stderr.write('Invalid API key · Please run /login\\n'); sys.exit(1)");
    let (code, out, err) =
        s.run(&["exhaust", "x", "-k", "2", "--angles", "a,b,c,d,e,f,g,h", "--agent", &agent, "--json"]);
    assert_eq!(code, 1, "{err}");
    let master: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(master["stoppedReason"], "agent-failing", "{master:#}");
    assert_eq!(s.read(".agent-state/calls"), "3", "angle a twice (then given up), b once: not the whole pool");
    assert!(err.contains("Invalid API key"), "the cause is on stderr: {err}");
    assert!(master.to_string().contains("Invalid API key"), "and in the result");
}
