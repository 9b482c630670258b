//! Every workflow through the real Codex CLI (`WORK_TEST_CODEX`), against the scripted
//! model server: the CLI runs its own tools (`exec_command`, `apply_patch`) in the scratch repository, and
//! `work` sees the result through git.

use crate::ext_harness::{Cli, RealCli, assert_key_never_written};
use crate::support::Scenario;
use serde_json::{Value, json};
use work_model_server::{Rule, Script, Step};

fn jobs_repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn e() { if err { rollback() } }\n");
    s.commit("jobs");
    s
}

fn finder_answer(angle: &str, items: Value) -> Step {
    Step::Answer(json!({"angle": angle, "items": items, "roundNotes": "scripted"}))
}

/// Exhaust: a read-only finder that tries to write (the Write tool, `git log --output=FILE`
/// inside and `git diff --output=FILE` outside the repository) is refused every time, its
/// read-only commands run, its item passes gate 2, and round 2's finder receives what round 1
/// found (the brief's "see context.seen").
#[test]
fn exhaust_read_only_finders_run_tools_but_cannot_write() {
    let s = jobs_repo();
    let outside = tempfile::tempdir().expect("tempdir");
    let root = s.root().display().to_string();
    let leak_in = format!("{root}/leak-inside.txt");
    let leak_out = outside.path().join("leak-outside.txt").display().to_string();
    let item = json!([{"id": "swallowed-rollback-error", "title": "rollback swallows the error",
        "location": "src/jobs.rs:2", "evidence": "if err { rollback() }", "severity": "high"}]);
    let cli = RealCli::new(
        Cli::Codex,
        Script::new(vec![
            Rule::new(
                "YOUR ANGLE: error-paths",
                vec![
                    Step::Bash("git log --oneline -1".into()),
                    Step::Bash(format!("git log -1 --output={leak_in}")),
                    Step::Bash(format!("git diff HEAD~1 --output={leak_out}")),
                    Step::Write { path: format!("{root}/written.txt"), content: "x\n".into() },
                    finder_answer("error-paths", item),
                ],
            ),
            Rule::new("YOUR ANGLE: races", vec![finder_answer("races", json!([]))]),
            Rule::new("YOUR ANGLE: docs", vec![finder_answer("docs", json!([]))]),
        ]),
    );
    let master = cli.run_json(
        &s,
        &["exhaust", "error handling", "-k", "2", "--angles", "error-paths,races,docs", "--agent", "codex"],
        0,
    );
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master:#}");
    assert_eq!(master["seen"], json!(["swallowed-rollback-error"]), "{master:#}");
    for leak in [&leak_in, &leak_out, &format!("{root}/written.txt")] {
        assert!(!std::path::Path::new(leak).exists(), "a read-only finder wrote {leak}\n{}", cli.summary());
    }
    assert_eq!(s.git(&["status", "--porcelain", "--", ".", ":!.work"]), "", "the tree is untouched");
    let finder = cli.server.requests_for(0);
    assert!(finder.iter().any(|r| r.tool_results == 4), "every tool step ran: {}", cli.summary());
    let log_result = finder.iter().find(|r| r.tool_results == 1).expect("the git log result");
    assert!(log_result.body.to_string().contains("jobs"), "`git log` ran read-only: {}", log_result.body);
    let round2 = cli.server.requests_for(1);
    let brief = &round2.first().expect("round 2 dispatched").brief;
    assert!(brief.contains("swallowed-rollback-error"), "context.seen reached the model:\n{brief}");
    assert_key_never_written(s.root());
}
