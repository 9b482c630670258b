//! lint-spec-status on crafted specs and workspace-status on crafted workspace.toml files.
#![allow(clippy::disallowed_methods, reason = "tests set up their fixtures directly")]

use serde_json::Value;
use std::path::{Path, PathBuf};
use work_loop::LoopError;
use work_loop::lint::lint;
use work_loop::workspace::workspace_status;
use work_runtime::ExitStatus;

fn repo() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(t.path()).expect("canon");
    (t, root)
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

fn codes(doc: &Value, key: &str) -> Vec<String> {
    doc[key].as_array().expect("array").iter().filter_map(|f| f["code"].as_str().map(String::from)).collect()
}

#[test]
fn lint_flags_vocabulary_acs_deferrals_and_dangling_links() {
    let (_t, root) = repo();
    write(&root, "src/real.rs", "");
    write(&root, "workspace.toml", "[backlog]\nopen = [{ slug = \"later-ok\", source = \"x\" }]\n");
    write(
        &root,
        "docs/specs/good/spec.md",
        "**Status:** Shipped\n\n## Acceptance criteria\n- [x] a\n- [ ] b (deferred: later-ok)\n\nSee [code](../../../src/real.rs).\n",
    );
    write(&root, "docs/specs/good/plan.md", "**Status:** Done\n");
    write(&root, "docs/specs/planvocab/spec.md", "Status: Done\n");
    write(&root, "docs/specs/unknown/spec.md", "Status: Finished\n");
    write(
        &root,
        "docs/specs/unchecked/spec.md",
        "**Status:** Shipped\n## Acceptance Criteria\n- [ ] not done\n- [ ] deferred (deferred: nowhere)\n",
    );
    write(
        &root,
        "docs/specs/draft/spec.md",
        "**Status:** Draft\n## Acceptance criteria\n- [ ] fine while drafting\n[gone](missing.md) [web](https://x.y/z) [anchor](#top)\n",
    );
    let out = lint(&root, ".", Some("HEAD")).expect("lint");
    assert_eq!(out.exit, ExitStatus::Unsuccessful);
    let f = out.json["findings"].as_array().expect("findings");
    let has = |path: &str, code: &str| {
        f.iter().any(|x| x["path"].as_str().is_some_and(|p| p.contains(path)) && x["code"] == code)
    };
    assert!(has("planvocab", "plan_vocabulary_in_spec"));
    assert!(has("unknown", "unknown_status"));
    assert!(has("unchecked", "unchecked_acceptance_criterion"));
    assert!(has("unchecked", "unanchored_deferral"));
    assert!(has("draft", "dangling_reference"));
    assert!(!f.iter().any(|x| x["path"].as_str().is_some_and(|p| p.contains("good"))), "{f:?}");
    assert!(!has("draft", "unchecked_acceptance_criterion"));
    let dangling = f.iter().find(|x| x["code"] == "dangling_reference").expect("dangling");
    assert_eq!(dangling["severity"], "warning");
    assert_eq!(out.json["specs_checked"].as_array().map(Vec::len), Some(5));
}

#[test]
fn lint_warnings_alone_pass_and_bad_toml_is_bad_input() {
    let (_t, root) = repo();
    write(&root, "docs/specs/a/spec.md", "Status: Approved\n[x](nope.md)\n");
    let out = lint(&root, ".", Some("HEAD")).expect("lint");
    assert_eq!(out.exit, ExitStatus::Done);
    assert_eq!(out.json["warnings"], 1);
    write(&root, "workspace.toml", "[backlog\nopen = 3\n");
    assert!(matches!(lint(&root, ".", None), Err(LoopError::BadInput(_))));
    assert!(matches!(lint(&root, "../x", None), Err(LoopError::BadInput(_))));
    // An absolute directory outside is its own root; one that does not exist is bad input.
    assert!(matches!(lint(&root, "/nonexistent-work-loop-root", None), Err(LoopError::BadInput(_))));
}

#[test]
fn workspace_status_canonical_sets_and_findings() {
    let (_t, root) = repo();
    write(
        &root,
        "workspace.toml",
        r#"
["ini-001"]
name = "Initiative one"
status = "active"
milestone = "M1"

["ini-001".shaping_queue]
active = ["shape-me"]

[work]
queue = [
  "ready-one",
  "docs/specs/no-plan/",
  { slug = "draft-one", source = "intake/2026-01-01" },
  { slug = "needs-dep", depends_on = ["draft-one"] },
  "../escape",
  "missing-spec",
  "shape-me",
  { slug = "bad-source", source = "" },
]
active = ["in-flight", "ready-one"]
current = ["old-style"]
"#,
    );
    let approved = "**Status:** Approved\n";
    for d in ["ready-one", "no-plan", "needs-dep", "shape-me", "bad-source"] {
        write(&root, &format!("docs/specs/{d}/spec.md"), approved);
        if d != "no-plan" {
            write(&root, &format!("docs/specs/{d}/plan.md"), "Status: Approved\n## Task 1: a\n");
        }
    }
    write(&root, "docs/specs/draft-one/spec.md", "Status: Draft\n");
    write(&root, "docs/specs/draft-one/plan.md", "Status: Drafting\n");
    write(&root, "docs/specs/in-flight/spec.md", "Status: Implementing\n");
    write(&root, "docs/specs/in-flight/plan.md", "Status: Approved\n");
    write(&root, "docs/specs/stray/spec.md", "Status: Approved\n");
    let out = workspace_status(&root, None).expect("status");
    let doc = &out.json;
    let canon = &doc["canonical"];
    let paths = |k: &str| -> Vec<String> {
        canon[k].as_array().expect("a").iter().filter_map(|e| e["path"].as_str().map(String::from)).collect()
    };
    assert_eq!(paths("ready"), Vec::<String>::new(), "ready-one is in both lists: duplicate");
    assert_eq!(paths("active"), ["docs/specs/in-flight"]);
    let all = codes(canon, "findings");
    for want in [
        "missing_plan",
        "unapproved_spec",
        "unsatisfied_dependency",
        "unsafe_path",
        "missing_spec",
        "shaping_item",
        "invalid_provenance",
        "duplicate_membership",
        "unregistered_work",
    ] {
        assert!(all.iter().any(|c| c == want), "missing finding {want} in {all:?}");
    }
    assert_eq!(doc["legacy_memberships"][0]["key"], "current");
    assert_eq!(doc["initiatives"][0]["id"], "ini-001");
    assert_eq!(doc["next_action"], "resume docs/specs/in-flight/spec.md");
    for f in canon["findings"].as_array().expect("f") {
        assert!(f["next_action"].as_str().is_some_and(|s| !s.is_empty()));
    }
    // --spec: canonical active passes, anything else is refused with its finding.
    assert_eq!(workspace_status(&root, Some("docs/specs/in-flight/")).expect("s").exit, ExitStatus::Done);
    let nope = workspace_status(&root, Some("docs/specs/stray")).expect("s");
    assert_eq!(nope.exit, ExitStatus::Unsuccessful);
    assert_eq!(nope.json["spec"]["findings"][0]["code"], "unregistered_work");
    let np = workspace_status(&root, Some("docs/specs/no-plan")).expect("s");
    assert_eq!(np.json["spec"]["findings"][0]["code"], "missing_plan");
    assert!(matches!(workspace_status(&root, Some("../x")), Err(LoopError::BadInput(_))));
}

#[test]
fn workspace_status_ready_queue_order_and_absent_file() {
    let (_t, root) = repo();
    let none = workspace_status(&root, None).expect("no file");
    assert_eq!(none.json["workspace_present"], false);
    write(&root, "workspace.toml", "[work]\nqueue = [\"b\", \"a\"]\n");
    for d in ["a", "b"] {
        write(&root, &format!("docs/specs/{d}/spec.md"), "Status: Approved\n");
        write(&root, &format!("docs/specs/{d}/plan.md"), "Status: Approved\n");
    }
    let out = workspace_status(&root, None).expect("ok");
    assert_eq!(out.json["canonical"]["ready"][0]["path"], "docs/specs/b");
    assert_eq!(out.json["canonical"]["ready"][1]["path"], "docs/specs/a");
    assert_eq!(out.json["next_action"], "start docs/specs/b/spec.md (first canonical ready item)");
    write(&root, "workspace.toml", "[work\n");
    assert!(matches!(workspace_status(&root, None), Err(LoopError::BadInput(_))));
}

#[test]
fn lint_root_may_be_an_absolute_path_inside_the_repository() {
    let (_t, root) = repo();
    write(&root, "docs/specs/a/spec.md", "Status: Implementing\n");
    write(&root, "sub/docs/specs/b/spec.md", "Status: Executing\n");
    let abs = root.display().to_string();
    let out = lint(&root, &abs, None).expect("the root itself, absolute");
    assert_eq!((out.exit, out.json["root"].as_str()), (ExitStatus::Done, Some(".")));
    let out = lint(&root, &format!("{abs}/"), None).expect("with a trailing slash");
    assert_eq!(out.exit, ExitStatus::Done);
    let out = lint(&root, &format!("{abs}/sub"), None).expect("a directory under the root");
    assert_eq!((out.exit, out.json["root"].as_str()), (ExitStatus::Unsuccessful, Some("sub")));
    // A directory outside is linted as its own root, as the scripts take it; a symlink inside
    // that leads outside, a missing path and `/` are refused.
    let outside = tempfile::tempdir().expect("outside");
    let outside_real = std::fs::canonicalize(outside.path()).expect("canon").display().to_string();
    assert!(lint(&root, &outside_real, None).is_ok());
    std::os::unix::fs::symlink(outside.path(), root.join("escape")).expect("symlink");
    for bad in [format!("{abs}/escape"), format!("{abs}/missing"), "/".into()] {
        assert!(matches!(lint(&root, &bad, None), Err(LoopError::BadInput(_))), "{bad} accepted");
    }
    write(&root, "file.txt", "");
    assert!(matches!(lint(&root, &format!("{abs}/file.txt"), None), Err(LoopError::BadInput(_))));
}
