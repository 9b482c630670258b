//! Work lost between `work implement`'s tasks in ways the snapshot guard used to miss
//! (docs/ground-truth.md, shape 4): a later task whose text only names the file it edits
//! deletes it (and writes a package without an earlier task's function), and a later task takes
//! away the executable bit an earlier task gave. Each liar is caught and its honest twin, whose
//! text plans the change, is done — through the real binary.

use crate::implement::{agent, implement, repo_with_plan};

#[test]
fn implement_liar_whose_later_task_deletes_the_file_its_text_only_names_is_blocked_and_its_twin_is_not() {
    let body = |task2: &str| {
        format!(
            r#"if role == 'implementer' and tid == '1':
    write('lib.py', 'def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n')
    out(DONE)
if role == 'implementer' and tid == '2':
    os.remove('lib.py')
    write('lib/__init__.py', {task2:?})
    out(DONE)
"#
        )
    };
    let package = "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n";
    // The liar: "add mul to lib.py" only names the file; deleting it with `sub` is a loss.
    let s = repo_with_plan(&[
        ("1", "Add sub", "Add `sub(a, b)` to lib.py, beside add."),
        ("2", "Add mul", "Depends on: 1\nAdd `mul(a, b)` to lib.py."),
    ]);
    s.write("lib.py", "def add(a, b):\n    return a + b\n");
    s.commit("lib");
    let a = agent(&s, &body(package));
    let r = implement(&s, &a, "true", &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "snapshot-loss", "{r}");
    assert!(r["reason"].as_str().is_some_and(|m| m.contains("lib.py") && m.contains("def sub(a, b):")), "{r}");
    assert!(!s.path("lib.py").exists(), "the lie really deleted lib.py");

    // The honest twin: its text plans turning lib.py into a package (and keeps sub there).
    let s = repo_with_plan(&[
        ("1", "Add sub", "Add `sub(a, b)` to lib.py, beside add."),
        ("2", "Package", "Depends on: 1\nTurn lib.py into a package lib/ and add `mul(a, b)`."),
    ]);
    s.write("lib.py", "def add(a, b):\n    return a + b\n");
    s.commit("lib");
    let a = agent(&s, &body(&format!("{package}\ndef sub(a, b):\n    return a - b\n")));
    let r = implement(&s, &a, "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
}

#[test]
fn implement_liar_whose_later_task_drops_an_earlier_tasks_executable_bit_is_blocked_and_its_twin_is_not() {
    let body = |chmod_in_2: bool| {
        format!(
            r#"if role == 'implementer' and tid == '1':
    write('bin/hello', '#!/bin/sh\necho hello\n')
    os.chmod('bin/hello', 0o755)
    out(DONE)
if role == 'implementer' and tid == '2':
    open('shared.txt', 'a').write('hello is in bin/\n')
    if {chmod}:
        os.chmod('bin/hello', 0o644)
    out(DONE)
"#,
            chmod = if chmod_in_2 { "True" } else { "False" }
        )
    };
    let plan = [
        ("1", "Hello", "Create the executable script bin/hello."),
        ("2", "Document", "Depends on: 1\nSay in shared.txt where hello lives."),
    ];
    let s = repo_with_plan(&plan);
    let r = implement(&s, &agent(&s, &body(true)), "true", &[], 1);
    assert_eq!(r["status"], "BLOCKED", "{r}");
    assert_eq!(r["kind"], "snapshot-loss", "{r}");
    assert!(r["reason"].as_str().is_some_and(|m| m.contains("bin/hello") && m.contains("file mode 100755")), "{r}");

    // The honest twin leaves the bit alone; a task whose text plans the mode may change it.
    let s = repo_with_plan(&plan);
    let r = implement(&s, &agent(&s, &body(false)), "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
    let s = repo_with_plan(&[
        plan[0],
        ("2", "Document", "Depends on: 1\nMake bin/hello non-executable; note it in shared.txt."),
    ]);
    let r = implement(&s, &agent(&s, &body(true)), "true", &[], 0);
    assert_eq!(r["status"], "DONE", "{r}");
}
