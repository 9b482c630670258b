//! The parts of a `workspace.toml` entry beyond its spec path, as the work-loop scripts'
//! workspace writes them: the provenance record (`source`) and the hard dependencies (`needs`).
//!
//! A target entry is `{ path = "docs/specs/<slug>/spec.md", kind = "spec", source = { mode =
//! "repo-origin" }, summary = "…", needs = [{ type = "local", kind = "design", path = "…" }] }`.
//! `source` is the provenance: where the work came from. `mode` is `repo-origin` (written in this
//! repository) or `tracker-origin` (imported from a tracker, which then needs `ref` and
//! `revision`); `ref`, `revision`, `parent` (the repository-relative document it was derived
//! from), `coordination` and `tracker_profile = { id, version }` are the only other keys. The
//! project's older form, a non-empty string `source = "intake/…"`, is accepted too.
//!
//! A need names a governed document by kind and path; it is satisfied when that document is
//! in its kind's terminal status: a spec Shipped, a design Approved, a brief Ready, Executing
//! or Shipped, an intent Accepted or Fulfilled, research Complete, a defect Closed with
//! `Resolution: fixed`. A document's status is its `- **Status:** X` preamble line (the last
//! state of an `A → B` transition line). A `cross-repo` need is never taken as satisfied here.

use crate::common::{confine, read_status};
use std::path::Path;

/// The document kinds a need may name.
const KINDS: [&str; 6] = ["intent", "research", "design", "brief", "spec", "defect"];
/// The keys a `source` table may hold.
const SOURCE_KEYS: [&str; 6] = ["mode", "ref", "revision", "parent", "coordination", "tracker_profile"];

/// One hard dependency on a governed document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Need {
    /// `local` or `cross-repo`.
    pub kind_of_need: String,
    /// The document kind (`design`, `spec` …).
    pub kind: String,
    /// The repository-relative path of the document.
    pub path: String,
}

/// The validated provenance: the parent it names, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Provenance {
    /// True for the scripts' record form (a table), whose `parent` must match the spec's.
    pub is_record: bool,
    /// `source.parent`.
    pub parent: Option<String>,
}

fn bounded(v: Option<&toml::Value>, key: &str, max: usize) -> Result<Option<String>, String> {
    match v {
        None => Ok(None),
        Some(toml::Value::String(s)) if !s.trim().is_empty() && s.len() <= max => Ok(Some(s.clone())),
        Some(_) => Err(format!("source.{key} is not a non-empty string of at most {max} characters")),
    }
}

fn relative_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\\')
        && !p.contains(':')
        && p.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
}

/// Validates `source`; `Err` says what is wrong with it.
pub(crate) fn parse_source(v: &toml::Value) -> Result<Provenance, String> {
    let t = match v {
        toml::Value::String(s) if !s.trim().is_empty() => return Ok(Provenance::default()),
        toml::Value::String(_) => return Err("source is empty".into()),
        toml::Value::Table(t) => t,
        other => return Err(format!("source is a {}, not a table or a string", other.type_str())),
    };
    if let Some(k) = t.keys().find(|k| !SOURCE_KEYS.contains(&k.as_str())) {
        return Err(format!("source has an unknown key `{k}` (keys: {})", SOURCE_KEYS.join(", ")));
    }
    let mode = t.get("mode").and_then(toml::Value::as_str);
    if !matches!(mode, Some("repo-origin" | "tracker-origin")) {
        return Err("source.mode is not `repo-origin` or `tracker-origin`".into());
    }
    let r#ref = bounded(t.get("ref"), "ref", 500)?;
    let revision = bounded(t.get("revision"), "revision", 200)?;
    let parent = bounded(t.get("parent"), "parent", 500)?;
    bounded(t.get("coordination"), "coordination", 300)?;
    if let Some(p) = &parent
        && !relative_path(p)
    {
        return Err(format!("source.parent `{p}` is not a repository-relative path"));
    }
    if let Some(tp) = t.get("tracker_profile") {
        let ok = tp.as_table().is_some_and(|tp| {
            tp.len() == 2 && ["id", "version"].iter().all(|k| tp.get(*k).and_then(toml::Value::as_str).is_some())
        });
        if !ok {
            return Err("source.tracker_profile is not `{ id, version }`".into());
        }
    }
    if mode == Some("tracker-origin") && (r#ref.is_none() || revision.is_none()) {
        return Err("a tracker-origin source needs `ref` and `revision`".into());
    }
    Ok(Provenance { is_record: true, parent })
}

/// Parses `needs`: an array of `{ type, kind, path }` tables (`cross-repo` needs carry more
/// keys). `Err` says what is wrong.
pub(crate) fn parse_needs(v: &toml::Value) -> Result<Vec<Need>, String> {
    const OLD_FORM: &str =
        "`needs` are in the older queue-prefix form (`work:…`): write each as `{ type = \"local\", kind, path }`";
    let items = match v {
        toml::Value::Array(items) => items,
        toml::Value::String(_) => return Err(OLD_FORM.into()),
        _ => return Err("`needs` is not an array".into()),
    };
    let mut out = Vec::new();
    for item in items {
        let Some(t) = item.as_table() else {
            return Err(if item.is_str() { OLD_FORM } else { "a need is not a table `{ type, kind, path }`" }.into());
        };
        let field = |k: &str| t.get(k).and_then(toml::Value::as_str).map(str::to_string);
        let (Some(kind_of_need), Some(kind), Some(path)) = (field("type"), field("kind"), field("path")) else {
            return Err("a need lacks `type`, `kind` or `path`".into());
        };
        if !matches!(kind_of_need.as_str(), "local" | "cross-repo") {
            return Err(format!("need type `{kind_of_need}` is not `local` or `cross-repo`"));
        }
        if !KINDS.contains(&kind.as_str()) {
            return Err(format!("need kind `{kind}` is not one of {}", KINDS.join(", ")));
        }
        if !relative_path(&path) {
            return Err(format!("need path `{path}` is not a repository-relative path"));
        }
        out.push(Need { kind_of_need, kind, path });
    }
    Ok(out)
}

/// The `- **Name:** value` fields of a document's preamble (before its first `##` heading),
/// by lower-case name; the first occurrence wins.
pub(crate) fn preamble_field(text: &str, name: &str) -> Option<String> {
    for (_, line) in crate::common::unfenced(text.lines()) {
        let t = line.trim_start();
        if t.starts_with("##") {
            return None;
        }
        let Some(rest) = t.strip_prefix("- **") else { continue };
        let Some((n, value)) = rest.split_once(":**") else { continue };
        if n.trim().eq_ignore_ascii_case(name) {
            let value = value.split("<!--").next().unwrap_or("").trim();
            return Some(value.to_string());
        }
    }
    None
}

/// A governed document's status: a spec's as every verb reads it, any other's from its
/// preamble (`Draft → Approved` reads as `Approved`).
fn document_status(kind: &str, text: &str) -> Option<String> {
    if kind == "spec" {
        return read_status(text);
    }
    let v = preamble_field(text, "status")?;
    let v = match v.rsplit_once('→') {
        Some((_, last)) => last.trim().to_string(),
        None => v,
    };
    v.split_whitespace().next().map(|w| w.trim_matches(|c: char| c == '*' || c == '`').to_string())
}

fn terminal(kind: &str) -> &'static [&'static str] {
    match kind {
        "spec" => &["Shipped"],
        "design" => &["Approved"],
        "brief" => &["Ready", "Executing", "Shipped"],
        "intent" => &["Accepted", "Fulfilled"],
        "research" => &["Complete"],
        "defect" => &["Closed"],
        _ => &[],
    }
}

/// Why `need` is not satisfied: `(code, message)`, `None` when it is.
pub(crate) fn need_finding(repo_root: &Path, need: &Need) -> Option<(&'static str, String)> {
    let Need { kind, path, .. } = need;
    if need.kind_of_need == "cross-repo" {
        return Some((
            "unsatisfied_dependency",
            format!("needs cross-repo {kind} {path}: a receipt from another repository is not checked here"),
        ));
    }
    // A spec need may name the directory or its spec.md.
    let file = if kind == "spec" && !path.ends_with(".md") { format!("{path}/spec.md") } else { path.clone() };
    let text = confine(repo_root, &file).ok().filter(|p| p.is_file()).and_then(|p| std::fs::read_to_string(p).ok());
    let Some(text) = text else {
        return Some(("unknown_dependency", format!("needs {kind} {file}, which does not exist")));
    };
    let status = document_status(kind, &text);
    let want = terminal(kind);
    let done = status.as_deref().is_some_and(|s| want.contains(&s))
        && (kind != "defect"
            || preamble_field(&text, "resolution").is_some_and(|r| r.split_whitespace().next() == Some("fixed")));
    if done {
        return None;
    }
    let is = status.unwrap_or_else(|| "without a Status line".into());
    let need_is = if kind == "defect" { "Closed with Resolution: fixed".to_string() } else { want.join(" or ") };
    Some(("unsatisfied_dependency", format!("needs {kind} {file}, which is {is}, not {need_is}")))
}

/// The parent a spec's preamble names (`Brief`, `Source parent` or `Parent`), `none` read as
/// no parent.
pub(crate) fn document_parent(text: &str) -> Option<String> {
    ["brief", "source parent", "parent"]
        .iter()
        .find_map(|n| preamble_field(text, n))
        .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("none"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Result<Provenance, String> {
        let v: toml::Table = toml::from_str(&format!("source = {text}")).expect("toml");
        parse_source(&v["source"])
    }

    #[test]
    fn a_provenance_record_is_validated_as_the_scripts_do() {
        assert_eq!(source(r#"{ mode = "repo-origin" }"#), Ok(Provenance { is_record: true, parent: None }));
        assert!(source(r#"{ mode = "tracker-origin", ref = "x://1", revision = "r" }"#).is_ok());
        assert_eq!(source(r#""intake/2026""#), Ok(Provenance::default()));
        for bad in [
            r#"{ mode = "hearsay" }"#,
            r#"{ mode = "tracker-origin", ref = "x://1" }"#,
            r#"{ mode = "repo-origin", who = "me" }"#,
            r#"{ mode = "repo-origin", parent = "../out.md" }"#,
            r#"{ mode = "repo-origin", tracker_profile = { id = "j" } }"#,
            r#"{ mode = "repo-origin", ref = "" }"#,
            r#""""#,
            "3",
        ] {
            assert!(source(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_status_is_the_preamble_line_only() {
        let doc = "# D\n\n```\n- **Status:** Approved\n```\n- **Status:** Draft <!-- Draft | Approved -->\n\n## S\n- **Status:** Approved\n";
        assert_eq!(document_status("design", doc).as_deref(), Some("Draft"));
        assert_eq!(document_status("design", "- **Status:** Draft → Approved\n").as_deref(), Some("Approved"));
        assert_eq!(document_status("design", "## S\n- **Status:** Approved\n"), None);
        assert_eq!(document_parent("- **Brief:** none\n"), None);
        assert_eq!(document_parent("- **Brief:** docs/b.md\n").as_deref(), Some("docs/b.md"));
    }
}
