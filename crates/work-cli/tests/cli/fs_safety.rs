//! Filesystem safety through the real binary: a file is opened first and then checked (no
//! symlink followed, regular files only, capped), so a symlink swapped under gate 2, a FIFO,
//! `/dev/zero` or a symlink an agent leaves in the tree neither leaks outside content nor hangs.

use crate::support::Scenario;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const LINES: usize = 100;

fn inside_text() -> String {
    (1..=LINES).map(|n| format!("inside line {n}\n")).collect()
}

/// A finder that cites every line of `src/swap.rs`, a different third per angle.
fn citing_finder(s: &Scenario) -> String {
    s.agent(
        "cite.py",
        &format!(
            r#"
angle = ctx['angle']
base = {{'a': 0, 'b': 1, 'c': 2}}.get(angle)
items = [] if base is None else [
    {{"id": "l%d" % n, "title": "line %d" % n, "location": "src/swap.rs:%d" % n}}
    for n in range(1, {LINES} + 1) if n % 3 == base]
print(json.dumps({{"angle": angle, "items": items}}))
"#
        ),
    )
}

/// Runs exhaust while a thread swaps `src/swap.rs` between an in-repo file and a symlink to an
/// outside secret; returns how many re-reads leaked the secret (journal and stdout).
fn swap_race_leaks(s: &Scenario, secret_dir: &std::path::Path) -> (usize, usize) {
    let secret = secret_dir.join("secret.txt");
    let secret_text: String = (1..=LINES).map(|n| format!("TOP-SECRET {n}\n")).collect();
    std::fs::write(&secret, secret_text).expect("write secret");
    let link = s.path("src/swap.rs");
    // Staged outside the tree (same filesystem), so no stray file shows in the tree.
    let tmp = secret_dir.join("swap.tmp");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, link, tmp) = (stop.clone(), link.clone(), tmp.clone());
        std::thread::spawn(move || {
            let mut flip = false;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&tmp);
                if flip {
                    let _ = std::os::unix::fs::symlink(&secret, &tmp);
                } else {
                    let _ = std::fs::write(&tmp, inside_text());
                }
                let _ = std::fs::rename(&tmp, &link);
                // Mostly the in-repo file, the symlink only for a moment: the read-only guard's
                // tree hashes around each finder then mostly agree, and gate 2's re-reads race.
                if !flip {
                    std::thread::sleep(std::time::Duration::from_micros(300));
                }
                flip = !flip;
            }
        })
    };
    let agent = citing_finder(s);
    let (_code, out, _err) =
        s.run(&["exhaust", "lines", "-k", "2", "--angles", "a,b,c,d", "--agent", &agent, "--json"]);
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("join the swapper");
    let journal = std::fs::read_to_string(s.path(".work/quality-journals/work-exhaust-lines.json")).unwrap_or_default();
    // The swap shows as a tree change around the read-only finders (their answers dropped, or the
    // swapped path refused as written during the round), or gate 2 re-reads an in-repo line:
    // either way something ran against the race, and nothing from outside may come through.
    let defended = journal.matches("inside line").count()
        + journal.matches("read-only finder changed the tree").count()
        + journal.matches("written during").count();
    (journal.matches("TOP-SECRET").count() + out.matches("TOP-SECRET").count(), defended)
}

#[test]
fn a_symlink_swapped_under_gate_2_never_leaks_outside_content() {
    let outside = tempfile::tempdir().expect("tempdir");
    let mut leaks = 0;
    let mut honest = 0;
    for _ in 0..3 {
        let s = Scenario::new();
        s.write("src/swap.rs", &inside_text());
        s.commit("init");
        let (l, h) = swap_race_leaks(&s, outside.path());
        leaks += l;
        honest += h;
    }
    assert_eq!(leaks, 0, "outside lines reached the journal or stdout");
    assert!(honest > 0, "no finder answer met the race: the race test tested nothing");
}

#[test]
fn a_fifo_cited_as_a_location_is_refused_without_hanging() {
    let s = Scenario::new();
    s.write("src/a.rs", "fn a() {}\n");
    s.commit("init");
    nix::unistd::mkfifo(&s.path("src/pipe"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let agent = s.agent(
        "f.py",
        r#"
items = [{"id": "p", "title": "pipe", "location": "src/pipe:1"},
         {"id": "a", "title": "honest", "location": "src/a.rs:1"}] if ctx['angle'] == 'a' else []
print(json.dumps({"angle": ctx['angle'], "items": items}))
"#,
    );
    let master = s.run_json(
        &[
            "-c",
            "timeouts.dispatch_secs=30",
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
    assert_eq!(master["seen"], serde_json::json!(["a"]), "the honest item is kept, the FIFO refused: {master}");
    assert!(master.to_string().contains("FIFO"), "the refusal names what the path is: {master}");
}

#[test]
fn a_hard_link_to_an_outside_file_cited_as_a_location_is_refused() {
    let s = Scenario::new();
    s.write("src/a.rs", "fn a() {}\n");
    s.commit("init");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret"), "OUTSIDE-SECRET-TEXT\n").expect("write");
    std::fs::hard_link(outside.path().join("secret"), s.path("src/notes.txt")).expect("hard link");
    let agent = s.agent(
        "f.py",
        r#"
items = [{"id": "h", "title": "notes", "location": "src/notes.txt:1"},
         {"id": "a", "title": "honest", "location": "src/a.rs:1"}] if ctx['angle'] == 'a' else []
print(json.dumps({"angle": ctx['angle'], "items": items}))
"#,
    );
    let (code, stdout, stderr) = s.run(&["exhaust", "x", "-k", "2", "--angles", "a,b,c", "--agent", &agent, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let master: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(master["seen"], serde_json::json!(["a"]), "the honest item is kept, the hard link refused: {master}");
    assert!(master.to_string().contains("hard links"), "the refusal names why: {master}");
    let mut state = String::new();
    for f in walk(&s.path(".work")) {
        state.push_str(&String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()));
    }
    for (what, text) in [("stdout", &stdout), ("stderr", &stderr), ("the state directory", &state)] {
        assert!(!text.contains("OUTSIDE-SECRET-TEXT"), "the outside file's text is in {what}");
    }
}

fn plan_repo() -> Scenario {
    let s = Scenario::new();
    s.write("PLAN.md", "# Plan\n\n## Task 1: Add\n\nCreate hello.txt.\n");
    s.commit("plan");
    s
}

#[test]
fn a_fifo_or_dev_zero_as_the_plan_is_bad_input_at_once() {
    let s = plan_repo();
    let a = s.agent("a.py", "sys.exit(3)");
    nix::unistd::mkfifo(&s.path("plan.fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    std::fs::write(s.path(".git/info/exclude"), "plan.fifo\n.agents/\n.agent-state/\n.work/\n").expect("exclude");
    for plan in ["plan.fifo", "/dev/zero"] {
        let (code, out, err) =
            s.run(&["implement", "--plan", plan, "--iter-id", "it-1", "--agent", &a, "--test-cmd", "true"]);
        assert_eq!(code, 2, "--plan {plan}: stdout {out}\nstderr {err}");
        assert!(err.contains("not a regular file"), "--plan {plan}: {err}");
    }
    // The honest twin: a regular plan file is read.
    let (code, _out, err) =
        s.run(&["implement", "--plan", "PLAN.md", "--iter-id", "it-2", "--agent", &a, "--test-cmd", "true"]);
    assert_ne!(code, 2, "a regular plan is not bad input: {err}");
}

#[test]
fn symlinks_an_agent_leaves_in_the_tree_are_not_followed() {
    let outside = tempfile::tempdir().expect("tempdir");
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET outside line\n").expect("secret");
    let fifo = outside.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let s = plan_repo();
    let a = s.agent(
        "a.py",
        &format!(
            r#"
role = req['role']
def out(d):
    print(json.dumps({{'work_result': d}})); sys.exit(0)
if role == 'implementer':
    open('hello.txt', 'w').write('hi\n')
    if not os.path.lexists('leak.txt'):
        os.symlink({secret:?}, 'leak.txt')
        os.symlink({fifo:?}, 'hang.txt')
    out({{'status': 'DONE', 'summary': 'done', 'applied_changes': True}})
if role == 'spec-reviewer':
    out({{'status': 'compliant', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)}})
if role == 'quality-reviewer':
    out({{'verdict': 'approved', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)}})
out({{'status': 'DONE', 'fixtures': 1}})
"#,
            secret = secret.display().to_string(),
            fifo = fifo.display().to_string(),
        ),
    );
    let (code, out, err) = s.run(&[
        "-c",
        "timeouts.dispatch_secs=30",
        "implement",
        "--plan",
        "PLAN.md",
        "--iter-id",
        "it-1",
        "--agent",
        &a,
        "--test-cmd",
        "true",
        "--json",
    ]);
    assert!(code == 0 || code == 1, "the run ends (no hang on the FIFO): {code}\n{out}\n{err}");
    assert!(!out.contains("TOP-SECRET") && !err.contains("TOP-SECRET"), "outside content printed");
    for path in walk(&s.path(".work")) {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
        assert!(!text.contains("TOP-SECRET"), "outside content copied into {}", path.display());
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(walk(&p)),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
    out
}
