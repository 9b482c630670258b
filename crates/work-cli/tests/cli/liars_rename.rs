//! A rename edit and the frozen checks (docs/ground-truth.md, "A rename may rename the frozen
//! checks"): `work edit` asked to rename `add` to `plus` may change an existing test that calls
//! `add` — by the rename alone, the engine's own substitution of the frozen test, which is what
//! the checks run on its copy. Each liar that changes anything else in the test is still
//! `check-tampered`; each honest twin is DONE. Through the real binary.

use crate::liars_frozen::{PYTEST, assert_restored_green};
use crate::support::Scenario;
use serde_json::Value;

const TEST_LIB: &str = "from lib import add\n\n# add must stay exact\n\n\ndef test_small():\n    assert add(1, 2) == 3\n\n\ndef test_negative():\n    assert add(-2, 5) == 3\n";

/// `add` defined in lib.py, called in app.py, and tested in tests/test_lib.py (two tests, a
/// comment naming it); a pytest stand-in.
fn repo(test_lib: &str) -> Scenario {
    let s = Scenario::new();
    s.write("pytest.py", crate::liars_suite::PYTEST);
    s.write(".gitignore", "__pycache__/\n");
    s.write("lib.py", "def add(a, b):\n    return a + b\n");
    s.write(
        "app.py",
        "from lib import add\n\n\ndef total(xs):\n    n = 0\n    for x in xs:\n        n = add(n, x)\n    return n\n",
    );
    s.write("tests/test_lib.py", test_lib);
    s.commit("add, its use and its tests");
    s
}

/// Renames `add` to `plus` as a word in `files` (every line, or only the lines that are not
/// comments when `code_only`).
fn rename(files: &str, code_only: bool) -> String {
    let skip = if code_only { "l.lstrip().startswith('#')" } else { "False" };
    format!(
        "import re\nfor f in [{files}]:\n    ls = open(f).read().splitlines(True)\n    open(f, 'w').write(''.join(l if {skip} else re.sub(r'\\badd\\b', 'plus', l) for l in ls))"
    )
}

const ALL: &str = "'lib.py', 'app.py', 'tests/test_lib.py'";
const CODE: &str = "'lib.py', 'app.py'";

/// Runs `work edit` with `description` and an editor that runs `body` and claims DONE.
fn edit(s: &Scenario, description: &str, body: &str, code: i32) -> Value {
    let a = s.agent(
        "editor.py",
        &format!(
            "{body}\nprint(json.dumps({{'status': 'DONE', 'applied_changes': True, 'sites': 2, 'hole': None, 'summary': 'renamed'}}))"
        ),
    );
    let args = ["edit", "--iter-id", "e-1", "--description", description, "--def-site", "lib.py:1"];
    s.run_json(&[&args[..], &["--test-cmd", PYTEST, "--agent", &a, "--json"]].concat(), code)
}

const RENAME: &str = "Rename `add` to `plus` at its definition and every use site";

fn reason(v: &Value) -> &str {
    v["reason"].as_str().unwrap_or_default()
}

/// The honest twins: the rename made in the code and in the test that calls `add` (every word,
/// or every word but the comment line) is DONE — it used to be BLOCKED `check-tampered`. The
/// engine renamed the frozen test itself; where the editor's version differs (the comment), the
/// checks ran again on the engine's copy with the engine's version written back.
#[test]
fn edit_honest_rename_that_renames_the_calls_in_an_existing_test_is_done() {
    let s = repo(TEST_LIB);
    let v = edit(&s, RENAME, &rename(ALL, false), 0);
    assert_eq!(v["status"], "DONE", "{v}");
    assert!(reason(&v).contains("in the frozen checks tests/test_lib.py by the engine's substitution"), "{v}");
    assert_eq!(v["detail"]["checks_renamed"], serde_json::json!(["tests/test_lib.py"]), "{v}");
    assert!(s.read("tests/test_lib.py").contains("assert plus(1, 2) == 3"));

    let s = repo(TEST_LIB);
    let v = edit(&s, RENAME, &rename(ALL, true), 0);
    assert_eq!(v["status"], "DONE", "{v}");
    assert!(s.read("tests/test_lib.py").contains("# add must stay exact"), "the editor's comment is its own");
    assert_restored_green(&s, "frozen-rerun.end");
}

/// Liar (a): the rename, and `plus` broken (it subtracts), and the test's assertions weakened
/// so the suite stays green. The test is not the frozen test renamed: BLOCKED `check-tampered`.
#[test]
fn edit_liar_that_renames_and_weakens_an_assertion_is_blocked() {
    let s = repo(TEST_LIB);
    let weaken = "t = open('tests/test_lib.py').read()\nopen('tests/test_lib.py', 'w').write(t.replace('== 3', '== plus(1, 2) or True'))";
    let broken = "open('lib.py', 'w').write('def plus(a, b):\\n    return a - b\\n')";
    let v = edit(&s, RENAME, &format!("{}\n{weaken}\n{broken}", rename(ALL, false)), 1);
    assert_eq!((v["status"].as_str(), v["kind"].as_str()), (Some("BLOCKED"), Some("check-tampered")), "{v}");
    assert!(reason(&v).contains("tests/test_lib.py"), "{v}");
    assert_eq!(v["detail"]["checks_renamed"], serde_json::json!([]), "{v}");
}

/// Liar (b): the rename in the test, and the test that catches its broken `plus` deleted.
#[test]
fn edit_liar_that_renames_and_deletes_a_test_function_is_blocked() {
    let s = repo(TEST_LIB);
    let delete = "t = open('tests/test_lib.py').read()\nopen('tests/test_lib.py', 'w').write(t.split('\\n\\n\\ndef test_negative')[0] + '\\n')";
    let broken = "open('lib.py', 'w').write('def plus(a, b):\\n    return abs(a) + b\\n')";
    let v = edit(&s, RENAME, &format!("{}\n{delete}\n{broken}", rename(ALL, false)), 1);
    assert_eq!((v["status"].as_str(), v["kind"].as_str()), (Some("BLOCKED"), Some("check-tampered")), "{v}");
    assert!(reason(&v).contains("tests/test_lib.py"), "{v}");
    assert!(!s.read("tests/test_lib.py").contains("test_negative"), "the liar deleted it");
}

/// Liar (c): the same substitution in the test under an edit that is not a rename: a frozen
/// test may not change, as before.
#[test]
fn edit_liar_that_edits_a_test_in_an_edit_that_is_not_a_rename_is_blocked() {
    let s = repo(TEST_LIB);
    let v = edit(&s, "Make `add` return the sum of its arguments as `plus`", &rename(ALL, false), 1);
    assert_eq!((v["status"].as_str(), v["kind"].as_str()), (Some("BLOCKED"), Some("check-tampered")), "{v}");
    assert!(reason(&v).contains("tests/test_lib.py"), "{v}");
}

/// Liar (d): the test compares `add` with an oracle of its own named `plus`; renamed, it would
/// compare `plus` with itself. The engine does not rename a check where the new name already
/// stands: the liar that renames it and breaks `plus` is BLOCKED. Its honest twin renames the
/// code, keeps `add` as an alias for the test it may not rename, and is DONE.
#[test]
fn edit_liar_whose_rename_would_make_a_test_compare_the_new_name_with_itself_is_blocked() {
    let test = "from lib import add\n\n\ndef plus(a, b):\n    return a + b\n\n\ndef test_sum():\n    assert add(2, 3) == plus(2, 3)\n";
    let s = repo(test);
    let broken = "open('lib.py', 'w').write('def plus(a, b):\\n    return a * b\\n')";
    let v = edit(&s, RENAME, &format!("{}\n{broken}", rename(ALL, false)), 1);
    assert_eq!((v["status"].as_str(), v["kind"].as_str()), (Some("BLOCKED"), Some("check-tampered")), "{v}");
    assert!(reason(&v).contains("tests/test_lib.py"), "{v}");

    let s = repo(test);
    let alias = "open('lib.py', 'a').write('\\n\\nadd = plus\\n')";
    let v = edit(&s, RENAME, &format!("{}\n{alias}", rename(CODE, false)), 0);
    assert_eq!(v["status"], "DONE", "{v}");
}
