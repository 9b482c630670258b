//! The product speaks of itself alone: no product file (README, ARCHITECTURE, docs/, crates/,
//! examples/, scripts/) refers to a specification outside the repository.

use std::path::{Path, PathBuf};

/// What a reference to an outside document looks like (built from pieces, so that this file
/// does not name them itself).
fn needles() -> Vec<String> {
    let spec_files = ["ultrawork", "work-until", "work-exhaust", "work-loop", "implement-pipeline-changelog"];
    let mut v = vec![format!("../{}", "shared"), format!("{}S", "CONTRACT"), format!("{}/", "seeds")];
    let seed = "seed";
    v.extend([format!("the {seed}"), format!("{seed}'s"), format!("({seed}:")]);
    v.extend(spec_files.iter().map(|f| format!("{f}.md")));
    v
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn no_product_file_refers_to_a_document_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap_or(root);
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for d in ["docs", "crates", "examples", "scripts"] {
        walk(&root.join(d), &mut files);
    }
    assert!(files.len() > 50, "the walk found the tree ({} files)", files.len());
    let needles = needles();
    let mut offenders = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_ascii_lowercase();
            // The contracts file by its name (upper case: `api-contracts` is an angle, not it).
            let hit = needles.iter().find(|k| {
                if k.chars().all(|c| c.is_ascii_uppercase()) {
                    line.contains(k.as_str())
                } else {
                    lower.contains(&k.to_ascii_lowercase())
                }
            });
            if let Some(needle) = hit {
                let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
                offenders.push(format!("{rel}:{}: `{needle}`: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "{} line(s) refer to a document outside the repository (say what the project does, and document it in docs/):\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}
