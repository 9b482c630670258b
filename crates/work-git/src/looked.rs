//! Reviewers prove they looked: a clean verdict names the files it read (`files_read`), and
//! at least one of them must be a file the change under review touched. A reviewer that
//! answers "clean" without having opened anything the diff changed is refused — the workflow
//! asks it once more with the reason, then treats it as missing.

/// The one name of the field a reviewer lists the files it read in.
pub const FILES_READ: &str = "files_read";

/// One spelling of a path a reviewer names: `./` and a trailing `:LINE` (or `:L-M`) dropped.
fn normalise(path: &str) -> String {
    let p = path.trim().trim_start_matches("./");
    let p = match p.rsplit_once(':') {
        Some((head, tail)) if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit() || c == '-') => head,
        _ => p,
    };
    p.trim_end_matches('/').to_string()
}

/// The paths of a reviewer's answer's `files_read` (empty when absent or not a list).
pub fn files_read(answer: &serde_json::Value) -> Vec<String> {
    answer
        .get(FILES_READ)
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .map(str::to_string)
        .collect()
}

/// `Err(why)` when a clean verdict's `files_read` names none of `changed` (the paths of the
/// diff under review). An empty `changed` asks nothing.
pub fn check_files_read(files_read: &[String], changed: &[String]) -> Result<(), String> {
    if changed.is_empty() {
        return Ok(());
    }
    let changed_n: Vec<String> = changed.iter().map(|c| normalise(c)).collect();
    if files_read.iter().any(|f| changed_n.contains(&normalise(f))) {
        return Ok(());
    }
    let shown: Vec<&str> = changed.iter().take(8).map(String::as_str).collect();
    let more = if changed.len() > 8 { format!(" and {} more", changed.len() - 8) } else { String::new() };
    let named = if files_read.is_empty() { "no file".to_string() } else { format!("only {}", files_read.join(", ")) };
    Err(format!(
        "a clean verdict must name the files it read in `{FILES_READ}`, at least one of the changed files ({}{more}); it named {named}",
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_verdict_must_name_a_changed_file() {
        let changed = vec!["src/a.rs".to_string(), "hello.txt".to_string()];
        assert!(check_files_read(&["./hello.txt:3".into()], &changed).is_ok());
        assert!(check_files_read(&["README.md".into(), "src/a.rs".into()], &changed).is_ok());
        let e = check_files_read(&[], &changed).err().unwrap_or_default();
        assert!(e.contains("named no file") && e.contains("src/a.rs, hello.txt"), "{e}");
        let e = check_files_read(&["README.md".into()], &changed).err().unwrap_or_default();
        assert!(e.contains("only README.md"), "{e}");
        assert!(check_files_read(&[], &[]).is_ok(), "nothing changed: nothing to read");
        let v = serde_json::json!({"verdict": "clean", "files_read": ["a", 3, "b"]});
        assert_eq!(files_read(&v), vec!["a", "b"]);
    }
}
