//! `work exhaust`'s oracles search the engine's copy of the tree as the run started, never the
//! tree the finders can write: a finder that deletes or empties the very file the final oracle
//! greps (or reaches into the copy itself) cannot blind gate 3. With the sandbox a finder
//! can write neither (the tree and `.git` are read-only to it), so these liars are the
//! fallback's tests: the engine's own oracle must hold on its own.
//! Each liar has an honest twin whose outcome is what it always was.

use crate::support::{Scenario, fallback_only, refused};
use serde_json::Value;

/// Two files: the finders' territory, and the one setState( site only the final oracle finds.
fn repo() -> Scenario {
    let s = Scenario::new();
    s.write("src/jobs.rs", "fn a() { transition(1); }\nfn b() { transition(2); }\n");
    s.write("lib/orphan.rs", "fn h() { setState(9); }\n");
    s.commit("jobs");
    s
}

/// `work exhaust` with a finder running `body` (with `angle` and `rnd` in scope) that reports
/// `src/jobs.rs:1`, and a final oracle grepping for `setState(`.
fn exhaust(s: &Scenario, body: &str) -> Value {
    let finder = s.agent(
        "finder.py",
        &format!(
            "angle = ctx['angle']\nrnd = ctx['round']\n{body}\nitems = [{{'id': 'real', 'title': 't', 'location': 'src/jobs.rs:1'}}]\nprint(json.dumps({{'angle': angle, 'items': items}}))\n"
        ),
    );
    let args = [
        "exhaust",
        "state changes",
        "-k",
        "2",
        "--angles",
        "a,b,c,d,e",
        "--concurrency",
        "1",
        "--final-oracle",
        "grep -rn 'setState(' src lib",
        "--agent",
        &finder,
        "--json",
    ];
    let (code, out, err) = s.run(&args);
    assert!(code == 0 || code == 1, "exit {code}\n{out}\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"))
}

fn seen(master: &Value) -> Vec<String> {
    master["seen"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// The oracle's item, as accepted: found by the final oracle, re-read where it searched.
fn orphan_item(master: &Value) -> Value {
    master["items"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["id"] == "lib/orphan.rs:1"))
        .cloned()
        .unwrap_or_else(|| panic!("the final oracle's site is missing: {master}"))
}

/// Before, the final oracle ran in the tree the finder had just sabotaged: it found nothing,
/// and the run ended `k-consecutive-dry`, completeness `confirmed`, with the site missing. The
/// oracle now searches the engine's copy: the site is found and re-read there (gate 3 resets
/// the dry counter), and the dry that follows is confirmed with it — the finder's own wave is
/// dropped and named, as before.
#[test]
fn exhaust_liar_that_deletes_or_empties_the_file_the_final_oracle_greps_cannot_blind_it() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    for sabotage in
        ["if rnd == 1:\n    os.remove('lib/orphan.rs')", "if rnd == 1:\n    open('lib/orphan.rs', 'w').close()"]
    {
        let s = repo();
        let master = exhaust(&s, sabotage);
        let left = std::fs::read_to_string(s.path("lib/orphan.rs")).unwrap_or_default();
        assert!(!left.contains("setState("), "the finder sabotaged the tree");
        let item = orphan_item(&master);
        assert_eq!(item["source"], "final-oracle", "{item}");
        assert_eq!(item["reRead"]["text"], "fn h() { setState(9); }", "re-read in the engine's copy: {item}");
        assert_eq!(seen(&master), vec!["real", "lib/orphan.rs:1"], "{master}");
        assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master}");
        assert_eq!(master["completeness"], "confirmed", "the oracle searched the tree as the run started: {master}");
        let gaps = master["completenessGaps"].to_string();
        assert!(gaps.contains("read-only finder changed the tree") && gaps.contains("lib/orphan.rs"), "{gaps}");
        assert!(!s.path(".git/work-copies").read_dir().is_ok_and(|mut d| d.next().is_some()), "the copy is removed");
    }
}

/// The copy lies in the git directory, which only the sandbox makes read-only: a finder that
/// empties the file there instead — directly, or through a hard link it makes in its own tree —
/// is seen before gate 3 runs, and the copy is made again from the tree the run started with.
#[test]
fn exhaust_liar_that_empties_the_file_in_the_engine_s_copy_cannot_blind_the_oracle() {
    let _unconfined = fallback_only(refused::READ_ONLY);
    for sabotage in [
        "import glob\nfor p in glob.glob('.git/work-copies/*/lib/orphan.rs'):\n    open(p, 'w').close()",
        "import glob\nfor p in glob.glob('.git/work-copies/*/lib/orphan.rs') if rnd == 1 else []:\n    os.remove('lib/orphan.rs')\n    os.link(p, 'lib/orphan.rs')\n    open('lib/orphan.rs', 'w').close()",
    ] {
        let s = repo();
        let master = exhaust(&s, sabotage);
        assert_eq!(orphan_item(&master)["source"], "final-oracle", "{master}");
        assert_eq!(orphan_item(&master)["reRead"]["text"], "fn h() { setState(9); }", "{master}");
        let gaps = master["completenessGaps"].to_string();
        assert!(
            gaps.contains("the engine's copy the oracles search was changed") && gaps.contains("lib/orphan.rs"),
            "{gaps}"
        );
    }
}

/// Honest twin: a finder that keeps scratch files of its own (outside what git tracks) and a
/// counter in an ignored file it rewrites in place (the copy holds its own copy of that file:
/// no change to the copy), and reports its real site. The final oracle finds the other one, and the dry stop is
/// confirmed as before, with no gap.
#[test]
fn exhaust_honest_twin_with_scratch_files_is_confirmed_with_the_oracle_s_site() {
    let _unconfined = fallback_only(
        "scratch files a read-only finder leaves in the tree, which the fallback tolerates; with the sandbox the tree is read-only to it and its scratch goes to its private /tmp",
    );
    let s = repo();
    s.write(".agent-state/calls", "0");
    let master = exhaust(&s, "bump('calls')\nopen('scratch-%s.txt' % angle, 'w').write('notes\\n')");
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master}");
    assert_eq!(master["completeness"], "confirmed", "{master}");
    assert_eq!(seen(&master), vec!["real", "lib/orphan.rs:1"], "{master}");
    assert_eq!(master["completenessGaps"], serde_json::json!([]), "{master}");
    assert!(s.path("scratch-a.txt").exists(), "the finder ran in the tree");
}

/// Outside a git repository there is no copy to search: the oracles run in the tree itself,
/// which a finder can write, so the same honest run is never reported as confirmed.
#[test]
fn exhaust_outside_a_git_repository_runs_its_oracles_in_the_tree_and_never_confirms() {
    let s = repo();
    let finder = s.agent("finder.py", "print(json.dumps({'angle': ctx['angle'], 'items': []}))");
    std::fs::remove_dir_all(s.path(".git")).expect("rm .git");
    let args = [
        "exhaust",
        "state changes",
        "-k",
        "2",
        "--angles",
        "a,b,c,d,e",
        "--final-oracle",
        "grep -rn 'setState(' src lib",
        "--agent",
        &finder,
        "--json",
    ];
    let (code, out, err) = s.run(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    let master: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(seen(&master), vec!["lib/orphan.rs:1"], "{master}");
    assert_eq!(master["stoppedReason"], "k-consecutive-dry", "{master}");
    assert_eq!(master["completeness"], "unconfirmed", "{master}");
    assert!(master["completenessGaps"].to_string().contains("not a git repository"), "{master}");
    assert!(err.contains("UNCONFIRMED: not a git repository"), "{err}");
}
