//! "Did you mean …?" for unknown names: every parser that refuses a key, a field, a role or an
//! enum word names the nearest valid one (by edit distance), or lists the valid ones when
//! nothing is near.

/// Levenshtein distance between `a` and `b` (by characters), as `strsim` computes it.
pub fn distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

/// The valid name nearest to `given` (case-insensitive), when it is near enough to be a
/// plausible misspelling: at most half the longer name's length away (and at least 2 allowed),
/// or a name that `given` is the start of (`exit` for `exit_code`).
pub fn nearest<'a>(given: &str, valid: &[&'a str]) -> Option<&'a str> {
    let g = given.trim().to_ascii_lowercase();
    if g.chars().count() >= 3
        && let Some(v) = valid.iter().find(|v| v.to_ascii_lowercase().starts_with(&g))
    {
        return Some(v);
    }
    let (best, d) =
        valid.iter().map(|v| (*v, distance(&g, &v.to_ascii_lowercase()))).min_by_key(|(v, d)| (*d, v.len()))?;
    let longer = g.chars().count().max(best.chars().count());
    (d <= (longer / 2).max(2)).then_some(best)
}

/// The tail of a refusal: `; did you mean `x`?` when a name is near, else `; valid: a, b, c`.
pub fn hint(given: &str, valid: &[&str]) -> String {
    match nearest(given, valid) {
        Some(v) => format!("; did you mean `{v}`?"),
        None => format!("; valid: {}", valid.join(", ")),
    }
}

/// One line for an unknown name: "unknown key `stop_when` in GOAL.toml; did you mean `stop_line`?".
pub fn unknown(what: &str, given: &str, place: &str, valid: &[&str]) -> String {
    format!("unknown {what} `{given}` in {place}{}", hint(given, valid))
}

/// Rewrites serde's "unknown field `x`, expected one of `a`, `b`" (or "expected `a` or `b`",
/// "there are no fields") into [`unknown`]'s line; any other message is returned unchanged.
pub fn rewrite_serde_unknown(message: &str, what: &str, place: &str) -> String {
    for kind in ["field", "variant"] {
        let head = format!("unknown {kind} `");
        let Some(start) = message.find(&head) else { continue };
        let rest = &message[start + head.len()..];
        let Some(end) = rest.find('`') else { continue };
        let given = &rest[..end];
        let valid: Vec<&str> = rest[end + 1..].split('`').skip(1).step_by(2).collect();
        if valid.is_empty() {
            return format!("unknown {what} `{given}` in {place} (it takes no keys)");
        }
        return unknown(what, given, place, &valid);
    }
    message.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_are_suggested_and_far_ones_list_the_valid_names() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(nearest("findr", &["worker", "finder"]), Some("finder"));
        assert_eq!(nearest("stop_when", &["stop_line", "tier", "objective"]), Some("stop_line"));
        assert_eq!(nearest("colour", &["tier", "objective"]), None);
        assert_eq!(nearest("exit", &["stdout_contains", "exit_code"]), Some("exit_code"));
        assert_eq!(hint("ultra", &["low", "high"]), "; valid: low, high");
        assert_eq!(
            unknown("key", "stop_when", "GOAL.toml", &["stop_line", "tier"]),
            "unknown key `stop_when` in GOAL.toml; did you mean `stop_line`?"
        );
    }

    #[test]
    fn serde_messages_are_rewritten() {
        let m = "unknown field `stop_when`, expected one of `id`, `stop_line`, `tier`";
        assert_eq!(
            rewrite_serde_unknown(m, "key", "GOAL.toml"),
            "unknown key `stop_when` in GOAL.toml; did you mean `stop_line`?"
        );
        let m = "unknown field `lnt`, expected `lint` or `test`";
        assert_eq!(rewrite_serde_unknown(m, "key", "[gates]"), "unknown key `lnt` in [gates]; did you mean `lint`?");
        assert_eq!(rewrite_serde_unknown("invalid type", "key", "x"), "invalid type");
    }
}
