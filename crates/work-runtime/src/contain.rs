//! Containment: nothing `work` starts outlives its dispatch, or `work` itself.
//!
//! Membership rests on the process tree, which an agent cannot rewrite, not on what it can
//! change about itself (an environment variable it can clear, a process group it can join):
//! - `work` is the child subreaper (`PR_SET_CHILD_SUBREAPER`) of everything it starts: a
//!   descendant that detaches (`setsid`, a double fork, a CLI running each tool command in its
//!   own session) is re-parented to `work`, not to init. So every process started in the tree
//!   stays a descendant of `work`, and a `/proc` walk of parent links finds it;
//! - a descendant is *in* a live dispatch when its chain of parents reaches that dispatch's
//!   main process (a direct child of `work` the spawner still waits for). Everything else that
//!   descends from `work` — an orphan re-parented to it, whatever that orphan started, anything
//!   below the watchdog — is a leftover. An orphan may still be *claimed* by a live dispatch
//!   (its `WORK_CONTAINMENT=<owner>/<n>` marker or its process group names one, the watchdog's
//!   group never does): a claim only keeps it until that dispatch ends, so it buys nothing a
//!   dispatch's own process would not have;
//! - every child gets `PR_SET_PDEATHSIG` = SIGKILL, so it dies with `work` even when `work` is
//!   SIGKILLed. The kernel sends it when the *thread* that started it dies, so every child is
//!   started from one thread that lives as long as the process (the forker). How it is set
//!   ([`DeathSignal`]) keeps a spawn from copying a large engine's page tables;
//! - the sweeps read `work`'s descendants and the processes started after the dispatch, never
//!   the rest of the machine (see `procs`);
//! - a watchdog (`sh`, its own group, no pdeathsig) holds a pipe from `work`; when `work` dies
//!   (however), the pipe ends and the watchdog kills every process group still registered,
//!   what carries this owner's marker, every process the sweeps saw running (pid and start
//!   time, so a reused pid is spared) and every member of its own group.
//!
//! After each process ends, [`end_dispatch`] ends what it left: its process group, every process
//! with its marker, and every leftover no live dispatch claims. At every exit of `work` (a
//! normal one included) [`end_all`] ends everything still descending from it. Each gets
//! SIGTERM, a grace period, then SIGKILL; orphans are reaped (no zombies).
//!
//! With the kernel sandbox ([`crate::sandbox`]) an agent's dispatch has a PID namespace of its
//! own: when its main process ends the kernel ends everything in it, whatever it did to
//! detach. For agents, then, the sweeps are the fallback's (`--isolation none`, no user
//! namespaces); they still hold in both modes for what `work` runs unconfined — the checks,
//! gates and oracles, which are the project's own code.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

mod procs;
use procs::{Reader, Stat};

/// The environment variable that names the dispatch a process belongs to.
pub const OWNER_VAR: &str = "WORK_CONTAINMENT";

/// Environment variables that hand a process to a spawner outside `work`'s tree: a terminal
/// multiplexer or terminal whose server starts a command as its own child (`tmux new-window`,
/// `screen -X screen`, `zellij run`, `kitty @ launch`, `wezterm cli spawn`, a Neovim server's
/// `:terminal`). They are removed from every process `work` starts. Prefixes end in `*`.
pub const DAEMON_HANDLES: &[&str] = &[
    "TMUX",
    "TMUX_PANE",
    "STY",
    "ZELLIJ*",
    "KITTY_LISTEN_ON",
    "KITTY_WINDOW_ID",
    "WEZTERM_UNIX_SOCKET",
    "WEZTERM_PANE",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
];

/// The variables of `work`'s own environment that [`DAEMON_HANDLES`] names.
pub fn daemon_handles() -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| {
            let k = k.to_string_lossy();
            DAEMON_HANDLES.iter().any(|h| match h.strip_suffix('*') {
                Some(prefix) => k.starts_with(prefix),
                None => k == *h,
            })
        })
        .collect()
}

/// How long a process has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_millis(500);

/// A child started by the spawner and not yet ended.
#[derive(Debug, Clone)]
struct Tracked {
    pgid: i32,
    marker: String,
}

/// Direct children of `work` still running (pid → group and marker). The lock is held while a
/// child is forked and registered, and while orphans are chosen, so a child just forked is
/// never mistaken for an orphan.
static TRACKED: Mutex<BTreeMap<i32, Tracked>> = Mutex::new(BTreeMap::new());

/// Each dispatch's marker ⇒ its main process (pid, start time in clock ticks after boot): no
/// process that started earlier can carry the marker. Kept until the dispatch's sweep is done.
static STARTED: Mutex<BTreeMap<String, (i32, u64)>> = Mutex::new(BTreeMap::new());

type Job = Box<dyn FnOnce() + Send>;

struct Shared {
    owner: String,
    /// `work` is its descendants' subreaper: nothing it starts can leave its tree.
    subreaper: bool,
    forker: Option<std::sync::mpsc::Sender<Job>>,
    watchdog: Option<Mutex<std::process::ChildStdin>>,
    watchdog_pid: Option<i32>,
    next: std::sync::atomic::AtomicU64,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

fn shared() -> &'static Shared {
    SHARED.get_or_init(|| {
        // Not fatal where unsupported: containment then falls back to groups and markers.
        let subreaper = nix::sys::prctl::set_child_subreaper(true).is_ok();
        let nanos = crate::clock::nonce_nanos();
        let owner = format!("{}-{nanos}", std::process::id());
        let (watchdog, watchdog_pid) = match start_watchdog(&owner) {
            Some((stdin, pid)) => (Some(Mutex::new(stdin)), Some(pid)),
            None => (None, None),
        };
        Shared { owner, subreaper, forker: start_forker(), watchdog, watchdog_pid, next: Default::default() }
    })
}

/// A fresh marker value for one process (`<owner>/<n>`).
pub fn new_marker() -> String {
    let s = shared();
    let n = s.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    format!("{}/{n}", s.owner)
}

fn start_forker() -> Option<std::sync::mpsc::Sender<Job>> {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("work-forker".into())
        .spawn(move || {
            // Lives as long as the process: the parent-death signal is tied to this thread.
            while let Ok(job) = rx.recv() {
                job();
            }
        })
        .ok()?;
    Some(tx)
}

/// `+ G` / `- G` register and forget a process group; `p PID START` names a process a sweep
/// saw running (killed only while `/proc/PID/stat` still shows that start time).
const WATCHDOG: &str = r#"owner="$1"; groups=""; seen=""
while read -r op g s; do
  case "$op" in
    +) groups="$groups $g" ;;
    -) keep=""; for x in $groups; do [ "$x" = "$g" ] || keep="$keep $x"; done; groups="$keep" ;;
    p) seen="$seen $g:$s" ;;
  esac
done
for round in 1 2 3 4 5 6; do
  for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
  for e in $seen; do
    { read -r st < "/proc/${e%%:*}/stat"; } 2>/dev/null || continue
    set -- ${st##*") "}
    [ "${20}" = "${e#*:}" ] && kill -KILL "${e%%:*}" 2>/dev/null
  done
  pids=$(grep -lzsE "^WORK_CONTAINMENT=$owner(/|\$)" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3)
  [ -z "$pids" ] && [ "$round" -gt 1 ] && break
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  sleep 0.1
done
kill -s KILL -- "-$$"
"#;

fn start_watchdog(owner: &str) -> Option<(std::process::ChildStdin, i32)> {
    use std::os::unix::process::CommandExt;
    #[expect(clippy::disallowed_methods, reason = "the containment watchdog is started by the runtime itself")]
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", WATCHDOG, "work-watchdog", owner])
        .env_remove(OWNER_VAR)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .current_dir("/")
        .process_group(0);
    let mut child = cmd.spawn().ok()?;
    let pid = i32::try_from(child.id()).ok()?;
    let stdin = child.stdin.take()?;
    // Never waited for: it outlives `work` on purpose. Not tracked: its group is never a live
    // dispatch's, and [`targets`] knows it by its pid.
    std::mem::forget(child);
    Some((stdin, pid))
}

fn tell_watchdog(line: &str) {
    if let Some(w) = shared().watchdog.as_ref()
        && let Ok(mut w) = w.lock()
    {
        let _ = writeln!(w, "{line}");
    }
}

/// How a child started outside the kernel sandbox gets its parent-death signal. (In the
/// sandbox, `bwrap --die-with-parent` sets it, and the sandbox's PID namespace ends the rest.)
#[derive(Debug, Clone, Copy)]
pub(crate) enum DeathSignal {
    /// Set in the forked child before it execs ([`arm`]): a closure run before exec makes std
    /// fork the whole engine, whose page tables grow with its memory.
    Forked,
    /// Set by `setpriv --pdeathsig KILL -- PROGRAM ARGS…`, which then execs the program: std
    /// starts it with `posix_spawn` (a `vfork`-style clone), whose cost does not grow with the
    /// engine's memory; the exec of `setpriv` costs about 1 ms of CPU in the child.
    Shim(&'static std::path::Path),
}

/// Above this resident size, a fork of the engine costs more than the exec of the shim.
const SHIM_ABOVE_BYTES: u64 = 32 << 20;

/// How the next child outside the sandbox gets its death signal: forked while the engine is
/// small, through `setpriv` once forking it costs more (when `setpriv` has `--pdeathsig`).
/// `WORK_TEST_SPAWN_SHIM=1` (tests only) takes the shim whatever the size.
pub(crate) fn death_signal() -> DeathSignal {
    static FORCED: OnceLock<bool> = OnceLock::new();
    let forced = *FORCED.get_or_init(|| std::env::var_os("WORK_TEST_SPAWN_SHIM").is_some_and(|v| v == "1"));
    match setpriv() {
        Some(shim) if forced || resident_bytes().is_some_and(|b| b > SHIM_ABOVE_BYTES) => DeathSignal::Shim(shim),
        _ => DeathSignal::Forked,
    }
}

/// The engine's resident size (`/proc/self/statm`).
fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// `setpriv` (util-linux) when it has `--pdeathsig` (2.33 and later), found once.
fn setpriv() -> Option<&'static std::path::Path> {
    static FOUND: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let path = std::env::var_os("PATH")?;
            let found = std::env::split_paths(&path).map(|d| d.join("setpriv")).find(|p| p.is_file())?;
            #[expect(clippy::disallowed_methods, reason = "probes the runtime's own spawn shim once")]
            let help = std::process::Command::new(&found)
                .arg("--help")
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .ok()?;
            String::from_utf8_lossy(&help.stdout).contains("--pdeathsig").then_some(found)
        })
        .as_deref()
}

/// Arms a child: it gets SIGKILL when `work` dies, and refuses to start if `work` already did.
#[allow(unsafe_code)]
pub(crate) fn arm(cmd: &mut tokio::process::Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec. It calls only prctl(2) and
    // getppid(2), which are async-signal-safe system calls; it allocates nothing, takes no lock
    // and touches no state shared with other threads of the parent.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
            if nix::unistd::getppid() != parent {
                // `work` died between the fork and the prctl: do not start an orphan.
                return Err(std::io::Error::from_raw_os_error(nix::errno::Errno::ESRCH as i32));
            }
            Ok(())
        });
    }
}

/// Forks `cmd` on the forker thread (inside the caller's runtime) and registers the child.
pub(crate) async fn spawn_tracked(
    mut cmd: tokio::process::Command,
    marker: String,
) -> std::io::Result<tokio::process::Child> {
    let sh = shared();
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = move || {
        let _entered = handle.enter();
        let mut tracked = TRACKED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let r = cmd.spawn();
        if let Ok(child) = &r
            && let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok())
        {
            if let (Some(st), Ok(mut started)) = (procs::stat(Reader::Spawn, pid), STARTED.lock()) {
                started.insert(marker.clone(), (pid, st.start));
            }
            tracked.insert(pid, Tracked { pgid: pid, marker });
            drop(tracked);
            tell_watchdog(&format!("+ {pid}"));
        }
        let _ = tx.send(r);
    };
    match &sh.forker {
        Some(f) => {
            f.send(Box::new(job)).map_err(|_| std::io::Error::other("the forker thread is gone"))?;
        }
        None => job(),
    }
    rx.await.map_err(|_| std::io::Error::other("the forker thread dropped a spawn"))?
}

fn marker_of(pid: i32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{OWNER_VAR}=");
    env.split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// What to end: processes and process groups; and what a dispatch's sweep let run.
#[derive(Debug, Default)]
struct Targets {
    pids: BTreeSet<i32>,
    groups: BTreeSet<i32>,
    /// Descendants of `work` left running that the watchdog would not find by their group or
    /// marker (pid, start time): it is told of them.
    spared: Vec<(i32, u64)>,
    /// Exited children of `work` the spawner does not wait for: reaped by the sweep.
    zombies: Vec<i32>,
}

impl Targets {
    fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.groups.is_empty()
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        use nix::unistd::Pid;
        for &g in &self.groups {
            let _ = nix::sys::signal::killpg(Pid::from_raw(g), sig);
        }
        for &p in &self.pids {
            let _ = nix::sys::signal::kill(Pid::from_raw(p), sig);
        }
    }
}

/// Which processes a cleanup ends.
#[derive(Debug, Clone)]
enum Scope {
    /// One ended dispatch: its group, its marker, and every leftover no live dispatch claims.
    Dispatch { pgid: i32, marker: String },
    /// Everything `work` started (at every exit of `work`, SIGINT/SIGTERM included).
    All,
}

/// Where a process stands in `work`'s tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Not a descendant of `work` (or its chain could not be read).
    Outside,
    /// In the tree of a dispatch whose main process still runs.
    Live,
    /// The watchdog's descendant: the watchdog starts nothing while `work` runs.
    UnderWatchdog,
    /// Re-parented to `work` (the orphan heading its chain is given), or below such an orphan.
    Orphan(i32),
}

/// Walks `pid`'s parents (as `/proc` showed them at this sweep) up to `work`.
fn place(
    pid: i32,
    procs: &BTreeMap<i32, Stat>,
    me: i32,
    tracked: &BTreeMap<i32, Tracked>,
    watchdog: Option<i32>,
) -> Place {
    let mut cur = pid;
    // Bounded: a chain read while processes exit could in principle loop.
    for _ in 0..procs.len() + 1 {
        let Some(st) = procs.get(&cur) else { return Place::Outside };
        if st.ppid == me {
            return if tracked.contains_key(&cur) {
                Place::Live
            } else if Some(cur) == watchdog {
                Place::UnderWatchdog
            } else {
                Place::Orphan(cur)
            };
        }
        if st.ppid <= 1 {
            return Place::Outside;
        }
        cur = st.ppid;
    }
    Place::Outside
}

/// The processes a sweep of `scope` reads, and the start time (clock ticks after boot) from
/// which a process outside `work`'s tree has its environment (marker) read.
///
/// Where `work` is its descendants' subreaper and the kernel lists each task's children, these
/// are `work`'s descendants and the processes started after the ended dispatch's main process
/// (after the watchdog at `work`'s exit): a process outside the tree can carry a marker only
/// when a daemon started it with the dispatch's environment, after the dispatch started. The
/// rest of the machine is not read. Otherwise every process is read; at `work`'s exit, or
/// without the subreaper (a process can then leave the tree), every environment is read too.
fn read_procs(scope: &Scope, sh: &Shared, me: i32) -> (BTreeMap<i32, Stat>, u64) {
    let (reader, after) = match scope {
        Scope::All => (Reader::Exit, sh.watchdog_pid.map(|p| (p, 0))),
        Scope::Dispatch { marker, .. } => (Reader::Dispatch, STARTED.lock().ok().and_then(|s| s.get(marker).copied())),
    };
    if sh.subreaper
        && procs::children_listed()
        && let Some((after, since)) = after
        && let Some(started) = procs::pids_after(after)
    {
        let mut found = procs::descendants(reader, me);
        for pid in started {
            if !found.contains_key(&pid)
                && let Some(st) = procs::stat(reader, pid)
            {
                found.insert(pid, st);
            }
        }
        return (found, since);
    }
    let since = match (scope, after) {
        (Scope::Dispatch { .. }, Some((_, since))) if sh.subreaper => since,
        _ => 0,
    };
    (procs::every_process(reader), since)
}

/// Chooses what is still running in `scope` (zombies excluded; they are reaped, not killed).
///
/// One read of each process's `/proc/PID/stat` that [`read_procs`] looks at builds the tree;
/// environments (markers) are read for `work`'s descendants, and outside the tree (a daemon
/// started the process with the dispatch's environment) only for processes that started after
/// the ended dispatch did: no earlier one can carry its marker.
fn targets(scope: &Scope) -> Targets {
    let me = std::process::id() as i32;
    let sh = shared();
    let owner_prefix = format!("{}/", sh.owner);
    // The processes first, then what is tracked: a child forked in between is then both listed
    // and tracked (the spawner holds the lock from its fork until it is registered), never
    // taken for an orphan and killed as it starts.
    let (procs, outside_since) = read_procs(scope, sh, me);
    let tracked = TRACKED.lock().map(|t| t.clone()).unwrap_or_default();
    let watchdog = sh.watchdog_pid;
    let live_markers: BTreeSet<&str> = tracked.values().map(|t| t.marker.as_str()).collect();
    let live_groups: BTreeSet<i32> = tracked.values().map(|t| t.pgid).collect();
    let mut out = Targets::default();
    let wanted_groups: BTreeSet<i32> = match scope {
        Scope::Dispatch { pgid, .. } => BTreeSet::from([*pgid]),
        Scope::All => live_groups.clone(),
    };
    // An orphan is claimed when its marker or its group names a live dispatch (other than
    // the one that ended): it is ended with that dispatch, or at `work`'s exit.
    let claimed = |orphan: i32| {
        let Some(st) = procs.get(&orphan) else { return false };
        let mine = match scope {
            Scope::Dispatch { marker, .. } => marker.as_str(),
            Scope::All => return false,
        };
        live_groups.contains(&st.pgrp)
            || marker_of(orphan).is_some_and(|m| m != mine && live_markers.contains(m.as_str()))
    };
    for st in procs.values() {
        if matches!(st.state, 'Z' | 'X') {
            if st.ppid == me && !tracked.contains_key(&st.pid) {
                out.zombies.push(st.pid);
            }
            continue;
        }
        if st.pid == me || Some(st.pid) == watchdog {
            continue;
        }
        if wanted_groups.contains(&st.pgrp) {
            out.groups.insert(st.pgrp);
        }
        let at = place(st.pid, &procs, me, &tracked, watchdog);
        let marker = if at != Place::Outside || st.start >= outside_since { marker_of(st.pid) } else { None };
        let take = match scope {
            Scope::All => at != Place::Outside || marker.as_deref().is_some_and(|m| m.starts_with(&owner_prefix)),
            Scope::Dispatch { marker: mine, .. } => {
                marker.as_deref() == Some(mine.as_str())
                    || match at {
                        Place::Outside | Place::Live => false,
                        Place::UnderWatchdog => true,
                        Place::Orphan(head) => !claimed(head),
                    }
            }
        };
        // The watchdog finds a live group's members and the owner's marker holders itself.
        let found_anyway =
            live_groups.contains(&st.pgrp) || marker.as_deref().is_some_and(|m| m.starts_with(&owner_prefix));
        if take {
            out.pids.insert(st.pid);
        } else if at != Place::Outside && !found_anyway {
            out.spared.push((st.pid, st.start));
        }
    }
    out
}

/// Processes already named to the watchdog (pid, start time).
static REPORTED: Mutex<BTreeSet<(i32, u64)>> = Mutex::new(BTreeSet::new());

/// Names to the watchdog each descendant a sweep left running, once: should `work` die by
/// SIGKILL, the watchdog ends it even when it left every group and cleared its marker.
fn report_to_watchdog(spared: &[(i32, u64)]) {
    let fresh: Vec<(i32, u64)> = {
        let Ok(mut seen) = REPORTED.lock() else { return };
        spared.iter().copied().filter(|p| seen.insert(*p)).collect()
    };
    for (pid, start) in fresh {
        tell_watchdog(&format!("p {pid} {start}"));
    }
}

/// Reaps exited children of `work` a sweep listed (the spawner does not wait for them).
fn reap(zombies: &[i32]) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    for &pid in zombies {
        let _ = waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
    }
}

/// SIGTERM, up to [`GRACE`] for it to work, then SIGKILL until nothing in scope runs (bounded).
/// Each round reads the processes once: what to signal and what to reap.
fn terminate(scope: &Scope) {
    use nix::sys::signal::Signal;
    let started = Instant::now();
    let mut t = targets(scope);
    report_to_watchdog(&t.spared);
    reap(&t.zombies);
    if t.is_empty() {
        return;
    }
    t.signal(Signal::SIGTERM);
    while started.elapsed() < GRACE {
        std::thread::sleep(Duration::from_millis(10));
        t = targets(scope);
        reap(&t.zombies);
        if t.is_empty() {
            return;
        }
        // A process started after the first round also gets its SIGTERM.
        t.signal(Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while !t.is_empty() && Instant::now() < deadline {
        t.signal(Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(10));
        t = targets(scope);
        reap(&t.zombies);
    }
}

/// Forgets a child the spawner has waited for (or given up on).
pub(crate) fn untrack(pid: i32) {
    if let Ok(mut t) = TRACKED.lock() {
        t.remove(&pid);
    }
    tell_watchdog(&format!("- {pid}"));
}

/// Ends what a dispatch left behind once its main process has ended: its group, every process
/// with its marker, every unclaimed re-parented orphan (SIGTERM, grace, SIGKILL), and reaps.
pub(crate) async fn end_dispatch(pgid: i32, marker: String) {
    let scope = Scope::Dispatch { pgid, marker: marker.clone() };
    let _ = tokio::task::spawn_blocking(move || terminate(&scope)).await;
    forget_start(&marker);
}

/// Forgets when a dispatch's main process started: its sweep is done, or will not run (the
/// future that ran it was dropped; the next sweep ends what it left as an orphan).
pub(crate) fn forget_start(marker: &str) {
    if let Ok(mut started) = STARTED.lock() {
        started.remove(marker);
    }
}

/// Ends everything `work` started (SIGTERM, grace, SIGKILL) and reaps it: for SIGINT/SIGTERM.
pub fn end_all() {
    if SHARED.get().is_none() {
        return;
    }
    terminate(&Scope::All);
}

/// A process group signalled directly (a timeout, before the main process is waited for).
pub(crate) fn signal_group(pgid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), sig);
}
