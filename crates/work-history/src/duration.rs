//! Durations as people write them for `runs gc --older-than`: a whole number and one unit,
//! `s`, `m`, `h`, `d` or `w` (`90m`, `12h`, `30d`, `2w`).

/// Parses `30d` into seconds; `Err` says what is wrong.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: i64 = num.parse().map_err(|_| format!("`{text}` is not a duration (write e.g. 30d, 12h, 90m)"))?;
    let per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(format!("`{text}`: the unit must be one of s, m, h, d, w (e.g. 30d)")),
    };
    n.checked_mul(per).ok_or_else(|| format!("`{text}` is too long"))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn units_and_refusals() {
        assert_eq!(parse_duration("90m"), Ok(5400));
        assert_eq!(parse_duration("2w"), Ok(1_209_600));
        assert_eq!(parse_duration("0s"), Ok(0));
        for bad in ["", "d", "10", "10y", "-1d", "1.5h", "10 d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
