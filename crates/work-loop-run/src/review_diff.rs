//! The diff code reviewers read travels whole or not at all: a reviewer never reads a cut
//! diff (what is cut is not reviewed). A change whose diff is larger than
//! [`MAX_DIFF_BYTES`] stops the round BLOCKED `too-large-to-review`, naming the paths, before
//! any reviewer is asked. (`work implement` reviews such a diff in parts; `loop run` does not
//! yet.)

/// The most bytes of diff one reviewer's `context.diff` carries.
pub const MAX_DIFF_BYTES: usize = 200_000;

/// The stop reason of a change too large to review.
pub const TOO_LARGE: &str = "too-large-to-review";

/// `text` when it fits [`MAX_DIFF_BYTES`]; else the message of the stop, naming the paths.
pub fn whole(text: String, changed: &[String]) -> Result<String, String> {
    if text.len() <= MAX_DIFF_BYTES {
        return Ok(text);
    }
    let shown: Vec<&str> = changed.iter().take(8).map(String::as_str).collect();
    let more = if changed.len() > 8 { format!(" and {} more", changed.len() - 8) } else { String::new() };
    Err(format!(
        "the change is too large to review: its diff is over {MAX_DIFF_BYTES} bytes, which a reviewer's context carries at most, and a reviewer never reads a cut diff ({}{more}); split the work or leave generated and bulk files out of the tree",
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_travels_whole_or_the_round_stops() {
        assert_eq!(whole("d".into(), &[]), Ok("d".to_string()));
        let big = "x".repeat(MAX_DIFF_BYTES + 1);
        let e = whole(big, &["bulk.txt".into(), "a.rs".into()]).expect_err("too large");
        assert!(e.contains("bulk.txt, a.rs") && e.contains("never reads a cut diff"), "{e}");
    }
}
