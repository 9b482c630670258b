//! A real model end to end: `work exhaust` against an OpenAI-compatible server running a tiny
//! local model (SmolLM2-135M-Instruct under llama-cpp-python; `scripts/real-model-server.sh`).
//!
//! Needs `WORK_REAL_MODEL_URL` naming the server (`scripts/test.sh` starts it and sets it); without
//! it the test fails. Plain `cargo nextest run` leaves `ext_*` tests out (.config/nextest.toml).
//! What it proves, whatever the tiny model says:
//! - the `openai:` backend talks to a real server (`response_format = "json_object"`), and at
//!   least one finder dispatch comes back schema-valid (every dispatch failing fails the test);
//! - the model calls the engine's tools for real: at least one dispatch record holds a tool
//!   call the engine ran (the server runs `--chat_format chatml-function-calling`, and
//!   `max_turns = 2` makes the second turn `tool_choice: "none"`, where the schema's grammar
//!   makes it answer);
//! - the run ends as a run (exit 0 or 1, one JSON document), never as bad input;
//! - gate 2 holds: every accepted `PATH:LINE` item names a line that exists, re-checked here
//!   from the files, with the engine's re-read text; every file-like location the model
//!   invented (a missing file or line, or a path without a line) is in `rejected` (or its item
//!   was a duplicate of one already seen).

use crate::support::Scenario;
use serde_json::Value;
use std::collections::BTreeSet;
use work_exhaust::items::{Location, classify_location, normalize_id, parse_file_line};

const JOBS: &str = "fn a() { transition(1); }\n\
fn b() { transition(2); }\n\
fn c() { if failed() { rollback() } }\n\
fn d() { retry_forever() }\n\
fn e() { transition(5); }\n";

/// The text at `path:line` in the scratch repository, when that line exists (checked here,
/// independently of the engine).
fn line_at(s: &Scenario, path: &str, line: u64) -> Option<String> {
    if path.is_empty() || path.starts_with('/') || path.split(['/', '\\']).any(|c| c == "..") {
        return None;
    }
    let text = std::fs::read_to_string(s.path(path)).ok()?;
    let idx = usize::try_from(line).ok()?.checked_sub(1)?;
    text.lines().nth(idx).map(str::to_string)
}

/// Every finder document that came back schema-valid, read from the run's dispatch records.
fn valid_finder_documents(s: &Scenario, events: &[Value]) -> Vec<Value> {
    let runs = s.path(".work/runs");
    events
        .iter()
        .filter(|e| e["kind"] == "dispatch.end" && e["outcome"] == "ok")
        .filter_map(|e| {
            let run = e["run_id"].as_str()?;
            let rec =
                work_runtime::events::find_record(&runs.join(run), e["dispatch_id"].as_str()?, e["attempt"].as_u64()?)
                    .ok()??;
            (rec["request"]["role"] == "finder").then(|| rec["response"]["document"].clone())
        })
        .collect()
}

/// The names of the tool calls the engine ran, over every dispatch record of the run (an
/// attempt that ran tools records `{"final", "turns", "transcript": [{"turn", "calls"}]}`).
fn tool_calls_run(s: &Scenario, events: &[Value]) -> Vec<String> {
    let runs = s.path(".work/runs");
    let mut names = vec![];
    for e in events.iter().filter(|e| e["kind"] == "dispatch.end") {
        let (Some(run), Some(id), Some(attempt)) =
            (e["run_id"].as_str(), e["dispatch_id"].as_str(), e["attempt"].as_u64())
        else {
            continue;
        };
        let Ok(Some(rec)) = work_runtime::events::find_record(&runs.join(run), id, attempt) else { continue };
        let Some(raw) = rec["response"]["raw"].as_str().and_then(|r| serde_json::from_str::<Value>(r).ok()) else {
            continue;
        };
        for turn in raw["transcript"].as_array().into_iter().flatten() {
            for call in turn["calls"].as_array().into_iter().flatten() {
                names.push(format!("{} {}", call["name"].as_str().unwrap_or("?"), call["input"]));
            }
        }
    }
    names
}

fn all_events(s: &Scenario) -> Vec<Value> {
    let mut events = vec![];
    let Ok(runs) = std::fs::read_dir(s.path(".work/runs")) else { return events };
    for run in runs.flatten() {
        let Ok(text) = std::fs::read_to_string(run.path().join("events.jsonl")) else { continue };
        events.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    events
}

#[test]
fn exhaust_against_a_real_model_keeps_gate2() {
    let Some(url) = std::env::var("WORK_REAL_MODEL_URL").ok().filter(|u| !u.trim().is_empty()) else {
        panic!("WORK_REAL_MODEL_URL is not set: run the suite with scripts/test.sh, which starts the model server");
    };
    let s = Scenario::new();
    s.write("src/jobs.rs", JOBS);
    s.write(
        "work.toml",
        &format!(
            "[agents.smol]\nspec = \"openai:smollm2\"\nbase_url = \"{}\"\nresponse_format = \"json_object\"\nmax_tokens = 1024\nmax_turns = 2\n",
            url.trim()
        ),
    );
    s.write(".git/info/exclude", ".work/\n");
    s.commit("jobs");
    let listing: String = JOBS.lines().enumerate().map(|(i, l)| format!("src/jobs.rs:{}: {l}\n", i + 1)).collect();
    let context = format!(
        "The repository has one source file, src/jobs.rs, shown as PATH:LINE: TEXT:\n{listing}\
         An item looks like {{\"id\": \"transition-in-a\", \"title\": \"transition call\", \
         \"location\": \"src/jobs.rs:1\", \"severity\": \"low\"}}."
    );
    let out = s
        .work()
        .env_remove("OPENAI_BASE_URL")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .args([
            "-c",
            // One server answers every turn of both finders in turn, on a loaded machine.
            "timeouts.dispatch_secs=600",
            "exhaust",
            "every call to transition() and every error path in the job code",
            "--context",
            &context,
            "-k",
            "2",
            "--angles",
            "call-sites,error-paths",
            // One round of both finders shows all this test asserts (a tool call run, a
            // schema-valid answer, gate 2 on what was accepted); a second doubled its time.
            "--max-rounds",
            "1",
            "--agent",
            "smol",
            "--json",
        ])
        .output()
        .expect("run work");
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("work exhaust exited {code}\nstderr:\n{stderr}");
    assert!(code == 0 || code == 1, "exit code {code} (0 or 1 expected)\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let master: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}\nstderr:\n{stderr}"));

    // The backend reached the server and at least one finder answered schema-valid JSON.
    let events = all_events(&s);
    let ends: Vec<&Value> = events.iter().filter(|e| e["kind"] == "dispatch.end").collect();
    let ok = ends.iter().filter(|e| e["outcome"] == "ok").count();
    eprintln!("dispatch attempts: {} ({} ok)", ends.len(), ok);
    for e in &ends {
        eprintln!("  {} a{}: {} {}", e["dispatch_id"], e["attempt"], e["outcome"], e["reason"]);
    }
    assert!(!ends.is_empty(), "no dispatch ran: {master}");
    assert!(
        ok >= 1,
        "all {} dispatch attempt(s) failed; the backend got no valid output from {url} (reasons above)",
        ends.len()
    );
    let rounds = master["rounds"].as_array().expect("rounds");
    assert!(
        rounds.iter().any(|r| r["failedFinders"].as_u64().unwrap_or(u64::MAX)
            < r["anglesUsed"].as_array().map_or(0, |a| a.len() as u64)),
        "no round had a finder that answered: {rounds:?}"
    );
    let calls = tool_calls_run(&s, &events);
    eprintln!("tool calls the engine ran: {}", calls.len());
    for c in &calls {
        eprintln!("  {c}");
    }
    assert!(!calls.is_empty(), "the model made no tool call the engine ran (dispatch records above)");
    let documents = valid_finder_documents(&s, &events);
    assert!(!documents.is_empty(), "no schema-valid finder document in the dispatch records");

    // Gate 2 on what was accepted: every PATH:LINE exists, and the engine read that line.
    let items = master["items"].as_array().expect("items");
    for item in items {
        let location = item["location"].as_str().unwrap_or_default();
        let fl = match classify_location(location) {
            Location::FileLine(fl) => fl,
            Location::Concept => continue,
            Location::Malformed(why) => {
                panic!("accepted item has a file-like location that is no PATH:LINE ({why}): {item}")
            }
        };
        let line = line_at(&s, &fl.path, fl.line)
            .unwrap_or_else(|| panic!("accepted item names a location that does not exist: {item}"));
        if let Some(end) = fl.end {
            assert!(line_at(&s, &fl.path, end).is_some(), "accepted range ends past the file: {item}");
        }
        assert_eq!(item["workDone"], true, "{item}");
        let read = item["reRead"]["text"].as_str().unwrap_or_default();
        assert!(line.trim().starts_with(read.trim()), "re-read {read:?} is not the line {line:?}: {item}");
    }

    // Gate 2 on what the model invented: every file-like location that does not exist (or has
    // no line) was rejected, unless its item was dropped earlier as a duplicate of one seen.
    let rejected = master["rejected"].as_array().expect("rejected");
    let rejected_locations: BTreeSet<String> = rejected
        .iter()
        .filter_map(|r| r["location"].as_str())
        .flat_map(|l| [l.trim().to_string()].into_iter().chain(parse_file_line(l).map(|f| f.key())))
        .collect();
    let known_ids: BTreeSet<String> =
        items.iter().chain(rejected).filter_map(|i| i["id"].as_str()).map(normalize_id).collect();
    let mut produced = 0;
    let mut invented = 0;
    for doc in &documents {
        for item in doc["items"].as_array().into_iter().flatten() {
            produced += 1;
            let location = item["location"].as_str().unwrap_or_default();
            let key = match classify_location(location) {
                Location::Concept => continue,
                Location::FileLine(fl) if line_at(&s, &fl.path, fl.line).is_some() => continue,
                Location::FileLine(fl) => fl.key(),
                Location::Malformed(_) => location.trim().to_string(),
            };
            invented += 1;
            let id = normalize_id(item["id"].as_str().unwrap_or_default());
            assert!(
                rejected_locations.contains(&key) || known_ids.contains(&id),
                "invented location {location:?} was neither rejected nor a duplicate: {item}\nrejected: {rejected:?}"
            );
        }
    }
    eprintln!(
        "real model: {} valid finder document(s), {produced} item(s) produced, {invented} invented file \
         location(s), {} accepted, {} rejected by gate 2, stoppedReason {}",
        documents.len(),
        items.len(),
        rejected.len(),
        master["stoppedReason"]
    );
    for r in rejected {
        eprintln!("  rejected {} at {}: {}", r["id"], r["location"], r["reason"]);
    }
    for i in items {
        eprintln!("  accepted {} at {} ({})", i["id"], i["location"], i["gate2"]);
    }
}
