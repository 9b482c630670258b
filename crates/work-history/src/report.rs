//! The self-contained HTML report of one run: no script, no network (a Content-Security-Policy
//! forbids both), charts as inline SVG, every outside string redacted and escaped.

use crate::detail::{Detail, ExhaustDetail, UntilDetail};
use crate::html::Html;
use crate::summary::{RunState, RunSummary, ms_between};
use crate::svg::{self, Marker};
use std::collections::BTreeMap;
use work_runtime::redact::Redactor;

/// The most timeline rows drawn (the rest are counted).
pub const MAX_TIMELINE_ROWS: usize = 2000;

/// Latency buckets of the distribution chart: (label, upper bound in ms).
const BUCKETS: [(&str, i64); 7] = [
    ("<1s", 1_000),
    ("1–5s", 5_000),
    ("5–15s", 15_000),
    ("15–60s", 60_000),
    ("1–5m", 300_000),
    ("5–15m", 900_000),
    (">15m", i64::MAX),
];

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#1b1b1b;padding:0 16px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}\
table{border-collapse:collapse;width:100%;margin:6px 0 12px}th,td{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}\
th{background:#f4f4f4}td{white-space:pre-wrap;word-break:break-word}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px}\
dt{color:#555}dd{margin:0}.chart{display:block;margin:8px 0;max-width:100%;height:auto;background:#fcfcfc;border:1px solid #eee}\
.ax{stroke:#888}.tick{font-size:11px;fill:#444}.ct{font-size:13px;font-weight:600;fill:#222}.muted{color:#666}\
.outcome{display:inline-block;padding:1px 8px;border-radius:10px;background:#eef;font-weight:600}\
.outcome.ok{background:#dfd}.outcome.warn{background:#fe9}.outcome.bad{background:#fcc}";

/// Renders the report of `run`.
pub fn render(run: &RunSummary, detail: &Detail, redactor: &Redactor, generated: &str) -> String {
    let mut h = Html::new(redactor);
    h.raw("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>work report — ")
        .text(&run.run_id)
        .raw("</title><style>")
        .raw(STYLE)
        .raw("</style></head><body>");
    header(&mut h, run, detail, generated);
    // What went wrong comes before the big tables.
    failures(&mut h, run);
    if let Some(x) = &detail.exhaust {
        exhaust(&mut h, x, detail);
    }
    if let Some(u) = &detail.until {
        until(&mut h, u);
    }
    timeline(&mut h, detail);
    stats(&mut h, detail);
    spend(&mut h, run);
    latency(&mut h, run);
    h.raw("</body></html>\n");
    h.finish()
}

/// A duration for people: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn human_ms(ms: i64) -> String {
    match ms {
        ..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// The outcome pill: its class (`ok`, `warn` when the run has gaps or failures, `bad` when it
/// ended on an error, was cut off or its log was altered, none while it runs) and its text
/// (the outcome, an exhaust's completeness, the count of gaps).
fn pill(run: &RunSummary, d: &Detail) -> (&'static str, String) {
    let gaps = d.exhaust.as_ref().map_or(0, |x| x.completeness_gaps.len());
    let completeness = d.exhaust.as_ref().and_then(|x| x.completeness.clone());
    let mut text = run.outcome.clone();
    if let Some(c) = &completeness {
        text.push_str(&format!(" · {c}"));
    }
    if gaps > 0 {
        text.push_str(&format!(" · {gaps} gap(s)"));
    }
    let ended_on_error = run.end_detail.get("error").is_some();
    let class = match run.state {
        RunState::Running => "",
        RunState::Interrupted | RunState::Altered => "bad",
        RunState::Ended if ended_on_error => "bad",
        RunState::Ended if gaps > 0 || !run.failures.is_empty() || completeness.as_deref() == Some("unconfirmed") => {
            "warn"
        }
        RunState::Ended => "ok",
    };
    (class, text)
}

fn header(h: &mut Html, run: &RunSummary, d: &Detail, generated: &str) {
    h.raw("<h1>").text(&run.workflow).raw(" run ").text(&run.run_id).raw("</h1>");
    h.raw("<p class=\"muted\">Generated ").text(generated).raw(" from the run's event log.</p><dl>");
    let subject = run.subject.as_ref().map(|s| format!("{} {}", s.kind, s.id)).unwrap_or_else(|| "—".into());
    let (class, outcome) = pill(run, d);
    let rows = [
        ("outcome", outcome),
        ("subject", subject),
        ("started", run.started.clone().unwrap_or_default()),
        ("duration", run.duration_ms.map(human_ms).unwrap_or_default()),
        ("dispatches", run.dispatches.to_string()),
        ("tokens", run.tokens.to_string()),
        ("cost", work_runtime::budget::cost_text(run.cost_usd, run.unpriced)),
        ("event log", run.events_path.display().to_string()),
        ("dispatch records", run.run_dir.join(work_runtime::events::RECORDS_FILE).display().to_string()),
    ];
    for (k, v) in rows {
        h.el("dt", k);
        if k == "outcome" {
            h.raw(&format!("<dd><span class=\"outcome {class}\" data-state=\"{class}\">")).text(&v).raw("</span></dd>");
        } else {
            h.el("dd", &v);
        }
    }
    h.raw("</dl>");
    if run.skipped_lines > 0 || run.truncated {
        h.raw("<p class=\"muted\">").text(&format!(
            "{} unreadable line(s) skipped{}.",
            run.skipped_lines,
            if run.truncated { "; the log was longer than the read cap and was cut" } else { "" }
        ));
        h.raw("</p>");
    }
}

fn exhaust(h: &mut Html, x: &ExhaustDetail, d: &Detail) {
    h.raw("<h2>Exhaust: ").text(&x.what).raw("</h2>");
    h.raw("<p>").text(&format!(
        "K={} · {} round(s) · {} accepted · {} rejected · stopped: {}",
        x.k,
        x.rounds.len(),
        x.accepted.len(),
        x.rejected.len(),
        x.stopped_reason.as_deref().unwrap_or("—")
    ));
    h.raw("</p>");
    let bars: Vec<(String, f64)> = x.rounds.iter().map(|r| (format!("{}", r.n), r.new_items as f64)).collect();
    let dry: Vec<f64> = x.rounds.iter().map(|r| r.dry_counter_after as f64).collect();
    let mut markers = Vec::new();
    for (i, r) in x.rounds.iter().enumerate() {
        if let Some(found) = r.gate3_new {
            markers.push(Marker { at: i, text: format!("round {}: gate 3 ran, {found} new", r.n), alert: found > 0 });
        }
        if r.rejected > 0 {
            markers.push(Marker { at: i, text: format!("round {}: gate 2 rejected {}", r.n, r.rejected), alert: true });
        }
    }
    let seeded = d.gate_events.iter().filter(|(round, k)| *round == 0 && k.starts_with("gate1")).count();
    let esc = |s: &str| h.esc(s);
    let chart = svg::bars(
        "rounds",
        "New items and the dry counter per round (▼ gate events)",
        "new items",
        &bars,
        Some(("dry counter", &dry)),
        &markers,
        &esc,
    );
    h.raw(&chart);
    if seeded > 0 {
        h.raw("<p class=\"muted\">").text(&format!("Gate 1 ran {seeded} seed oracle(s) before round 1.")).raw("</p>");
    }
    let rows: Vec<Vec<String>> = x
        .rounds
        .iter()
        .map(|r| {
            vec![
                r.n.to_string(),
                r.angles.join(", "),
                r.new_items.to_string(),
                r.rejected.to_string(),
                r.dry_counter_after.to_string(),
                r.gate3_new.map(|n| format!("ran: {n} new")).unwrap_or_default(),
                r.verdict.clone(),
            ]
        })
        .collect();
    h.table("rounds", &["round", "angles", "new", "rejected", "dry after", "gate 3", "verdict"], &rows);
    h.raw("<h2>Accepted items</h2>");
    let rows: Vec<Vec<String>> = x
        .accepted
        .iter()
        .map(|a| vec![a.id.clone(), a.title.clone(), a.location.clone(), a.evidence.clone(), a.round.to_string()])
        .collect();
    h.table("accepted", &["id", "title", "location", "re-read evidence", "round"], &rows);
    h.raw("<h2>Rejected items</h2>");
    let rows: Vec<Vec<String>> = x
        .rejected
        .iter()
        .map(|r| vec![r.id.clone(), r.location.clone(), r.reason.clone(), r.round.to_string()])
        .collect();
    h.table("rejected", &["id", "location", "reason", "round"], &rows);
    if !x.completeness_gaps.is_empty() {
        h.raw("<h2>Completeness gaps</h2><ul>");
        for g in &x.completeness_gaps {
            h.el("li", g);
        }
        h.raw("</ul>");
    }
}

fn until(h: &mut Html, u: &UntilDetail) {
    h.raw("<h2>Until: session ").text(&u.session).raw("</h2>");
    let bars: Vec<(String, f64)> = u.iterations.iter().map(|i| (i.n.to_string(), i.changed.len() as f64)).collect();
    let markers: Vec<Marker> = u
        .iterations
        .iter()
        .enumerate()
        .filter_map(|(at, i)| {
            let verify = i.verify_passed.map(|p| format!("verify {}", if p { "passed" } else { "failed" }));
            let mismatch = (!i.false_claims.is_empty()).then(|| format!("{} false claim(s)", i.false_claims.len()));
            let text = [verify, mismatch].into_iter().flatten().collect::<Vec<_>>().join(" · ");
            (!text.is_empty()).then(|| Marker {
                at,
                text: format!("iteration {}: {text}", i.n),
                alert: i.verify_passed == Some(false) || !i.false_claims.is_empty(),
            })
        })
        .collect();
    let esc = |s: &str| h.esc(s);
    let chart = svg::bars(
        "iterations",
        "Paths changed per iteration (▼ verify runs and ground-truth mismatches)",
        "changed paths",
        &bars,
        None,
        &markers,
        &esc,
    );
    h.raw(&chart);
    let rows: Vec<Vec<String>> = u
        .iterations
        .iter()
        .map(|i| {
            let verify = match (&i.verify, i.verify_passed) {
                (Some(c), Some(p)) => format!(
                    "{c}: {} ({})",
                    if p { "passed" } else { "failed" },
                    i.verify_end.clone().unwrap_or_default()
                ),
                _ => String::new(),
            };
            vec![
                i.n.to_string(),
                i.status.clone(),
                i.decision.clone(),
                verify,
                i.false_claims.join(", "),
                i.unclaimed.join(", "),
            ]
        })
        .collect();
    h.table(
        "iterations",
        &["iteration", "worker status", "decision", "verify", "claimed, not changed", "changed, not claimed"],
        &rows,
    );
}

fn timeline(h: &mut Html, d: &Detail) {
    if d.timeline.is_empty() {
        return;
    }
    h.raw("<h2>Timeline</h2>");
    let rows: Vec<Vec<String>> = d
        .timeline
        .iter()
        .take(MAX_TIMELINE_ROWS)
        .map(|s| vec![s.ts.clone(), s.phase.clone(), s.label.clone(), s.status.clone(), s.note.clone()])
        .collect();
    h.table("timeline", &["time", "phase", "what", "status", "note"], &rows);
    if d.timeline.len() > MAX_TIMELINE_ROWS {
        h.raw("<p class=\"muted\">")
            .text(&format!("… {} more step(s)", d.timeline.len() - MAX_TIMELINE_ROWS))
            .raw("</p>");
    }
}

fn stats(h: &mut Html, d: &Detail) {
    let Some(obj) = d.stats.as_ref().and_then(|v| v.as_object()) else { return };
    h.raw("<h2>Iteration stats (fingerprints, repairs)</h2>");
    let rows: Vec<Vec<String>> = obj
        .iter()
        .map(|(k, v)| vec![k.clone(), if let Some(s) = v.as_str() { s.to_string() } else { v.to_string() }])
        .collect();
    h.table("stats", &["field", "value"], &rows);
}

fn spend(h: &mut Html, run: &RunSummary) {
    h.raw("<h2>Spend per role</h2>");
    let by_cost = run.cost_usd > 0.0;
    let by_tokens = !by_cost && run.tokens > 0;
    let unit = if by_cost {
        "US dollars"
    } else if by_tokens {
        "tokens"
    } else {
        "dispatches"
    };
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let start = run.started.clone().unwrap_or_default();
    // Seconds on the time axis, or milliseconds for a run shorter than ten seconds.
    let (x_unit, per) = if run.duration_ms.unwrap_or(0) < 10_000 { ("milliseconds", 1.0) } else { ("seconds", 1000.0) };
    // In end order: attempts run in parallel end in another order than they started, and a
    // cumulative line over end times must never run backwards.
    let mut ended: Vec<(f64, &crate::summary::Attempt)> = run
        .attempts
        .iter()
        .filter_map(|a| a.ended.as_ref().map(|end| (ms_between(&start, end).unwrap_or(0).max(0) as f64 / per, a)))
        .collect();
    ended.sort_by(|x, y| x.0.total_cmp(&y.0));
    for (x, a) in ended {
        let pts = series.entry(a.role.clone()).or_default();
        let prev = pts.last().map_or(0.0, |p| p.1);
        let add = if by_cost {
            a.cost_usd
        } else if by_tokens {
            a.tokens as f64
        } else {
            1.0
        };
        pts.push((x, prev + add));
    }
    let series: Vec<(String, Vec<(f64, f64)>)> = series.into_iter().collect();
    let esc = |s: &str| h.esc(s);
    let chart = svg::lines("spend", &format!("Cumulative spend per role ({unit})"), unit, x_unit, &series, &esc);
    h.raw(&chart);
    let rows: Vec<Vec<String>> = run
        .spent_by_role
        .iter()
        .map(|(role, s)| {
            let cost = work_runtime::budget::cost_text(s.cost_usd, s.unpriced);
            vec![role.clone(), s.dispatches.to_string(), s.tokens.to_string(), cost]
        })
        .collect();
    h.table("roles", &["role", "dispatches", "tokens", "cost"], &rows);
}

fn latency(h: &mut Html, run: &RunSummary) {
    h.raw("<h2>Dispatch latency</h2>");
    let mut counts = [0u64; BUCKETS.len()];
    let mut all: Vec<i64> = run.attempts.iter().filter_map(|a| a.latency_ms).collect();
    for ms in &all {
        if let Some(i) = BUCKETS.iter().position(|(_, hi)| ms < hi) {
            counts[i] += 1;
        }
    }
    let bars: Vec<(String, f64)> = BUCKETS.iter().zip(counts).map(|((l, _), c)| (l.to_string(), c as f64)).collect();
    let esc = |s: &str| h.esc(s);
    let chart = svg::bars("latency", "Dispatch attempts by latency", "attempts", &bars, None, &[], &esc);
    h.raw(&chart);
    all.sort_unstable();
    if !all.is_empty() {
        let q = |p: usize| human_ms(all[(all.len() - 1) * p / 100]);
        h.raw("<p>")
            .text(&format!("{} attempt(s) · median {} · p90 {} · max {}", all.len(), q(50), q(90), q(100)))
            .raw("</p>");
    }
}

fn failures(h: &mut Html, run: &RunSummary) {
    h.raw("<h2>Failures</h2>");
    if let Some(e) = run.end_detail.get("error").and_then(|e| e.as_str()) {
        h.raw("<p>").text(&format!("The run ended on an error ({}): {e}", run.outcome)).raw("</p>");
    }
    if run.failures.is_empty() {
        h.raw("<p>No dispatch failed.</p>");
        return;
    }
    let rows: Vec<Vec<String>> = run
        .failures
        .iter()
        .map(|f| {
            vec![
                f.dispatch_id.clone(),
                if f.attempt == 0 { String::new() } else { f.attempt.to_string() },
                f.role.clone(),
                f.outcome.clone(),
                f.reason.clone(),
                f.record.clone().unwrap_or_default(),
            ]
        })
        .collect();
    h.table("failures", &["dispatch", "attempt", "role", "outcome", "reason", "record"], &rows);
}
