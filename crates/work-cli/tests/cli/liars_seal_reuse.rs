//! Liars against the cheaper read-only guard of `exhaust`: git's seal handed back without a git
//! while nothing it rests on changed (`work_git::integrity`'s inputs), and the containment sweep
//! that reads environments only where a marker can be. Each liar changes what the full seal (or
//! the whole-`/proc` sweep) saw where the cheap check does not look; each honest twin does the
//! work those checks must let be. The repositories are aged past git's racy window first, as a
//! user's is: a younger one is read in full every look and would prove nothing.

use crate::support::{Scenario, fallback_only, refused};
use serde_json::Value;
use std::time::Duration;

/// A committed repository.
fn repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn b() { transition(2); }\n");
    s.commit("jobs");
    s
}

/// Runs a read-only finder (`body` sets `items`) once `setup` ran (after the finder is written)
/// and the inputs settled; the master record.
fn exhaust(s: &Scenario, setup: &dyn Fn(&Scenario), body: &str) -> Value {
    let agent = s.agent(
        "finder.py",
        &format!(
            "import subprocess\nangle = ctx['angle']\nrnd = ctx['round']\nitems = []\n{body}\nprint(json.dumps({{'angle': angle, 'items': items, 'roundNotes': 'n'}}))\n"
        ),
    );
    setup(s);
    std::thread::sleep(work_git::integrity::RACY + Duration::from_millis(500));
    let (code, out, err) = s.run(&["exhaust", "things", "-k", "2", "--angles", "a,b", "--agent", &agent, "--json"]);
    assert!(code == 0 || code == 1, "exit {code}\n{out}\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"))
}

fn seen(master: &Value) -> Vec<String> {
    master["seen"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect()
}

/// The planted answer is dropped and the run names what changed in git's view.
fn assert_dropped(master: &Value, named: &str, what: &str) {
    assert!(!seen(master).contains(&"planted".to_string()), "{what}: {master}");
    let gaps = master["completenessGaps"].to_string();
    assert!(gaps.contains("read-only finder changed the tree") && gaps.contains(named), "{what}: {gaps}");
}

const PLANT: &str = "items = [{'id': 'planted', 'title': 't', 'location': 'src/jobs.rs:1'}]";

/// Where the tree snapshot does not look: a byte-code cache, and a directory made another
/// repository (git stops reading its untracked `.gitattributes`). (The run's own directory is
/// not compared at all: what git sees there applies to the engine's files only.)
#[test]
fn exhaust_liar_that_changes_git_files_where_the_snapshot_does_not_look_loses_its_answers() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    type Case<'a> = (&'a str, &'a str, &'a dyn Fn(&Scenario));
    let cases: [Case; 2] = [
        (
            "os.makedirs('src/__pycache__', exist_ok=True)\n    open('src/__pycache__/.gitattributes', 'w').write('* -diff\\n')",
            "src/__pycache__/.gitattributes",
            &|_| {},
        ),
        ("subprocess.run(['git', 'init', '-q', 'vendor'])", "vendor/.gitattributes deleted", &|s| {
            s.write("vendor/.gitattributes", "* -diff\n");
        }),
    ];
    for (change, named, setup) in cases {
        let s = repo();
        let master = exhaust(&s, setup, &format!("if angle == 'a' and rnd == 1:\n    {change}\n    {PLANT}"));
        assert_dropped(&master, named, change);
    }
}

/// The git directory outside the tree (`git init --separate-git-dir`): its `commondir` pointed
/// at a copy whose configuration sets a diff driver. git reads another configuration; no file
/// the seal was read from changed.
#[test]
fn exhaust_liar_that_points_an_outside_git_dir_at_another_common_dir_loses_its_answers() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    let gitdir = tempfile::tempdir().expect("tempdir");
    let separate = |s: &Scenario| {
        s.git(&["init", "-q", &format!("--separate-git-dir={}", gitdir.path().join("repo.git").display())]);
    };
    let s = repo();
    let master = exhaust(
        &s,
        &separate,
        &format!(
            "if angle == 'a' and rnd == 1:\n    gd = subprocess.run(['git', 'rev-parse', '--absolute-git-dir'], capture_output=True, text=True).stdout.strip()\n    subprocess.run(['cp', '-a', gd, gd + '.alt'])\n    subprocess.run(['git', 'config', '-f', gd + '.alt/config', 'diff.hide.textconv', 'true'])\n    open(gd + '/commondir', 'w').write(gd + '.alt\\n')\n    {PLANT}"
        ),
    );
    assert_dropped(&master, "diff.hide.textconv", "commondir");
}

/// The honest twin: a finder that looks with git (which refreshes the index), byte-compiles a
/// module (a `__pycache__/` appears), and reads a nested repository's status, in a repository
/// whose git directory is outside the tree, keeps its answer and leaves no gap.
#[test]
fn exhaust_honest_twin_that_runs_git_and_python_in_an_aged_repository_keeps_its_answers() {
    let _unconfined = fallback_only(
        "the cheap seal's twin: git refreshing the index and a byte-compiled module in the tree, which with the sandbox a read-only finder cannot write",
    );
    let gitdir = tempfile::tempdir().expect("tempdir");
    let setup = |s: &Scenario| {
        s.git(&["init", "-q", &format!("--separate-git-dir={}", gitdir.path().join("repo.git").display())]);
        s.write("tools/gen.py", "X = 1\n");
        s.git(&["init", "-q", "vendor"]);
    };
    let s = repo();
    let master = exhaust(
        &s,
        &setup,
        "subprocess.run(['git', 'status'], capture_output=True)\nsubprocess.run(['git', 'diff'], capture_output=True)\nsubprocess.run(['git', '-C', 'vendor', 'status'], capture_output=True)\nimport py_compile\npy_compile.compile('tools/gen.py')\nif angle == 'a':\n    items = [{'id': 'real', 'title': 't', 'location': 'src/jobs.rs:2'}]",
    );
    assert!(s.path("tools/__pycache__").is_dir(), "the twin byte-compiled its module");
    assert_eq!(seen(&master), vec!["real"], "{master}");
    assert_eq!(master["completenessGaps"].as_array().map(Vec::len), Some(0), "{master}");
}

/// Why the daemon's tests are the fallback's: its socket is under `/tmp`.
const DAEMON_OUT_OF_REACH: &str = "a daemon outside work's tree reached by its socket under /tmp; with the sandbox /tmp is private and the socket out of reach";

/// A server that was running before `work` and starts a command for any client with the
/// client's environment (a build daemon, a terminal multiplexer's `-e`): `python3 daemon.py
/// SOCKET`. It answers each request with the pid it started.
const DAEMON: &str = r#"
import json, os, socket, subprocess, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
while True:
    c, _ = s.accept()
    req = json.loads(c.makefile().readline())
    p = subprocess.Popen(req['cmd'], env=req['env'], start_new_session=True)
    c.sendall(b'%d\n' % p.pid); c.close()
"#;

/// The finder's side: asks the daemon to start `sleep 60` with `env` (a Python expression).
fn via_daemon(sock: &std::path::Path, env: &str) -> String {
    format!(
        "import socket\n    c = socket.socket(socket.AF_UNIX); c.connect({sock:?})\n    c.sendall((json.dumps({{'cmd': ['sleep', '60'], 'env': {env}}}) + '\\n').encode())\n    open(state_path('helper'), 'w').write(c.makefile().readline().strip())",
        sock = sock.display().to_string()
    )
}

/// Runs a finder that starts a helper through the outside daemon in round 1 and, in later
/// rounds, records whether it still runs; the helper's pid and whether it was seen alive.
fn helper_outside(env: &str) -> (i32, bool) {
    let s = repo();
    s.write(".agents/daemon.py", DAEMON);
    let sock_dir = tempfile::tempdir().expect("tempdir");
    let sock = sock_dir.path().join("d.sock");
    #[expect(clippy::disallowed_methods, reason = "the test runs a daemon outside work's tree")]
    let mut daemon = std::process::Command::new("python3")
        .arg(s.path(".agents/daemon.py"))
        .arg(&sock)
        .env_remove(work_runtime::contain::OWNER_VAR)
        .spawn()
        .expect("start the daemon");
    while !sock.exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = via_daemon(&sock, env);
    let master = exhaust(
        &s,
        &|_| {},
        &format!(
            "if angle == 'a' and rnd == 1:\n    {start}\n    items = [{{'id': 'one', 'title': 't', 'location': 'src/jobs.rs:1'}}]\nif rnd >= 2 and os.path.exists(state_path('helper')):\n    pid = int(open(state_path('helper')).read())\n    if os.path.exists('/proc/%d' % pid) and open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[0] != 'Z':\n        open(state_path('alive'), 'w').write('yes')"
        ),
    );
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_eq!(seen(&master), vec!["one"], "{master}");
    let pid: i32 = std::fs::read_to_string(s.path(".agent-state/helper"))
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("the helper never started: {master}"));
    let alive = s.path(".agent-state/alive").exists();
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    (pid, alive)
}

/// A process outside `work`'s tree that carries the finder's marker (the daemon started it with
/// the finder's environment) ends with the finder's dispatch, not only at `work`'s exit: it
/// never runs into the next round.
#[test]
fn exhaust_liar_whose_helper_an_outside_daemon_starts_with_its_marker_is_ended_with_its_dispatch() {
    let _unconfined = fallback_only(DAEMON_OUT_OF_REACH);
    let (pid, alive) = helper_outside("dict(os.environ)");
    assert!(!alive, "the helper {pid} outlived its dispatch");
}

/// The honest twin: what the daemon starts without the marker is not `work`'s; the sweep
/// that now reads its environment leaves it running.
#[test]
fn exhaust_honest_twin_whose_daemon_starts_an_unmarked_process_keeps_it() {
    let _unconfined = fallback_only(DAEMON_OUT_OF_REACH);
    let (pid, alive) = helper_outside(&format!(
        "{{k: v for k, v in os.environ.items() if k != '{}'}}",
        work_runtime::contain::OWNER_VAR
    ));
    assert!(alive, "the daemon's own process {pid} was ended");
}
