//! Confinement: the kernel sandbox every agent dispatch runs in.
//!
//! An agent runs as the user, so what the engine cannot *refuse* it can only detect afterwards.
//! Where the kernel allows unprivileged user namespaces, every process started with a
//! [`Confine`] runs inside `bwrap` (bubblewrap, the sandbox Flatpak and Codex use), which sets
//! up, before the agent's program starts:
//!
//! - a user, mount, PID, IPC and UTS namespace; every capability dropped; a new session;
//! - the whole file system read-only (`$HOME` included), a fresh `/dev` and `/proc`, a private
//!   writable `/tmp` (a directory of the engine's, removed after the dispatch), an empty `/run`
//!   and `/dev/shm` (no user bus, no `ssh-agent`, no container socket, no `/run/user`, no
//!   tmux or screen socket: those live under `/tmp` and `/run`);
//! - write roles ([`Confine::write`]): the repository root writable, except every path
//!   [`protect`]ed for the run (the frozen checks, read only); its `.git` replaced by a private
//!   git directory made for the dispatch ([`git::GitScratch`]): a confined agent's commits land
//!   there and are discarded, what is judged is the working tree against the run's base, and the
//!   user's branch never moves;
//! - the state directory ([`configure`]) replaced by an empty read-only directory: not visible;
//! - [`Network::None`]: a network namespace of its own with only loopback (command agents);
//!   [`Network::Host`]: the host's network (the CLI backends reach their model endpoint);
//! - when the dispatch's main process ends, the kernel ends every process of its PID namespace,
//!   whatever they did to detach (`--die-with-parent` when `work` itself dies). The agent's
//!   program is that namespace's PID 1 (`--as-pid-1`): no reaper process of `bwrap`'s between.
//!
//! What each part costs per dispatch is measured in docs/performance.md.
//!
//! The environment is built from an allowlist ([`BASE_ENV`], the protocol's `WORK_*`
//! variables, and only the names the backend asks for: [`Confine::env_allow`]), in every mode:
//! a key the agent never sees it cannot leak.
//!
//! Where no sandbox can be had ([`Mode::Detection`]), confined processes run as before with the
//! environment allowlist, and the engine's after-the-fact checks are what holds; `--isolation
//! required` refuses to start instead ([`SandboxError::Required`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

pub mod git;

/// How a run asks for the sandbox (`--isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// The sandbox where the platform has it; today's detection (said in one line) where not.
    #[default]
    Auto,
    /// The sandbox, or the run refuses to start.
    Required,
    /// No sandbox: detection only.
    None,
}

impl Isolation {
    /// The canonical names, in order.
    pub const NAMES: [&'static str; 3] = ["auto", "required", "none"];

    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Auto => "auto",
            Isolation::Required => "required",
            Isolation::None => "none",
        }
    }
}

impl std::str::FromStr for Isolation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Isolation::Auto),
            "required" => Ok(Isolation::Required),
            "none" => Ok(Isolation::None),
            other => Err(crate::suggest::unknown("isolation", other, "--isolation", &Isolation::NAMES)),
        }
    }
}

/// What confinement this process gives the processes it confines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// The kernel sandbox, through this `bwrap`.
    Kernel {
        /// The bubblewrap binary.
        bwrap: PathBuf,
    },
    /// No sandbox; why (the line printed at the start of a run).
    Detection {
        /// Why there is none (`--isolation none`, no `bwrap`, user namespaces refused, …).
        reason: String,
    },
}

impl Mode {
    /// True for the kernel sandbox.
    pub fn is_kernel(&self) -> bool {
        matches!(self, Mode::Kernel { .. })
    }

    /// One line for a person: what confines the agents here.
    pub fn describe(&self) -> String {
        match self {
            Mode::Kernel { bwrap } => format!("agents run in a kernel sandbox ({})", bwrap.display()),
            Mode::Detection { reason } => {
                format!("agents run without a sandbox ({reason}); what they do is checked after each dispatch")
            }
        }
    }
}

/// Why the sandbox could not be set up as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// `--isolation required` where the platform gives no sandbox.
    #[error("start a sandbox (--isolation required): {0}")]
    Required(String),
}

/// Whether a confined process reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// A network namespace of its own: loopback only (its own, not the host's).
    None,
    /// The host's network (a CLI backend talks to its model endpoint).
    Host,
}

/// How one process is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confine {
    /// The repository root.
    pub root: PathBuf,
    /// The root is writable (a write role), except `.git` and the protected paths.
    pub write: bool,
    /// The network.
    pub network: Network,
    /// Directories bound writable at their own path (a CLI's private state directory).
    pub private: Vec<PathBuf>,
    /// Environment names this process gets beyond [`BASE_ENV`] (exact, or a prefix ending in
    /// `*`), from the parent's environment.
    pub env_allow: Vec<String>,
}

impl Confine {
    /// A read-only role in `root`: nothing writable but its private `/tmp`.
    pub fn read_only(root: &Path, network: Network) -> Self {
        Self { root: root.to_path_buf(), write: false, network, private: Vec::new(), env_allow: Vec::new() }
    }

    /// A write role in `root`: the working tree writable, `.git` and the protected paths not.
    pub fn write(root: &Path, network: Network) -> Self {
        Self { write: true, ..Self::read_only(root, network) }
    }

    /// Adds environment names the process gets.
    pub fn allow_env<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.env_allow.extend(names.into_iter().map(Into::into));
        self
    }
}

/// The variables every confined process may get from the parent's environment (prefixes end
/// in `*`): the locale, where programs are, who and where the user is, the terminal's kind.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "TMPDIR", "NO_COLOR",
    "WORK_*",
];

/// Variables a backend that talks to the network needs to go through the user's proxy.
pub const PROXY_ENV: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

fn allowed(name: &str, patterns: &[&str]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == *p,
    })
}

/// The environment a confined process starts with: the parent's variables that [`BASE_ENV`]
/// or `extra` allows (never a daemon handle, never the containment marker).
pub fn allowed_env(extra: &[String]) -> Vec<(OsString, OsString)> {
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    std::env::vars_os()
        .filter(|(k, _)| {
            let Some(k) = k.to_str() else { return false };
            k != crate::contain::OWNER_VAR && (allowed(k, BASE_ENV) || allowed(k, &extra))
        })
        .collect()
}

/// The variable that names directories every confined agent may write (`:`-separated absolute
/// paths; the user's own grant, never the repository's: `work.toml` cannot set it).
pub const WRITABLE_VAR: &str = "WORK_SANDBOX_WRITABLE";

static MODE: OnceLock<Mode> = OnceLock::new();

/// How the run asked for the sandbox ([`configure`]; `auto` when never configured).
static ASKED: OnceLock<Isolation> = OnceLock::new();

/// How the run asked for the sandbox: a run says it has none only when it asked for `auto`.
pub fn asked() -> Isolation {
    ASKED.get().copied().unwrap_or_default()
}

/// Whether this run configured the sandbox ([`configure`]) and has it: every agent's write
/// outside the repository is then refused by the kernel, so what only detects such writes
/// afterwards is the fallback's and is not paid for (nor does it take a change someone else
/// makes there for the agent's).
pub fn run_is_confined() -> bool {
    ASKED.get().is_some() && MODE.get().is_some_and(Mode::is_kernel)
}

/// Paths no agent sees (the state directory), set by [`configure`].
static HIDDEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Paths a write role may not change during this run (the frozen checks), read-only inside.
static PROTECTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Directories every confined agent may write ([`WRITABLE_VAR`]).
fn writable() -> Vec<PathBuf> {
    std::env::var_os(WRITABLE_VAR)
        .map(|v| std::env::split_paths(&v).filter(|p| p.is_absolute() && p.is_dir()).collect())
        .unwrap_or_default()
}

/// Sets how this process confines agents, before the first dispatch: `isolation` as asked,
/// `hidden` the directories no agent may see (the state directory). The mode is decided once
/// (a later call keeps the first answer).
pub fn configure(isolation: Isolation, hidden: Vec<PathBuf>) -> Result<&'static Mode, SandboxError> {
    if let Ok(mut h) = HIDDEN.lock() {
        *h = hidden;
    }
    let _ = ASKED.set(isolation);
    let mode = MODE.get_or_init(|| match isolation {
        Isolation::None => Mode::Detection { reason: "--isolation none".into() },
        Isolation::Auto | Isolation::Required => probe(),
    });
    match (mode, isolation) {
        (Mode::Detection { reason }, Isolation::Required) => Err(SandboxError::Required(reason.clone())),
        (mode, _) => Ok(mode),
    }
}

/// The mode this process confines with ([`configure`]d, else probed once).
pub fn mode() -> &'static Mode {
    MODE.get_or_init(probe)
}

fn hidden() -> Vec<PathBuf> {
    HIDDEN.lock().map(|h| h.clone()).unwrap_or_default()
}

/// Makes `paths` read-only for every later write role of this run (a frozen check script,
/// a runner's configuration): an honest agent gets `EROFS` at once.
pub fn protect<I: IntoIterator<Item = PathBuf>>(paths: I) {
    if let Ok(mut p) = PROTECTED.lock() {
        for path in paths {
            if !p.contains(&path) {
                p.push(path);
            }
        }
    }
}

/// The paths [`protect`]ed so far.
pub fn protected() -> Vec<PathBuf> {
    PROTECTED.lock().map(|p| p.clone()).unwrap_or_default()
}

/// Whether the platform gives the sandbox: `bwrap` on `PATH` that can set up the namespaces.
pub fn probe() -> Mode {
    if !cfg!(target_os = "linux") {
        return Mode::Detection { reason: "no sandbox on this platform yet".into() };
    }
    let Some(bwrap) = find_on_path("bwrap") else {
        return Mode::Detection { reason: "`bwrap` not found: install bubblewrap".into() };
    };
    let mut args = vec!["--unshare-all".into(), "--die-with-parent".into(), "--cap-drop".into(), "ALL".into()];
    args.extend(["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"].map(OsString::from));
    #[expect(clippy::disallowed_methods, reason = "the sandbox's one probe, before any dispatch")]
    let out = std::process::Command::new(&bwrap)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    match out {
        Ok(o) if o.status.success() => Mode::Kernel { bwrap },
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let err = err.lines().next().unwrap_or("").trim();
            Mode::Detection { reason: format!("bwrap cannot set up namespaces here: {err}") }
        }
        Err(e) => Mode::Detection { reason: format!("run bwrap: {e}") },
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(program))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// The directories a confined process gets private, empty copies of.
const PRIVATE_MOUNTS: [&str; 3] = ["/tmp", "/run", "/dev/shm"];

/// Whether the sandbox replaces what is at `path` (a private mount, or the fresh `/dev` and
/// `/proc`): only there must the root be bound again to stay visible.
fn replaced(path: &Path) -> bool {
    PRIVATE_MOUNTS.iter().chain(&["/dev", "/proc"]).any(|m| path.starts_with(m))
}

/// What of `named` (the program and arguments an agent's command line gives) the private mounts
/// would hide from it: a regular file under `/tmp`, `/run` or `/dev/shm` (by its real path) and
/// outside the root. Bound read-only, so `command:/tmp/x/finder.sh` runs confined as it runs
/// unconfined. Only regular files: a directory or a socket named there (a repository's
/// `work.toml` can write that command line) would hand the agent what the private mounts hide —
/// a tmux or `ssh-agent` socket.
fn named_paths<'a>(c: &Confine, named: impl IntoIterator<Item = &'a str>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for n in named {
        let p = Path::new(n);
        if !p.is_absolute() {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(p) else { continue };
        let hidden = PRIVATE_MOUNTS.iter().any(|m| real.starts_with(m));
        let file = std::fs::metadata(&real).is_ok_and(|m| m.is_file());
        if hidden && file && !real.starts_with(&c.root) && !out.contains(&real) {
            out.push(real);
        }
    }
    out
}

/// The `bwrap` arguments (before `--` and the program) that confine a process as `c` says,
/// with `tmp` as its private `/tmp`, `cwd` its working directory, `named` its program and
/// arguments, and `git` a write role's private git directory ([`git::GitScratch`]).
///
/// Each bind costs `bwrap` a read of the whole mount table (to set its flags), so nothing is
/// bound that is already there as it must be: `--dev` gives `/dev/shm` as an empty directory of
/// its own `tmpfs`, and a read-only role's root is read-only through `/` unless it lies where
/// the sandbox replaces what the host has.
pub fn bwrap_args<'a>(
    c: &Confine,
    tmp: &Path,
    cwd: &Path,
    named: impl IntoIterator<Item = &'a str>,
    git: Option<&git::GitScratch>,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |xs: &[&std::ffi::OsStr]| a.extend(xs.iter().map(|x| x.to_os_string()));
    push(&["--unshare-user".as_ref(), "--unshare-pid".as_ref(), "--unshare-ipc".as_ref(), "--unshare-uts".as_ref()]);
    push(&["--unshare-cgroup-try".as_ref(), "--die-with-parent".as_ref(), "--new-session".as_ref()]);
    push(&["--as-pid-1".as_ref()]);
    push(&["--cap-drop".as_ref(), "ALL".as_ref()]);
    if c.network == Network::None {
        push(&["--unshare-net".as_ref()]);
    }
    push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
    push(&["--dev".as_ref(), "/dev".as_ref(), "--proc".as_ref(), "/proc".as_ref()]);
    push(&["--tmpfs".as_ref(), "/run".as_ref()]);
    push(&["--bind".as_ref(), tmp.as_os_str(), "/tmp".as_ref()]);
    for p in named_paths(c, named) {
        push(&["--ro-bind".as_ref(), p.as_os_str(), p.as_os_str()]);
    }
    // The root again, after `/tmp`: a repository under `/tmp` stays visible.
    if c.write || replaced(&c.root) {
        let bind = if c.write { "--bind" } else { "--ro-bind" };
        push(&[bind.as_ref(), c.root.as_os_str(), c.root.as_os_str()]);
    }
    if c.write {
        let git = git::binds(&c.root, git);
        push(&git.iter().map(OsString::as_os_str).collect::<Vec<_>>());
        for p in protected() {
            if p.starts_with(&c.root) && p.symlink_metadata().is_ok() {
                push(&["--ro-bind".as_ref(), p.as_os_str(), p.as_os_str()]);
            }
        }
    }
    for p in c.private.iter().chain(&writable()) {
        push(&["--bind".as_ref(), p.as_os_str(), p.as_os_str()]);
    }
    for h in hidden() {
        if h.is_dir() && !c.private.iter().any(|p| p.starts_with(&h)) {
            push(&["--tmpfs".as_ref(), h.as_os_str(), "--remount-ro".as_ref(), h.as_os_str()]);
        }
    }
    push(&["--chdir".as_ref(), cwd.as_os_str()]);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_names_parse_and_a_typo_is_refused_with_a_suggestion() {
        for n in Isolation::NAMES {
            assert_eq!(n.parse::<Isolation>().map(Isolation::as_str), Ok(n));
        }
        let err = "requierd".parse::<Isolation>().expect_err("a typo");
        assert!(err.contains("did you mean `required`"), "{err}");
    }

    #[test]
    fn the_allowlist_takes_exact_names_and_prefixes() {
        assert!(allowed("LC_ALL", BASE_ENV) && allowed("WORK_ROLE", BASE_ENV) && allowed("PATH", BASE_ENV));
        assert!(!allowed("ANTHROPIC_API_KEY", BASE_ENV) && !allowed("PATHX", BASE_ENV));
        assert!(allowed("ANTHROPIC_API_KEY", &["ANTHROPIC_*"]));
    }

    fn args_of(c: &Confine) -> Vec<String> {
        bwrap_args(c, Path::new("/t"), &c.root, [], None).iter().map(|a| a.to_string_lossy().into()).collect()
    }

    #[test]
    fn a_read_only_role_gets_no_writable_bind_of_the_root() {
        let args = args_of(&Confine::read_only(Path::new("/repo"), Network::None));
        let binds: Vec<&[String]> = args.windows(3).filter(|w| w[0] == "--bind").collect();
        assert_eq!(binds, [["--bind", "/t", "/tmp"]], "only the private /tmp is writable: {args:?}");
        assert!(args.windows(3).any(|w| w == ["--ro-bind", "/", "/"]), "the root is read-only through /: {args:?}");
        assert!(!args.windows(2).any(|w| w[0].ends_with("bind") && w[1] == "/repo"), "nor bound again: {args:?}");
        assert!(args.contains(&"--unshare-net".to_string()) && args.contains(&"ALL".to_string()));

        // A repository under a private mount is bound again, read-only, after that mount.
        let args = args_of(&Confine::read_only(Path::new("/tmp/repo"), Network::None));
        let tmp = args.windows(3).position(|w| w == ["--bind", "/t", "/tmp"]).expect("a private /tmp");
        let root = args.windows(3).position(|w| w == ["--ro-bind", "/tmp/repo", "/tmp/repo"]).expect("the root");
        assert!(root > tmp, "the root is bound after /tmp, so a repository under /tmp stays visible: {args:?}");
    }

    #[test]
    fn a_write_role_binds_its_root_writable_and_the_dev_shm_of_dev_is_not_mounted_again() {
        let args = args_of(&Confine::write(Path::new("/repo"), Network::Host));
        assert!(args.windows(3).any(|w| w == ["--bind", "/repo", "/repo"]), "{args:?}");
        assert!(!args.iter().any(|a| a == "--unshare-net"), "the host's network: {args:?}");
        assert!(args.windows(2).any(|w| w == ["--dev", "/dev"]), "{args:?}");
        assert!(!args.iter().any(|a| a == "/dev/shm"), "`--dev` gives an empty /dev/shm of its own: {args:?}");
    }

    #[test]
    fn an_agent_program_the_private_tmp_would_hide_stays_visible_read_only() {
        let dir = tempfile::tempdir_in("/tmp").expect("tempdir");
        let prog = dir.path().join("finder.sh");
        std::fs::write(&prog, "#!/bin/sh\n").expect("write");
        let root = tempfile::tempdir_in("/tmp").expect("root");
        let c = Confine::read_only(root.path(), Network::None);
        let prog = prog.to_string_lossy().into_owned();
        let inside = root.path().join("x").to_string_lossy().into_owned();
        let named = named_paths(&c, [prog.as_str(), "python3", "/usr/bin/env", inside.as_str(), "/tmp/missing"]);
        assert_eq!(
            named,
            vec![std::fs::canonicalize(&prog).expect("real")],
            "the file, not PATH names or the root's files"
        );
        let listener = std::os::unix::net::UnixListener::bind(dir.path().join("agent.sock")).expect("a socket");
        let sock = dir.path().join("agent.sock").to_string_lossy().into_owned();
        let d = dir.path().to_string_lossy().into_owned();
        assert!(named_paths(&c, [sock.as_str(), d.as_str()]).is_empty(), "never a socket or a directory");
        drop(listener);
        assert!(named_paths(&c, ["/tmp", "/run/"]).is_empty(), "a private mount itself is never bound");
    }
}
