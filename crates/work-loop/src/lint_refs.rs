//! The lint's warn-only reference checks on spec.md, as the work-loop scripts run them:
//!
//! - **Code references** (invariant iii). A backticked span or a markdown link target that is a
//!   full repository-relative code path: it contains `/`, ends in `.py`, `.toml`, `.sh` or
//!   `.json` (optionally followed by a `:line`, `:line:col` or `#anchor` locator, which is
//!   dropped) and starts with `packages/`, `tools/`, `packs/`, `apps/`, `docs/`, `.github/`,
//!   `./` or `../`. Placeholders (`<…>`), globs (`*`), brace shorthand (`{a,b}`), URLs and
//!   prose ellipses (`...`) are not paths. Each path must resolve, from the spec's directory
//!   or from the lint root, to a regular file inside the root; otherwise the warning is
//!   `dangling_code_reference`, once per path.
//! - **Contract back-references** (invariant v). The first `**Contract:**` header line names
//!   `contracts/…` paths (`none`, empty or a comment: none). Each must be a regular file inside
//!   the root (`contract_unresolved`), and must point back at the spec's directory: a
//!   `.yaml`/`.yml`/`.json` contract containing `x-spec` and the directory, or else
//!   `contracts/REGISTRY.md` naming both the contract and the directory
//!   (`contract_without_backref`).
//!
//! Nothing is read through a path that resolves outside the root, and no content of a file is
//! ever printed. Fenced code and HTML comments are skipped.

use crate::common::{confine, uncommented_lines};
use crate::lint::Finding;
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

const CODE_ROOTS: [&str; 8] = ["packages/", "tools/", "packs/", "apps/", "docs/", ".github/", "./", "../"];
const CODE_EXTS: [&str; 4] = [".py", ".toml", ".sh", ".json"];
const XSPEC_FORMATS: [&str; 3] = [".yaml", ".yml", ".json"];
const MAX_READ: u64 = 8 * 1024 * 1024;

/// Where the checks run: the repository the paths are confined to, the lint root's prefix
/// inside it (`""` or `"a/b/"`), and the spec's directory (repository-relative).
pub struct RefContext<'a> {
    /// The repository root.
    pub repo_root: &'a Path,
    /// The lint root's repository-relative prefix.
    pub prefix: &'a str,
    /// The spec's directory, repository-relative.
    pub dir: &'a str,
    /// spec.md, repository-relative (the findings' path).
    pub spec_rel: &'a str,
}

/// Lines outside fenced code and HTML comments, with their 1-based numbers.
fn visible_lines(text: &str) -> Vec<(usize, String)> {
    let lines = uncommented_lines(text);
    crate::common::unfenced(lines.iter().map(String::as_str)).map(|(i, line)| (i + 1, line.to_string())).collect()
}

/// The code-reference and contract findings of one spec.md.
pub fn check(cx: &RefContext<'_>, text: &str, out: &mut Vec<Finding>) {
    let lines = visible_lines(text);
    code_references(cx, &lines, out);
    contracts(cx, &lines, out);
}

fn code_references(cx: &RefContext<'_>, lines: &[(usize, String)], out: &mut Vec<Finding>) {
    let mut seen = BTreeSet::new();
    for (n, line) in lines {
        for token in backtick_spans(line).into_iter().chain(link_targets(line)) {
            let Some(path) = code_path(token.trim()) else { continue };
            if !seen.insert(path.to_string()) {
                continue;
            }
            let from_spec = join(cx.dir, path);
            let from_root = join(cx.prefix.trim_end_matches('/'), path);
            if ![from_spec, from_root].iter().flatten().any(|rel| regular_file(cx, rel).is_some()) {
                out.push(Finding::warning(
                    "dangling_code_reference",
                    cx.spec_rel,
                    Some(*n),
                    format!("invariant (iii) — code reference `{path}` does not resolve to a file under the root (warn-only)"),
                ));
            }
        }
    }
}

fn contracts(cx: &RefContext<'_>, lines: &[(usize, String)], out: &mut Vec<Finding>) {
    let Some((n, value)) = lines.iter().find_map(|(n, l)| contract_value(l).map(|v| (*n, v))) else { return };
    let tokens = contract_tokens(&value);
    if tokens.is_empty() {
        return;
    }
    let root = cx.prefix.trim_end_matches('/');
    let feature_dir = cx.dir.strip_prefix(cx.prefix).unwrap_or(cx.dir);
    let registry = join(root, "contracts/REGISTRY.md")
        .and_then(|rel| regular_file(cx, &rel))
        .and_then(|p| read_capped(&p))
        .unwrap_or_default();
    for token in tokens {
        let Some(file) = join(root, &token).and_then(|rel| regular_file(cx, &rel)) else {
            out.push(Finding::warning(
                "contract_unresolved",
                cx.spec_rel,
                Some(n),
                format!("invariant (v) — Contract: `{token}` does not resolve to a file under the root (warn-only)"),
            ));
            continue;
        };
        let inline = XSPEC_FORMATS.iter().any(|e| token.ends_with(e))
            && read_capped(&file).is_some_and(|t| t.contains("x-spec") && t.contains(feature_dir));
        let registered = registry.contains(&token) && registry.contains(feature_dir);
        if !inline && !registered {
            out.push(Finding::warning(
                "contract_without_backref",
                cx.spec_rel,
                Some(n),
                format!(
                    "invariant (v) — contract `{token}` lacks a backward x-spec/REGISTRY.md ref to {feature_dir} (warn-only)"
                ),
            ));
        }
    }
}

/// The value of a `**Contract:**` header line (also `Contract:` / `**Contract**:`), trimmed.
fn contract_value(line: &str) -> Option<String> {
    let t = line.trim_start().trim_start_matches(['-', '*', '+', ' ']).trim_start_matches(['*', '_']);
    let head = t.get(..8)?;
    if !head.eq_ignore_ascii_case("contract") {
        return None;
    }
    let rest = t[8..].trim_start_matches(['*', '_']).strip_prefix(':')?;
    Some(rest.trim_start_matches(['*', '_']).trim().to_string())
}

/// Every `contracts/<seg>/…/<seg>` in `value`, each segment starting with a letter or digit
/// (so no `.` or `..` segment); `none` or an empty value names none.
fn contract_tokens(value: &str) -> Vec<String> {
    if value.is_empty() || value.eq_ignore_ascii_case("none") {
        return Vec::new();
    }
    let seg_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = value[from..].find("contracts/") {
        let start = from + i;
        let mut end = start + "contracts".len();
        let mut taken = false;
        loop {
            let rest = &value[end..];
            let Some(after) = rest.strip_prefix('/') else { break };
            if !after.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                break;
            }
            let len = after.find(|c: char| !seg_char(c)).unwrap_or(after.len());
            end += 1 + len;
            taken = true;
        }
        if taken {
            out.push(value[start..end].to_string());
            from = end;
        } else {
            from = start + 1;
        }
    }
    out
}

/// The path of a code reference token, without its locator; `None` when it is not one.
fn code_path(token: &str) -> Option<&str> {
    if token.contains(['<', '>', '*', '{', '}'])
        || token.contains("://")
        || token.contains("...")
        || !token.contains('/')
    {
        return None;
    }
    let path = CODE_EXTS.iter().find_map(|ext| {
        let end = token.find(ext)? + ext.len();
        let rest = &token[end..];
        (rest.is_empty() || rest.starts_with([':', '#'])).then(|| &token[..end])
    })?;
    CODE_ROOTS.iter().any(|r| path.starts_with(r)).then_some(path)
}

fn backtick_spans(line: &str) -> Vec<&str> {
    let parts: Vec<&str> = line.split('`').collect();
    // Odd-indexed parts sit between a pair of backticks; an unclosed last one does not.
    parts.iter().enumerate().filter(|(i, _)| i % 2 == 1 && i + 1 < parts.len()).map(|(_, p)| *p).collect()
}

fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(p) = rest.find("](") {
        rest = &rest[p + 2..];
        let Some(end) = rest.find(')') else { break };
        out.push(&rest[..end]);
        rest = &rest[end..];
    }
    out
}

/// `base/rel` normalised to a repository-relative path; `None` when it climbs above `base`'s
/// repository root.
fn join(base: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<String> = base.split('/').filter(|p| !p.is_empty()).map(str::to_string).collect();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The path when `rel` is under the lint root and resolves, through symlinks, to a regular file
/// inside the repository.
fn regular_file(cx: &RefContext<'_>, rel: &str) -> Option<PathBuf> {
    if !rel.starts_with(cx.prefix) {
        return None;
    }
    let p = confine(cx.repo_root, rel).ok()?;
    std::fs::metadata(&p).ok().filter(std::fs::Metadata::is_file).map(|_| p)
}

fn read_capped(p: &Path) -> Option<String> {
    let meta = std::fs::metadata(p).ok()?;
    if meta.len() > MAX_READ {
        return None;
    }
    std::fs::read(p).ok().map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_paths_keep_full_rooted_code_paths_only() {
        assert_eq!(code_path("tools/y.py:42:10"), Some("tools/y.py"));
        assert_eq!(code_path("tools/y.py#L42"), Some("tools/y.py"));
        assert_eq!(code_path("../../x.toml"), Some("../../x.toml"));
        for not in ["install.py", "packages/<pkg>/x.py", "tools/lint-*.py", "packs/core/...x.toml", "packages/{a,b}.py"]
        {
            assert_eq!(code_path(not), None, "{not}");
        }
        assert_eq!(code_path("src/x.py"), None, "not under a code root");
        assert_eq!(code_path("tools/x.python"), None);
    }

    #[test]
    fn contract_tokens_refuse_dot_segments() {
        assert_eq!(contract_tokens("`contracts/openapi/orders.yaml`"), ["contracts/openapi/orders.yaml"]);
        assert_eq!(
            contract_tokens("`contracts/a.proto`, `contracts/b/c.graphql`"),
            ["contracts/a.proto", "contracts/b/c.graphql"]
        );
        assert!(contract_tokens("`contracts/../../secret.json`").is_empty());
        assert!(contract_tokens("none").is_empty());
        assert_eq!(contract_value("- **Contract:** `contracts/x.yaml`").as_deref(), Some("`contracts/x.yaml`"));
        assert_eq!(contract_value("Contractual terms: x"), None);
    }
}
