//! `work loop workspace-status [--json] [--spec PATH]`: the canonical preflight over
//! `workspace.toml`.
//!
//! Raw membership (`[work].queue`, `[work].active`, at the top level or inside an active
//! initiative table `["ini-NNN"]`) is only the list of candidates; each is evaluated against
//! the real files, and only evaluations without a finding are `canonical.ready` (queue) or
//! `canonical.active` (active). Entries are a slug (`foo` ⇒ `docs/specs/foo`), a spec path
//! (`docs/specs/foo/` or `docs/specs/foo/spec.md`), or a table
//! `{ slug = "foo", spec = "docs/specs/foo", depends_on = ["bar"], source = "intake/…" }`, or the
//! work-loop scripts' target entry `{ path, kind, source, summary, needs }` ([`crate::workspace_entry`]).
//!
//! Finding codes (stable): `unsafe_path`, `shaping_item`, `missing_spec`, `missing_plan`,
//! `unapproved_spec`, `stale_queue`, `archived_spec`, `unknown_dependency`,
//! `unsatisfied_dependency` (a hard dependency not Shipped, a needed document not done),
//! `invalid_provenance`, `provenance_mismatch`, `impossible_transition` (a Shipped spec in
//! `[work].active`),
//! `duplicate_membership`, `invalid_entry`, and `unregistered_work` (an Approved or
//! Implementing spec no entry names, or a `--spec` with no evaluation). Other array keys of
//! `[work]` are `legacy_memberships`: shown, never dispatched.

use crate::common::{LoopError, LoopResult, Outcome, confine, read_status};
use crate::lint::{read_workspace, spec_dirs};
use crate::workspace_entry::{Need, Provenance, document_parent, need_finding, parse_needs, parse_source};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use work_runtime::ExitStatus;

/// One canonical finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The stable code.
    pub code: &'static str,
    /// The slug concerned.
    pub slug: String,
    /// The spec directory concerned.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub next_action: String,
}

/// The keys of a table entry: this project's form (`slug`, `spec`, `depends_on`, `source`) and
/// the work-loop scripts' target entry (`path`, `kind`, `source`, `summary`, `needs`).
const ENTRY_KEYS: [&str; 8] = ["slug", "spec", "depends_on", "source", "path", "kind", "summary", "needs"];

/// The evaluation of one registered entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evaluation {
    /// The slug.
    pub slug: String,
    /// The spec directory (`docs/specs/<slug>`).
    pub path: String,
    /// `queue` or `active`.
    pub membership: &'static str,
    /// Where the entry was found (`work` or `<initiative>.work`).
    pub source_table: String,
    /// spec.md's status.
    pub spec_status: Option<String>,
    /// plan.md's status.
    pub plan_status: Option<String>,
    /// engine-state.json's state, when present.
    pub engine_state: Option<String>,
    /// The hard dependencies.
    pub depends_on: Vec<String>,
    /// The findings that block it (empty ⇒ canonical).
    pub findings: Vec<Finding>,
}

#[derive(Default)]
struct Entry {
    slug: String,
    path: String,
    depends_on: Vec<String>,
    /// The governed documents it needs (the scripts' `needs`).
    needs: Vec<Need>,
    /// `source`: absent, valid (its parent), or what is wrong with it.
    provenance: Option<Result<Provenance, String>>,
    bad_entry: Option<String>,
}

fn next_action(code: &str, slug: &str, path: &str) -> String {
    match code {
        "unsafe_path" => "fix the entry's path in workspace.toml (relative, inside the repository)".into(),
        "shaping_item" => {
            format!("`{slug}` is a shaping item: use its shaping workflow; work-loop is for build items only")
        }
        "missing_spec" => format!("write {path}/spec.md (new-spec) or remove the entry"),
        "missing_plan" => format!("write the sibling {path}/plan.md before starting"),
        "unapproved_spec" => format!("the spec approver writes Status: Approved in {path}/spec.md"),
        "stale_queue" => "move the entry from [work].queue to [work].active, or remove it when shipped".into(),
        "archived_spec" => "remove the archived spec from [work].active".into(),
        "impossible_transition" => "move the shipped entry from [work].active to [work].shipped".into(),
        "unknown_dependency" => "fix `depends_on` / `needs`: name an existing document".into(),
        "invalid_provenance" => {
            "give the entry a valid `source`: `{ mode = \"repo-origin\" }`, a tracker-origin source with `ref` and `revision`, or a non-empty string".into()
        }
        "provenance_mismatch" => format!(
            "make the entry's `source.parent` and the `Brief:` (or `Parent:`) line of {path}/spec.md name the same document"
        ),
        "unsatisfied_dependency" => "finish the needed document first (its terminal Status)".into(),
        "duplicate_membership" => "keep the entry in only one of [work].queue and [work].active".into(),
        "invalid_entry" => "write the entry as a slug, a spec path or a table with `slug`/`spec`".into(),
        "unregistered_work" => format!("register {path} in workspace.toml [work].queue or [work].active"),
        _ => "surface it to a person".into(),
    }
}

fn finding(code: &'static str, slug: &str, path: &str, message: String) -> Finding {
    Finding { code, slug: slug.into(), path: path.into(), message, next_action: next_action(code, slug, path) }
}

fn parse_entry(v: &toml::Value) -> Entry {
    let from_path = |p: &str| {
        let p = p.trim_end_matches('/');
        let p = p.strip_suffix("/spec.md").unwrap_or(p);
        if p.contains('/') || p.contains('\\') {
            let slug = p.rsplit(['/', '\\']).next().unwrap_or(p).to_string();
            (slug, p.to_string())
        } else {
            (p.to_string(), format!("docs/specs/{p}"))
        }
    };
    match v {
        toml::Value::String(s) => {
            let (slug, path) = from_path(s);
            Entry { slug, path, ..Entry::default() }
        }
        toml::Value::Table(t) => {
            let spec = t.get("spec").or_else(|| t.get("path")).and_then(toml::Value::as_str);
            let slug = t.get("slug").and_then(toml::Value::as_str);
            let (slug, path) = match (slug, spec) {
                (Some(s), Some(p)) => (s.to_string(), from_path(p).1),
                (None, Some(p)) => from_path(p),
                (Some(s), None) => from_path(s),
                (None, None) => {
                    return Entry { bad_entry: Some("a table without `slug` or `spec`".into()), ..Entry::default() };
                }
            };
            let mut e = Entry { slug, path, ..Entry::default() };
            if let Some(k) = t.keys().find(|k| !ENTRY_KEYS.contains(&k.as_str())) {
                e.bad_entry =
                    Some(format!("an entry with an unknown key `{k}`{}", work_runtime::suggest::hint(k, &ENTRY_KEYS)));
                return e;
            }
            e.depends_on = t
                .get("depends_on")
                .and_then(toml::Value::as_array)
                .map(|a| a.iter().filter_map(toml::Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            e.provenance = t.get("source").map(parse_source);
            match t.get("kind").map(|k| k.as_str()) {
                None | Some(Some("spec")) => {}
                Some(k) => {
                    e.bad_entry = Some(format!("an entry of kind `{}`: only specs are work", k.unwrap_or("?")));
                }
            }
            match t.get("needs").map(parse_needs) {
                None => {}
                Some(Ok(n)) => e.needs = n,
                Some(Err(why)) => e.bad_entry = Some(format!("an entry that cannot be read: {why}")),
            }
            e
        }
        other => Entry { bad_entry: Some(format!("a {} entry", other.type_str())), ..Entry::default() },
    }
}

/// The shaping slugs: `[shaping_queue].active` / `.backlog` and typed `[backlog].open` entries,
/// at the top level or inside an active initiative.
fn shaping_slugs(tables: &[(String, &toml::Table)]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, t) in tables {
        if let Some(toml::Value::Table(sq)) = t.get("shaping_queue") {
            for key in ["active", "backlog"] {
                for e in sq.get(key).and_then(toml::Value::as_array).into_iter().flatten() {
                    match e {
                        toml::Value::String(s) => {
                            out.insert(s.clone());
                        }
                        toml::Value::Table(et) => {
                            if let Some(s) = et.get("slug").and_then(toml::Value::as_str) {
                                out.insert(s.to_string());
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if let Some(toml::Value::Table(b)) = t.get("backlog") {
            for e in b.get("open").and_then(toml::Value::as_array).into_iter().flatten() {
                if let toml::Value::Table(et) = e
                    && et.contains_key("type")
                    && let Some(s) = et.get("slug").and_then(toml::Value::as_str)
                {
                    out.insert(s.to_string());
                }
            }
        }
    }
    out
}

/// `workspace-status`; `spec` is `--spec PATH` (exit 1 unless it is canonical ready or active).
pub fn workspace_status(repo_root: &Path, spec: Option<&str>) -> LoopResult {
    let Some(doc) = read_workspace(repo_root, "")? else {
        let mut findings = Vec::new();
        if let Some(s) = spec {
            let p = s.trim_end_matches('/').trim_end_matches("/spec.md").to_string();
            findings.push(finding("unregistered_work", "", &p, "no workspace.toml: no canonical evaluation".into()));
        }
        let doc = json!({
            "ok": spec.is_none(),
            "workspace_present": false,
            "initiatives": [],
            "canonical": { "ready": [], "active": [], "blocked": [], "findings": findings },
            "legacy_memberships": [],
            "next_action": "no workspace.toml: an argless start, a resume or a spec path has no canonical preflight; surface rather than infer authority",
        });
        let exit = if spec.is_none() { ExitStatus::Done } else { ExitStatus::Unsuccessful };
        return Ok(Outcome::with(exit, doc, "no workspace.toml"));
    };
    // The tables that may hold work: the top level and every active initiative.
    let mut tables: Vec<(String, &toml::Table)> = vec![(String::new(), &doc)];
    let mut initiatives = Vec::new();
    for (k, v) in &doc {
        if let toml::Value::Table(t) = v
            && t.get("status").and_then(toml::Value::as_str) == Some("active")
        {
            initiatives.push(json!({
                "id": k,
                "name": t.get("name").and_then(toml::Value::as_str),
                "milestone": t.get("milestone").and_then(toml::Value::as_str),
            }));
            tables.push((k.clone(), t));
        }
    }
    let shaping = shaping_slugs(&tables);
    let mut evals: Vec<Evaluation> = Vec::new();
    let mut legacy = Vec::new();
    for (name, t) in &tables {
        let Some(toml::Value::Table(work)) = t.get("work") else { continue };
        let source_table = if name.is_empty() { "work".to_string() } else { format!("{name}.work") };
        for (key, v) in work {
            let membership = match key.as_str() {
                "queue" => "queue",
                "active" => "active",
                _ => {
                    if let toml::Value::Array(a) = v {
                        legacy.push(json!({ "table": source_table, "key": key, "entries": a.len() }));
                    }
                    continue;
                }
            };
            let Some(items) = v.as_array() else {
                return Err(LoopError::bad(format!("read workspace.toml `{source_table}.{key}`: not an array")));
            };
            for item in items {
                evals.push(evaluate(repo_root, parse_entry(item), membership, &source_table, &shaping));
            }
        }
    }
    // Duplicate membership (queue and active, or twice).
    let mut seen: Vec<String> = Vec::new();
    let dup: BTreeSet<String> = evals
        .iter()
        .filter(|e| !e.path.is_empty())
        .filter_map(|e| {
            if seen.contains(&e.path) {
                Some(e.path.clone())
            } else {
                seen.push(e.path.clone());
                None
            }
        })
        .collect();
    for e in &mut evals {
        if dup.contains(&e.path) {
            let f =
                finding("duplicate_membership", &e.slug, &e.path, format!("{} is registered more than once", e.path));
            e.findings.push(f);
        }
    }
    let registered: BTreeSet<String> = evals.iter().map(|e| e.path.clone()).collect();
    let mut findings: Vec<Finding> = evals.iter().flat_map(|e| e.findings.clone()).collect();
    for d in spec_dirs(repo_root, "")? {
        if registered.contains(&d) {
            continue;
        }
        let status = confine(repo_root, &format!("{d}/spec.md"))
            .ok()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| read_status(&t));
        if matches!(status.as_deref(), Some("Approved") | Some("Implementing")) {
            let slug = d.rsplit('/').next().unwrap_or(&d).to_string();
            findings.push(finding(
                "unregistered_work",
                &slug,
                &d,
                format!("{d} is {} but no workspace entry names it", status.as_deref().unwrap_or("")),
            ));
        }
    }
    let ready: Vec<&Evaluation> = evals.iter().filter(|e| e.membership == "queue" && e.findings.is_empty()).collect();
    let active: Vec<&Evaluation> = evals.iter().filter(|e| e.membership == "active" && e.findings.is_empty()).collect();
    let blocked: Vec<&Evaluation> = evals.iter().filter(|e| !e.findings.is_empty()).collect();
    let next = match (active.len(), ready.first()) {
        (1, _) => format!("resume {}/spec.md", active[0].path),
        (n, _) if n > 1 => format!(
            "several canonical active items ({}): ask the person to pick one",
            active.iter().map(|e| e.path.as_str()).collect::<Vec<_>>().join(", ")
        ),
        (_, Some(r)) => format!("start {}/spec.md (first canonical ready item)", r.path),
        _ => "No canonical ready or active spec found — run workspace-status to see blocked findings.".into(),
    };
    let mut ok = true;
    let mut matched = Value::Null;
    if let Some(s) = spec {
        let want = s.trim_end_matches('/');
        let want = want.strip_suffix("/spec.md").unwrap_or(want).to_string();
        confine(repo_root, &want)?;
        let hits: Vec<&Evaluation> = evals.iter().filter(|e| e.path == want).collect();
        ok = hits.iter().any(|e| e.findings.is_empty());
        if hits.is_empty() {
            let slug = want.rsplit('/').next().unwrap_or(&want).to_string();
            let f = finding("unregistered_work", &slug, &want, format!("{want} has no canonical evaluation"));
            matched = json!({ "path": want, "evaluation": null, "findings": [f] });
        } else {
            matched = json!({ "path": want, "evaluation": hits[0], "findings": hits.iter().flat_map(|e| e.findings.clone()).collect::<Vec<_>>() });
        }
    }
    let mut text = String::new();
    for e in &active {
        text.push_str(&format!("active   {}\n", e.path));
    }
    for e in &ready {
        text.push_str(&format!("ready    {}\n", e.path));
    }
    for f in &findings {
        text.push_str(&format!("blocked  {} [{}] {} → {}\n", f.path, f.code, f.message, f.next_action));
    }
    text.push_str(&format!("next: {next}"));
    let doc = json!({
        "ok": ok,
        "workspace_present": true,
        "initiatives": initiatives,
        "canonical": { "ready": ready, "active": active, "blocked": blocked, "findings": findings },
        "legacy_memberships": legacy,
        "spec": matched,
        "next_action": next,
    });
    Ok(Outcome::with(if ok { ExitStatus::Done } else { ExitStatus::Unsuccessful }, doc, text))
}

fn evaluate(
    repo_root: &Path,
    entry: Entry,
    membership: &'static str,
    source_table: &str,
    shaping: &BTreeSet<String>,
) -> Evaluation {
    let mut e = Evaluation {
        slug: entry.slug.clone(),
        path: entry.path.clone(),
        membership,
        source_table: source_table.to_string(),
        spec_status: None,
        plan_status: None,
        engine_state: None,
        depends_on: entry.depends_on.clone(),
        findings: Vec::new(),
    };
    let (slug, path) = (entry.slug.as_str(), entry.path.as_str());
    if let Some(why) = entry.bad_entry {
        e.findings.push(finding("invalid_entry", slug, path, format!("[{source_table}].{membership} has {why}")));
        return e;
    }
    let Ok(dir) = confine(repo_root, path) else {
        e.findings.push(finding("unsafe_path", slug, path, format!("`{path}` is not a safe repository path")));
        return e;
    };
    if shaping.contains(slug) {
        e.findings.push(finding("shaping_item", slug, path, format!("`{slug}` is a shaping item")));
    }
    let read = |name: &str| -> Option<String> {
        confine(repo_root, &format!("{path}/{name}")).ok().and_then(|p| std::fs::read_to_string(p).ok())
    };
    let spec = read("spec.md");
    let plan = read("plan.md");
    e.spec_status = spec.as_deref().and_then(read_status);
    e.plan_status = plan.as_deref().and_then(read_status);
    e.engine_state = read("engine-state.json")
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("state").and_then(Value::as_str).map(str::to_string));
    if spec.is_none() || !dir.is_dir() {
        e.findings.push(finding("missing_spec", slug, path, format!("{path}/spec.md does not exist")));
        return e;
    }
    if plan.is_none() {
        e.findings.push(finding("missing_plan", slug, path, format!("{path}/plan.md does not exist")));
    }
    let status = e.spec_status.clone().unwrap_or_else(|| "missing".into());
    match (membership, status.as_str()) {
        ("queue", "Approved") | ("active", "Approved" | "Implementing") => {}
        ("active", "Shipped") => e.findings.push(finding(
            "impossible_transition",
            slug,
            path,
            format!("{path} is in [work].active but its spec is Shipped"),
        )),
        (_, "Archived") if membership == "active" => {
            e.findings.push(finding("archived_spec", slug, path, format!("{path}/spec.md is Archived")))
        }
        ("queue", "Implementing" | "Shipped" | "Archived") => {
            e.findings.push(finding("stale_queue", slug, path, format!("{path} is queued but its spec is {status}")))
        }
        _ => e.findings.push(finding(
            "unapproved_spec",
            slug,
            path,
            format!("{path}/spec.md Status is {status}, not Approved"),
        )),
    }
    for dep in &entry.depends_on {
        let dep_path =
            if dep.contains('/') { dep.trim_end_matches('/').to_string() } else { format!("docs/specs/{dep}") };
        let dep_status = confine(repo_root, &format!("{dep_path}/spec.md"))
            .ok()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|t| read_status(&t));
        match dep_status {
            None => e.findings.push(finding(
                "unknown_dependency",
                slug,
                path,
                format!("dependency `{dep}` has no spec at {dep_path}/spec.md"),
            )),
            Some(s) if s.as_deref() == Some("Shipped") => {}
            Some(s) => e.findings.push(finding(
                "unsatisfied_dependency",
                slug,
                path,
                format!("dependency `{dep}` is {}, not Shipped", s.as_deref().unwrap_or("missing")),
            )),
        }
    }
    for need in &entry.needs {
        if let Some((code, why)) = need_finding(repo_root, need) {
            e.findings.push(finding(code, slug, path, why));
        }
    }
    match &entry.provenance {
        Some(Err(why)) => e.findings.push(finding("invalid_provenance", slug, path, format!("the entry's {why}"))),
        Some(Ok(p)) if p.is_record => {
            let spec_parent = spec.as_deref().and_then(document_parent);
            if spec_parent != p.parent {
                let show = |v: &Option<String>| v.as_deref().map(|s| format!("`{s}`")).unwrap_or_else(|| "none".into());
                e.findings.push(finding(
                    "provenance_mismatch",
                    slug,
                    path,
                    format!("source.parent is {} but {path}/spec.md names {}", show(&p.parent), show(&spec_parent)),
                ));
            }
        }
        _ => {}
    }
    e
}

#[cfg(test)]
mod entry_key_tests {
    use super::*;

    #[test]
    fn an_unknown_key_of_a_table_entry_is_refused_with_the_nearest_name() {
        let v: toml::Value = toml::from_str("e = { slug = \"a\", requires = [\"b\"] }").expect("toml");
        let e = parse_entry(&v["e"]);
        let why = e.bad_entry.expect("refused");
        assert!(
            why.contains("unknown key `requires`") && why.contains("valid:") || why.contains("did you mean"),
            "{why}"
        );
        let v: toml::Value = toml::from_str("e = { slug = \"a\", depends_on = [\"b\"] }").expect("toml");
        let e = parse_entry(&v["e"]);
        assert!(e.bad_entry.is_none() && e.depends_on == ["b"], "{:?}", e.bad_entry);
    }
}
