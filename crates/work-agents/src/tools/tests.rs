use super::*;
use serde_json::json;
use std::time::Duration;
use work_runtime::dispatch::Access;

fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let w = |rel: &str, text: &str| {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    w("src/jobs.rs", "fn a() { transition(1); }\nfn e() { if err { rollback() } }\n");
    w("src/lib.rs", "mod jobs;\n");
    w(".gitignore", "target/\n*.log\n");
    w("target/out.rs", "fn rollback() {}\n");
    w("run.log", "rollback\n");
    w(".git/config", "[core]\n");
    d
}

fn request(root: &std::path::Path, access: Access) -> DispatchRequest {
    let mut r = crate::test_request(access);
    r.cwd = root.display().to_string();
    r
}

async fn run(req: &DispatchRequest, name: &str, input: serde_json::Value) -> Outcome {
    let ws = Workspace::of(req);
    call(req, &ws, name, &input, Duration::from_secs(30)).await
}

#[tokio::test]
async fn reads_lists_and_searches_what_git_keeps() {
    let d = repo();
    let req = request(d.path(), Access::ReadOnly);
    let o = run(&req, "read_file", json!({"path": "src/jobs.rs", "start_line": 2, "end_line": 2})).await;
    assert!(!o.is_error && o.text.starts_with("2: fn e()") && o.text.contains("lines 2–2 of 2"), "{}", o.text);
    let abs = d.path().join("src/lib.rs").display().to_string();
    assert_eq!(run(&req, "read_file", json!({"path": abs})).await.text, "1: mod jobs;\n", "an absolute path inside");
    let o = run(&req, "list_dir", json!({})).await;
    assert_eq!(o.text, ".gitignore\nsrc/", "ignored entries and .git left out: {}", o.text);
    let o = run(&req, "search", json!({"pattern": "roll(back)?\\("})).await;
    assert!(o.text.starts_with("src/jobs.rs:2: fn e() { if err { rollback() } }\n"), "{}", o.text);
    assert!(!o.text.contains("target/") && !o.text.contains("run.log"), "ignored files are not searched: {}", o.text);
    assert!(run(&req, "search", json!({"pattern": "("})).await.text.contains("not a valid regex"));
    assert!(run(&req, "search", json!({"pattern": "nothing-like-this"})).await.text.starts_with("no match"));
}

#[tokio::test]
async fn reads_stay_in_the_repository() {
    let d = repo();
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.txt"), "secret\n").expect("write");
    std::os::unix::fs::symlink(outside.path(), d.path().join("out")).expect("symlink");
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), d.path().join("s.txt")).expect("symlink");
    let req = request(d.path(), Access::ReadOnly);
    for input in [
        json!({"path": "../secret.txt"}),
        json!({"path": "/etc/passwd"}),
        json!({"path": "out/secret.txt"}),
        json!({"path": "s.txt"}),
    ] {
        let o = run(&req, "read_file", input.clone()).await;
        assert!(o.is_error && !o.text.contains("secret\n"), "{input}: {}", o.text);
    }
    assert!(run(&req, "list_dir", json!({"path": "out"})).await.is_error);
    let o = run(&req, "search", json!({"pattern": "secret"})).await;
    assert!(o.text.starts_with("no match"), "a symlink is not followed by a search: {}", o.text);
}

#[tokio::test]
async fn a_read_only_role_is_refused_every_write_and_command() {
    let d = repo();
    let req = request(d.path(), Access::ReadOnly);
    assert_eq!(offered(Access::ReadOnly), [Tool::ReadFile, Tool::ListDir, Tool::Search]);
    for (name, input) in [
        ("write_file", json!({"path": "x.txt", "content": "x"})),
        ("edit_file", json!({"path": "src/lib.rs", "old": "mod", "new": "pub mod"})),
        ("apply_patch", json!({"patch": "*** Begin Patch\n*** Add File: y.txt\n+y\n*** End Patch\n"})),
        ("run_command", json!({"command": "touch z.txt"})),
    ] {
        let o = run(&req, name, input).await;
        assert!(o.is_error, "{name}: {}", o.text);
        let why = o.refused.unwrap_or_default();
        assert!(why.contains(name) && why.contains("finder role is read-only"), "{name}: {why}");
    }
    for f in ["x.txt", "y.txt", "z.txt"] {
        assert!(!d.path().join(f).exists(), "{f} was written");
    }
    assert_eq!(std::fs::read_to_string(d.path().join("src/lib.rs")).expect("read"), "mod jobs;\n");
    assert!(run(&req, "rm_rf", json!({})).await.text.contains("no tool `rm_rf`"));
}

#[tokio::test]
async fn writes_are_exact_and_confined() {
    let d = repo();
    let outside = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(outside.path(), d.path().join("out")).expect("symlink");
    std::os::unix::fs::symlink(outside.path().join("t.txt"), d.path().join("link.txt")).expect("symlink");
    let req = request(d.path(), Access::WorkspaceWrite);
    let o = run(&req, "edit_file", json!({"path": "src/jobs.rs", "old": "fn", "new": "pub fn"})).await;
    assert!(o.is_error && o.text.contains("occurs 2 times"), "{}", o.text);
    let o =
        run(&req, "edit_file", json!({"path": "src/jobs.rs", "old": "transition(1)", "new": "transition(2)"})).await;
    assert!(!o.is_error, "{}", o.text);
    assert!(std::fs::read_to_string(d.path().join("src/jobs.rs")).expect("read").contains("transition(2)"));
    assert!(!run(&req, "write_file", json!({"path": "new/dir/a.txt", "content": "a\n"})).await.is_error);
    assert_eq!(std::fs::read_to_string(d.path().join("new/dir/a.txt")).expect("read"), "a\n");
    for (path, why) in
        [(".git/hooks/pre-commit", ".git/"), (".work/runs/x", ".work/"), ("out/t.txt", "symlink"), ("../t.txt", "..")]
    {
        let o = run(&req, "write_file", json!({"path": path, "content": "x"})).await;
        assert!(o.is_error && o.text.contains(why), "{path}: {}", o.text);
    }
    // A symlink at the name is replaced, never written through.
    assert!(!run(&req, "write_file", json!({"path": "link.txt", "content": "in\n"})).await.is_error);
    assert!(!outside.path().join("t.txt").exists(), "the write followed the symlink out");
    let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-mod jobs;\n+pub mod jobs;\n*** Add File: b.txt\n+b\n*** End Patch\n";
    let o = run(&req, "apply_patch", json!({"patch": patch})).await;
    assert!(!o.is_error, "{}", o.text);
    assert_eq!(std::fs::read_to_string(d.path().join("src/lib.rs")).expect("read"), "pub mod jobs;\n");
    assert_eq!(std::fs::read_to_string(d.path().join("b.txt")).expect("read"), "b\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_in_the_root_with_a_timeout_and_a_cap() {
    let d = repo();
    let req = request(d.path(), Access::WorkspaceWrite);
    let o = run(&req, "run_command", json!({"command": "cat src/lib.rs; echo oops >&2; exit 3"})).await;
    assert!(o.is_error && o.text.starts_with("exit code 3"), "{}", o.text);
    assert!(o.text.contains("mod jobs;") && o.text.contains("--- stderr ---\noops"), "{}", o.text);
    let o = run(&req, "run_command", json!({"command": "sleep 5", "timeout_secs": 1})).await;
    assert!(o.is_error && o.text.contains("timed out"), "{}", o.text);
    let o = run(&req, "run_command", json!({"command": "yes 0123456789 | head -c 200000"})).await;
    assert!(!o.is_error && o.text.len() <= RESULT_CAP + 100 && o.text.contains("not shown"), "{}", o.text.len());
    let spec = run::tool_command_spec(&req, "true");
    assert_eq!((spec.program.as_str(), spec.cwd.as_path()), ("sh", d.path()));
    // The keys `work` holds are not the commands' (PATH, HOME … are).
    let o = run(&req, "run_command", json!({"command": "env"})).await;
    assert!(o.text.contains("PATH=") && !o.text.contains("_API_KEY=") && !o.text.contains("TOKEN="), "{}", o.text);
    for (name, _) in std::env::vars() {
        if work_runtime::redact::is_secret_var(&name) {
            assert!(spec.env_removed.contains(&name), "{name} is passed on");
        }
    }
}

#[test]
fn results_are_cut_at_the_cap() {
    let t = cap("é".repeat(RESULT_CAP));
    assert!(t.len() < RESULT_CAP + 64 && t.ends_with(&format!("(cut at {RESULT_CAP} of {} bytes)", 2 * RESULT_CAP)));
}
