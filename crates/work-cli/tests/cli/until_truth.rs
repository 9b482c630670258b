//! `work until`'s ground truth is the working tree's content, not git's index: a worker that
//! moves HEAD or the index to make a change appear is not credited with one, and an honest
//! worker whose edits an index flag (set before the session) hides from `git status` is not
//! taken for a do-nothing. Through the real binary, on scratch repositories.

use crate::support::{Scenario, fallback_only, refused};
use serde_json::Value;

/// A worker that runs `body` (Python, `n` the iteration) and reports `status`, claiming
/// `src/lib.rs`.
fn worker(s: &Scenario, body: &str, status: &str) -> String {
    s.agent(
        "worker.py",
        &format!(
            "import subprocess\nn = ctx['iteration']\ndef git(*a):\n    subprocess.run(['git', *a], check=True, capture_output=True)\n{body}\nprint(json.dumps({{\"status\": {status:?} if n >= 3 else 'continue', \"summary\": 'worked on src/lib.rs', \"changes_claimed\": ['src/lib.rs']}}))"
        ),
    )
}

/// A repository whose verify is a committed check script, with `src/lib.rs` in two commits.
fn repo() -> Scenario {
    let s = Scenario::new();
    s.write("check.sh", "grep -q 'fn ready' src/lib.rs\n");
    s.write("src/lib.rs", "pub fn f() {}\n");
    s.commit("code and check");
    s.write("src/lib.rs", "pub fn f() {}\npub fn g() {}\n");
    s.commit("g");
    s
}

fn until(s: &Scenario, agent: &str, code: i32) -> Value {
    s.run_json(
        &[
            "until",
            "`sh check.sh` exits 0",
            "--goal",
            "g",
            "--verify",
            "sh check.sh",
            "--max",
            "6",
            "--agent",
            agent,
            "--json",
        ],
        code,
    )
}

fn master(v: &Value) -> String {
    let dir = std::path::PathBuf::from(v["path"].as_str().expect("path in the result"));
    std::fs::read_to_string(dir.join("master.md")).expect("master.md")
}

#[test]
fn a_worker_that_fakes_a_change_with_head_or_the_index_is_not_progress() {
    let _unconfined = fallback_only(refused::GIT);
    // Each index trick alternates between two moves, so that `git status` differs after
    // every iteration while no file's content ever changes.
    // Moving HEAD below the session's base is refused outright, at the first iteration (the
    // one rule for HEAD, `head_rule.rs`).
    let s = repo();
    let liar = worker(
        &s,
        "if n % 2 == 1:\n    git('reset', '--soft', 'HEAD~1')\nelse:\n    git('commit', '-q', '-m', 'again')",
        "continue",
    );
    let v = until(&s, &liar, 1);
    assert_eq!((v["status"].as_str(), v["iterations"].as_u64()), (Some("blocked"), Some(1)), "{v}");
    let reason = v["stoppedReason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("head-moved") && reason.contains("below-base"), "{v}");
    for (what, body) in [
        (
            "rm --cached / add",
            "if n % 2 == 1:\n    git('rm', '-q', '--cached', 'src/lib.rs')\nelse:\n    git('add', 'src/lib.rs')",
        ),
        ("index chmod", "git('update-index', '--chmod=' + ('+x' if n % 2 == 1 else '-x'), 'src/lib.rs')"),
    ] {
        let s = repo();
        let liar = worker(&s, body, "continue");
        let v = until(&s, &liar, 1);
        assert_eq!(v["status"], "blocked", "{what}: {v}");
        assert_eq!(v["iterations"], 2, "{what}: {v}");
        let reason = v["stoppedReason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("stalled: two reports in a row"), "{what}: {v}");
        let m = master(&v);
        assert!(m.contains("[iter 1] claimed `src/lib.rs` but git shows no change to it"), "{what}: {m}");
        assert!(m.contains("[iter 2] claimed `src/lib.rs` but git shows no change to it"), "{what}: {m}");
    }
}

#[test]
fn an_honest_worker_whose_edits_an_earlier_index_flag_hides_is_credited() {
    for flag in ["--skip-worktree", "--assume-unchanged"] {
        let s = repo();
        // The flag was there before the session (the seal takes it as it finds it).
        s.git(&["update-index", flag, "src/lib.rs"]);
        let honest = worker(
            &s,
            "line = 'pub fn ready() {}\\n' if n >= 3 else 'pub fn step%d() {}\\n' % n\nopen('src/lib.rs', 'a').write(line)",
            "done",
        );
        let v = until(&s, &honest, 0);
        assert_eq!(v["status"], "done", "{flag}: {v}");
        assert_eq!(v["iterations"], 3, "{flag}: {v}");
        let m = master(&v);
        assert!(!m.contains("but git shows no change"), "{flag}: {m}");
        assert_eq!(m.matches("- changed (git): `src/lib.rs`").count(), 3, "{flag}: {m}");
    }
}
