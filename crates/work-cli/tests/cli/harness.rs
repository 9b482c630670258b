//! The harness every command goes through, end to end: secrets never reach stdout or
//! `.work/` (whole or altered), stdout failures never panic, one writer per working tree,
//! and `implement` / `edit` bad input is refused before any agent starts.

use crate::support::Scenario;
use std::path::Path;
use std::process::Stdio;

const KEY: &str = "sk-Canary-7f3a9c2e5b81d4f6a0";
const TOKEN: &str = "tok-canary-93be1f0d27c4a8";

/// Every lower-cased 12-byte window of each secret: a cut or case-folded copy shows one.
fn fragments() -> Vec<String> {
    let mut out = Vec::new();
    for s in [KEY, TOKEN] {
        let l = s.to_lowercase().replace(['-', '_'], "-");
        for i in 0..=l.len() - 12 {
            out.push(l[i..i + 12].to_string());
        }
    }
    out
}

fn leaked(text: &str) -> Option<String> {
    let t = text.to_lowercase().replace('_', "-");
    fragments().into_iter().find(|f| t.contains(f.as_str()))
}

/// Every file and file name under `dir`, checked for a fragment of a secret.
fn assert_clean_tree(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(leaked(&name).is_none(), "a secret in a file name: {}", p.display());
        if p.is_dir() {
            assert_clean_tree(&p);
        } else {
            let bytes = std::fs::read(&p).unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes);
            assert!(leaked(&text).is_none(), "a secret in {}:\n{text}", p.display());
        }
    }
}

/// `work` as a plain process (stdout and stderr to wire by hand), set up as `Scenario::work`.
fn std_work(s: &Scenario) -> std::process::Command {
    s.work_std()
}

/// Runs `work args…` with the secrets in its environment, the `--agent` named `leaky` and
/// granted both variables (an agent sees no key it is not given).
fn with_secrets(s: &Scenario, args: &[&str]) -> (i32, String, String) {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut grant = Vec::new();
    if let Some(i) = args.iter().position(|a| a == "--agent") {
        let spec = std::mem::replace(&mut args[i + 1], "leaky".into());
        grant = vec![
            "-c".to_string(),
            format!("agents.leaky.spec={spec:?}"),
            "-c".into(),
            "agents.leaky.env=[\"OPENAI_API_KEY\", \"FOO_TOKEN\"]".into(),
        ];
    }
    let out =
        s.work().env("OPENAI_API_KEY", KEY).env("FOO_TOKEN", TOKEN).args(grant).args(args).output().expect("run work");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An agent that answers every role, with the secrets (whole, upper- and lower-cased, cut)
/// in every free-text field it has.
fn leaky_agent(s: &Scenario) -> String {
    s.agent(
        "leaky.py",
        r#"
k = os.environ.get('OPENAI_API_KEY', '') ; t = os.environ.get('FOO_TOKEN', '')
leak = '%s %s %s %s %s' % (k, t.upper(), k.lower(), k[3:], t[:-2])
sys.stderr.write('stderr tail ' + leak + '\n')
role = req['role']
def out(d):
    print(json.dumps({'work_result': d, 'usage': {'input_tokens': 10, 'output_tokens': 5}}))
    sys.exit(0)
if role == 'worker':
    open('work.txt', 'a').write('x\n')
    out({'status': 'blocked', 'summary': 'leak ' + leak, 'changes_claimed': ['work.txt'],
         'blocker': 'BLOCKED BY ' + leak.upper(), 'next_steps': ['retry ' + leak], 'decisions': [leak], 'evidence': [leak]})
if role == 'implementer':
    open('hello.txt', 'w').write('hi\n')
    out({'status': 'DONE', 'summary': 'done ' + leak, 'applied_changes': True, 'concerns': [leak]})
if role == 'editor':
    out({'status': 'BLOCKED', 'applied_changes': False, 'sites': 0, 'hole': leak, 'summary': leak})
if role == 'spec-reviewer':
    out({'status': 'compliant', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)})
if role == 'quality-reviewer':
    out({'verdict': 'approved', 'issues': [], 'files_read': __import__('re').findall(r'^diff --git a/(\S+) ', req['prompt'], 8)})
if role == 'tester':
    out({'status': 'DONE', 'fixtures': 1})
if role == 'finder':
    out({'angle': ctx.get('angle'), 'items': [{'id': 'x-' + k, 'location': 'a.txt:1', 'title': leak, 'summary': leak}]})
print(json.dumps({'work_result': {'summary': leak}}))
"#,
    )
}

fn leak_repo() -> Scenario {
    let s = Scenario::new();
    s.write("a.txt", "line one\n");
    s.write("PLAN.md", "# Plan\n\n## Task 1: Add hello\n\nCreate hello.txt.\n");
    s.commit("init");
    s
}

#[test]
fn a_planted_secret_never_reaches_stdout_or_the_state_directory() {
    for json in [false, true] {
        let s = leak_repo();
        let agent = leaky_agent(&s);
        let mut runs: Vec<Vec<&str>> = vec![
            vec![
                "until",
                "file DONE exists",
                "--goal",
                "g",
                "--verify",
                "test -e DONE",
                "--max",
                "2",
                "--agent",
                &agent,
            ],
            vec!["implement", "--plan", "PLAN.md", "--iter-id", "it-1", "--test-cmd", "true", "--agent", &agent],
            vec!["edit", "--iter-id", "ed-1", "--description", "rename", "--def-site", "a.txt:1", "--test-cmd", "true"],
            vec!["exhaust", "places", "--k", "2", "--max-rounds", "1", "--agent", &agent],
        ];
        runs[2].extend(["--agent", &agent]);
        // An angle named after the secret names a dispatch record file.
        let angle = format!("look-{}", KEY.to_lowercase());
        runs.push(vec!["exhaust", "angled", "--k", "2", "--max-rounds", "1", "--angles", &angle, "--agent", &agent]);
        for args in runs.iter_mut() {
            if json {
                args.push("--json");
            }
            let (code, out, err) = with_secrets(&s, args);
            assert_ne!(code, 2, "work {args:?} ran\nstdout: {out}\nstderr: {err}");
            assert!(leaked(&out).is_none(), "work {args:?}: a secret on stdout:\n{out}");
            assert!(leaked(&err).is_none(), "work {args:?}: a secret on stderr:\n{err}");
            // Every implement/edit leaves the tree as it found it for the next command.
            s.git(&["checkout", "-q", "--", "."]);
            s.git(&["clean", "-qfd", "-e", ".work", "-e", ".agents", "-e", ".agent-state"]);
        }
        assert!(s.path(".agent-state").exists() || s.path(".work/runs").exists());
        assert_clean_tree(&s.path(".work"));
    }
}

/// Runs `work args…` with stdout closed before it writes, then with stdout on `/dev/full`.
fn assert_stdout_failures_are_clean(s: &Scenario, args: &[&str]) {
    let mut c = std_work(s);
    let mut child = c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    assert!(!err.contains("panicked") && code != 101, "work {args:?} | (closed): {code}\n{err}");
    assert!(matches!(code, 0..=3 | 141), "work {args:?} | (closed): exit {code}\n{err}");
    if Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("open /dev/full");
        let out = std_work(s).args(args).stdout(full).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code().unwrap_or(-1);
        assert!(!err.contains("panicked") && code != 101, "work {args:?} > /dev/full: {code}\n{err}");
        assert!(matches!(code, 0..=3), "work {args:?} > /dev/full: exit {code}\n{err}");
        // A command that writes its result on stdout must not claim success when it could not.
        let writes = args.contains(&"--json") || ["table", "list", "--help", "status"].iter().any(|w| args.contains(w));
        if writes {
            assert_ne!(code, 0, "work {args:?} > /dev/full must not claim success\n{err}");
            assert!(err.contains("error: failed to write the"), "{err}");
        }
    }
}

#[test]
fn a_closed_pipe_or_a_full_disk_on_stdout_never_panics() {
    let s = leak_repo();
    let agent = leaky_agent(&s);
    s.write("docs/specs/feat/spec.md", "# Feat\n\n**Status:** Draft\n");
    s.write(
        "docs/specs/feat/plan.md",
        "# Plan\n\n**Status:** Drafting\n\n## Task 1: base\n\n## Task 2: top\nDepends on: 1\n",
    );
    s.commit("spec");
    let init = s.run_json(&["loop", "engine", "init", "docs/specs/feat", "--mode", "code", "--json"], 0);
    let run = init["run_id"].as_str().expect("run id").to_string();
    s.run_json(&["loop", "cohort", "init", "docs/specs/feat", "--run-id", &run, "--json"], 0);
    for args in [
        vec!["exhaust", "places", "--k", "2", "--max-rounds", "1", "--agent", &agent, "--json"],
        vec!["exhaust", "places", "--k", "2", "--max-rounds", "1", "--agent", &agent],
        vec![
            "until",
            "file DONE exists",
            "--goal",
            "g",
            "--verify",
            "test -e DONE",
            "--max",
            "1",
            "--agent",
            &agent,
            "--json",
        ],
        vec!["implement", "--plan", "PLAN.md", "--iter-id", "p-1", "--test-cmd", "true", "--agent", &agent, "--json"],
        vec!["loop", "cohort", "schedule", "docs/specs/feat", "--json"],
        vec!["loop", "cohort", "status", "docs/specs/feat"],
        vec!["loop", "engine", "table"],
        vec!["agents", "check", "--json"],
        vec!["until", "list"],
        vec!["--help"],
    ] {
        assert_stdout_failures_are_clean(&s, &args);
        s.git(&["checkout", "-q", "--", "."]);
        s.git(&["clean", "-qfd", "-e", ".work", "-e", ".agents", "-e", ".agent-state", "-e", "docs"]);
    }
}

#[test]
fn a_second_writer_on_one_tree_is_refused_at_once_whatever_its_state_dir() {
    let s = leak_repo();
    // The first run's worker says it started, then waits to be released.
    let slow = s.agent(
        "slow.py",
        r#"
open(state_path('started'), 'w').write('1')
while not os.path.exists(state_path('release')):
    time.sleep(0.05)
print(json.dumps({'status': 'blocked', 'summary': 's', 'changes_claimed': [], 'blocker': 'b', 'next_steps': [], 'decisions': [], 'evidence': []}))
"#,
    );
    let counted = s.agent("counted.py", "bump('second')\nprint('{}')\n");
    let mut first = std_work(&s);
    let mut first = first
        .args(["until", "file DONE exists", "--goal", "g", "--verify", "test -e DONE", "--max", "1", "--agent", &slow])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the first run");
    let started = s.path(".agent-state/started");
    for _ in 0..1200 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started.exists(), "the first run's worker never started");
    let other_state = tempfile::tempdir().expect("tempdir");
    let other = other_state.path().display().to_string();
    for args in [
        vec![
            "--state-dir",
            other.as_str(),
            "implement",
            "--plan",
            "PLAN.md",
            "--iter-id",
            "x",
            "--test-cmd",
            "true",
            "--agent",
            &counted,
        ],
        vec!["until", "file DONE exists", "--goal", "h", "--verify", "test -e DONE", "--agent", &counted],
    ] {
        let (code, out, err) = s.run(&args);
        assert_eq!(code, 2, "work {args:?}\nstdout: {out}\nstderr: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {err}");
        assert!(err.contains("working tree") && err.contains("pid ") && err.contains("-until-"), "{err}");
    }
    assert!(!s.path(".agent-state/second").exists(), "a refused run started its agent");
    std::fs::write(s.path(".agent-state/release"), "1").expect("release");
    let status = first.wait().expect("wait");
    assert_eq!(status.code(), Some(1), "the first run went on to its own end");
}

#[test]
fn implement_and_edit_refuse_bad_input_before_any_agent_starts() {
    let s = leak_repo();
    let agent = s.agent("never.py", "bump('started')\nprint('{}')\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["implement", "--plan", "PLAN.md", "--test-cmd", "true", "--agent", &agent], "--iter-id"),
        (vec!["implement", "--plan", "PLAN.md", "--iter-id", "a", "--agent", &agent], "test command"),
        (
            vec![
                "implement",
                "--plan",
                "PLAN.md",
                "--iter-id",
                "a",
                "--range",
                "5-6",
                "--test-cmd",
                "true",
                "--agent",
                &agent,
            ],
            "--range",
        ),
        (
            vec![
                "edit",
                "--iter-id",
                "e",
                "--description",
                "d",
                "--def-site",
                "nope.rs:3",
                "--test-cmd",
                "true",
                "--agent",
                &agent,
            ],
            "--def-site",
        ),
        (
            vec!["edit", "--iter-id", "e", "--def-site", "a.txt:1", "--test-cmd", "true", "--agent", &agent],
            "--description",
        ),
        (
            vec!["edit", "--iter-id", "e", "--description", "d", "--def-site", "a.txt:1", "--agent", &agent],
            "test command",
        ),
    ];
    for (args, names) in cases {
        let (code, out, err) = s.run(&args);
        assert_eq!(code, 2, "work {args:?}\nstdout: {out}\nstderr: {err}");
        assert!(out.is_empty(), "nothing on stdout: {out}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {err}");
        assert!(lines[0].starts_with("error: failed to ") && lines[0].contains(names), "{err}");
        assert!(!s.path(".agent-state/started").exists(), "work {args:?} started the agent");
        assert!(!s.path(".work/iterations").exists(), "work {args:?} wrote artifacts");
    }
}

#[test]
fn ctrl_c_in_until_prints_the_exact_resume_command_and_exits_130() {
    let s = leak_repo();
    let slow = s.agent("slow.py", "open(state_path('started'), 'w').write('1')\nwhile True:\n    time.sleep(0.05)\n");
    let child = std_work(&s)
        .args(["until", "file DONE exists", "--goal", "g", "--slug", "my-session", "--verify", "test -e DONE"])
        .args(["--agent", &slow])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = s.path(".agent-state/started");
    for _ in 0..1200 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started.exists(), "the worker never started");
    #[expect(clippy::disallowed_methods, reason = "the test sends SIGINT as a person's Ctrl-C would")]
    let killed = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("resume with `work until resume my-session`"), "{err}");
    // The command it names continues that session (it is refused only for a reason of its own).
    let (code, _, err2) = s.run(&["until", "resume", "my-session", "--max", "1", "--agent", &s.agent("blk.py",
        "print(json.dumps({'status': 'blocked', 'summary': 's', 'changes_claimed': [], 'blocker': 'b', 'next_steps': [], 'decisions': [], 'evidence': []}))")]);
    assert_ne!(code, 2, "the printed resume command works: {err2}");
}
