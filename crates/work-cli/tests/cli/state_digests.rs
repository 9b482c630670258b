//! State files carry a digest: a journal or `meta.md` rewritten after `work` exited (by an
//! agent's leftover process, a script, a person) is refused by the next run with one line and
//! exit 2, before anything runs; an untouched one resumes.

use crate::support::{KILL_WORK, Scenario, assert_one_line_error};

const JOURNAL: &str = ".work/quality-journals/work-exhaust-things.json";

fn exhaust_repo() -> (Scenario, String) {
    let s = Scenario::new();
    s.write("src/a.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    s.commit("src");
    let agent = s.agent(
        "finder.py",
        r#"
bump('calls')
n = {'a': 1, 'b': 2, 'c': 3}.get(ctx['angle'], 0)
items = [{"id": "f-%d" % n, "title": "t", "location": "src/a.rs:%d" % n}] if n else []
print(json.dumps({"angle": ctx['angle'], "items": items}))
"#,
    );
    (s, agent)
}

fn first_round(s: &Scenario, agent: &str) {
    let args = ["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--max-rounds", "1", "--agent", agent, "--json"];
    let v = s.run_json(&args, 1);
    assert_eq!(v["stoppedReason"], "caller-target", "{v}");
}

fn resume(s: &Scenario, agent: &str) -> (i32, String, String) {
    s.run(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", agent, "--json"])
}

#[test]
fn a_journal_rewritten_after_work_exited_is_refused() {
    let (s, agent) = exhaust_repo();
    first_round(&s, &agent);
    let calls = s.read(".agent-state/calls");
    // The liar: after the run, something drops the dry counter's history and claims an item.
    let mut j = s.read_json(JOURNAL);
    j["seen"].as_array_mut().expect("seen").push("invented".into());
    j["rounds"] = serde_json::json!([]);
    s.write(JOURNAL, &serde_json::to_string_pretty(&j).expect("json"));
    let (code, out, err) = resume(&s, &agent);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert_one_line_error(&err);
    assert!(err.contains("work-exhaust-things.json") && err.contains("changed outside a run"), "{err}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
    assert_eq!(s.read_json(JOURNAL), j, "the journal is left as it was found");
}

#[test]
fn a_journal_log_appended_to_after_work_exited_is_refused() {
    let (s, agent) = exhaust_repo();
    first_round(&s, &agent);
    let log = s.path(".work/quality-journals/work-exhaust-things.jsonl");
    let mut text = std::fs::read_to_string(&log).expect("the journal's log");
    text.push_str("{\"seq\": 1, \"seen\": [\"invented\"], \"k\": 2}\n");
    std::fs::write(&log, text).expect("write");
    let (code, _, err) = resume(&s, &agent);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("work-exhaust-things.jsonl"), "{err}");
}

#[test]
fn an_untouched_journal_resumes() {
    let (s, agent) = exhaust_repo();
    first_round(&s, &agent);
    let (code, out, err) = resume(&s, &agent);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["seen"], serde_json::json!(["f-1", "f-2", "f-3"]), "{v}");
    // And again, once finished: nothing to do, nothing refused.
    let (code, _, err) = resume(&s, &agent);
    assert_eq!(code, 0, "{err}");
}

/// Runs the task to its end, then reruns it as a person would (no --json): what a rerun of a
/// finished task reads is the journal log's head, not the whole journal.
fn finished(s: &Scenario, agent: &str) -> String {
    let v = resume(s, agent);
    assert_eq!(v.0, 0, "{}", v.2);
    s.read(".agent-state/calls")
}

fn rerun(s: &Scenario, agent: &str) -> (i32, String, String) {
    s.run(&["exhaust", "things", "-k", "2", "--angles", "a,b,c", "--agent", agent])
}

#[test]
fn a_finished_task_reruns_from_its_head_and_dispatches_nothing() {
    let (s, agent) = exhaust_repo();
    let calls = finished(&s, &agent);
    let (code, _, err) = rerun(&s, &agent);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("task already stopped (angles-and-oracles-exhausted)") && err.contains("3 seen"), "{err}");
    assert!(err.contains("src/a.rs:1"), "the summary lists the items: {err}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
}

#[test]
fn a_finished_journal_rewritten_after_work_exited_is_refused_on_a_rerun() {
    let (s, agent) = exhaust_repo();
    let calls = finished(&s, &agent);
    // The liar: the finished journal made resumable again, with an invented item.
    let mut j = s.read_json(JOURNAL);
    j["stoppedReason"] = serde_json::Value::Null;
    j["seen"].as_array_mut().expect("seen").push("invented".into());
    s.write(JOURNAL, &serde_json::to_string_pretty(&j).expect("json"));
    let (code, _, err) = rerun(&s, &agent);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("work-exhaust-things.json") && err.contains("changed outside a run"), "{err}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
}

#[test]
fn a_finished_journal_head_rewritten_after_work_exited_is_refused() {
    let (s, agent) = exhaust_repo();
    finished(&s, &agent);
    // The liar: the head a rerun reads claims other findings.
    let log = s.path(".work/quality-journals/work-exhaust-things.jsonl");
    let text = std::fs::read_to_string(&log).expect("the journal's log");
    assert!(text.contains("\"seen\":3"), "{text}");
    std::fs::write(&log, text.replace("\"seen\":3", "\"seen\":300")).expect("write");
    let (code, _, err) = rerun(&s, &agent);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("work-exhaust-things.jsonl") && err.contains("changed outside a run"), "{err}");
}

fn until_paused(s: &Scenario) -> String {
    until_paused_with(s, &[])
}

fn until_paused_with(s: &Scenario, extra: &[&str]) -> String {
    let agent = s.agent(
        "worker.py",
        r#"
n = ctx['iteration']
bump('calls')
open('f%d' % n, 'w').write('x')
print(json.dumps({"status": "done" if n == 2 else "continue", "summary": "step %d" % n, "changes_claimed": ["f%d" % n]}))
"#,
    );
    let mut args =
        vec!["until", "file f2 exists", "--goal", "two files", "--mode", "human-gate", "--slug", "two", "--json"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--agent", &agent]);
    let v = s.run_json(&args, 3);
    assert_eq!(v["status"], "paused", "{v}");
    agent
}

#[test]
fn a_meta_md_rewritten_after_work_exited_is_refused() {
    let s = Scenario::new();
    let agent = until_paused(&s);
    let meta = s.path(".work/sessions/two/meta.md");
    let text = std::fs::read_to_string(&meta).expect("meta.md");
    assert!(text.contains("\"iteration_count\": 1"), "{text}");
    std::fs::write(&meta, text.replace("\"iteration_count\": 1", "\"iteration_count\": 7")).expect("write");
    let calls = s.read(".agent-state/calls");
    let (code, _, err) = s.run(&["until", "resume", "two", "--agent", &agent, "--json"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("meta.md") && err.contains("changed outside a run"), "{err}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
}

/// The liar: a worker removes (or rewrites) the session's frozen check surface or git seal and
/// kills `work`, so that the resumed session would freeze the checks again from the tree it
/// left. The resume is refused before anything runs.
#[test]
fn a_session_s_kept_freeze_or_seal_removed_or_changed_after_work_exited_is_refused() {
    for (file, remove) in [("check-surface.json", true), ("check-surface.json", false), ("git-seal.json", true)] {
        let s = Scenario::new();
        let agent = until_paused_with(&s, &["--verify", "test -f f2"]);
        let path = s.path(&format!(".work/sessions/two/{file}"));
        if remove {
            std::fs::remove_file(&path).expect("remove");
        } else {
            // Still valid JSON, other content: as if frozen from another tree.
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
            v["frozen_by"] = "the worker".into();
            std::fs::write(&path, v.to_string()).expect("write");
        }
        let calls = s.read(".agent-state/calls");
        let (code, _, err) = s.run(&["until", "resume", "two", "--agent", &agent, "--json"]);
        assert_eq!(code, 2, "{file} removed={remove}: {err}");
        assert_one_line_error(&err);
        let why = if remove { "removed outside a run" } else { "changed outside a run" };
        assert!(err.contains(file) && err.contains(why), "{err}");
        assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
    }
}

#[test]
fn an_untouched_session_with_a_verify_command_resumes() {
    let s = Scenario::new();
    let agent = until_paused_with(&s, &["--verify", "test -f f2"]);
    let v = s.run_json(&["until", "resume", "two", "--agent", &agent, "--json"], 0);
    assert_eq!((v["status"].as_str(), v["iterations"].as_u64()), (Some("done"), Some(2)), "{v}");
}

#[test]
fn an_untouched_session_resumes() {
    let s = Scenario::new();
    let agent = until_paused(&s);
    let v = s.run_json(&["until", "resume", "two", "--agent", &agent, "--json"], 0);
    assert_eq!((v["status"].as_str(), v["iterations"].as_u64()), (Some("done"), Some(2)), "{v}");
}

/// A two-task plan whose run is killed (SIGKILL, by the agent of task 2's first implementer
/// dispatch) once task 1 ended and the progress log records task 2's start: an unfinished
/// iteration, which the same command continues.
fn implement_killed_in_task_2() -> (Scenario, Vec<String>) {
    let s = Scenario::new();
    s.write("PLAN.md", "# Plan\n\n## Task 1: One\n\nCreate one.txt.\n\n## Task 2: Two\n\nCreate two.txt.\n");
    s.commit("plan");
    let agent = s.agent(
        "agent.py",
        &r#"
role = req['role']
tid = str(ctx.get('task_id'))
if role == 'implementer' and tid == '2' and bump('task-2') == 1:
    KILL_WORK
bump('calls')
if role == 'implementer':
    open(('one' if tid == '1' else 'two') + '.txt', 'w').write(tid + '\n')
    print(json.dumps({'status': 'DONE', 'summary': 'task ' + tid, 'applied_changes': True}))
elif role == 'spec-reviewer':
    print(json.dumps({'status': 'compliant', 'issues': [], 'files_read': [('one' if tid == '1' else 'two') + '.txt']}))
else:
    print(json.dumps({'verdict': 'approved', 'issues': [], 'files_read': [('one' if tid == '1' else 'two') + '.txt']}))
"#
        .replace("    KILL_WORK", &KILL_WORK.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")),
    );
    let args: Vec<String> =
        ["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--test-cmd", "test -f two.txt", "--json", "--agent"]
            .iter()
            .map(|a| a.to_string())
            .chain([agent])
            .collect();
    let out = s.output_killable(&args);
    assert!(out.status.code().is_none(), "the run was not killed: {out:?}");
    let log = std::fs::read_to_string(s.path(".work/iterations/it-1/progress.jsonl")).expect("the progress log");
    assert!(log.contains("\"start\":{\"task_id\":\"2\""), "task 2's start is a record of the log: {log}");
    (s, args)
}

#[test]
fn an_implement_progress_log_appended_to_after_work_exited_is_refused() {
    let (s, args) = implement_killed_in_task_2();
    let calls = s.read(".agent-state/calls");
    // The liar: a line claiming task 2 DONE, so that it is never dispatched.
    let log = s.path(".work/iterations/it-1/progress.jsonl");
    let mut text = std::fs::read_to_string(&log).expect("the progress log");
    let seq = text.lines().count();
    text.push_str(&format!(
        "{{\"seq\":{seq},\"end\":{{\"outcome\":{{\"id\":\"2\",\"title\":\"Two\",\"status\":\"DONE\",\"reason\":null,\"kind\":null,\"concerns\":[],\"held\":[],\"findings\":[],\"applied_changes_claimed\":true,\"tree_changed\":true,\"repairs\":0,\"reviews\":2,\"fingerprints\":1,\"e2e\":false,\"e2e_result\":null,\"spent\":{{\"dispatches\":3,\"tokens\":0}}}},\"snapshot\":null,\"tree\":null}}}}\n"
    ));
    std::fs::write(&log, &text).expect("write");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = s.run(&args);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert_one_line_error(&err);
    assert!(err.contains("progress.jsonl") && err.contains("changed outside a run"), "{err}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
}

/// The liar: the record of the unfinished iteration is deleted after `work` died, so that the
/// same command would start afresh (preflight, freeze) from the tree the implementer left.
#[test]
fn an_implement_progress_record_removed_after_work_exited_is_refused() {
    let (s, args) = implement_killed_in_task_2();
    let calls = s.read(".agent-state/calls");
    std::fs::remove_dir_all(s.path(".work/iterations/it-1")).expect("remove the iteration's record");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = s.run(&args);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert_one_line_error(&err);
    assert!(err.contains("progress.json") && err.contains("removed outside a run"), "{err}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
}

/// The liar: the implementer commits (a weakened test, say) and kills `work`; rerunning the
/// same command must not start the iteration afresh with its checks frozen from that commit.
#[test]
fn an_implement_iteration_whose_head_moved_while_work_was_dead_is_refused() {
    let (s, args) = implement_killed_in_task_2();
    let calls = s.read(".agent-state/calls");
    s.commit("the implementer's commit");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = s.run(&args);
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert_one_line_error(&err);
    assert!(err.contains("it started at HEAD") && err.contains("another --iter-id"), "{err}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
}

#[test]
fn an_untouched_implement_progress_record_resumes() {
    let (s, args) = implement_killed_in_task_2();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = s.run(&args);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["status"], "DONE", "{v}");
    // Finished: the documented file holds both tasks whole.
    let p = s.read_json(".work/iterations/it-1/progress.json");
    assert_eq!(p["finished"], true, "{p}");
    assert_eq!(p["ended"].as_array().map(|a| a.iter().filter(|t| t["status"] == "DONE").count()), Some(2), "{p}");
}

// ----- the digest log's chain -------------------------------------------------------------

/// Rewrites every digest the log records for `rel` to `sha` in place (the chain fields kept).
fn forge_log_entries(s: &Scenario, rel: &str, sha: &str) -> usize {
    let log = s.path(".work/state-digests.jsonl");
    let text = std::fs::read_to_string(&log).expect("the digest log");
    let mut forged = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).expect("a log line");
            if v["path"] == rel {
                v["sha256"] = sha.into();
                forged += 1;
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&log, lines.join("\n") + "\n").expect("write");
    forged
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn a_journal_rewritten_with_its_digest_forged_in_the_log_is_refused() {
    let (s, agent) = exhaust_repo();
    first_round(&s, &agent);
    let calls = s.read(".agent-state/calls");
    // The liar rewrites the journal and makes the log's entries for it match the new content.
    let mut j = s.read_json(JOURNAL);
    j["seen"].as_array_mut().expect("seen").push("invented".into());
    let text = serde_json::to_string_pretty(&j).expect("json");
    s.write(JOURNAL, &text);
    let forged = forge_log_entries(&s, "quality-journals/work-exhaust-things.json", &sha256(text.as_bytes()));
    assert!(forged >= 2, "the journal was recorded more than once ({forged})");
    let (code, _, err) = resume(&s, &agent);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("state-digests.jsonl") && err.contains("edited outside a run"), "{err}");
    assert_eq!(s.read(".agent-state/calls"), calls, "nothing was dispatched");
}

#[test]
fn a_line_removed_from_the_middle_of_the_digest_log_is_refused() {
    let (s, agent) = exhaust_repo();
    first_round(&s, &agent);
    let log = s.path(".work/state-digests.jsonl");
    let text = std::fs::read_to_string(&log).expect("the digest log");
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 3, "{text}");
    lines.remove(1);
    std::fs::write(&log, lines.join("\n") + "\n").expect("write");
    let (code, _, err) = resume(&s, &agent);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err);
    assert!(err.contains("edited outside a run") && err.contains("line 2"), "{err}");
}

// ----- ultra --------------------------------------------------------------------------------

const GOAL: &str = r#"
id = "greet"
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

const GOAL_DIR: &str = ".work/goals/greet";

/// A goal whose first run stops BLOCKED (an implementer that changes nothing, one attempt).
fn ultra_stopped() -> (Scenario, String) {
    let s = Scenario::new();
    s.write("GOAL.toml", GOAL);
    s.write("check.sh", "test \"$(sh greet.sh 2>/dev/null)\" = 'hello, world'\n");
    s.commit("goal");
    let agent = s.agent(
        "lazy.py",
        r#"bump('calls')
print(json.dumps({"status": "done", "summary": "nothing", "claims": [], "cleanup": []}))"#,
    );
    let v = s.run_json(&["ultra", "GOAL.toml", "--agent", &agent, "--max-attempts", "1", "--json"], 1);
    assert_eq!(v["stop_reason"], "attempts-exhausted", "{v}");
    (s, agent)
}

fn ultra_again(s: &Scenario, agent: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["ultra", "GOAL.toml", "--agent", agent, "--max-attempts", "1", "--json"];
    args.extend_from_slice(extra);
    s.run(&args)
}

#[test]
fn ultra_state_files_changed_or_removed_after_work_exited_are_refused() {
    type Tamper = fn(&Scenario);
    let cases: [(&str, &str, Tamper); 6] = [
        ("state.json", "changed outside a run", |s| {
            // Forget the frozen check surface and the attempts: the next run would freeze anew.
            let p = format!("{GOAL_DIR}/state.json");
            let mut v = s.read_json(&p);
            v.as_object_mut().expect("object").remove("check_surface");
            v.as_object_mut().expect("object").remove("check_surface_sha256");
            v["attempts"] = 0.into();
            s.write(&p, &serde_json::to_string_pretty(&v).expect("json"));
        }),
        ("state.json", "removed outside a run", |s| {
            std::fs::remove_file(s.path(&format!("{GOAL_DIR}/state.json"))).expect("rm");
        }),
        ("receipts.json", "changed outside a run", |s| {
            s.write(&format!("{GOAL_DIR}/receipts.json"), "{\"goal_id\": \"greet\", \"receipts\": []}\n");
        }),
        ("receipts.json", "removed outside a run", |s| {
            std::fs::remove_file(s.path(&format!("{GOAL_DIR}/receipts.json"))).expect("rm");
        }),
        ("notepad.md", "changed outside a run", |s| {
            s.write(&format!("{GOAL_DIR}/notepad.md"), "# Notepad\nall fine, nothing was tried\n");
        }),
        ("red.json", "changed outside a run", |s| {
            let p = format!("{GOAL_DIR}/evidence/happy/red.json");
            let mut v = s.read_json(&p);
            v["verdict"] = "fail".into();
            v["exit_code"] = 7.into();
            s.write(&p, &v.to_string());
        }),
    ];
    for (file, what, tamper) in cases {
        let (s, agent) = ultra_stopped();
        tamper(&s);
        let calls = s.read(".agent-state/calls");
        let (code, out, err) = ultra_again(&s, &agent, &[]);
        assert_eq!(code, 2, "{file} {what}: stdout {out}\nstderr {err}");
        assert_one_line_error(&err);
        assert!(err.contains(file) && err.contains(what) && err.contains("--fresh"), "{file} {what}: {err}");
        assert_eq!(s.read(".agent-state/calls"), calls, "{file} {what}: nothing was dispatched");
        // A person's way out: start the goal over.
        let (code, out, err) = ultra_again(&s, &agent, &["--fresh"]);
        assert_eq!(code, 1, "{file} {what}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!((v["stop_reason"].as_str(), v["runs"].as_u64()), (Some("attempts-exhausted"), Some(1)), "{v}");
    }
}

#[test]
fn ultra_untouched_state_resumes() {
    let (s, agent) = ultra_stopped();
    let (code, out, err) = ultra_again(&s, &agent, &[]);
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!((v["stop_reason"].as_str(), v["runs"].as_u64()), (Some("attempts-exhausted"), Some(2)), "{v}");
    assert_eq!(v["attempts"], 2, "{v}");
}

// ----- loop run -----------------------------------------------------------------------------

/// A loop run paused at its plan gate: `loop-run.json` holds the pinned gates.
fn loop_paused() -> (Scenario, String) {
    let s = Scenario::new();
    let agent = crate::loop_run::setup(&s, "test -f hello.txt", true);
    let v = crate::loop_run::run(&s, &agent, &[], 3);
    assert_eq!(v["reason"], "spec-human-gate", "{v}");
    let v = crate::loop_run::run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "plan-human-gate", "{v}");
    (s, agent)
}

#[test]
fn loop_run_state_changed_or_removed_after_work_exited_is_refused() {
    use crate::loop_run::DIR;
    type Tamper = fn(&Scenario);
    let cases: [(&str, &str, Tamper); 4] = [
        ("loop-run.json", "changed outside a run", |s| {
            // The liar unpins the gates: the next resume would take whatever it says.
            let p = format!("{DIR}/loop-run.json");
            let mut v = s.read_json(&p);
            v["pinned_gates"] = serde_json::json!([["test", "true"]]);
            s.write(&p, &serde_json::to_string_pretty(&v).expect("json"));
        }),
        ("loop-run.json", "removed outside a run", |s| {
            std::fs::remove_file(s.path(&format!("{DIR}/loop-run.json"))).expect("rm");
        }),
        ("engine-state.json", "changed outside a run", |s| {
            // The liar moves the engine to DONE.
            let p = format!("{DIR}/engine-state.json");
            let mut v = s.read_json(&p);
            v["state"] = "DONE".into();
            s.write(&p, &serde_json::to_string_pretty(&v).expect("json"));
        }),
        ("state.json", "changed outside a run", |s| {
            let p = format!("{DIR}/state.json");
            let mut v = s.read_json(&p);
            v["implementation_retry_count"] = 0.into();
            v["note"] = "reset by the agent".into();
            s.write(&p, &serde_json::to_string_pretty(&v).expect("json"));
        }),
    ];
    for (file, what, tamper) in cases {
        let (s, agent) = loop_paused();
        tamper(&s);
        let (code, out, err) = s.run(&["loop", "run", DIR, "--agent", &agent, "--json", "--resume"]);
        assert_eq!(code, 2, "{file} {what}: stdout {out}\nstderr {err}");
        assert_one_line_error(&err);
        assert!(
            err.contains(&format!("`{file}`")) && err.contains(what) && err.contains("work loop engine reset"),
            "{file} {what}: {err}"
        );
        assert_eq!(crate::loop_run::calls(&s, "implementer"), 0, "{file} {what}: nothing was dispatched");
    }
}

#[test]
fn loop_run_untouched_state_resumes() {
    let (s, agent) = loop_paused();
    let v = crate::loop_run::run(&s, &agent, &["--resume"], 3);
    assert_eq!(v["reason"], "code-human-gate", "{v}");
    assert_eq!(crate::loop_run::calls(&s, "implementer"), 1, "{v}");
}
