//! `cohort review record` / `classify` / `inspect`: review rounds and their fingerprints.

use super::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewRecord {
    /// `--report P --adjudication`: a clean adjudicated report.
    CleanReport(String),
    /// `--report P`: a clean reviewer report ([`crate::report`]).
    CleanReviewerReport(String),
    /// `--fingerprint FP …`: a round with sustained findings (counts a review retry).
    Fingerprints(Vec<String>),
    /// `--all-skipped`: every warranted reviewer was a non-mandatory named skip.
    AllSkipped,
}

/// `cohort review record`. Not idempotent (the design says so): every call is a round.
pub fn review_record(
    root: &Path,
    sd: &SpecDir,
    what: &ReviewRecord,
    expect: Option<&str>,
    clock: &dyn Clock,
) -> LoopResult {
    // Read and classify the artifact before taking the lock: bad input changes nothing.
    let report = match what {
        ReviewRecord::CleanReport(p) => {
            let c = read_classification(root, p)?;
            if c.classification != Class::Clean {
                return Err(LoopError::refused(
                    format!("record the review: `{p}` is not clean ({} sustained)", c.sustained.len()),
                    json!({ "classification": c }),
                ));
            }
            Some(p.clone())
        }
        ReviewRecord::CleanReviewerReport(p) => {
            let (class, fps) =
                read_report(sd, p).map(|t| report::classify(&t)).unwrap_or((ReportClass::Invalid, Vec::new()));
            if class != ReportClass::Clean {
                return Err(LoopError::refused(
                    format!(
                        "record the review: report `{p}` is classified {class:?}, not clean (use --fingerprint for a findings round)"
                    ),
                    json!({ "classification": class, "fingerprints": fps }),
                ));
            }
            Some(p.clone())
        }
        ReviewRecord::Fingerprints(fps) if fps.iter().any(|f| f.trim().is_empty()) || fps.is_empty() => {
            return Err(LoopError::bad("use `--fingerprint`: a fingerprint is empty"));
        }
        _ => None,
    };
    mutate(sd, "review record", expect, |st| {
        let (kind, mut fps) = match what {
            ReviewRecord::CleanReport(_) | ReviewRecord::CleanReviewerReport(_) => ("clean-report", Vec::new()),
            ReviewRecord::Fingerprints(f) => ("fingerprints", f.clone()),
            ReviewRecord::AllSkipped => ("all-skipped", Vec::new()),
        };
        fps.sort();
        fps.dedup();
        st.review_round_count += 1;
        if matches!(what, ReviewRecord::Fingerprints(_)) {
            st.review_retry_count += 1;
        }
        st.previous_fingerprints = std::mem::replace(&mut st.fingerprints, fps.clone());
        st.review_rounds.push(ReviewRound {
            round: st.review_round_count,
            kind: kind.into(),
            report,
            fingerprints: fps,
            recorded_at: clock.now_rfc3339(),
        });
        let doc = json!({
            "kind": kind,
            "review_round_count": st.review_round_count,
            "review_retry_count": st.review_retry_count,
            "review_retry_cap": st.review_retry_cap,
            "fingerprints": st.fingerprints,
            "previous_fingerprints": st.previous_fingerprints,
        });
        Ok((true, doc, format!("review round {} recorded ({kind})", st.review_round_count)))
    })
}

fn read_classification(root: &Path, rel: &str) -> Result<adjudication::Classification, LoopError> {
    let p = confine(root, rel)?;
    let text = fsx::read_optional(&p)
        .map_err(|e| LoopError::bad(format!("read adjudication `{rel}`: {e}")))?
        .ok_or_else(|| LoopError::bad(format!("read adjudication `{rel}`: no such file")))?;
    adjudication::classify(&text, rel)
}

/// `cohort review classify P`: state-free classification (light mode).
pub fn review_classify(root: &Path, rel: &str) -> LoopResult {
    let c = read_classification(root, rel)?;
    let text = format!("{}: {} sustained, {} refuted", class_name(c.classification), c.sustained.len(), c.refuted);
    let exit = if c.classification == Class::Indeterminate { ExitStatus::Unsuccessful } else { ExitStatus::Done };
    let mut doc = serde_json::to_value(&c).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut doc {
        o.insert("ok".into(), json!(exit == ExitStatus::Done));
        o.insert("report".into(), json!(rel));
    }
    Ok(Outcome::with(exit, doc, text))
}

fn class_name(c: Class) -> &'static str {
    match c {
        Class::Clean => "clean",
        Class::Findings => "findings",
        Class::Indeterminate => "indeterminate",
    }
}

/// A reviewer report, confined under the spec directory's root; `None` when it cannot be read
/// (the report is then `invalid`, a content outcome, never an error).
fn read_report(sd: &SpecDir, rel: &str) -> Option<String> {
    let p = confine(sd.root(), rel).ok()?;
    let m = std::fs::symlink_metadata(&p).ok()?;
    if !m.file_type().is_file() || m.len() > crate::common::MAX_MANAGED_BYTES {
        return None;
    }
    fsx::read_optional(&p).ok().flatten()
}

/// `cohort review inspect --report P`: the reviewer report's class, fingerprints and
/// stasis against the last round. Every content outcome exits 0 (an unreadable report is
/// `invalid`, with a warning on stderr).
pub fn review_inspect_report(sd: &SpecDir, rel: &str, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd, "review inspect")?;
    check_run_id(&st, "review inspect", expect)?;
    let text = read_report(sd, rel);
    if text.is_none() {
        eprintln!("work loop: warning: report `{rel}` could not be read; classified invalid");
    }
    let (class, fps) = text.as_deref().map(report::classify).unwrap_or((ReportClass::Invalid, Vec::new()));
    let mut previous = st.fingerprints.clone();
    previous.sort();
    previous.dedup();
    let matches = !fps.is_empty() && fps == previous;
    let doc = json!({ "classification": class, "fingerprints": fps, "matches_previous_round": matches });
    let text = format!(
        "review inspect classification={} fingerprints={} matches_previous_round={matches}",
        serde_json::to_value(class).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
        fps.len()
    );
    Ok(Outcome::ok(doc, text))
}

/// `cohort review inspect --adjudication P`: classification plus `matches_previous_round`
/// (stasis: the same non-empty sustained fingerprints as the last recorded round).
pub fn review_inspect(root: &Path, sd: &SpecDir, rel: &str, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd, "review inspect")?;
    check_run_id(&st, "review inspect", expect)?;
    let c = read_classification(root, rel)?;
    let matches = !c.fingerprints.is_empty() && c.fingerprints == st.fingerprints;
    let exit = if c.classification == Class::Indeterminate { ExitStatus::Unsuccessful } else { ExitStatus::Done };
    let mut doc = serde_json::to_value(&c).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut doc {
        o.insert("ok".into(), json!(exit == ExitStatus::Done));
        o.insert("report".into(), json!(rel));
        o.insert("matches_previous_round".into(), json!(matches));
        o.insert("previous_round_fingerprints".into(), json!(st.fingerprints));
        o.insert("review_round_count".into(), json!(st.review_round_count));
        o.insert("review_retry_count".into(), json!(st.review_retry_count));
        o.insert("review_retry_cap_reached".into(), json!(st.review_retry_count >= st.review_retry_cap));
    }
    let mut text = format!("{}: {} sustained", class_name(c.classification), c.sustained.len());
    if matches {
        text.push_str("; same findings as the previous round (stasis): surface for replanning");
    }
    text.push_str(&format!("\nmatches_previous_round: {matches}"));
    Ok(Outcome::with(exit, doc, text))
}
