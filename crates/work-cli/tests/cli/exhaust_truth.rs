//! `work exhaust` against lying finders: each liar tries one way past gate 2 or read-only, and
//! an honest twin doing the real work must not be blocked.

use crate::support::{Scenario, fallback_only, refused};
use serde_json::{Value, json};

const JOBS: &str = "fn a() { transition(1); }\nfn b() { transition(2); }\nfn c() { transition(3); }\n\
fn d() { if err { rollback() } }\nfn e() { retry() }\n";

fn repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/jobs.rs", JOBS);
    s.write("lib/orphan.rs", "fn h() { setState(9); }\n");
    s.commit("jobs");
    s
}

/// A finder whose body runs for every angle with `angle` and `rnd` (the round) in scope and
/// must set `items`.
fn finder(s: &Scenario, body: &str) -> String {
    s.agent(
        "finder.py",
        &format!(
            "angle = ctx['angle']\nrnd = ctx['round']\nitems = []\n{body}\nprint(json.dumps({{'angle': angle, 'items': items, 'roundNotes': 'n'}}))\n"
        ),
    )
}

fn exhaust(s: &Scenario, agent: &str, extra: &[&str]) -> Value {
    let mut args = vec!["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", agent, "--json"];
    args.extend_from_slice(extra);
    let (code, out, err) = s.run(&args);
    assert!(code == 0 || code == 1, "exit {code}\n{out}\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"))
}

fn seen(master: &Value) -> Vec<String> {
    master["seen"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn rejection(master: &Value, id: &str) -> String {
    master["rejected"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"] == id))
        .map(|r| r["reason"].as_str().unwrap_or("").to_string())
        .unwrap_or_else(|| panic!("{id} not rejected: {}", master["rejected"]))
}

#[test]
fn a_finder_that_writes_a_file_and_cites_it_is_refused_and_its_honest_twin_is_not() {
    let unconfined = fallback_only(refused::READ_ONLY);
    let s = repo();
    let liar = finder(
        &s,
        "if angle == 'a':\n    open('src/planted.rs', 'w').write('fn planted() { transition(9); }\\n')\n    items = [{'id': 'planted', 'title': 't', 'location': 'src/planted.rs:1'}]\n",
    );
    let master = exhaust(&s, &liar, &[]);
    assert!(!seen(&master).contains(&"planted".to_string()), "{master}");
    assert!(rejection(&master, "planted").contains("written during"), "{}", master["rejected"]);

    // A file written in one round and cited in a later one is refused too.
    let s = repo();
    let liar = finder(
        &s,
        "if rnd == 1:\n    open('notes.rs', 'w').write('fn planted() {}\\n')\nif rnd == 2:\n    items = [{'id': 'late', 'title': 't', 'location': 'notes.rs:1'}]\n",
    );
    let master = exhaust(&s, &liar, &[]);
    assert!(rejection(&master, "late").contains("written during"), "{}", master["rejected"]);

    drop(unconfined);
    // The honest twin keeps scratch state of its own (a counter file) and cites real lines.
    let s = repo();
    let honest = finder(
        &s,
        "bump('calls')\nif angle == 'a':\n    items = [{'id': 'real', 'title': 't', 'location': 'src/jobs.rs:2'}]\n",
    );
    let master = exhaust(&s, &honest, &[]);
    assert_eq!(seen(&master), vec!["real"], "{master}");
    assert_eq!(master["stoppedReason"], "k-consecutive-dry");
}

#[test]
fn a_finder_that_deletes_a_tracked_file_loses_its_answers_and_the_run_says_so() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    let s = repo();
    // It deletes the file the final oracle greps for, and reports something real.
    let liar = finder(
        &s,
        "if angle == 'a' and os.path.exists('lib/orphan.rs'):\n    os.remove('lib/orphan.rs')\nitems = [{'id': 'real-' + angle + str(rnd), 'title': 't', 'location': 'src/jobs.rs:1'}]\n",
    );
    let master = exhaust(&s, &liar, &["--final-oracle", "grep -rn 'setState(' src lib || true"]);
    assert!(!seen(&master).contains(&"real-a1".to_string()), "the violating wave's answer is dropped: {master}");
    let gaps = master["completenessGaps"].to_string();
    assert!(gaps.contains("read-only finder changed the tree") && gaps.contains("lib/orphan.rs"), "{gaps}");
    assert_eq!(master["rounds"][0]["verdict"], "all-finders-failed", "{}", master["rounds"]);
}

#[test]
fn prose_locations_are_read_as_file_lines_and_a_file_is_never_a_concept() {
    let s = repo();
    s.write("Makefile", "all:\n\ttrue\n");
    s.commit("make");
    let agent = finder(
        &s,
        "if angle == 'a':\n    items = [\n        {'id': 'hash', 'title': 't', 'location': 'src/jobs.rs#L2'},\n        {'id': 'words', 'title': 't', 'location': 'src/jobs.rs line 3'},\n        {'id': 'paren', 'title': 't', 'location': 'src/jobs.rs (line 4)'},\n        {'id': 'vague', 'title': 't', 'location': 'somewhere in src/jobs.rs'},\n        {'id': 'file-word', 'title': 'build rules', 'location': 'the build rules in Makefile'},\n        {'id': 'named', 'title': 'retry loop', 'location': 'the retry loop'},\n    ]\n",
    );
    let master = exhaust(&s, &agent, &[]);
    assert_eq!(seen(&master), vec!["hash", "words", "paren", "named"], "{}", master["rejected"]);
    let items = master["items"].as_array().expect("items");
    let sources: Vec<&Value> = items.iter().map(|i| &i["reReadSources"]).collect();
    assert_eq!(
        sources,
        vec![&json!(["src/jobs.rs:2"]), &json!(["src/jobs.rs:3"]), &json!(["src/jobs.rs:4"]), &json!([])]
    );
    assert!(rejection(&master, "vague").contains("PATH:LINE"), "{}", master["rejected"]);
    assert!(rejection(&master, "file-word").contains("names the file `Makefile`"), "{}", master["rejected"]);
}

#[test]
fn a_location_glued_to_a_file_name_is_refused_and_never_a_concept() {
    // A file at the root glued to a line by a character no path has used to be accepted as a
    // concept (nothing re-read). The honest twin's concept is accepted.
    let s = repo();
    s.write("a.py", "x = 1\n");
    s.commit("a.py");
    let agent = finder(
        &s,
        "if angle == 'a':\n    items = [\n        {'id': 'at', 'title': 'site at', 'location': 'a.py@99'},\n        {'id': 'tilde', 'title': 'site tilde', 'location': 'a.py~99'},\n        {'id': 'arrow', 'title': 'site arrow', 'location': 'a.py→line 99'},\n        {'id': 'hashword', 'title': 'site hashword', 'location': 'a.py#line99'},\n        {'id': 'named', 'title': 'retry loop', 'location': 'the retry loop'},\n    ]\n",
    );
    let master = exhaust(&s, &agent, &[]);
    assert_eq!(seen(&master), vec!["named"], "{}", master["rejected"]);
    for id in ["at", "tilde", "arrow", "hashword"] {
        assert!(rejection(&master, id).contains("a.py"), "{id}: {}", master["rejected"]);
    }
}

#[test]
fn quoted_evidence_must_match_the_lines_the_engine_reads() {
    let s = repo();
    let agent = finder(
        &s,
        "if angle == 'a':\n    items = [\n        {'id': 'fake-quote', 'title': 't', 'location': 'src/jobs.rs:1', 'evidence': 'calls `unsafe_transmute(job)` with no check'},\n        {'id': 'real-quote', 'title': 't', 'location': 'src/jobs.rs:4', 'evidence': 'the `rollback()` in `if err` is the only error path'},\n        {'id': 'nearby', 'title': 't', 'location': 'src/jobs.rs:2', 'evidence': '`transition(3)` right below'},\n        {'id': 'prose', 'title': 't', 'location': 'src/jobs.rs:5', 'evidence': 'jobs.rs:5 — retries forever, no backoff'},\n        {'id': 'bare-code', 'title': 't', 'location': 'src/jobs.rs:3', 'evidence': 'fn c() { launch_missiles(); }'},\n    ]\n",
    );
    let master = exhaust(&s, &agent, &[]);
    assert_eq!(seen(&master), vec!["real-quote", "nearby", "prose"], "{}", master["rejected"]);
    assert!(rejection(&master, "fake-quote").contains("unsafe_transmute"));
    assert!(rejection(&master, "bare-code").contains("quoted evidence"));
}

#[test]
fn one_location_spelled_many_ways_is_one_item() {
    let s = repo();
    std::os::unix::fs::symlink("src/jobs.rs", s.path("alias.rs")).expect("symlink");
    s.commit("alias");
    let agent = finder(
        &s,
        "if angle == 'a':\n    items = [\n        {'id': 'one', 'title': 't', 'location': 'src/jobs.rs:1'},\n        {'id': 'dot', 'title': 't', 'location': './src/jobs.rs:1'},\n        {'id': 'slash', 'title': 't', 'location': 'src/jobs.rs/:1'},\n        {'id': 'updown', 'title': 't', 'location': 'src/x/../jobs.rs:1'},\n        {'id': 'link', 'title': 't', 'location': 'alias.rs:1'},\n        {'id': 'double', 'title': 't', 'location': 'src//jobs.rs:1'},\n        {'id': 'c1', 'title': 'The Job Queue', 'location': 'the job queue'},\n        {'id': 'c2', 'title': 'the job-queue', 'location': 'job queue (concept)'},\n    ]\n",
    );
    let master = exhaust(&s, &agent, &[]);
    assert_eq!(seen(&master), vec!["one", "c1"], "{}", master["rounds"]);
    assert_eq!(master["rounds"][0]["duplicates"], 6);
}

#[test]
fn git_internals_work_state_and_out_of_scope_locations_are_refused() {
    let s = repo();
    s.write(".work/notes.txt", "fn planted() {}\n");
    let agent = finder(
        &s,
        "if angle == 'a':\n    items = [\n        {'id': 'head', 'title': 't', 'location': '.git/HEAD:1'},\n        {'id': 'state', 'title': 't', 'location': '.work/notes.txt:1'},\n        {'id': 'outside-scope', 'title': 't', 'location': 'lib/orphan.rs:1'},\n        {'id': 'in-scope', 'title': 't', 'location': 'src/jobs.rs:1'},\n    ]\n",
    );
    let master = exhaust(&s, &agent, &["--scope", "src"]);
    assert_eq!(seen(&master), vec!["in-scope"], "{}", master["rejected"]);
    assert!(rejection(&master, "head").contains(".git"));
    assert!(rejection(&master, "state").contains("state"));
    assert!(rejection(&master, "outside-scope").contains("scope"));

    // A scope that names nothing in the repository is bad input, before anything runs.
    let (code, out, err) = s.run(&["exhaust", "other", "--agent", &agent, "--scope", "nowhere", "--json"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("--scope") && out.is_empty(), "{err}");
}

#[test]
fn a_dry_stop_without_a_completeness_oracle_is_not_reported_as_confirmed() {
    let s = repo();
    let lazy = finder(&s, "");
    let (code, out, err) = s.run(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", &lazy, "--json"]);
    assert_eq!(code, 0, "{err}");
    let master: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(master["stoppedReason"], "k-consecutive-dry");
    assert_eq!(master["completeness"], "unconfirmed");
    assert!(err.contains("UNCONFIRMED"), "{err}");

    let s = repo();
    let lazy = finder(&s, "");
    let (code, out, err) = s.run(&[
        "exhaust",
        "things",
        "-k",
        "2",
        "--angles",
        "a,b,c,d,e",
        "--agent",
        &lazy,
        "--final-oracle",
        "grep -rn 'setState(' lib",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let master: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master}");
    assert_eq!(master["completeness"], "confirmed");
    assert!(!err.contains("UNCONFIRMED"), "{err}");
    assert_eq!(seen(&master), vec!["lib/orphan.rs:1"], "gate 3 found what the lazy finder did not");
}
