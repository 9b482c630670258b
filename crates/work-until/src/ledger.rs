//! The ledger (`master.md`), the iteration record (`reports/NN.md`), and the
//! `compact-master` as code.
//!
//! The ledger is markdown a person can read and edit; the engine parses it back by section
//! (`## Open blockers`, `## Decisions`, …; items are `- [iter N] text`). Sections the engine
//! does not know are kept verbatim. Merging an iteration is idempotent: everything tagged
//! with that iteration is replaced, so a merge that is rolled forward twice leaves one copy.
//!
//! Compaction keeps the ledger under a line limit (150) by folding, oldest first: full
//! iteration entries into one-liners, one-liners into a range, old ground-truth notes and
//! incidents into a count, long bodies into their first lines, and — when that is not enough —
//! the oldest decisions into one line (their count, their iterations and the gist of each),
//! keeping the newest [`DECISIONS_VERBATIM`] verbatim. Open blockers are never dropped (at most
//! shortened to one line each); a folded decision stays word for word in its `reports/NN.md`.

use crate::report::{ReconReport, ReportStatus, WorkerReport};
use crate::session::{Meta, SessionStatus};
use serde::{Deserialize, Serialize};

/// The default line limit of `master.md`.
pub const LEDGER_LINE_LIMIT: usize = 150;

/// Decisions kept verbatim when older ones are folded (the newest).
pub const DECISIONS_VERBATIM: usize = 20;

/// One ledger list item, tagged with the iteration it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// The iteration (`None` for hand-written or folded items).
    pub iter: Option<u32>,
    /// The text, on one line.
    pub text: String,
}

impl Item {
    fn new(iter: u32, text: &str) -> Self {
        Item { iter: Some(iter), text: one_line(text, 400) }
    }

    fn render(&self) -> String {
        match self.iter {
            Some(n) => format!("- [iter {n}] {}", self.text),
            None => format!("- {}", self.text),
        }
    }

    fn parse(line: &str) -> Option<Item> {
        let rest = line.strip_prefix("- ")?;
        if let Some(tagged) = rest.strip_prefix("[iter ")
            && let Some(end) = tagged.find(']')
            && let Ok(n) = tagged[..end].trim().parse::<u32>()
        {
            return Some(Item { iter: Some(n), text: tagged[end + 1..].trim().to_string() });
        }
        Some(Item { iter: None, text: rest.trim().to_string() })
    }
}

/// One full iteration entry in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterEntry {
    /// The iteration number.
    pub n: u32,
    /// The rest of the heading after `### Iteration NN · `.
    pub heading: String,
    /// The body lines.
    pub body: Vec<String>,
}

/// The parsed ledger (also the snapshot `ledger.json`, see [`crate::store`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ledger {
    /// The last iteration merged into the ledger.
    pub merged_through: u32,
    /// The recon map (iteration 0), as lines.
    pub recon: Vec<String>,
    /// Blockers not yet resolved.
    pub open_blockers: Vec<Item>,
    /// Decisions (kept for good).
    pub decisions: Vec<Item>,
    /// What the next worker should do.
    pub next_steps: Vec<Item>,
    /// Git ground truth notes (claims the tree does not back, unclaimed changes).
    pub ground_truth: Vec<Item>,
    /// Iterations that did not count (failed dispatch, invalid report), and other events.
    pub incidents: Vec<Item>,
    /// Compacted iteration one-liners.
    pub earlier: Vec<String>,
    /// Full iteration entries, oldest first.
    pub iterations: Vec<IterEntry>,
    /// Sections the engine does not know, kept verbatim (title, lines).
    pub extra: Vec<(String, Vec<String>)>,
}

/// The result of running the verify command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyResult {
    /// The command.
    pub command: String,
    /// It exited 0.
    pub passed: bool,
    /// How it ended (`exit code 1`, `timed out after …`).
    pub end: String,
    /// The last lines of its output.
    pub tail: Vec<String>,
}

/// Everything the engine learned from one iteration: the archive's machine block and the
/// source the ledger merge is rolled forward from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationRecord {
    /// The iteration number.
    pub iteration: u32,
    /// The dispatch id.
    pub dispatch_id: String,
    /// The validated report.
    pub report: WorkerReport,
    /// Ground truth was available (a git work tree).
    pub git: bool,
    /// Paths that really changed during the iteration.
    pub changed: Vec<String>,
    /// Claimed paths that did not change.
    pub false_claims: Vec<String>,
    /// Changed paths the report does not claim.
    pub unclaimed: Vec<String>,
    /// The verify run, when the report said done.
    pub verify: Option<VerifyResult>,
    /// The engine's decision (`continue`, `verify-failed`, `done`, `blocked`, `stalled: …`,
    /// `max-reached`, `paused`).
    pub decision: String,
    /// The iteration changed nothing in the tree.
    pub empty: bool,
    /// What the iteration committed to the session. The archive is the iteration's commit
    /// point: `meta.md` (and `master.md`) are rolled forward from it on the next start.
    /// `None` in archives written before it existed.
    #[serde(default)]
    pub commit: Option<IterationCommit>,
}

/// The session state an iteration leaves behind (see [`IterationRecord::commit`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationCommit {
    /// The session's status after the iteration (`active` when the loop goes on).
    pub status: SessionStatus,
    /// Why the session stopped, when it did.
    pub stopped_reason: Option<String>,
    /// The empty-report streak after the iteration.
    pub empty_streak: u32,
    /// The blockers seen after the iteration.
    pub blockers_seen: Vec<String>,
    /// What the session had spent once the iteration's dispatch ended (every run's, this
    /// iteration's included): `meta.md`'s `spent` rolls forward to it. `None` in records
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<work_runtime::budget::Spent>,
}

/// The recon's archive record (`reports/00.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconRecord {
    /// The dispatch id.
    pub dispatch_id: String,
    /// What the session had spent once the recon's dispatch ended (see
    /// [`IterationCommit::spent`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<work_runtime::budget::Spent>,
    /// The map.
    pub recon: ReconReport,
}

/// Flattens text to one line of at most `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let s: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() <= max {
        s
    } else {
        format!("{}…", s.chars().take(max.saturating_sub(1)).collect::<String>())
    }
}

/// Normalises a blocker for the "same blocker twice" rule.
pub fn normalize_blocker(b: &str) -> String {
    b.to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_placeholder(line: &str) -> bool {
    line.trim() == "_none_"
}

impl Ledger {
    /// Parses `master.md`. Tolerant: anything unrecognised is kept in [`Ledger::extra`].
    pub fn parse(text: &str) -> Ledger {
        let mut l = Ledger::default();
        let mut section: Option<String> = None;
        let mut lines_of: Vec<(String, Vec<String>)> = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("## ") {
                section = Some(rest.trim().to_string());
                lines_of.push((rest.trim().to_string(), Vec::new()));
                continue;
            }
            if section.is_none() {
                if let Some(pos) = line.find("Merged through iteration:") {
                    let num: String = line[pos + "Merged through iteration:".len()..]
                        .trim()
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    l.merged_through = num.parse().unwrap_or(0);
                }
                continue;
            }
            if let Some(last) = lines_of.last_mut() {
                last.1.push(line.to_string());
            }
        }
        for (title, lines) in lines_of {
            let content: Vec<String> = {
                let mut v: Vec<String> = lines.into_iter().filter(|x| !is_placeholder(x)).collect();
                while v.last().is_some_and(|x| x.trim().is_empty()) {
                    v.pop();
                }
                while v.first().is_some_and(|x| x.trim().is_empty()) {
                    v.remove(0);
                }
                v
            };
            let items = || content.iter().filter_map(|x| Item::parse(x)).collect::<Vec<_>>();
            match title.as_str() {
                "Until" | "Goal" | "Verify" => {}
                "Recon" => l.recon = content,
                "Open blockers" => l.open_blockers = items(),
                "Decisions" => l.decisions = items(),
                "Next steps" => l.next_steps = items(),
                "Ground truth" => l.ground_truth = items(),
                "Incidents" => l.incidents = items(),
                "Earlier iterations (compacted)" => {
                    l.earlier = content.into_iter().filter(|x| x.starts_with("- ")).collect()
                }
                "Iterations" => {
                    for x in content {
                        if let Some(h) = x.strip_prefix("### Iteration ") {
                            let num: String = h.chars().take_while(char::is_ascii_digit).collect();
                            let heading = h[num.len()..].trim_start_matches([' ', '·']).trim().to_string();
                            l.iterations.push(IterEntry { n: num.parse().unwrap_or(0), heading, body: Vec::new() });
                        } else if let Some(e) = l.iterations.last_mut() {
                            e.body.push(x);
                        }
                    }
                    for e in &mut l.iterations {
                        while e.body.first().is_some_and(|x| x.trim().is_empty()) {
                            e.body.remove(0);
                        }
                        while e.body.last().is_some_and(|x| x.trim().is_empty()) {
                            e.body.pop();
                        }
                    }
                }
                _ => l.extra.push((title, content)),
            }
        }
        l
    }

    /// Renders `master.md` for the session.
    pub fn render(&self, meta: &Meta) -> String {
        let mut o = String::new();
        o.push_str(&format!("# Master ledger — `{}`\n\n", meta.id));
        o.push_str(&format!(
            "Kept by the engine; workers never edit it. Compacted to at most {LEDGER_LINE_LIMIT} lines.\nMerged through iteration: {}\n",
            self.merged_through
        ));
        let items = |o: &mut String, title: &str, items: &[Item]| {
            o.push_str(&format!("\n## {title}\n\n"));
            if items.is_empty() {
                o.push_str("_none_\n");
            }
            for i in items {
                o.push_str(&i.render());
                o.push('\n');
            }
        };
        o.push_str(&format!("\n## Until\n\n{}\n", one_line(&meta.until, 1000)));
        o.push_str(&format!("\n## Goal\n\n{}\n", one_line(&meta.goal, 1000)));
        match &meta.verify {
            Some(v) => {
                o.push_str(&format!("\n## Verify\n\n`{v}` ({})\n", meta.verify_source.as_deref().unwrap_or("--verify")))
            }
            None => o.push_str("\n## Verify\n\nnone: a `done` report pauses the session for a person to check\n"),
        }
        if !self.recon.is_empty() {
            o.push_str("\n## Recon\n\n");
            for r in &self.recon {
                o.push_str(r);
                o.push('\n');
            }
        }
        items(&mut o, "Open blockers", &self.open_blockers);
        items(&mut o, "Decisions", &self.decisions);
        items(&mut o, "Next steps", &self.next_steps);
        items(&mut o, "Ground truth", &self.ground_truth);
        items(&mut o, "Incidents", &self.incidents);
        if !self.earlier.is_empty() {
            o.push_str("\n## Earlier iterations (compacted)\n\n");
            for e in &self.earlier {
                o.push_str(e);
                o.push('\n');
            }
        }
        o.push_str("\n## Iterations\n");
        if self.iterations.is_empty() {
            o.push_str("\n_none_\n");
        }
        for e in &self.iterations {
            o.push_str(&format!("\n### Iteration {:02} · {}\n\n", e.n, e.heading));
            for b in &e.body {
                o.push_str(b);
                o.push('\n');
            }
        }
        for (title, lines) in &self.extra {
            o.push_str(&format!("\n## {title}\n\n"));
            for x in lines {
                o.push_str(x);
                o.push('\n');
            }
        }
        o
    }

    /// Removes everything tagged with iteration `n` (before a merge of `n`, for idempotence).
    fn forget(&mut self, n: u32) -> Option<String> {
        let resolved = self
            .iterations
            .iter()
            .find(|e| e.n == n)
            .and_then(|e| e.body.iter().find(|b| b.starts_with("- resolved blockers: ")).cloned());
        let keep = |i: &Item| i.iter != Some(n);
        self.decisions.retain(keep);
        self.ground_truth.retain(keep);
        self.open_blockers.retain(keep);
        self.iterations.retain(|e| e.n != n);
        let prefix = format!("- {n:02} ");
        self.earlier.retain(|e| !e.starts_with(&prefix));
        resolved
    }

    /// Merges one iteration's record (idempotent).
    pub fn merge(&mut self, r: &IterationRecord) {
        let n = r.iteration;
        let resolved_before = self.forget(n);
        let rep = &r.report;
        let mut body = vec![one_line(&rep.summary, 600), String::new()];
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
            }
        };
        if r.git {
            body.push(format!("- changed (git): {}", list(&r.changed)));
        } else {
            body.push("- changed: unknown (not a git work tree)".into());
        }
        body.push(format!("- claimed: {}", list(&rep.changes_claimed)));
        if !r.git && !rep.changes_claimed.is_empty() {
            body.push("- claims unverifiable: not a git work tree (not progress)".into());
        }
        if !r.false_claims.is_empty() {
            body.push(format!("- claimed but not changed: {} (not progress)", list(&r.false_claims)));
        }
        if let Some(b) = &rep.blocker {
            body.push(format!("- blocker: {}", one_line(b, 300)));
        }
        if let Some(v) = &r.verify {
            body.push(format!("- verify `{}`: {} ({})", v.command, if v.passed { "passed" } else { "failed" }, v.end));
        }
        for e in rep.evidence.iter().take(5) {
            body.push(format!("- evidence: {}", one_line(e, 200)));
        }
        body.push(format!("- decision: {}", r.decision));
        // Open blockers: a report without a blocker resolves them.
        match &rep.blocker {
            Some(b) => {
                let norm = normalize_blocker(b);
                if !self.open_blockers.iter().any(|i| normalize_blocker(&i.text) == norm) {
                    self.open_blockers.push(Item::new(n, b));
                }
            }
            None if rep.status != ReportStatus::Blocked && !self.open_blockers.is_empty() => {
                let resolved: Vec<String> = self.open_blockers.iter().map(|i| one_line(&i.text, 80)).collect();
                body.push(format!("- resolved blockers: {}", resolved.join("; ")));
                self.open_blockers.clear();
            }
            None => body.extend(resolved_before),
        }
        for d in &rep.decisions {
            self.decisions.push(Item::new(n, d));
        }
        if r.decision.starts_with("done (verified)") {
            self.next_steps.clear();
        } else if !rep.next_steps.is_empty() {
            self.next_steps = rep.next_steps.iter().map(|s| Item::new(n, s)).collect();
        }
        if r.git {
            for p in &r.false_claims {
                self.ground_truth
                    .push(Item::new(n, &format!("claimed `{p}` but git shows no change to it; not progress")));
            }
            if !r.unclaimed.is_empty() {
                self.ground_truth.push(Item::new(n, &format!("changed but not claimed: {}", list(&r.unclaimed))));
            }
        } else {
            for p in &rep.changes_claimed {
                self.ground_truth
                    .push(Item::new(n, &format!("claimed `{p}`: unverifiable (not a git work tree); not progress")));
            }
        }
        if let Some(v) = &r.verify
            && !v.passed
            && let Some(last) = v.tail.last()
        {
            self.ground_truth.push(Item::new(n, &format!("verify `{}` failed: {}", v.command, one_line(last, 200))));
        }
        let changed = if r.git { format!("{} changed", r.changed.len()) } else { "changes unknown".into() };
        self.iterations.push(IterEntry { n, heading: format!("{} · {changed}", rep.status.as_str()), body });
        self.iterations.sort_by_key(|e| e.n);
        self.merged_through = self.merged_through.max(n);
    }

    /// Merges the recon (iteration 0).
    pub fn merge_recon(&mut self, r: &ReconRecord) {
        let rc = &r.recon;
        self.recon = vec![one_line(&rc.summary, 600)];
        if !rc.map.is_empty() || !rc.risks.is_empty() {
            self.recon.push(String::new());
        }
        for m in &rc.map {
            self.recon.push(format!("- map: {}", one_line(m, 300)));
        }
        for m in &rc.risks {
            self.recon.push(format!("- risk: {}", one_line(m, 300)));
        }
        if !rc.recommended_next.is_empty() {
            self.next_steps = rc.recommended_next.iter().map(|s| Item::new(0, s)).collect();
        }
    }

    /// Records an incident (an iteration that did not count, a resume, …).
    pub fn incident(&mut self, text: &str) {
        self.incidents.push(Item { iter: None, text: one_line(text, 400) });
    }

    /// `compact-master`: folds old material until the rendering has at most `limit` lines
    /// (or nothing more can be folded without losing open blockers or decisions).
    pub fn compact(&mut self, meta: &Meta, limit: usize) {
        let lines = |l: &Ledger| l.render(meta).lines().count();
        let mut guard = 0;
        while lines(self) > limit && guard < 10_000 {
            guard += 1;
            if self.iterations.len() > 1 {
                let e = self.iterations.remove(0);
                let first = e.body.iter().find(|b| !b.trim().is_empty()).cloned().unwrap_or_default();
                let decision = e.body.iter().find_map(|b| b.strip_prefix("- decision: ")).unwrap_or("");
                self.earlier.push(format!("- {:02} {} — {} [{decision}]", e.n, e.heading, one_line(&first, 120)));
                continue;
            }
            if self.earlier.len() > 1 {
                let nums: Vec<String> = self
                    .earlier
                    .iter()
                    .filter_map(|e| e.strip_prefix("- ").map(|r| r.chars().take_while(char::is_ascii_digit).collect()))
                    .filter(|s: &String| !s.is_empty())
                    .collect();
                let span = match (nums.first(), nums.last()) {
                    (Some(a), Some(b)) => format!("{a}–{b}"),
                    _ => "earlier".into(),
                };
                self.earlier = vec![format!("- iterations {span} folded (see reports/NN.md)")];
                continue;
            }
            if fold_items(&mut self.ground_truth, 3, "ground-truth notes")
                || fold_items(&mut self.incidents, 3, "incidents")
            {
                continue;
            }
            if fold_decisions(&mut self.decisions, DECISIONS_VERBATIM) {
                continue;
            }
            if let Some(e) = self.iterations.first_mut()
                && e.body.len() > 12
            {
                e.body.truncate(12);
                e.body.push("- … (trimmed; see reports/NN.md)".into());
                continue;
            }
            if self.recon.len() > 6 {
                self.recon.truncate(6);
                self.recon.push("- … (trimmed; see reports/00.md)".into());
                continue;
            }
            if self.next_steps.len() > 8 {
                self.next_steps.truncate(8);
                continue;
            }
            if self.extra.iter().any(|(_, l)| l.len() > 10) {
                for (_, l) in &mut self.extra {
                    l.truncate(10);
                }
                continue;
            }
            let long = self.decisions.iter().chain(&self.open_blockers).any(|i| i.text.chars().count() > 160);
            if long {
                for i in self.decisions.iter_mut().chain(self.open_blockers.iter_mut()) {
                    i.text = one_line(&i.text, 160);
                }
                continue;
            }
            break;
        }
    }
}

/// The fold line's prefix: `N earlier decisions folded (iterations A–B, each word for word in
/// reports/NN.md): gist; gist; …`.
const FOLDED_DECISIONS: &str = " earlier decisions folded (iterations ";

/// Folds all but the newest `keep` decisions into one line at the front (an earlier fold line
/// is folded into the new one). False when there is nothing to fold.
fn fold_decisions(items: &mut Vec<Item>, keep: usize) -> bool {
    let folded_line = |i: &Item| i.iter.is_none() && i.text.contains(FOLDED_DECISIONS);
    let earlier = items.first().filter(|i| folded_line(i)).cloned();
    let verbatim = items.len() - usize::from(earlier.is_some());
    if verbatim <= keep {
        return false;
    }
    let start = usize::from(earlier.is_some());
    let drop = verbatim - keep;
    let gone: Vec<Item> = items.drain(start..start + drop).collect();
    let (mut count, mut first) = (0usize, None::<u32>);
    let mut gist: Vec<String> = Vec::new();
    if let Some(e) = &earlier {
        let (n, rest) = e.text.split_once(FOLDED_DECISIONS).unwrap_or(("0", ""));
        count = n.trim().parse().unwrap_or(0);
        first = rest.split(['–', ',', ')']).next().and_then(|a| a.trim().parse().ok());
        if let Some((_, g)) = rest.split_once("): ") {
            gist.extend(g.split("; ").map(str::to_string));
        }
    }
    count += gone.len();
    first = first.or_else(|| gone.iter().find_map(|i| i.iter));
    let last = gone.iter().filter_map(|i| i.iter).max().unwrap_or(first.unwrap_or(0));
    gist.extend(gone.iter().map(|i| one_line(&i.text, 40)));
    // The gist keeps the newest folded decisions that fit in 240 characters.
    let mut kept: Vec<String> = Vec::new();
    let mut room = 240usize;
    for g in gist.iter().rev() {
        let cost = g.chars().count() + 2;
        if cost > room {
            break;
        }
        room -= cost;
        kept.push(g.clone());
    }
    if kept.len() < gist.len() {
        kept.push("…".into());
    }
    kept.reverse();
    let span = match first {
        Some(a) if a != last => format!("{a}–{last}"),
        _ => last.to_string(),
    };
    let text = format!("{count}{FOLDED_DECISIONS}{span}, each word for word in reports/NN.md): {}", kept.join("; "));
    if earlier.is_some() {
        items[0] = Item { iter: None, text };
    } else {
        items.insert(0, Item { iter: None, text });
    }
    true
}

fn fold_items(items: &mut Vec<Item>, keep: usize, what: &str) -> bool {
    if items.len() <= keep + 1 {
        return false;
    }
    let drop = items.len() - keep;
    let mut folded = 0usize;
    for i in items.drain(..drop) {
        // An earlier fold line carries its own count.
        folded +=
            i.text.strip_suffix(&format!(" earlier {what} folded")).and_then(|n| n.parse::<usize>().ok()).unwrap_or(1);
    }
    items.insert(0, Item { iter: None, text: format!("{folded} earlier {what} folded") });
    true
}

/// Renders a worker report as markdown (`report.md`), followed by the record's machine block
/// when `record` is given (`reports/NN.md`).
pub fn render_report(meta: &Meta, record: &IterationRecord) -> String {
    let r = &record.report;
    let mut o = format!(
        "# Report — iteration {:02} of `{}`\n\n- status: {}\n- decision: {}\n- dispatch: {}\n\n## Summary\n\n{}\n",
        record.iteration,
        meta.id,
        r.status.as_str(),
        record.decision,
        record.dispatch_id,
        r.summary.trim()
    );
    let list = |o: &mut String, title: &str, v: &[String]| {
        o.push_str(&format!("\n## {title}\n\n"));
        if v.is_empty() {
            o.push_str("_none_\n");
        }
        for x in v {
            o.push_str(&format!("- {}\n", one_line(x, 2000)));
        }
    };
    list(&mut o, "Changes claimed", &r.changes_claimed);
    if record.git {
        list(&mut o, "Changed according to git", &record.changed);
        if !record.false_claims.is_empty() {
            list(&mut o, "Claimed but not changed", &record.false_claims);
        }
    }
    o.push_str(&format!("\n## Blocker\n\n{}\n", r.blocker.as_deref().unwrap_or("_none_")));
    list(&mut o, "Next steps", &r.next_steps);
    list(&mut o, "Decisions", &r.decisions);
    list(&mut o, "Evidence", &r.evidence);
    if let Some(v) = &record.verify {
        o.push_str(&format!(
            "\n## Verify\n\n`{}`: {} ({})\n",
            v.command,
            if v.passed { "passed" } else { "failed" },
            v.end
        ));
        if !v.tail.is_empty() {
            o.push_str("\n```text\n");
            for t in &v.tail {
                o.push_str(t);
                o.push('\n');
            }
            o.push_str("```\n");
        }
    }
    o
}

/// Appends a record's JSON block (the archive's machine part).
pub fn with_machine_block<T: Serialize>(text: String, record: &T) -> String {
    let json = serde_json::to_string_pretty(record).unwrap_or_else(|_| "{}".into());
    format!(
        "{text}\n<!-- engine record: the block below is what the ledger is rebuilt from -->\n\n```json\n{json}\n```\n"
    )
}

/// Reads the last fenced `json` block of an archive.
pub fn machine_block<T: for<'de> Deserialize<'de>>(text: &str) -> Option<T> {
    let start = text.rfind("```json\n")? + "```json\n".len();
    let len = text[start..].find("\n```")?;
    serde_json::from_str(&text[start..start + len]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::validate_report;
    use serde_json::json;

    fn meta() -> Meta {
        crate::session::tests_support::meta("s")
    }

    fn record(n: u32, status: &str, blocker: Option<&str>, decisions: &[&str]) -> IterationRecord {
        let report = validate_report(&json!({"status": status, "summary": format!("did step {n}\nsecond line"),
            "changes_claimed": ["a.rs", "ghost.rs"], "blocker": blocker, "decisions": decisions,
            "next_steps": [format!("step {}", n + 1)]}))
        .expect("valid");
        IterationRecord {
            iteration: n,
            dispatch_id: format!("d{n}"),
            report,
            git: true,
            changed: vec!["a.rs".into()],
            false_claims: vec!["ghost.rs".into()],
            unclaimed: vec![],
            verify: None,
            decision: "continue".into(),
            empty: false,
            commit: None,
        }
    }

    #[test]
    fn merge_is_idempotent_and_round_trips() {
        let m = meta();
        let mut l = Ledger::default();
        l.merge(&record(1, "continue", Some("no db"), &["use sqlite"]));
        l.merge(&record(2, "continue", None, &[]));
        let once = l.render(&m);
        let mut again = Ledger::parse(&once);
        again.merge(&record(2, "continue", None, &[]));
        assert_eq!(again.render(&m), once);
        assert_eq!(Ledger::parse(&once), l);
        assert_eq!(l.merged_through, 2);
        assert!(l.open_blockers.is_empty(), "a report without a blocker resolves it");
        assert!(once.contains("claimed `ghost.rs` but git shows no change"));
        assert!(once.contains("- [iter 1] use sqlite"));
    }

    #[test]
    fn compaction_keeps_the_limit_blockers_and_decisions() {
        let m = meta();
        let mut l = Ledger::default();
        for n in 1..=60 {
            let blocker = if n == 60 { Some("the CI token is missing") } else { None };
            l.merge(&record(n, "continue", blocker, &[&format!("decision {n}")]));
        }
        assert!(l.render(&m).lines().count() > LEDGER_LINE_LIMIT);
        l.compact(&m, LEDGER_LINE_LIMIT);
        let text = l.render(&m);
        assert!(text.lines().count() <= LEDGER_LINE_LIMIT, "{} lines", text.lines().count());
        assert!(text.contains("the CI token is missing"));
        for n in 1..=60 {
            assert!(text.contains(&format!("- [iter {n}] decision {n}")), "decision {n} lost");
        }
        assert!(text.contains("### Iteration 60"));
        let reparsed = Ledger::parse(&text);
        assert_eq!(reparsed.render(&m), text);
    }

    #[test]
    fn old_decisions_fold_into_one_line_and_a_refold_keeps_the_count() {
        let mut items: Vec<Item> = (1..=50).map(|n| Item::new(n, &format!("decision {n}"))).collect();
        assert!(fold_decisions(&mut items, 20));
        assert_eq!(items.len(), 21);
        assert!(items[0].text.starts_with("30 earlier decisions folded (iterations 1–30, "), "{}", items[0].text);
        assert_eq!(items[1].iter, Some(31));
        assert!(!fold_decisions(&mut items, 20), "nothing more to fold");
        items.extend((51..=60).map(|n| Item::new(n, &format!("decision {n}"))));
        assert!(fold_decisions(&mut items, 20));
        assert!(items[0].text.starts_with("40 earlier decisions folded (iterations 1–40, "), "{}", items[0].text);
        assert!(items[0].text.contains("decision 40") && items[0].text.chars().count() < 400, "{}", items[0].text);
        assert_eq!((items.len(), items[1].iter, items[20].iter), (21, Some(41), Some(60)));
        // It survives master.md's round trip.
        let m = meta();
        let mut l = Ledger { decisions: items, ..Ledger::default() };
        l.merged_through = 60;
        assert_eq!(Ledger::parse(&l.render(&m)).decisions, l.decisions);
    }

    #[test]
    fn unknown_sections_survive() {
        let m = meta();
        let mut l = Ledger::default();
        l.extra.push(("Notes from a person".into(), vec!["keep the API stable".into()]));
        let text = l.render(&m);
        assert!(Ledger::parse(&text).render(&m).contains("keep the API stable"));
    }

    #[test]
    fn machine_block_round_trips() {
        let r = record(3, "done", None, &[]);
        let text = with_machine_block(render_report(&meta(), &r), &r);
        assert_eq!(machine_block::<IterationRecord>(&text), Some(r));
    }
}
