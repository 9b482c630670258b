//! The one kebab-case slug of free text, for the names a workflow derives from what it was
//! given (an until session, an ultra goal).

/// Lowercase ASCII letters and digits, every other run of characters one `-`, at most `max`
/// characters, no `-` at either end; `empty` when nothing is left.
pub fn kebab(text: &str, max: usize, empty: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= max {
            break;
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() { empty.to_string() } else { out.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_text_becomes_one_kebab_name() {
        assert_eq!(kebab("Fix the  Parser!", 40, "x"), "fix-the-parser");
        assert_eq!(kebab("--", 40, "session"), "session");
        assert_eq!(kebab("abcdef", 3, "x"), "abc");
        assert_eq!(kebab("ab cd", 3, "x"), "ab");
    }
}
