//! Each event kind and each shared stop reason is spelled once, where it is declared
//! (`events/kinds.rs`, `outcome.rs`): this test reads the product sources of every crate of the
//! workspace (each file up to its `#[cfg(test)]`, comment lines left out; `tests/`, `benches/`
//! and `tests.rs` files are tests) and fails on an `emit("…")` or on one of those words in
//! quotes anywhere else. A word without a `.` or a `-` (`progress`, `budget`) is an everyday
//! word too and is not searched for.

use crate::events::EventKind;
use crate::outcome::{ExhaustStop, StopReason};
use std::path::{Path, PathBuf};

/// The definition files, relative to the workspace's `crates/`.
const DEFINITIONS: [&str; 2] = ["work-runtime/src/events/kinds.rs", "work-runtime/src/outcome.rs"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// (file relative to `crates/`, line number, line) of every product source line.
fn product_lines() -> Vec<(String, usize, String)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&crates).expect("crates/").flatten() {
        rust_files(&c.path().join("src"), &mut files);
    }
    assert!(files.len() > 100, "the workspace's sources are found ({} files)", files.len());
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&crates).expect("under crates/").to_string_lossy().into_owned();
        if DEFINITIONS.contains(&rel.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("read a source");
        let product = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in product.lines().enumerate() {
            if !line.trim_start().starts_with("//") {
                out.push((rel.clone(), i + 1, line.to_string()));
            }
        }
    }
    out
}

fn quoted(word: &str) -> String {
    format!("\"{word}\"")
}

#[test]
fn no_event_kind_or_stop_reason_is_spelled_outside_its_definition() {
    let mut words: Vec<String> = EventKind::ALL
        .iter()
        .map(|k| serde_json::to_value(k).expect("a kind").as_str().expect("a word").to_string())
        .collect();
    assert_eq!(words.len(), EventKind::ALL.len());
    words.extend(StopReason::ALL.iter().map(|w| w.as_str().to_string()));
    words.extend(ExhaustStop::ALL.iter().map(|w| w.as_str().to_string()));
    words.retain(|w| w.contains(['.', '-']));
    let lines = product_lines();
    let mut found = Vec::new();
    let mut prev = String::new();
    for (file, n, line) in &lines {
        // `emit(` with a string first: on the line, or on the next when rustfmt broke it.
        let emits_text =
            line.contains(".emit(\"") || (prev.trim_end().ends_with(".emit(") && line.trim_start().starts_with('"'));
        if emits_text {
            found.push(format!("{file}:{n}: an event kind as a string: {}", line.trim()));
        }
        for w in &words {
            if line.contains(&quoted(w)) {
                found.push(format!("{file}:{n}: {w} spelled again: {}", line.trim()));
            }
        }
        prev.clone_from(line);
    }
    assert!(found.is_empty(), "spelled outside kinds.rs / outcome.rs:\n{}", found.join("\n"));
}

#[test]
fn the_search_reads_the_emit_sites_and_the_words_as_written() {
    // Else the test above could pass by reading nothing or by looking for other spellings.
    let kind = serde_json::to_value(EventKind::UntilCheckTampered).expect("a kind");
    assert_eq!(kind, "until.check-tampered");
    assert_eq!(quoted(StopReason::CheckTampered.as_str()), r#""check-tampered""#);
    assert!(product_lines().iter().any(|(_, _, l)| l.contains(".emit(Event::")), "the emit sites are read");
}
