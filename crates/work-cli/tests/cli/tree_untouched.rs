//! The engine never writes into the agent's tree between its dispatches: a scripted `work until`
//! worker lists the whole tree (every file's content hash, mode, inode and mtime; every
//! directory's mode, inode and mtime; `.git`, the state directory and the agents' own counters
//! left out) when each dispatch starts and when it ends, and the end of one dispatch must equal
//! the start of the next — across a verify that fails, one that passes, and the rerun with the
//! frozen checks restored (the worker added a test file, so the rerun has something to leave
//! out). The verify leaves a byproduct (`verify.log`): what the engine checks, it checks on its
//! own copy, so the byproduct lands there.

use crate::support::Scenario;

/// Python for the worker: `listing()` of the tree as described above.
pub(crate) const LISTING: &str = r#"
import hashlib, stat
def listing():
    rows = []
    for d, dirs, files in os.walk('.'):
        dirs[:] = sorted(x for x in dirs if not (d == '.' and x in ('.git', '.work', '.agent-state')))
        for name in dirs + sorted(files):
            p = os.path.join(d, name)[2:]
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                what = 'link:' + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                what = hashlib.sha256(open(p, 'rb').read()).hexdigest()
            else:
                what = 'dir'
            rows.append('%s %o %d %s %d' % (p, st.st_mode, st.st_ino, what, st.st_mtime_ns))
    return rows
"#;

/// The worker: iteration 1 writes notes and a new test file (continue); iteration 2 says done
/// without the fix (the verify fails); iteration 3 weakens a test of the frozen test tree and
/// says done (blocked: the worker changed what judges it — a test stays writable with the
/// sandbox, unlike the check script); after the resume, iteration 4 puts the test back and
/// fixes the code (done, and the rerun with the frozen checks restored
/// leaves the added test file out of the engine's copy).
const WORKER: &str = r#"
BASE_TEST = "from lib import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
k = bump('dispatches')
json.dump(listing(), open(os.path.join(OUT, '%d-start.json' % k), 'w'))
n = ctx['iteration']
if n == 1:
    open('notes.md', 'w').write('plan\n')
    os.makedirs('tests/more', exist_ok=True)
    open('tests/more/test_add.py', 'w').write('from lib import add\n\ndef test_add():\n    assert add(1, 1) == 2\n')
if n == 3:
    open('tests/test_base.py', 'w').write('def test_add():\n    pass\n')
if n == 4:
    open('tests/test_base.py', 'w').write(BASE_TEST)
    open('lib.py', 'w').write('def add(a, b):\n    return a + b\n')
json.dump(listing(), open(os.path.join(OUT, '%d-end.json' % k), 'w'))
status = 'continue' if n == 1 else 'done'
print(json.dumps({'status': status, 'summary': 'step %d' % n, 'changes_claimed': ['lib.py'], 'blocker': None,
                  'next_steps': [], 'decisions': [], 'evidence': []}))
"#;

#[test]
fn until_leaves_the_agents_tree_untouched_between_dispatches() {
    let s = Scenario::new();
    s.write("lib.py", "def add(a, b):\n    return a - b\n");
    s.write("tests/check.py", "import sys\nsys.path.insert(0, '.')\nfrom lib import add\nassert add(2, 3) == 5\n");
    s.write("tests/test_base.py", "from lib import add\n\ndef test_add():\n    assert add(2, 3) == 5\n");
    s.commit("code and check");
    let out = listings(&s);
    let agent = s.agent("worker.py", &format!("{LISTING}\nOUT = {:?}\n{WORKER}", out.display().to_string()));
    let until = |args: &[&str], code: i32| {
        let mut all = args.to_vec();
        all.extend(["--agent", &agent, "--json"]);
        s.run_json(&all, code)
    };
    let args = [
        "until",
        "the check passes",
        "--goal",
        "make add add",
        "--verify",
        "python3 tests/check.py > verify.log",
        "--max",
        "5",
    ];
    let v = until(&args, 1);
    assert_eq!(v["status"], "blocked", "the worker weakened a test: {v}");
    let v = until(&["until", "resume", "make-add-add"], 0);
    assert_eq!(v["status"], "done", "{v}");
    let dispatches = assert_untouched(&s, &out);
    assert_eq!(dispatches, 4, "continue, a done that fails its verify, a blocked done, and after the resume a done");
    let read = |name: &str| read_listing(&out, name);
    assert!(read("1-end.json").iter().any(|r| r.starts_with("tests/more/test_add.py ")), "the listing sees the tree");
    assert_ne!(read("3-start.json"), read("3-end.json"), "and what a dispatch changes");
    assert!(!s.path("verify.log").exists(), "the verify's byproduct stayed in the engine's copy");
}

/// The listing a dispatch (or the test) wrote as `name` under `out`.
/// Where the agent writes its listings: under the scenario's grant, which a confined agent
/// may write in every role (and which the listing leaves out).
pub(crate) fn listings(s: &Scenario) -> std::path::PathBuf {
    let dir = s.path(".agent-state/listings");
    std::fs::create_dir_all(&dir).expect("mkdir listings");
    dir
}

pub(crate) fn read_listing(out: &std::path::Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Lists the tree now (`after.json`) and asserts every dispatch's end listing under `out`
/// equals the next dispatch's start listing (the last one's, the tree after `work` exited):
/// how many dispatches there were.
pub(crate) fn assert_untouched(s: &Scenario, out: &std::path::Path) -> usize {
    let dispatches = (1..).take_while(|k| out.join(format!("{k}-start.json")).exists()).count();
    #[expect(clippy::disallowed_methods, reason = "the test lists the tree as the agent does")]
    let after = std::process::Command::new("python3")
        .args(["-c", &format!("import json, os\n{LISTING}\nprint(json.dumps(listing()))")])
        .current_dir(s.root())
        .output()
        .expect("list the tree");
    std::fs::write(out.join("after.json"), &after.stdout).expect("write");
    let mut pairs: Vec<(String, String)> =
        (1..dispatches).map(|k| (format!("{k}-end.json"), format!("{}-start.json", k + 1))).collect();
    pairs.push((format!("{dispatches}-end.json"), "after.json".into()));
    for (end, next) in pairs {
        let (was, now) = (read_listing(out, &end), read_listing(out, &next));
        let gone: Vec<&String> = was.iter().filter(|r| !now.contains(r)).collect();
        let came: Vec<&String> = now.iter().filter(|r| !was.contains(r)).collect();
        assert!(gone.is_empty() && came.is_empty(), "from {end} to {next}: was {gone:#?}, now {came:#?}");
    }
    dispatches
}

/// A verify that rewrites an ignored file in place (appends to a counter a cache keeps, the way
/// a log or a database is written) writes the engine's copy only: the ignored entries are
/// copied into it (up to 1 MiB), not linked to the agent's files. Failed while they were hard links: the
/// agent's counter grew by one line per verify.
#[test]
fn a_verify_that_rewrites_an_ignored_file_in_place_leaves_the_agents_file_alone() {
    let s = Scenario::new();
    s.write(".gitignore", "cache/\n");
    s.write("lib.py", "def add(a, b):\n    return a - b\n");
    s.write("tests/check.py", "import sys\nsys.path.insert(0, '.')\nfrom lib import add\nassert add(2, 3) == 5\n");
    s.commit("code, check and an ignored cache");
    s.write("cache/runs.log", "before\n");
    let agent = s.agent(
        "fixer.py",
        "open('lib.py', 'w').write('def add(a, b):\\n    return a + b\\n')\nprint(json.dumps({'status': 'done', 'summary': 'fixed', 'changes_claimed': ['lib.py'], 'blocker': None, 'next_steps': [], 'decisions': [], 'evidence': []}))",
    );
    let verify = "python3 tests/check.py && echo ran >> cache/runs.log && grep -q before cache/runs.log";
    let v = s.run_json(
        &["until", "the check passes", "--goal", "make add add", "--verify", verify, "--agent", &agent, "--json"],
        0,
    );
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(s.read("cache/runs.log"), "before\n", "the verify appended to the engine's copy of the file only");
}
