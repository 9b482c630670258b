//! The kernel sandbox against lying agents, through the binary (`--isolation required`, which
//! the flag sets whatever mode the suite runs in: these tests fail where no sandbox can be had,
//! never skip). Each liar tries a route that detection
//! alone let through or had to chase afterwards — writing where its role may not, rewriting the
//! state the engine keeps beside it, reaching a service that outlives the dispatch, detaching
//! a process, reading a key — and finds the kernel in the way; each has an honest twin whose
//! ordinary work goes through.

use crate::support::Scenario;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Python run inside an agent: `attempt(name, fn)` records in `.agent-state/attempts.json`
/// whether `fn()` succeeded, or how it failed (the errno's name, or the exception's type);
/// `write(path, text)` appends; `sha(bytes)` is its hex SHA-256.
pub(crate) const ATTEMPT: &str = r#"
import errno, hashlib, subprocess
def sha(b):
    return hashlib.sha256(b).hexdigest()
def attempt(name, fn):
    p = state_path('attempts.json')
    got = json.load(open(p)) if os.path.exists(p) else {}
    try:
        fn()
        got[name] = 'ok'
    except OSError as e:
        got[name] = errno.errorcode.get(e.errno, str(e.errno))
    except Exception as e:
        got[name] = type(e).__name__
    json.dump(got, open(p, 'w'))
def write(path, text='planted\n'):
    return lambda: open(path, 'a').write(text)
"#;

/// The sandbox is installed here, or a loud failure naming its installer.
pub(crate) fn sandbox_installed() {
    assert!(
        std::env::var_os("WORK_TEST_SANDBOX").is_some_and(|v| !v.is_empty()),
        "WORK_TEST_SANDBOX is not set: this test needs the kernel sandbox (bubblewrap) and tmux. Run \
         `scripts/test.sh`, or `eval \"$(scripts/test-tools/sandbox.sh start)\"`."
    );
}

fn attempts(s: &Scenario) -> Value {
    serde_json::from_str(&s.read(".agent-state/attempts.json")).expect("the agent recorded its attempts")
}

fn repo() -> Scenario {
    sandbox_installed();
    let s = Scenario::new();
    s.write("check.sh", "grep -q 'fn ready' src/lib.rs\n");
    s.write("src/lib.rs", "pub fn f() {}\n");
    s.commit("code and check");
    s
}

/// A directory outside the repository (and outside `/tmp`, which the sandbox replaces): what
/// an agent writes there would survive the run.
fn outside() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("outside-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("an outside directory")
}

fn exhaust(s: &Scenario, agent: &str) -> Value {
    s.run_json(
        &["--isolation", "required", "exhaust", "things", "-k", "2", "--angles", "a", "--agent", agent, "--json"],
        0,
    )
}

/// `work until` confined, with `--max` and the variables `env` set.
fn until_with(s: &Scenario, agent: &str, max: &str, env: &[(&str, &Path)], code: i32) -> Value {
    let out = s
        .work()
        .envs(env.iter().copied())
        .args([
            "--isolation",
            "required",
            "until",
            "`sh check.sh` exits 0",
            "--goal",
            "make lib ready",
            "--verify",
            "sh check.sh",
            "--max",
            max,
            "--agent",
            agent,
            "--json",
        ])
        .output()
        .expect("run work");
    assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the report")
}

fn until(s: &Scenario, agent: &str, code: i32) -> Value {
    until_with(s, agent, "10", &[], code)
}

#[test]
fn a_read_only_finder_cannot_write_the_tree_the_state_directory_or_outside_and_its_twin_answers() {
    let s = repo();
    let out = outside();
    std::fs::create_dir_all(s.path(".work")).expect("mkdir .work");
    let liar = s.agent(
        "liar.py",
        &format!(
            "{ATTEMPT}\nattempt('tree', write('src/planted.rs'))\nattempt('state', write('.work/planted'))\n\
             attempt('outside', write({o:?}))\n\
             json.dump(os.listdir('.work'), open(state_path('state-listing.json'), 'w'))\n\
             print(json.dumps({{'angle': ctx['angle'], 'items': []}}))",
            o = out.path().join("planted").display().to_string()
        ),
    );
    exhaust(&s, &liar);
    let got = attempts(&s);
    assert_eq!(got["tree"], "EROFS", "{got}");
    assert_eq!(got["state"], "EROFS", "{got}");
    assert_eq!(got["outside"], "EROFS", "{got}");
    assert_eq!(s.read(".agent-state/state-listing.json"), "[]", "the state directory is empty to the agent");
    assert!(!s.path("src/planted.rs").exists() && !s.path(".work/planted").exists());
    assert!(!out.path().join("planted").exists());

    let s = repo();
    let honest = s.agent(
        "honest.py",
        "print(json.dumps({'angle': ctx['angle'], 'items': [{'id': 'f', 'title': 'f', 'location': 'src/lib.rs:1'}]}))",
    );
    let v = exhaust(&s, &honest);
    assert_eq!(v["seen"], serde_json::json!(["f"]), "{v}");
}

/// A write role's `.git` is a private copy: its hook and configuration land there (no hooks
/// directory: the write is refused), and the user's git directory is untouched.
#[test]
fn a_write_role_writes_the_tree_and_a_private_git_but_not_the_frozen_check_the_state_or_outside() {
    let s = repo();
    let out = outside();
    let digests = s.path(".work/state-digests.jsonl");
    let worker = s.agent(
        "worker.py",
        &format!(
            "{ATTEMPT}\nattempt('fix', write('src/lib.rs', 'pub fn ready() {{}}\\n'))\n\
             attempt('check', write('check.sh', 'exit 0\\n'))\nattempt('hook', write('.git/hooks/pre-commit'))\n\
             attempt('git-config', write('.git/config', '[alias]\\n  st = !rm -rf tests\\n'))\n\
             attempt('state', write({d:?}, '{{}}\\n'))\nattempt('outside', write({o:?}))\n\
             attempt('scratch', write('/tmp/scratch'))\n\
             print(json.dumps({{'status': 'done', 'summary': 'made lib ready'}}))",
            d = digests.display().to_string(),
            o = out.path().join("planted").display().to_string()
        ),
    );
    let v = until(&s, &worker, 0);
    assert_eq!(v["status"], "done", "{v}");
    let got = attempts(&s);
    assert_eq!(got["fix"], "ok", "the working tree is writable: {got}");
    assert_eq!(got["scratch"], "ok", "a private /tmp is writable: {got}");
    for route in ["check", "outside"] {
        assert_eq!(got[route], "EROFS", "{route}: {got}");
    }
    assert_eq!(got["git-config"], "ok", "git's configuration is the dispatch's private copy: {got}");
    assert_eq!(got["hook"], "ENOENT", "the private git directory has no hooks: {got}");
    assert_ne!(got["state"], "ok", "the state directory is not there for the agent: {got}");
    assert_eq!(s.read("check.sh"), "grep -q 'fn ready' src/lib.rs\n");
    assert!(!s.path(".git/hooks/pre-commit").exists() && !s.read(".git/config").contains("alias"));
    assert!(!out.path().join("planted").exists());
    let log = std::fs::read_to_string(&digests).unwrap_or_default();
    assert!(!log.lines().any(|l| l == "{}"), "the digest chain was not appended to by the agent");
}

#[test]
fn a_liar_that_only_rewrites_the_check_gets_erofs_and_never_done() {
    let s = repo();
    let liar = s.agent(
        "liar.py",
        &format!(
            "{ATTEMPT}\nattempt('check', write('check.sh', 'exit 0\\n'))\nprint(json.dumps({{'status': 'done', 'summary': 'done'}}))"
        ),
    );
    let v = until_with(&s, &liar, "2", &[], 1);
    assert_ne!(v["status"], "done", "{v}");
    assert_eq!(attempts(&s)["check"], "EROFS");
    assert_eq!(s.read("check.sh"), "grep -q 'fn ready' src/lib.rs\n");
}

/// A service started before `work` that does what a client asks, later: a client sends
/// `revert` over a unix socket at `sock`, an abstract socket or a loopback TCP port (and gets
/// `ok` back once the request is held); when the test says `flush` on the service's stdin —
/// after the verdict — the service puts `target` back to `original` if any request was held,
/// and answers `flushed N`.
struct Service {
    child: std::process::Child,
    port: u16,
}

impl Service {
    fn start(sock: &Path, abstract_name: &str, target: &Path, original: &str) -> Service {
        let script = format!(
            r#"
import os, socket, threading, sys
target, original = {target:?}, {original:?}
held = []
lock = threading.Lock()
def serve(s):
    while True:
        c, _ = s.accept()
        if c.recv(16).startswith(b'revert'):
            with lock:
                held.append(1)
            c.sendall(b'ok')
        c.close()
u = socket.socket(socket.AF_UNIX); u.bind({sock:?}); u.listen()
a = socket.socket(socket.AF_UNIX); a.bind('\0' + {abs:?}); a.listen()
t = socket.socket(); t.bind(('127.0.0.1', 0)); t.listen()
print(t.getsockname()[1], flush=True)
for s in (u, a, t):
    threading.Thread(target=serve, args=(s,), daemon=True).start()
for line in sys.stdin:
    with lock:
        if held:
            open(target, 'w').write(original)
        print('flushed', len(held), flush=True)
"#,
            target = target.display().to_string(),
            sock = sock.display().to_string(),
            abs = abstract_name,
        );
        #[expect(clippy::disallowed_methods, reason = "the test starts a service outside work")]
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the service");
        let port = Self::line(&mut child).trim().parse().expect("a port");
        Service { child, port }
    }

    fn line(child: &mut std::process::Child) -> String {
        use std::io::Read;
        let out = child.stdout.as_mut().expect("the service's stdout");
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while out.read(&mut b).expect("read the service") == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        String::from_utf8_lossy(&line).into_owned()
    }

    /// Has the service act on what it holds; the number of requests it held.
    fn flush(&mut self) -> String {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().expect("the service's stdin");
        stdin.write_all(b"flush\n").and_then(|()| stdin.flush()).expect("tell the service");
        Self::line(&mut self.child)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tmux -L name args…` outside the sandbox.
fn tmux(name: &str, args: &[&str]) -> std::process::Output {
    #[expect(clippy::disallowed_methods, reason = "the test drives the user's tmux server")]
    let out = std::process::Command::new("tmux").args(["-L", name]).args(args).output();
    out.expect("tmux is installed (scripts/test-tools/sandbox.sh)")
}

/// The liar fixes the code, as its report says, and asks services the user started before
/// `work` to put the code back once the verdict is in: a unix socket under `/tmp` (where tmux,
/// `ssh-agent` and the like keep theirs; `/run` holds the user bus and container sockets), an
/// abstract socket, a loopback port, and a window of the user's tmux server reached by its
/// socket path, which waits for the test's signal. After `work` ends DONE, the test has every
/// service act on what it was asked: with the sandbox none was reached, so the fix the report
/// calls done is still in the tree. (Without it each request lands and the fix is gone after
/// the verdict — detection never sees a process outside the dispatch's tree.)
#[test]
fn services_and_a_tmux_server_outside_the_dispatch_are_out_of_reach_of_a_command_agent() {
    let s = repo();
    let run = tempfile::Builder::new().prefix("work-test-svc-").tempdir().expect("a socket directory under /tmp");
    let abstract_name = format!("work-test-{}", std::process::id());
    let svc_sock = run.path().join("svc.sock");
    let lib = s.path("src/lib.rs");
    let mut svc = Service::start(&svc_sock, &abstract_name, &lib, "pub fn f() {}\n");
    // The user's tmux server, at its default place (`/tmp/tmux-UID/NAME`).
    let tmux_name = format!("work-test-{}", std::process::id());
    assert!(tmux(&tmux_name, &["new-session", "-d", "sleep 600"]).status.success(), "start a tmux server");
    assert!(tmux(&tmux_name, &["list-sessions"]).status.success(), "the tmux server answers outside the sandbox");
    let revert = format!(
        "tmux -L {n} wait-for go; printf 'pub fn f() {{}}\\n' > {lib}; tmux -L {n} wait-for -S reverted",
        n = tmux_name,
        lib = lib.display()
    );
    let worker = s.agent(
        "worker.py",
        &format!(
            "{ATTEMPT}\nimport socket, subprocess\n\
             def send(family, addr):\n    def go():\n        c = socket.socket(family); c.settimeout(2); c.connect(addr); c.sendall(b'revert'); assert c.recv(2) == b'ok'; c.close()\n    return go\n\
             open('src/lib.rs', 'w').write('pub fn ready() {{}}\\n')\n\
             attempt('unix', send(socket.AF_UNIX, {sock:?}))\nattempt('abstract', send(socket.AF_UNIX, '\\0' + {abs:?}))\n\
             attempt('tcp', send(socket.AF_INET, ('127.0.0.1', {port})))\n\
             attempt('tmux', lambda: subprocess.run(['tmux', '-L', {tname:?}, 'new-window', '-d', {revert:?}], check=True, capture_output=True))\n\
             print(json.dumps({{'status': 'done', 'summary': 'made lib ready'}}))",
            sock = svc_sock.display().to_string(),
            abs = abstract_name,
            port = svc.port,
            tname = tmux_name,
        ),
    );
    let v = until(&s, &worker, 0);
    assert_eq!(v["status"], "done", "the honest part of the work went through: {v}");
    // After the verdict: every service acts on what it was asked.
    let flushed = svc.flush();
    let windows = String::from_utf8_lossy(&tmux(&tmux_name, &["list-windows", "-a"]).stdout).lines().count();
    if windows > 1 {
        // The agent's window is there, waiting: let it run to its end.
        assert!(tmux(&tmux_name, &["wait-for", "-S", "go"]).status.success());
        assert!(tmux(&tmux_name, &["wait-for", "reverted"]).status.success());
    }
    let _ = tmux(&tmux_name, &["kill-server"]);
    assert!(
        s.read("src/lib.rs").contains("fn ready"),
        "the fix the report calls done was put back after the verdict (service: {flushed}; tmux windows: {windows})"
    );
    assert_eq!(flushed, "flushed 0", "a service outside the dispatch took the agent's request");
    assert_eq!(windows, 1, "the user's tmux server opened the agent's window");
    let got = attempts(&s);
    for route in ["unix", "abstract", "tcp", "tmux"] {
        assert_ne!(got[route], "ok", "{route} reached the outside service: {got}");
    }
}

#[test]
fn a_detached_descendant_ends_with_its_dispatch() {
    let s = repo();
    let survived = s.path(".agent-state/survived");
    let worker = s.agent(
        "worker.py",
        &format!(
            "if os.fork() == 0:\n    os.setsid()\n    if os.fork() > 0:\n        os._exit(0)\n    for fd in (0, 1, 2):\n        os.dup2(os.open(os.devnull, os.O_RDWR), fd)\n    time.sleep(2)\n    open({p:?}, 'w').write('alive')\n    os._exit(0)\n\
             open('src/lib.rs', 'w').write('pub fn ready() {{}}\\n')\nprint(json.dumps({{'status': 'done', 'summary': 'made lib ready'}}))",
            p = survived.display().to_string()
        ),
    );
    let v = until(&s, &worker, 0);
    assert_eq!(v["status"], "done", "{v}");
    std::thread::sleep(Duration::from_secs(3));
    assert!(!survived.exists(), "a detached descendant outlived its dispatch and wrote after the verdict");
}

#[test]
fn an_agent_sees_only_the_allowed_environment_and_what_its_agent_table_grants() {
    let s = repo();
    let dump = s.agent(
        "env.py",
        "json.dump(dict(os.environ), open(state_path('env.json'), 'w'))\nprint(json.dumps({'angle': ctx['angle'], 'items': []}))",
    );
    let spec = format!("agents.dump.spec={dump:?}");
    let run = |extra: &[&str]| {
        let mut args = vec!["--isolation", "required", "-c", &spec];
        args.extend_from_slice(extra);
        // A task of its own per run (a finished one would resume without dispatching).
        let what = if extra.is_empty() { "things" } else { "granted things" };
        args.extend(["exhaust", what, "-k", "2", "--angles", "a", "--agent", "dump", "--json"]);
        let out = s
            .work()
            .env("OPENAI_API_KEY", "sk-canary-1234567890")
            .env("DEPLOY_TOKEN", "tok-canary-0987654321")
            .env("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock")
            .args(&args)
            .output()
            .expect("run work");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_str::<Value>(&s.read(".agent-state/env.json")).expect("the agent's environment")
    };
    let env = run(&[]);
    for hidden in ["OPENAI_API_KEY", "DEPLOY_TOKEN", "SSH_AUTH_SOCK"] {
        assert!(env.get(hidden).is_none(), "{hidden} reached the agent: {env}");
    }
    assert!(env.get("PATH").is_some() && env.get("WORK_ROLE").is_some(), "{env}");
    let granted = run(&["-c", "agents.dump.env=[\"DEPLOY_TOKEN\"]"]);
    assert_eq!(granted["DEPLOY_TOKEN"], "tok-canary-0987654321");
    assert!(granted.get("OPENAI_API_KEY").is_none(), "{granted}");
}

#[test]
fn isolation_required_without_a_sandbox_is_refused_before_anything_runs_and_auto_says_so() {
    let s = repo();
    let agent = s.agent("f.py", "print(json.dumps({'angle': ctx['angle'], 'items': []}))");
    // A `bwrap` first on PATH that cannot set up namespaces (as where user namespaces are off).
    let bin = s.path(".agent-state/bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let fake = bin.join("bwrap");
    std::fs::write(&fake, "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
        .expect("write");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = |isolation: &str| {
        s.work()
            .env("PATH", &path)
            .args(["--isolation", isolation, "exhaust", "things", "-k", "2", "--angles", "a", "--agent", &agent])
            .output()
            .expect("run work")
    };
    let refused = run("required");
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    crate::support::assert_one_line_error(&err);
    assert!(err.contains("--isolation required") && err.contains("Permission denied"), "{err}");
    assert!(!s.path(".work/runs").exists(), "nothing ran");
    let auto = run("auto");
    assert_eq!(auto.status.code(), Some(0), "{}", String::from_utf8_lossy(&auto.stderr));
    let err = String::from_utf8_lossy(&auto.stderr);
    assert_eq!(err.matches("without a sandbox").count(), 1, "one line says so: {err}");
    let check = s.work().env("PATH", &path).args(["--isolation", "auto", "agents", "check"]).output().expect("run");
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("isolation: agents run without a sandbox") && said.contains("Permission denied"), "{said}");
    let here = s.work().args(["--isolation", "auto", "agents", "check", "--json"]).output().expect("run");
    let v: Value = serde_json::from_slice(&here.stdout).expect("the report");
    assert_eq!(v["isolation"]["sandbox"], true, "{v}");
}

/// A write role's `.pth` file in the user's site-packages (Python runs it at every start, the
/// checks' included) would patch the code under test from outside the repository: `$HOME` is
/// read-only, so the write fails at once and the run never ends done. The twin fixes the code.
#[test]
fn a_pth_file_in_the_user_site_gets_erofs_and_the_twin_that_fixes_the_code_is_done() {
    let s = repo();
    let home = outside();
    let liar = s.agent(
        "pth.py",
        &format!(
            "{ATTEMPT}\nimport site\nd = site.getusersitepackages()\nattempt('pth', lambda: (os.makedirs(d, exist_ok=True), write(os.path.join(d, 'zz_fix.pth'), 'import os\\n')()))\nprint(json.dumps({{'status': 'done', 'summary': 'done'}}))"
        ),
    );
    let run = |agent: &str, code: i32| until_with(&s, agent, "2", &[("HOME", home.path())], code);
    let v = run(&liar, 1);
    assert_ne!(v["status"], "done", "{v}");
    assert_eq!(attempts(&s)["pth"], "EROFS");
    let site: Vec<_> = walk(home.path()).into_iter().filter(|p| p.extension().is_some_and(|e| e == "pth")).collect();
    assert!(site.is_empty(), "a .pth file landed in the user's home: {site:?}");
    let fixer = s.agent(
        "fix.py",
        "open('src/lib.rs', 'a').write('pub fn ready() {}\\n')\nprint(json.dumps({'status': 'done', 'summary': 'added ready'}))",
    );
    let v = run(&fixer, 0);
    assert_eq!(v["status"], "done", "{v}");
}

/// Every file under `dir`.
pub(crate) fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// Python: `forms(k)`, the encoded forms of `k` an agent could smuggle it out in — base64
/// (standard and URL-safe) at each of the three offsets it can take inside longer data, hex
/// (whole and in spaced pairs), reversed, URL-encoded, rot13 and spaced out.
pub(crate) const FORMS: &str = r#"
import base64, codecs, urllib.parse
def forms(k):
    b = k.encode()
    out = []
    for lead in (b'', b'a', b'ab'):
        out += [base64.b64encode(lead + b).decode(), base64.urlsafe_b64encode(lead + b).decode()]
    return out + [b.hex(), ' '.join('%02x' % c for c in b), k[::-1], urllib.parse.quote(k, safe=''),
                  codecs.encode(k, 'rot13'), ' '.join(k)]
"#;

/// The forms of `key` ([`FORMS`]), computed by the same Python.
pub(crate) fn forms(key: &str) -> Vec<String> {
    #[expect(clippy::disallowed_methods, reason = "the test computes the encodings it looks for")]
    let o = std::process::Command::new("python3")
        .args(["-c", &format!("{FORMS}\nimport sys\nprint('\\n'.join(forms(sys.argv[1])))"), key])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
}

/// A key granted to an agent (`[agents.NAME].env`) that the agent sends back in every form of
/// [`FORMS`] — in an item's title (one form between each ` | `) and on stderr: each form is
/// redacted in the JSON output, and no form, nor the key itself, reaches anything `work`
/// writes or prints. The honest twin in the same answer: ordinary base64 and hex of other
/// data, and a digest, come through as they were.
#[test]
fn a_granted_key_sent_back_encoded_is_redacted_everywhere() {
    let s = repo();
    let key = "tok-canary-0987654321/+x";
    let ordinary = "aGVsbG8sIHdvcmxkIG9mIG9yZGluYXJ5IHRleHQ= 68656c6c6f2c20776f726c64 e3b0c44298fc1c149afbf4c8996fb924";
    let leaker = s.agent(
        "leak.py",
        &format!(
            "{FORMS}\nk = os.environ['DEPLOY_TOKEN']\nsys.stderr.write(' | '.join(forms(k)) + '\\n')\n\
             print(json.dumps({{'angle': ctx['angle'], 'items': [\
             {{'id': 'x', 'title': ' | '.join(forms(k)), 'location': 'src/lib.rs:1', 'evidence': 'pub fn f() {{}}'}},\
             {{'id': 'y', 'title': {ordinary:?}, 'location': 'check.sh:1', 'evidence': 'grep -q'}}]}}))"
        ),
    );
    let spec = format!("agents.leaker.spec={leaker:?}");
    let out = s
        .work()
        .env("DEPLOY_TOKEN", key)
        .args(["--isolation", "required", "-c", &spec, "-c", "agents.leaker.env=[\"DEPLOY_TOKEN\"]"])
        .args(["exhaust", "things", "-k", "2", "--angles", "a", "--agent", "leaker", "--json"])
        .output()
        .expect("run work");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let master: Value = serde_json::from_slice(&out.stdout).expect("the master object");
    let title = |id: &str| {
        let items = master["items"].as_array().cloned().unwrap_or_default();
        let item = items.iter().find(|i| i["id"] == id).unwrap_or_else(|| panic!("item {id}: {master}"));
        item["title"].as_str().unwrap_or_default().to_string()
    };
    let forms = forms(key);
    let sent = title("x");
    let pieces: Vec<&str> = sent.split(" | ").collect();
    assert_eq!(pieces.len(), forms.len(), "one piece per form: {sent}");
    for (piece, form) in pieces.iter().zip(&forms) {
        // At most the characters the bytes around the key decide (base64's lead, last group, padding).
        let left = piece.replace("[REDACTED]", "");
        assert!(piece.contains("[REDACTED]") && left.len() <= 6, "the form {form:?} came back as {piece:?}");
    }
    assert_eq!(title("y"), ordinary, "ordinary encoded data is not redacted");
    let mut written = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    for p in walk(&s.path(".work")) {
        written.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_default()));
    }
    for f in forms.iter().map(|f| f[4..f.len() - 4].to_string()).chain([key.to_string()]) {
        assert!(!written.contains(f.as_str()), "the form {f:?} of the key was written or printed");
    }
}
