//! `work loop lint-spec-status --root DIR` (the `lint-spec-status.py`): mechanical
//! doc-drift checks over `DIR/docs/specs/*/spec.md` (and their plan.md):
//!
//! - status vocabulary: spec.md uses Draft | Approved | Implementing | Shipped | Archived; the
//!   plan vocabulary (Drafting | Executing | Done) in spec.md is an error (`plan_vocabulary_in_spec`);
//!   plan.md uses Drafting | Approved | Executing | Done;
//! - at ship (spec `Status: Shipped`) every acceptance criterion (a checkbox item under an
//!   "Acceptance criteria" heading) is `[x]` or carries `(deferred: <slug>)`;
//! - every `(deferred: <slug>)` resolves to an entry of `[backlog].open` in `DIR/workspace.toml`
//!   (top level or inside an initiative table), parsed with a TOML library;
//! - relative markdown links that do not resolve inside the repository are warnings.
//!
//! Exit 1 when any error is found; warnings alone keep exit 0.

use crate::common::{LoopError, LoopResult, Outcome, confine, read_status};
use crate::lint_refs;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use work_runtime::ExitStatus;
use work_runtime::fsx;

/// Spec status vocabulary.
pub const SPEC_STATUSES: [&str; 5] = ["Draft", "Approved", "Implementing", "Shipped", "Archived"];
/// Plan status vocabulary.
pub const PLAN_STATUSES: [&str; 4] = ["Drafting", "Approved", "Executing", "Done"];

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `error` or `warning`.
    pub severity: &'static str,
    /// A stable code.
    pub code: &'static str,
    /// The repository-relative file.
    pub path: String,
    /// The 1-based line, when there is one.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl Finding {
    /// A warning (a finding that keeps exit 0).
    pub fn warning(code: &'static str, path: &str, line: Option<usize>, message: String) -> Finding {
        warn(code, path, line, message)
    }
}

fn err(code: &'static str, path: &str, line: Option<usize>, message: String) -> Finding {
    Finding { severity: "error", code, path: path.into(), line, message }
}

fn warn(code: &'static str, path: &str, line: Option<usize>, message: String) -> Finding {
    Finding { severity: "warning", code, path: path.into(), line, message }
}

/// Resolves `--root`: `.` (or empty) is the repository root; a relative path is confined to
/// it; an absolute path is accepted when it resolves (through symlinks) to the repository root
/// or a directory under it, and refused otherwise. Returns the directory and its
/// repository-relative prefix (`""` for the root, else `"a/b/"`).
pub fn resolve_root(repo_root: &Path, arg: &str) -> Result<(PathBuf, String), LoopError> {
    let a = if arg == "/" { arg } else { arg.trim_end_matches('/') };
    if a.is_empty() || a == "." {
        return Ok((repo_root.to_path_buf(), String::new()));
    }
    if Path::new(a).is_absolute() {
        let real = std::fs::canonicalize(a).map_err(|e| LoopError::bad(format!("use `--root {arg}`: {e}")))?;
        let root_real = std::fs::canonicalize(repo_root)
            .map_err(|e| LoopError::bad(format!("resolve the repository root `{}`: {e}", repo_root.display())))?;
        let Ok(rel) = real.strip_prefix(&root_real) else {
            return Err(LoopError::bad(format!(
                "use `--root {arg}`: it is outside the repository `{}`",
                root_real.display()
            )));
        };
        if !real.is_dir() {
            return Err(LoopError::bad(format!("use `--root {arg}`: not a directory")));
        }
        let rel = rel.to_str().ok_or_else(|| LoopError::bad(format!("use `--root {arg}`: not UTF-8")))?;
        if rel.is_empty() {
            return Ok((repo_root.to_path_buf(), String::new()));
        }
        // Through confine again, so the prefix the lint joins is checked like any relative one.
        let p = confine(repo_root, rel)?;
        return Ok((p, format!("{rel}/")));
    }
    let p = confine(repo_root, a)?;
    if !p.is_dir() {
        return Err(LoopError::bad(format!("use `--root {arg}`: not a directory")));
    }
    Ok((p, format!("{a}/")))
}

/// The slugs of every `[backlog].open` entry (strings or tables with `slug`), at the top level
/// or inside any top-level table (an initiative).
pub fn backlog_slugs(doc: &toml::Table) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut take = |t: &toml::Table| {
        if let Some(toml::Value::Table(b)) = t.get("backlog")
            && let Some(toml::Value::Array(open)) = b.get("open")
        {
            for e in open {
                match e {
                    toml::Value::String(s) => {
                        out.insert(s.clone());
                    }
                    toml::Value::Table(t) => {
                        if let Some(toml::Value::String(s)) = t.get("slug") {
                            out.insert(s.clone());
                        }
                    }
                    _ => {}
                }
            }
        }
    };
    take(doc);
    for v in doc.values() {
        if let toml::Value::Table(t) = v {
            take(t);
        }
    }
    out
}

/// Reads and parses `workspace.toml` under `dir`; `None` when absent. Malformed TOML is bad input.
pub fn read_workspace(repo_root: &Path, prefix: &str) -> Result<Option<toml::Table>, LoopError> {
    let rel = format!("{prefix}workspace.toml");
    let p = confine(repo_root, &rel)?;
    let Some(text) = fsx::read_optional(&p).map_err(|e| LoopError::bad(format!("read `{rel}`: {e}")))? else {
        return Ok(None);
    };
    text.parse::<toml::Table>().map(Some).map_err(|e| {
        let first = e.to_string().lines().next().unwrap_or("invalid TOML").to_string();
        LoopError::bad(format!("parse `{rel}`: {first}"))
    })
}

/// The spec directories (`docs/specs/<name>` with a spec.md) under `prefix`, sorted, as
/// repository-relative paths.
pub fn spec_dirs(repo_root: &Path, prefix: &str) -> Result<Vec<String>, LoopError> {
    let rel = format!("{prefix}docs/specs");
    let base = confine(repo_root, &rel)?;
    let Ok(rd) = std::fs::read_dir(&base) else { return Ok(Vec::new()) };
    let mut out: Vec<String> = rd
        .filter_map(Result::ok)
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .map(|n| format!("{rel}/{n}"))
        .filter(|d| confine(repo_root, &format!("{d}/spec.md")).map(|p| p.is_file()).unwrap_or(false))
        .collect();
    out.sort();
    Ok(out)
}

/// The base the ship transition is judged against: `--base-ref`, else `origin/HEAD`'s
/// branch, else `origin/main` when it exists; `None` when none resolves.
fn base_ref(lint_root: &Path, given: Option<&str>) -> Result<Option<String>, LoopError> {
    if let Some(r) = given {
        if r.is_empty() || r.starts_with('-') {
            return Err(LoopError::bad(format!("use `--base-ref {r}`: not a git ref")));
        }
        return Ok(Some(r.to_string()));
    }
    let git = work_git::Git::new(lint_root);
    if let Ok(out) = git.run(&["rev-parse", "--abbrev-ref", "origin/HEAD"])
        && !out.trim().is_empty()
    {
        return Ok(Some(out.trim().to_string()));
    }
    Ok(git.run(&["rev-parse", "--verify", "--quiet", "origin/main"]).ok().map(|_| "origin/main".to_string()))
}

/// `lint-spec-status --root DIR [--base-ref REF]`.
///
/// The acceptance-criteria rule applies at the ship transition: to a spec that says Shipped
/// and did not at the base (a spec new since the base included); a spec already Shipped at the
/// base is grandfathered. Without a base that resolves the rule is skipped, with a warning.
pub fn lint(repo_root: &Path, root_arg: &str, base: Option<&str>) -> LoopResult {
    let (lint_root, prefix) = match resolve_root(repo_root, root_arg) {
        Ok(r) => r,
        // As the scripts take it: an absolute directory outside the repository is linted as
        // its own root (every file under it still confined to it).
        Err(e) => match std::fs::canonicalize(root_arg) {
            // Only a path that names the directory itself: none reached through a symlink
            // that leaves the repository, and never the file-system root.
            Ok(real)
                if real.is_dir()
                    && real.parent().is_some()
                    && real == Path::new(root_arg.trim_end_matches('/'))
                    && real != repo_root =>
            {
                return lint(&real, ".", base);
            }
            _ => return Err(e),
        },
    };
    let base = base_ref(&lint_root, base)?;
    let mut findings = Vec::new();
    // A workspace.toml that resolves outside the root (a symlink) is never read: it anchors
    // nothing, as if absent.
    let workspace = if confine(repo_root, &format!("{prefix}workspace.toml")).is_err() {
        findings.push(warn(
            "reference_outside_root",
            &format!("{prefix}workspace.toml"),
            None,
            "workspace.toml resolves outside the root; it is not read".into(),
        ));
        None
    } else {
        read_workspace(repo_root, &prefix)?
    };
    let backlog = workspace.as_ref().map(backlog_slugs).unwrap_or_default();
    let dirs = spec_dirs(repo_root, &prefix)?;
    for d in &dirs {
        let ship = base.as_deref().is_some_and(|b| shipped_since(&lint_root, &prefix, d, b));
        lint_spec(repo_root, &prefix, d, &backlog, workspace.is_some(), ship, &mut findings)?;
    }
    if base.is_none() {
        findings.push(warn(
            "no_base_ref",
            ".",
            None,
            "invariant (ii): no base ref resolvable (pass --base-ref): the ship-transition acceptance-criteria check is skipped".into(),
        ));
    }
    let errors = findings.iter().filter(|f| f.severity == "error").count();
    let warnings = findings.len() - errors;
    let mut text = String::new();
    for f in &findings {
        let loc = f.line.map(|l| format!("{}:{l}", f.path)).unwrap_or_else(|| f.path.clone());
        text.push_str(&format!("{}: {loc}: [{}] {}\n", f.severity, f.code, f.message));
    }
    text.push_str(&format!("{} spec(s) checked: {errors} error(s), {warnings} warning(s)", dirs.len()));
    let doc = json!({
        "ok": errors == 0,
        "root": if prefix.is_empty() { ".".to_string() } else { prefix.trim_end_matches('/').to_string() },
        "specs_checked": dirs,
        "errors": errors,
        "warnings": warnings,
        "findings": findings,
    });
    // The findings go to stderr, as the scripts print them.
    Ok(Outcome::with(if errors == 0 { ExitStatus::Done } else { ExitStatus::Unsuccessful }, doc, text).text_to_stderr())
}

/// True when the spec's status at `base` (read with `git show`) is not Shipped: it moved to
/// Shipped since, or is new.
fn shipped_since(lint_root: &Path, prefix: &str, dir: &str, base: &str) -> bool {
    let rel = dir.strip_prefix(prefix).unwrap_or(dir);
    let spec = format!("{base}:./{rel}/spec.md");
    let old = work_git::Git::new(lint_root).run(&["show", &spec]).ok();
    old.as_deref().and_then(read_status).as_deref() != Some("Shipped")
}

fn lint_spec(
    repo_root: &Path,
    prefix: &str,
    dir: &str,
    backlog: &BTreeSet<String>,
    has_workspace: bool,
    at_ship: bool,
    out: &mut Vec<Finding>,
) -> Result<(), LoopError> {
    let spec_rel = format!("{dir}/spec.md");
    let spec_path = confine(repo_root, &spec_rel)?;
    let text = std::fs::read_to_string(&spec_path).map_err(|e| LoopError::bad(format!("read `{spec_rel}`: {e}")))?;
    let status = read_status(&text);
    match status.as_deref() {
        None => out.push(err(
            "missing_status",
            &spec_rel,
            None,
            "spec.md has no Status line (no `- **Status:**` header field found)".into(),
        )),
        Some(s) if SPEC_STATUSES.contains(&s) => {}
        Some(s) if PLAN_STATUSES.contains(&s) => out.push(err(
            "plan_vocabulary_in_spec",
            &spec_rel,
            status_line(&text),
            format!(
                "invariant (i) — spec.md Status `{s}` is plan vocabulary; use one of {}",
                SPEC_STATUSES.join(" | ")
            ),
        )),
        Some(s) => out.push(err(
            "unknown_status",
            &spec_rel,
            status_line(&text),
            format!("invariant (i) — spec.md Status `{s}` is not one of {}", SPEC_STATUSES.join(" | ")),
        )),
    }
    let shipped = at_ship && status.as_deref() == Some("Shipped");
    for (line, item, checked) in acceptance_criteria(&text) {
        if shipped && !checked && deferrals(item).is_empty() {
            out.push(err(
                "unchecked_acceptance_criterion",
                &spec_rel,
                Some(line),
                format!("invariant (ii) — spec moved to Shipped but the acceptance criterion is neither [x] nor (deferred: <slug>): {}", item.trim()),
            ));
        }
    }
    for (i, l) in text.lines().enumerate() {
        for slug in deferrals(l) {
            if !backlog.contains(&slug) {
                let why = if has_workspace {
                    "is not in workspace.toml [backlog].open"
                } else {
                    "has no workspace.toml to anchor it"
                };
                out.push(err(
                    "unanchored_deferral",
                    &spec_rel,
                    Some(i + 1),
                    format!("invariant (iv) — deferral `{slug}` {why}"),
                ));
            }
        }
    }
    links(repo_root, dir, &spec_rel, &text, out);
    let cx = lint_refs::RefContext { repo_root, prefix, dir, spec_rel: &spec_rel };
    lint_refs::check(&cx, &text, out);
    let plan_rel = format!("{dir}/plan.md");
    let plan_path = confine(repo_root, &plan_rel)?;
    if let Some(plan) = fsx::read_optional(&plan_path).map_err(|e| LoopError::bad(format!("read `{plan_rel}`: {e}")))? {
        match read_status(&plan).as_deref() {
            None => out.push(warn("missing_status", &plan_rel, None, "plan.md has no Status line".into())),
            Some(s) if PLAN_STATUSES.contains(&s) => {}
            Some(s) => out.push(err(
                "unknown_status",
                &plan_rel,
                status_line(&plan),
                format!("plan.md Status `{s}` is not one of {}", PLAN_STATUSES.join(" | ")),
            )),
        }
        links(repo_root, dir, &plan_rel, &plan, out);
    }
    Ok(())
}

fn status_line(text: &str) -> Option<usize> {
    crate::common::status_lines(text).first().map(|(l, _)| *l)
}

/// `(line, text, checked)` of every checkbox item under an "Acceptance criteria" heading.
fn acceptance_criteria(text: &str) -> Vec<(usize, &str, bool)> {
    let mut out = Vec::new();
    let mut section: Option<usize> = None;
    for (i, line) in crate::common::unfenced(text.lines()) {
        let t = line.trim_start();
        let hashes = t.bytes().take_while(|&b| b == b'#').count();
        if hashes > 0 && t[hashes..].starts_with(' ') {
            if let Some(level) = section
                && hashes <= level
            {
                section = None;
            }
            if t.to_ascii_lowercase().contains("acceptance criteria") {
                section = Some(hashes);
            }
            continue;
        }
        if section.is_none() {
            continue;
        }
        let item = t.trim_start_matches(['-', '*', '+']).trim_start();
        let item = item.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start_matches(['.', ')']).trim_start();
        if let Some(rest) = item.strip_prefix("[ ]") {
            out.push((i + 1, rest, false));
        } else if let Some(rest) = item.strip_prefix("[x]").or_else(|| item.strip_prefix("[X]")) {
            out.push((i + 1, rest, true));
        }
    }
    out
}

/// The slugs of every `(deferred: <slug>)` in `line`.
fn deferrals(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("(deferred:") {
        rest = &rest[i + "(deferred:".len()..];
        if let Some(end) = rest.find(')') {
            let slug = rest[..end].trim().trim_matches('`');
            // A real anchor is a slug; the template's `<anchor>` placeholder is not one.
            let is_slug = slug.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && slug.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if is_slug {
                out.push(slug.to_string());
            }
            rest = &rest[end..];
        }
    }
    out
}

fn links(repo_root: &Path, dir: &str, file_rel: &str, text: &str, out: &mut Vec<Finding>) {
    for (i, line) in crate::common::unfenced(text.lines()) {
        let mut rest = line;
        while let Some(p) = rest.find("](") {
            rest = &rest[p + 2..];
            let Some(end) = rest.find(')') else { break };
            let raw = rest[..end].trim();
            rest = &rest[end..];
            let target = raw.split_whitespace().next().unwrap_or("").trim_matches(['<', '>']);
            let target = target.split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            match normalise(dir, target) {
                None => out.push(warn(
                    "reference_outside_root",
                    file_rel,
                    Some(i + 1),
                    format!("invariant (iii) — link `{raw}` leaves the repository"),
                )),
                Some(rel) => match confine(repo_root, &rel) {
                    Ok(p) if p.exists() => {}
                    Ok(_) => out.push(warn(
                        "dangling_reference",
                        file_rel,
                        Some(i + 1),
                        format!("invariant (iii) — link `{raw}` does not resolve (`{rel}`)"),
                    )),
                    Err(_) => out.push(warn(
                        "reference_outside_root",
                        file_rel,
                        Some(i + 1),
                        format!("invariant (iii) — link `{raw}` resolves outside the repository"),
                    )),
                },
            }
        }
    }
}

/// The repository-relative path of `target` written in a file of `dir`; `None` when it climbs
/// above the root. A leading `/` means the repository root.
fn normalise(dir: &str, target: &str) -> Option<String> {
    let mut parts: Vec<String> =
        if target.starts_with('/') { Vec::new() } else { dir.split('/').map(str::to_string).collect() };
    for c in Path::new(target.trim_start_matches('/')).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    if parts.is_empty() { None } else { Some(parts.join("/")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_acceptance_criteria_and_deferrals() {
        let text = "# S\n## Acceptance criteria\n- [x] one\n- [ ] two (deferred: later-thing)\n1. [ ] three\n## Other\n- [ ] not an AC\n";
        let acs = acceptance_criteria(text);
        assert_eq!(acs.len(), 3);
        assert!(acs[0].2 && !acs[1].2 && !acs[2].2);
        assert_eq!(deferrals(acs[1].1), ["later-thing"]);
    }

    #[test]
    fn normalises_links() {
        assert_eq!(normalise("docs/specs/a", "../b/spec.md").as_deref(), Some("docs/specs/b/spec.md"));
        assert_eq!(normalise("docs/specs/a", "/src/x.rs").as_deref(), Some("src/x.rs"));
        assert_eq!(normalise("docs/specs/a", "../../../../x"), None);
    }

    #[test]
    fn backlog_slugs_from_top_level_and_initiatives() {
        let doc: toml::Table = "[backlog]\nopen = [\"a\", { slug = \"b\" }]\n[ini-001]\nstatus = \"active\"\n[ini-001.backlog]\nopen = [{ slug = \"c\", type = \"research\" }]\n"
            .parse()
            .expect("toml");
        let s: Vec<String> = backlog_slugs(&doc).into_iter().collect();
        assert_eq!(s, ["a", "b", "c"]);
    }
}
