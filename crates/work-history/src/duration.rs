//! Durations as people write them for `runs gc --older-than`, read by `humantime`: a number and
//! a unit, or several (`90m`, `12h`, `30d`, `2w`, `1h 30m`, `6months`).

/// Parses `30d` into whole seconds; `Err` says what is wrong.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}; write e.g. 30d, 12h, 90m)"))?;
    i64::try_from(d.as_secs()).map_err(|_| format!("`{text}` is too long"))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn units_and_refusals() {
        assert_eq!(parse_duration("90m"), Ok(5400));
        assert_eq!(parse_duration("2w"), Ok(1_209_600));
        assert_eq!(parse_duration("1h 30m"), Ok(5400));
        assert_eq!(parse_duration("1.5h"), Ok(5400));
        assert_eq!(parse_duration("0s"), Ok(0));
        for bad in ["", "d", "10", "-1d", "soon"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
