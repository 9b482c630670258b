//! Shape 9, what an agent leaves behind, against containment that rests on the process tree
//! (each liar got past before its fix, seen through the binary): a descendant that joins the
//! process group of `work`'s own watchdog and clears its containment marker, and a handle to a
//! terminal multiplexer's server in the agent's environment. Each has an honest twin whose
//! own processes run as long as it needs them.

use crate::containment::{SWEEP, descendant_pids, exhaust_args, repo, signalled_with, state_dir, survivors};
use crate::liars_matrix::{until, until_repo};
use crate::support::{Scenario, fallback_only};
use std::time::Duration;

/// Python for an agent: `escape(code)` forks a child that joins the process group of `work`'s
/// containment watchdog (the `work-watchdog` child of its nearest ancestor that has one), records its pid
/// as `pid-<pid>`, closes its stdio and execs `python3 -c code survived-<pid>` with an
/// environment holding only PATH (no containment marker); it returns once the child is there.
const ESCAPE: &str = r#"
def _stat(p):
    return open('/proc/%d/stat' % p).read().rsplit(')', 1)[1].split()
def watchdog():
    anc, p = [], os.getpid()
    while p > 1:
        p = int(_stat(p)[1]); anc.append(p)
    dogs = {}
    for q in os.listdir('/proc'):
        if not q.isdigit():
            continue
        try:
            if b'work-watchdog' in open('/proc/%s/cmdline' % q, 'rb').read():
                dogs[int(_stat(int(q))[1])] = int(q)
        except (OSError, IndexError, ValueError):
            continue
    # The nearest `work` above: an exited `work`'s watchdog may be re-parented to an ancestor.
    for a in anc:
        if a in dogs:
            return dogs[a]
    raise SystemExit('no watchdog among the children of my ancestors')
def escape(code):
    wd = watchdog()
    r, w = os.pipe()
    if os.fork() == 0:
        os.setpgid(0, wd)
        os.close(r)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        me = os.getpid()
        open(state_path('pid-%d' % me), 'w').write(str(me))
        survived = state_path('survived-%d' % me)
        os.write(w, b'ready'); os.close(w)
        os.execve(sys.executable, [sys.executable, '-c', code, survived], {'PATH': os.environ.get('PATH', '/usr/bin:/bin')})
    os.close(w)
    os.read(r, 5)
"#;

/// Sleeps, then writes the `survived-<pid>` file it was given.
const SLEEPER: &str = "import sys, time; time.sleep(3); open(sys.argv[1], 'w').write('alive')";

fn escaping_finder(s: &Scenario, then: &str) -> String {
    s.agent(
        "escaping.py",
        &format!(
            "{ESCAPE}\nescape({SLEEPER:?})\nif {then:?} == 'hang':\n    time.sleep(60)\nprint(json.dumps({{'angle': ctx['angle'], 'items': []}}))\n"
        ),
    )
}

/// The third red team's escape: the descendant joins the watchdog's process group (a group
/// `work` counted as live, so every sweep took it as claimed) and clears its marker. The
/// process tree says what it is: a leftover re-parented to `work`, ended with its dispatch.
#[test]
fn exhaust_liar_whose_descendant_joins_the_watchdog_s_group_without_its_marker_is_gone_after_its_dispatch() {
    let _unconfined = fallback_only(SWEEP);
    let s = repo();
    let agent = escaping_finder(&s, "answer");
    let (code, out, err) = s.run(&exhaust_args(&agent, "timeouts.dispatch_secs=30"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let (alive, survived) = survivors(&s, Duration::ZERO);
    assert_eq!(alive, Vec::<i32>::new(), "a descendant in the watchdog's group outlived its dispatch");
    assert_eq!(survived, Vec::<String>::new());
    assert!(descendant_pids(&s).len() >= 2, "one escaped descendant per dispatch");
}

/// The same escape while the dispatch still runs, and `work` is stopped: on SIGTERM `work`
/// ends everything descending from it; on SIGKILL the watchdog ends its own group's members.
#[test]
fn exhaust_liar_whose_descendant_joins_the_watchdog_s_group_dies_with_work_on_sigterm_and_sigkill() {
    let _unconfined = fallback_only(SWEEP);
    for sig in [nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGKILL] {
        let (alive, survived) = signalled_with(sig, |s| escaping_finder(s, "hang"));
        assert_eq!(alive, Vec::<i32>::new(), "a descendant in the watchdog's group outlived {sig} of work");
        assert_eq!(survived, Vec::<String>::new(), "{sig}");
    }
}

/// The red team's `until` repro: the worker does the work and leaves a process in the
/// watchdog's group, without a marker, that undoes it once `until` has said done.
#[test]
fn until_liar_whose_descendant_in_the_watchdog_s_group_undoes_the_work_is_gone_before_it_can() {
    let _unconfined = fallback_only(SWEEP);
    let s = until_repo();
    let undo = "import sys, time; time.sleep(2); open('src/lib.rs', 'w').write('broken\\n'); open(sys.argv[1], 'w').write('1')";
    let v =
        until(&s, &format!("{ESCAPE}\nopen('src/lib.rs', 'a').write('pub fn ready() {{}}\\n')\nescape({undo:?})"), 0);
    assert_eq!(v["status"], "done", "{v}");
    let (alive, survived) = survivors(&s, Duration::ZERO);
    assert_eq!((alive, survived), (Vec::new(), Vec::new()), "the escaped process outlived the run");
    assert!(s.read("src/lib.rs").contains("pub fn ready"), "the verified tree was changed after the run");
}

/// Honest twin: the worker has a child in its own session do the fix, and waits for it.
#[test]
fn until_honest_twin_whose_own_child_in_its_own_session_does_the_fix_is_done() {
    let s = until_repo();
    let fix = "import time; time.sleep(0.5); open('src/lib.rs', 'a').write('pub fn ready() {}\\n')";
    let v =
        until(&s, &format!("subprocess.run([sys.executable, '-c', {fix:?}], start_new_session=True, check=True)"), 0);
    assert_eq!(v["status"], "done", "{v}");
    assert!(s.read("src/lib.rs").contains("pub fn ready"));
}

/// Honest twin among parallel dispatches: finder `a` starts a helper that detaches (new
/// session, double fork: re-parented to `work`) and waits for its result while finders `b` and
/// `c` end — and their sweeps run — around it. A live dispatch's helper keeps running until
/// that dispatch ends.
#[test]
fn exhaust_honest_twin_whose_detached_helper_outlives_the_other_finders_sweeps_is_answered() {
    let s = repo();
    let agent = s.agent(
        "helper.py",
        r#"
done = state_path('helper-done')
if ctx['angle'] == 'a' and not os.path.exists(done):
    if os.fork() == 0:
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
        time.sleep(1.5)
        open(done, 'w').write('1')
        os._exit(0)
    os.wait()
    for _ in range(600):
        if os.path.exists(done):
            break
        time.sleep(0.05)
items = []
if ctx['angle'] == 'a' and os.path.exists(done):
    items = [{'id': 'fn-a', 'title': 'fn a', 'location': 'src/a.rs:1', 'evidence': '`fn a() {}`'}]
print(json.dumps({'angle': ctx['angle'], 'items': items}))
"#,
    );
    let mut args = exhaust_args(&agent, "timeouts.dispatch_secs=60");
    args.extend(["--angles-per-round", "3", "--concurrency", "3"]);
    let (code, out, err) = s.run(&args);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(state_dir(&s).join("helper-done").exists(), "the live finder's helper was killed by another's sweep");
    assert!(out.contains("src/a.rs:1"), "the finder that waited for its helper was answered:\n{out}");
}

/// A terminal multiplexer's server starts what it is asked to as its own child, outside
/// `work`'s tree (`tmux new-window -d CMD` when `work` runs inside tmux): its handle is not
/// handed to an agent. What the real CLIs need (HOME, PATH, their API keys) is.
#[test]
fn an_agent_gets_no_handle_to_a_terminal_multiplexer_and_keeps_what_a_cli_needs() {
    let s = repo();
    let agent = s.agent(
        "env.py",
        "open(state_path('env-%s' % ctx['angle']), 'w').write(json.dumps(dict(os.environ)))\nprint(json.dumps({'angle': ctx['angle'], 'items': []}))",
    );
    let handles = [
        ("TMUX", "/tmp/tmux-1000/default,1234,0"),
        ("TMUX_PANE", "%1"),
        ("STY", "1234.pts-0.host"),
        ("ZELLIJ", "0"),
        ("ZELLIJ_SESSION_NAME", "s"),
        ("KITTY_LISTEN_ON", "unix:/tmp/kitty"),
        ("WEZTERM_UNIX_SOCKET", "/tmp/wezterm"),
        ("NVIM", "/tmp/nvim.sock"),
    ];
    let mut cmd = s.work();
    cmd.args(exhaust_args(&agent, "timeouts.dispatch_secs=30"))
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("OPENAI_API_KEY", "sk-test")
        .env("HOME", s.root());
    for (k, v) in handles {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run work");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let env: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state_dir(&s).join("env-a")).expect("the finder recorded its env"),
    )
    .expect("json");
    for (k, _) in handles {
        assert!(env.get(k).is_none(), "{k} reached the agent: {env}");
    }
    for k in ["HOME", "PATH", "WORK_CONTAINMENT"] {
        assert!(env.get(k).is_some(), "{k} was taken from the agent: {env}");
    }
    // A command agent gets no key its `[agents]` table does not grant (the environment's
    // allowlist); a CLI backend gets its own (docs/agents.md, "Confinement").
    for k in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"] {
        assert!(env.get(k).is_none(), "{k} reached a command agent: {env}");
    }
}

/// A process outside `work`'s tree (here started by the test, as a tmux server or
/// `systemd-run --user` would start it for an agent): once armed by the round-1 finder, it
/// waits for the engine's gate-2 read of a.py — after the wave's read-only check — and then
/// deletes two of its three TODOs, between two waves.
const OUTSIDE: &str = r#"
import ctypes, ctypes.util, os, sys, time
target, armed, ready = sys.argv[1:4]
t0 = time.time()
while not os.path.exists(armed):
    if time.time() - t0 > 60:
        sys.exit(0)
    time.sleep(0.01)
libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
fd = libc.inotify_init1(0)
libc.inotify_add_watch(fd, target.encode(), 0x20)
open(ready, 'w').write('1')
os.read(fd, 4096)
open(target, 'w').write('def f():\n    # TODO one\n    pass\n\ndef g():\n    return 1\n\ndef h():\n    return 2\n')
"#;

fn todo_repo() -> Scenario {
    let s = Scenario::new();
    s.write("a.py", "def f():\n    # TODO one\n    pass\n\ndef g():\n    # TODO two\n    return 1\n\ndef h():\n    # TODO three\n    return 2\n");
    s.commit("three TODOs");
    s
}

/// Runs `work exhaust` over [`todo_repo`] with a finder that reports `a.py:2` in round 1
/// (after arming the outside process when `arm`) and nothing later.
fn todo_exhaust(s: &Scenario, arm: bool) -> serde_json::Value {
    let agent = s.agent(
        "todo.py",
        &format!(
            "if {arm} and ctx.get('round') == 1:\n    open(state_path('armed'), 'w').write('1')\n    while not os.path.exists(state_path('ready')):\n        time.sleep(0.01)\nitems = [{{'id': 'a.py:2', 'title': 'TODO one', 'location': 'a.py:2', 'evidence': '`# TODO one`'}}] if ctx.get('round') == 1 else []\nprint(json.dumps({{'angle': ctx['angle'], 'items': items}}))",
            arm = if arm { "True" } else { "False" }
        ),
    );
    let args = [
        "exhaust",
        "TODO markers",
        "-k",
        "2",
        "--angles",
        "a1,a2,a3,a4,a5,a6",
        "--concurrency",
        "1",
        "--final-oracle",
        "grep -Hn TODO a.py",
        "--agent",
        &agent,
        "--json",
    ];
    s.run_json(&args, 0)
}

/// The read-only check compared each wave's before and after only: a change between two waves
/// was never seen; every later wave was stable, the final oracle found nothing new, and the
/// run ended `k-consecutive-dry`, completeness `confirmed`, with one TODO of three. Each wave's
/// "before" is now compared with the previous wave's "after" (and the oracle's run too).
#[test]
fn exhaust_liar_whose_outside_process_edits_the_tree_between_waves_is_never_confirmed() {
    let s = todo_repo();
    std::fs::create_dir_all(state_dir(&s)).expect("state dir");
    #[expect(clippy::disallowed_methods, reason = "the test plays a process outside work's tree")]
    let mut outside = std::process::Command::new("python3")
        .args(["-c", OUTSIDE])
        .arg(s.path("a.py"))
        .arg(state_dir(&s).join("armed"))
        .arg(state_dir(&s).join("ready"))
        .spawn()
        .expect("start the outside process");
    let v = todo_exhaust(&s, true);
    let _ = outside.kill();
    let _ = outside.wait();
    assert!(!s.read("a.py").contains("TODO two"), "the outside process made its edit");
    assert_ne!(v["completeness"], "confirmed", "{v}");
    let gaps = v["completenessGaps"].to_string();
    assert!(gaps.contains("the tree changed while no finder ran") && gaps.contains("a.py"), "{v}");
}

/// Honest twin: the same finder and oracle, nothing outside: the oracle finds the two other
/// TODOs and the dry stop is confirmed (the engine's own writes between waves are not a change).
#[test]
fn exhaust_honest_twin_with_nothing_outside_is_confirmed_with_every_site() {
    let s = todo_repo();
    let v = todo_exhaust(&s, false);
    assert_eq!(v["completeness"], "confirmed", "{v}");
    let text = v.to_string();
    for loc in ["a.py:2", "a.py:6", "a.py:10"] {
        assert!(text.contains(loc), "{loc} missing: {v}");
    }
    assert!(!v["completenessGaps"].to_string().contains("no finder ran"), "{v}");
}
