//! Nested repositories: a changed path that is a git repository of its own (a new nested
//! repository, or a submodule whose work tree changed) is one gitlink, or one path, to git — so
//! its files reach no snapshot, no reviewer and no tester. `work implement` and `work loop run`
//! stop BLOCKED `nested-repository` on one the work's text does not name.

use std::path::Path;

/// The stop reason.
pub const NESTED: &str = "nested-repository";

/// The paths of `changed` (relative to `root`; a trailing `/` is ignored) that hold a `.git` of
/// their own and that `text` does not name.
pub fn unnamed<S: AsRef<str>>(root: &Path, changed: &[S], text: &str) -> Vec<String> {
    changed
        .iter()
        .map(|p| p.as_ref().trim_end_matches('/'))
        .filter(|p| !p.is_empty() && root.join(p).join(".git").exists() && !text.contains(*p))
        .map(str::to_string)
        .collect()
}

/// The stop's message for `nested`, telling the person where to name a path that is meant
/// (`the spec`, `the task`) and what to do next (`resume`, `run again`).
pub fn message(nested: &[String], named_in: &str, then: &str) -> String {
    format!(
        "the change holds a git repository of its own ({}): a new nested repository or a changed submodule work tree is one entry to git, so its code reaches no reviewer; keep code in the main repository (or name the path in {named_in}), then {then}",
        nested.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_its_own_git_is_nested_unless_the_text_names_it() {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(d.path().join("vendor/lib/.git")).expect("mkdir");
        std::fs::write(d.path().join("a.py"), "x\n").expect("write");
        let changed = ["vendor/lib/", "a.py"];
        assert_eq!(unnamed(d.path(), &changed, "fix a.py"), vec!["vendor/lib"]);
        assert!(unnamed(d.path(), &changed, "update vendor/lib to 2.0").is_empty());
        assert!(message(&["m".into()], "the task", "run again").contains("(m)"));
    }
}
