//! `work loop workspace-status` over a `workspace.toml` written as the work-loop scripts write
//! it: target entries `{ path, kind, source, summary, needs }`, whose `source` is a provenance
//! record and whose `needs` name governed documents — through the real binary.

use crate::support::Scenario;
use serde_json::Value;

fn status(s: &Scenario) -> (i32, Value, String) {
    let (code, out, err) = s.run(&["loop", "workspace-status", "--json"]);
    let doc = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("one JSON document ({e}): {out} {err}"));
    (code, doc, err)
}

fn paths(doc: &Value, key: &str) -> Vec<String> {
    doc["canonical"][key]
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|e| e["path"].as_str().map(String::from))
        .collect()
}

fn findings(doc: &Value) -> Vec<(String, String, String)> {
    doc["canonical"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
            (s("code"), s("path"), s("message"))
        })
        .collect()
}

/// An Approved spec with a plan, its preamble as the scripts' specs write it.
fn spec(s: &Scenario, slug: &str, extra: &str) {
    s.write(
        &format!("docs/specs/{slug}/spec.md"),
        &format!("# Spec: {slug}\n\n- **Status:** Approved\n- **Owner:** someone\n{extra}\n## Problem\n\nx\n"),
    );
    s.write(&format!("docs/specs/{slug}/plan.md"), "# Plan\n\n- **Status:** Approved\n\n### T1: a\n");
}

const HEADER: &str = "# workspace.toml\n\n[backlog]\nopen = []\nclosed = []\n\n[\"ini-001\"]\nname = \"Core\"\nstatus = \"active\"\n\n[\"ini-001\".work]\n";

#[test]
fn a_workspace_in_the_scripts_format_is_read_and_a_bad_provenance_still_blocks() {
    let s = Scenario::new();
    spec(&s, "plain", "");
    spec(&s, "briefed", "- **Brief:** docs/product/briefs/programme.md\n");
    spec(&s, "tracked", "");
    spec(&s, "in-flight", "");
    s.write("docs/specs/in-flight/spec.md", "# Spec\n\n- **Status:** Implementing\n");
    for slug in ["made-up", "tracker-bare", "stray-key", "wrong-parent"] {
        spec(&s, slug, "");
    }
    spec(&s, "done", "");
    s.write("docs/specs/done/spec.md", "# Spec\n\n- **Status:** Shipped\n");
    s.write(
        "workspace.toml",
        &format!(
            "{HEADER}queue = [\n\
  {{path = \"docs/specs/plain/spec.md\", kind = \"spec\", source = {{mode = \"repo-origin\"}}, summary = \"Plain\", needs = []}},\n\
  {{path = \"docs/specs/briefed/spec.md\", kind = \"spec\", source = {{mode = \"repo-origin\", ref = \"docs/product/briefs/programme.md\", revision = \"sha256-bytes-v1:ab\", parent = \"docs/product/briefs/programme.md\"}}, summary = \"Briefed\", needs = []}},\n\
  {{path = \"docs/specs/tracked/spec.md\", kind = \"spec\", source = {{mode = \"tracker-origin\", ref = \"example://PROJ-1\", revision = \"rev-1\", tracker_profile = {{id = \"jira\", version = \"1\"}}}}, summary = \"Tracked\", needs = []}},\n\
  {{path = \"docs/specs/made-up/spec.md\", kind = \"spec\", source = {{mode = \"hearsay\"}}, summary = \"Liar\", needs = []}},\n\
  {{path = \"docs/specs/tracker-bare/spec.md\", kind = \"spec\", source = {{mode = \"tracker-origin\"}}, summary = \"Liar\", needs = []}},\n\
  {{path = \"docs/specs/stray-key/spec.md\", kind = \"spec\", source = {{mode = \"repo-origin\", approved_by = \"me\"}}, summary = \"Liar\", needs = []}},\n\
  {{path = \"docs/specs/wrong-parent/spec.md\", kind = \"spec\", source = {{mode = \"repo-origin\", parent = \"docs/product/briefs/other.md\"}}, summary = \"Liar\", needs = []}},\n\
]\n\
active = [\n\
  {{path = \"docs/specs/in-flight/spec.md\", kind = \"spec\", source = {{mode = \"repo-origin\"}}, summary = \"Going\", needs = []}},\n\
  {{path = \"docs/specs/done/spec.md\", kind = \"spec\", source = {{mode = \"repo-origin\"}}, summary = \"Shipped, not moved\", needs = []}},\n\
  {{path = \"docs/product/design/d.md\", kind = \"design\", source = {{mode = \"repo-origin\"}}, summary = \"Not work\", needs = []}},\n\
]\n"
        ),
    );
    let (code, doc, err) = status(&s);
    assert_eq!(code, 0, "{err}");
    // The honest entries: ready and active, as the scripts report them.
    assert_eq!(paths(&doc, "ready"), ["docs/specs/plain", "docs/specs/briefed", "docs/specs/tracked"], "{doc}");
    assert_eq!(paths(&doc, "active"), ["docs/specs/in-flight"]);
    assert_eq!(doc["next_action"], "resume docs/specs/in-flight/spec.md");
    // The liars: each is blocked, naming what is wrong with its provenance.
    let f = findings(&doc);
    let has = |code: &str, path: &str, word: &str| f.iter().any(|(c, p, m)| c == code && p == path && m.contains(word));
    assert!(has("invalid_provenance", "docs/specs/made-up", "source.mode"), "{f:?}");
    assert!(has("invalid_provenance", "docs/specs/tracker-bare", "`ref` and `revision`"), "{f:?}");
    assert!(has("invalid_provenance", "docs/specs/stray-key", "approved_by"), "{f:?}");
    assert!(has("provenance_mismatch", "docs/specs/wrong-parent", "docs/product/briefs/other.md"), "{f:?}");
    // A Shipped spec left in active, and a design under [work], are not work to resume.
    assert!(has("impossible_transition", "docs/specs/done", "Shipped"), "{f:?}");
    assert!(has("invalid_entry", "docs/product/design/d.md", "kind `design`"), "{f:?}");
    assert_eq!(f.len(), 6, "only the liars are blocked: {f:?}");
    // The human report says the same.
    let (code, out, _) = s.run(&["loop", "workspace-status"]);
    assert_eq!(code, 0);
    assert!(out.contains("ready    docs/specs/plain\n"), "{out}");
    assert!(out.contains("blocked  docs/specs/made-up [invalid_provenance]"), "{out}");
    // --spec on a liar is refused with its finding; on an honest entry it passes.
    let (code, out, _) = s.run(&["loop", "workspace-status", "--spec", "docs/specs/made-up/spec.md", "--json"]);
    assert_eq!(code, 1);
    assert!(out.contains("invalid_provenance"), "{out}");
    assert_eq!(s.run(&["loop", "workspace-status", "--spec", "docs/specs/tracked/spec.md"]).0, 0);
}

/// A spec that needs a design document: `design` is the design's preamble Status.
fn with_design(s: &Scenario, design_status: &str) {
    spec(s, "feature", "");
    s.write(
        "docs/product/design/feature.md",
        &format!("# Design: feature\n\n- **Status:** {design_status}\n- **Owner:** someone\n\n## Shape\n\n- **Status:** Approved\n"),
    );
    s.write(
        "workspace.toml",
        &format!(
            "{HEADER}queue = [\n\
  {{path = \"docs/specs/feature/spec.md\", kind = \"spec\", source = {{mode = \"repo-origin\"}}, summary = \"Feature\", needs = [{{type = \"local\", kind = \"design\", path = \"docs/product/design/feature.md\"}}]}},\n\
]\n"
        ),
    );
}

#[test]
fn a_spec_whose_design_document_is_a_draft_is_not_ready() {
    // The liar: an Approved spec and plan whose design is still a draft (a later section's
    // "Status: Approved" is not the document's status).
    let s = Scenario::new();
    with_design(&s, "Draft");
    let (code, doc, _) = status(&s);
    assert_eq!(code, 0);
    assert!(paths(&doc, "ready").is_empty(), "{doc}");
    let f = findings(&doc);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].0, "unsatisfied_dependency");
    assert_eq!(f[0].1, "docs/specs/feature");
    assert!(f[0].2.contains("design docs/product/design/feature.md, which is Draft, not Approved"), "{f:?}");
    let (code, out, _) = s.run(&["loop", "workspace-status", "--spec", "docs/specs/feature/spec.md"]);
    assert_eq!(code, 1, "{out}");
    // A transition line's last state counts: Draft → Review is not Approved either.
    with_design(&s, "Draft → In review");
    assert!(paths(&status(&s).1, "ready").is_empty());
    // A missing design is named as missing.
    std::fs::remove_file(s.path("docs/product/design/feature.md")).expect("rm");
    let f = findings(&status(&s).1);
    assert!(f.iter().any(|(c, _, m)| c == "unknown_dependency" && m.contains("does not exist")), "{f:?}");

    // The honest twin: the same workspace with the design Approved is ready.
    let s = Scenario::new();
    with_design(&s, "Draft → Approved");
    let (code, doc, _) = status(&s);
    assert_eq!(code, 0);
    assert_eq!(paths(&doc, "ready"), ["docs/specs/feature"], "{doc}");
    assert!(findings(&doc).is_empty());
    assert_eq!(s.run(&["loop", "workspace-status", "--spec", "docs/specs/feature/spec.md"]).0, 0);
}
