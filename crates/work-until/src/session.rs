//! Session files under `<state>/sessions/<id>/` and the `init-session` and
//! `resolve-resume` scripts as code.
//!
//! `meta.md` is a readable table followed by a fenced `json` block that is the machine source
//! of truth ([`Meta`]). It is the session's commit point: an iteration counts only once
//! `iteration_count` in `meta.md` says so, and that write is the last of the iteration's
//! durable steps except the ledger merge, which is rolled forward from the archive on the
//! next start (see [`crate::workflow`]).

use crate::ledger::Ledger;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use work_runtime::{fsx, stage};

/// Errors reading or writing session files.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A file could not be read or written.
    #[error("{action} `{path}`: {reason}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// `meta.md` is not in the expected form.
    #[error("read session meta `{path}`: {reason}")]
    BadMeta {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// The files beside `meta.md` a later run trusts as they were first written: the frozen check
/// surface and git's sealed view.
pub(crate) const KEPT_FILES: [&str; 2] = [SURFACE_FILE, SEAL_FILE];
/// The frozen check surface, beside `meta.md`.
pub(crate) const SURFACE_FILE: &str = "check-surface.json";
/// git's sealed view, beside `meta.md`.
pub(crate) const SEAL_FILE: &str = "git-seal.json";

pub(crate) fn io_err(action: &'static str, path: &Path, e: impl std::fmt::Display) -> SessionError {
    SessionError::Io { action, path: path.display().to_string(), reason: e.to_string() }
}

/// `auto` or `human-gate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Iterate until a stop condition.
    #[default]
    Auto,
    /// Stop after every merged iteration (exit 3) until `work until resume`.
    HumanGate,
}

impl Mode {
    /// The spelling used in files and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::HumanGate => "human-gate",
        }
    }
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionStatus {
    /// Created or between iterations.
    Active,
    /// A process is (or was, if it was killed) working on it.
    Running,
    /// Stopped for a person (human gate, or an unverifiable `done`).
    Paused,
    /// The until-clause holds (verified).
    Done,
    /// The worker is blocked, or the loop stalled.
    Blocked,
    /// `max` iterations ran without success.
    MaxReached,
    /// The worker's report was malformed twice.
    InvalidReport,
    /// A dispatch failed (crash, timeout).
    Failed,
    /// The run's budget (`--budget-dispatches`, `--budget-tokens`, `--budget-usd`) is spent;
    /// the iteration it refused is not counted. Resume with a bigger budget.
    Budget,
}

impl SessionStatus {
    /// The spelling used in files and results.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Active => "active",
            SessionStatus::Running => "running",
            SessionStatus::Paused => "paused",
            SessionStatus::Done => "done",
            SessionStatus::Blocked => "blocked",
            SessionStatus::MaxReached => "max-reached",
            SessionStatus::InvalidReport => "invalid-report",
            SessionStatus::Failed => "failed",
            SessionStatus::Budget => "budget",
        }
    }

    /// Whether a run was cut off in this session (`active` between iterations, `running` — what
    /// a killed run leaves): a new session with its goal would be a silent restart from a tree
    /// its worker left. Every other status is a stop the run itself reported; a new session is
    /// a person's choice then.
    pub fn was_interrupted(self) -> bool {
        matches!(self, SessionStatus::Active | SessionStatus::Running)
    }

    /// The process exit status for a run that ended in this state.
    pub fn exit(self) -> work_runtime::ExitStatus {
        use work_runtime::ExitStatus;
        match self {
            SessionStatus::Done => ExitStatus::Done,
            SessionStatus::Paused => ExitStatus::Paused,
            _ => ExitStatus::Unsuccessful,
        }
    }
}

/// The session's machine state (`meta.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The session id (also the directory name).
    pub id: String,
    /// The goal.
    pub goal: String,
    /// The until-clause.
    pub until: String,
    /// What the worker is told to do (defaults to the goal).
    pub instructions: String,
    /// The verify command (`sh -c` in the repository root), if any.
    pub verify: Option<String>,
    /// Where the verify command came from (`--verify`, or the derivation).
    pub verify_source: Option<String>,
    /// auto | human-gate.
    pub mode: Mode,
    /// The iteration limit.
    pub max: u32,
    /// Run a read-only recon as iteration 0.
    pub recon: bool,
    /// The recon is merged.
    pub recon_done: bool,
    /// The `--agent` SPEC the session was started with, reused on resume.
    pub agent: Option<String>,
    /// Where the session stands.
    pub status: SessionStatus,
    /// Iterations merged (the last counted iteration's number).
    pub iteration_count: u32,
    /// The iteration started but not merged, if any (redone with the same number).
    pub in_progress: Option<u32>,
    /// Consecutive `continue` reports that changed nothing in the tree.
    pub empty_streak: u32,
    /// Normalised blockers reported so far (the stall rule: the same blocker twice).
    pub blockers_seen: Vec<String>,
    /// Why the session stopped last.
    pub stopped_reason: Option<String>,
    /// When the session was created.
    pub created: String,
    /// When `meta.md` was last written.
    pub updated: String,
    /// Runs (run ids) that worked on this session, oldest first.
    pub runs: Vec<String>,
    /// The budget limits in force (the last ones given; a resume without budget flags keeps
    /// them).
    #[serde(default)]
    pub budget: BudgetLimits,
    /// What every run of the session has spent so far: a resumed run starts from it, so a
    /// budget is cumulative over the session.
    #[serde(default)]
    pub spent: work_runtime::budget::Spent,
}

/// A session's budget limits (`None` is unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetLimits {
    /// `--budget-dispatches`.
    pub dispatches: Option<u64>,
    /// `--budget-tokens`.
    pub tokens: Option<u64>,
    /// `--budget-usd`.
    pub usd: Option<f64>,
}

impl BudgetLimits {
    /// The runtime budget.
    pub fn budget(&self) -> work_runtime::budget::Budget {
        work_runtime::budget::Budget { max_dispatches: self.dispatches, max_tokens: self.tokens, max_usd: self.usd }
    }

    /// The flags that raise the spent limits to twice what has been spent (at least one more
    /// dispatch / token / cent), for the resume command of a budget stop.
    pub fn raised_flags(&self, spent: &work_runtime::budget::Spent) -> String {
        let mut out = Vec::new();
        if let Some(d) = self.dispatches {
            out.push(format!("--budget-dispatches {}", (spent.dispatches.max(d) * 2).max(d + 1)));
        }
        if let Some(t) = self.tokens {
            let used = spent.usage.total_tokens().max(t);
            out.push(format!("--budget-tokens {}", (used * 2).max(t + 1)));
        }
        if let Some(u) = self.usd {
            let used = spent.usage.cost_usd.max(u);
            out.push(format!("--budget-usd {:.2}", (used * 2.0).max(u + 0.01)));
        }
        out.join(" ")
    }
}

/// A session: its directory and meta.
#[derive(Debug, Clone)]
pub struct Session {
    /// `<state>/sessions/<id>`.
    pub dir: PathBuf,
    /// The meta.
    pub meta: Meta,
}

/// The sessions directory under a state directory.
pub fn sessions_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("sessions")
}

fn cell(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    one.replace('|', "\\|")
}

impl Meta {
    /// Renders `meta.md`.
    pub fn render(&self) -> String {
        let mut out = format!("# work until session `{}`\n\n| field | value |\n|---|---|\n", self.id);
        let rows: Vec<(&str, String)> = vec![
            ("id", self.id.clone()),
            ("goal", self.goal.clone()),
            ("until", self.until.clone()),
            ("instructions", self.instructions.clone()),
            ("verify", self.verify.clone().unwrap_or_else(|| "(none)".into())),
            ("mode", self.mode.as_str().into()),
            ("max", self.max.to_string()),
            ("recon", self.recon.to_string()),
            ("status", self.status.as_str().into()),
            ("iteration_count", self.iteration_count.to_string()),
            ("in_progress", self.in_progress.map(|n| n.to_string()).unwrap_or_else(|| "-".into())),
            ("stopped_reason", self.stopped_reason.clone().unwrap_or_else(|| "-".into())),
            (
                "spent",
                format!(
                    "{} dispatch(es), {} token(s), ${:.2}",
                    self.spent.dispatches,
                    self.spent.usage.total_tokens(),
                    self.spent.usage.cost_usd
                ),
            ),
            ("created", self.created.clone()),
            ("updated", self.updated.clone()),
        ];
        for (k, v) in rows {
            out.push_str(&format!("| {k} | {} |\n", cell(&v)));
        }
        out.push_str("\nThe block below is the engine's source of truth; the table above is a copy.\n\n```json\n");
        out.push_str(&serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into()));
        out.push_str("\n```\n");
        out
    }

    /// Parses `meta.md` (its fenced `json` block).
    pub fn parse(text: &str, path: &Path) -> Result<Meta, SessionError> {
        let bad = |reason: String| SessionError::BadMeta { path: path.display().to_string(), reason };
        let start = text.find("```json\n").ok_or_else(|| bad("no ```json block".into()))? + "```json\n".len();
        let len = text[start..].find("\n```").ok_or_else(|| bad("the ```json block is not closed".into()))?;
        serde_json::from_str(&text[start..start + len]).map_err(|e| bad(e.to_string()))
    }
}

impl Session {
    /// The `meta.md` path.
    pub fn meta_path(&self) -> PathBuf {
        self.dir.join("meta.md")
    }

    /// The `master.md` path.
    pub fn master_path(&self) -> PathBuf {
        self.dir.join("master.md")
    }

    /// The `handoff.md` path.
    pub fn handoff_path(&self) -> PathBuf {
        self.dir.join("handoff.md")
    }

    /// The `report.md` path.
    pub fn report_path(&self) -> PathBuf {
        self.dir.join("report.md")
    }

    /// `reports/NN.md`.
    pub fn archive_path(&self, n: u32) -> PathBuf {
        self.dir.join("reports").join(format!("{n:02}.md"))
    }

    /// Loads a session from its directory (and checks the state kept beside `meta.md`).
    pub fn load(dir: &Path) -> Result<Session, SessionError> {
        let path = dir.join("meta.md");
        // Read through the runtime: a `meta.md` changed since work last wrote it is refused.
        let text = fsx::read_optional(&path)
            .and_then(|t| t.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")))
            .map_err(|e| io_err("read", &path, e))?;
        let session = Session { dir: dir.to_path_buf(), meta: Meta::parse(&text, &path)? };
        // The freeze of the checks and the seal of git's view are kept beside it: one changed
        // or removed since work wrote it would make the next run freeze the tree a worker left.
        for kept in KEPT_FILES {
            let p = dir.join(kept);
            fsx::read_kept(&p).map_err(|e| io_err("read", &p, e))?;
        }
        Ok(session)
    }

    /// Writes `meta.md` atomically through `write` (the run's redacting writer).
    pub fn save_meta(
        &mut self,
        now: String,
        write: &dyn Fn(&Path, &str) -> std::io::Result<()>,
    ) -> Result<(), SessionError> {
        self.meta.updated = now;
        let path = self.meta_path();
        write(&path, &self.meta.render()).map_err(|e| io_err("write", &path, e))
    }

    /// Reads `master.md` (a missing one is an empty ledger).
    pub fn load_ledger(&self) -> Result<Ledger, SessionError> {
        let path = self.master_path();
        let text = fsx::read_optional(&path).map_err(|e| io_err("read", &path, e))?.unwrap_or_default();
        Ok(Ledger::parse(&text))
    }
}

/// Makes a kebab-case slug (at most 40 characters) from free text.
pub fn slugify(text: &str) -> String {
    work_runtime::slug::kebab(text, 40, "session")
}

/// Checks a `--slug` value: kebab case, 1–64 characters.
pub fn check_slug(slug: &str) -> Result<(), String> {
    let ok = !slug.is_empty()
        && slug.len() <= 64
        && slug.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !slug.starts_with('-')
        && !slug.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!("use slug `{slug}`: expected kebab-case (a-z, 0-9, -), at most 64 characters"))
    }
}

/// An earlier session a new `work until` with the same goal and verify must not silently
/// replace with a fresh freeze (the tree it would freeze may hold what that session's worker
/// committed before `work` died).
#[derive(Debug)]
pub enum Unfinished {
    /// A session with the same goal and verify command that did not end `done` or `blocked`.
    Session(Box<Session>),
    /// A session named after the same goal (`slug`, `slug-N`) that cannot be read.
    Unreadable(String),
}

/// The unfinished session with this goal and verify command, if any (the most recently updated
/// first), or an unreadable one named after `slug`.
pub fn unfinished_with(state_dir: &Path, slug: &str, goal: &str, verify: Option<&str>) -> Option<Unfinished> {
    let (all, errors) = list_sessions(state_dir);
    let named_after = |dir: &str| {
        dir == slug
            || dir.strip_prefix(slug).and_then(|r| r.strip_prefix('-')).is_some_and(|n| n.parse::<u32>().is_ok())
    };
    for e in &errors {
        let (SessionError::Io { path, .. } | SessionError::BadMeta { path, .. }) = e;
        let dir = Path::new(path).parent().and_then(Path::file_name).map(|d| d.to_string_lossy().into_owned());
        if dir.as_deref().is_some_and(named_after) {
            return Some(Unfinished::Unreadable(e.to_string()));
        }
    }
    all.into_iter()
        .find(|s| {
            s.meta.status.was_interrupted() && s.meta.goal.trim() == goal.trim() && s.meta.verify.as_deref() == verify
        })
        .map(|s| Unfinished::Session(Box::new(s)))
}

/// Picks a free session id: `slug`, else `slug-2`, `slug-3`, …
pub fn free_id(state_dir: &Path, slug: &str) -> String {
    let base = sessions_dir(state_dir);
    if !base.join(slug).exists() {
        return slug.to_string();
    }
    (2u32..).map(|n| format!("{slug}-{n}")).find(|id| !base.join(id).exists()).unwrap_or_else(|| slug.to_string())
}

/// `init-session`: creates the session directory with `meta.md` and `master.md` (the ledger
/// template). `write` is the run's redacting atomic writer. The directory is built under a
/// staging name and renamed into place whole ([`work_runtime::stage`]): a crash leaves either
/// the complete session or none (a leftover staging directory is skipped by every reader and
/// removed here), and an existing session is never replaced.
pub fn init_session(
    state_dir: &Path,
    meta: Meta,
    write: &dyn Fn(&Path, &str) -> std::io::Result<()>,
) -> Result<Session, SessionError> {
    let dir = sessions_dir(state_dir).join(&meta.id);
    let staging = stage::staging_path(&dir);
    stage::discard_dir(&staging).map_err(|e| io_err("remove", &staging, e))?;
    let mut session = Session { dir: staging.clone(), meta };
    let now = session.meta.updated.clone();
    let ledger = Ledger::default();
    let path = session.master_path();
    write(&path, &ledger.render(&session.meta)).map_err(|e| io_err("write", &path, e))?;
    session.save_meta(now, write)?;
    stage::publish_dir(&staging, &dir).map_err(|e| io_err("create", &dir, e))?;
    session.dir = dir;
    Ok(session)
}

/// Every session under the state directory, most recently updated first (then by id).
/// Unreadable sessions are returned as errors beside the good ones.
pub fn list_sessions(state_dir: &Path) -> (Vec<Session>, Vec<SessionError>) {
    let base = sessions_dir(state_dir);
    let mut sessions = Vec::new();
    let mut errors = Vec::new();
    let Ok(entries) = std::fs::read_dir(&base) else { return (sessions, errors) };
    // A name starting with `.` is a session still being created (or a crash's leftover).
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        if !d.join("meta.md").exists() {
            continue;
        }
        match Session::load(&d) {
            Ok(s) => sessions.push(s),
            Err(e) => errors.push(e),
        }
    }
    sessions.sort_by(|a, b| b.meta.updated.cmp(&a.meta.updated).then_with(|| b.meta.id.cmp(&a.meta.id)));
    (sessions, errors)
}

/// What `resolve-resume` found.
#[derive(Debug)]
pub enum Resolution {
    /// No session could be resumed (the reason says why).
    Nothing(String),
    /// The recommended session first, then up to four other candidates.
    Candidates(Vec<Session>),
}

/// `resolve-resume`: the session with the exact id `hint` (whatever its status), else the
/// resumable sessions (every status but `done`) matching `hint` (a case-insensitive
/// substring of the id, goal or until), recommended first.
pub fn resolve_resume(state_dir: &Path, hint: Option<&str>) -> Resolution {
    let (all, errors) = list_sessions(state_dir);
    // A session that cannot be read (a `meta.md` changed outside a run, a broken one) is
    // refused by name when it is the one asked for, never silently passed over.
    if let Some(h) = hint.map(str::trim).filter(|h| !h.is_empty()) {
        let named = sessions_dir(state_dir).join(h);
        if let Some(e) = errors.iter().find(|e| {
            matches!(e, SessionError::Io { path, .. } | SessionError::BadMeta { path, .. }
                if Path::new(path).parent() == Some(named.as_path()))
        }) {
            return Resolution::Nothing(format!("resume session `{h}`: {e}"));
        }
    }
    if all.is_empty() {
        return Resolution::Nothing(match errors.first() {
            Some(e) => format!("find a session to resume: none readable ({e})"),
            None => format!("find a session to resume: none under {}", sessions_dir(state_dir).display()),
        });
    }
    let matching: Vec<Session> = match hint.map(str::trim).filter(|h| !h.is_empty()) {
        None => all,
        Some(h) => {
            if let Some(exact) = all.iter().find(|s| s.meta.id == h) {
                // An exact id is resumed whatever its status: a done session finishes at
                // once with its result (so a resume after a crash at the very end ends as
                // the uninterrupted run did).
                return Resolution::Candidates(vec![exact.clone()]);
            } else {
                let h = h.to_lowercase();
                all.into_iter()
                    .filter(|s| {
                        s.meta.id.to_lowercase().contains(&h)
                            || s.meta.goal.to_lowercase().contains(&h)
                            || s.meta.until.to_lowercase().contains(&h)
                    })
                    .collect()
            }
        }
    };
    if matching.is_empty() {
        return Resolution::Nothing(format!(
            "find a session matching `{}`: none (see `work until list`)",
            hint.unwrap_or_default()
        ));
    }
    let open: Vec<Session> = matching.iter().filter(|s| s.meta.status != SessionStatus::Done).cloned().collect();
    if open.is_empty() {
        let ids: Vec<&str> = matching.iter().map(|s| s.meta.id.as_str()).take(5).collect();
        return Resolution::Nothing(format!("resume a session: every match is already done ({})", ids.join(", ")));
    }
    Resolution::Candidates(open.into_iter().take(5).collect())
}

/// The exact command that continues a session (null when it is done): `work until resume
/// <id>`, with a raised `--max` when the session reached its maximum (a plain resume would
/// stop again before any iteration).
pub fn resume_command(meta: &Meta) -> Option<String> {
    match meta.status {
        SessionStatus::Done => None,
        SessionStatus::MaxReached => {
            Some(format!("work until resume {} --max {}", meta.id, meta.iteration_count.max(meta.max) + 10))
        }
        SessionStatus::Budget => Some(
            format!("work until resume {} {}", meta.id, meta.budget.raised_flags(&meta.spent)).trim_end().to_string(),
        ),
        _ => Some(format!("work until resume {}", meta.id)),
    }
}

/// Whether a resume may start without `--yes`: the hint is a session's exact id, or there is
/// no hint and exactly one resumable session. A recommendation among several sessions, or a
/// fuzzy hint (a word of an id, goal or until-clause), needs `--yes` (never
/// auto-continue on a guess).
pub fn is_definite_pick(hint: Option<&str>, candidates: &[Session]) -> bool {
    match hint.map(str::trim).filter(|h| !h.is_empty()) {
        Some(h) => candidates.len() == 1 && candidates[0].meta.id == h,
        None => candidates.len() == 1,
    }
}

/// One line describing a session: id, goal, until, status, iteration, path.
pub fn describe(s: &Session) -> String {
    format!(
        "{} · goal: {} · until: {} · status: {} · iteration {}/{} · {}",
        s.meta.id,
        cell(&s.meta.goal),
        cell(&s.meta.until),
        s.meta.status.as_str(),
        s.meta.iteration_count,
        s.meta.max,
        s.dir.display()
    )
}

/// A session as a JSON object (for `list` and `resume` results).
pub fn to_json(s: &Session) -> serde_json::Value {
    serde_json::json!({
        "id": s.meta.id,
        "goal": s.meta.goal,
        "until": s.meta.until,
        "status": s.meta.status.as_str(),
        "iteration": s.meta.iteration_count,
        "max": s.meta.max,
        "mode": s.meta.mode.as_str(),
        "path": s.dir.display().to_string(),
        "updated": s.meta.updated,
    })
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A meta for tests.
    pub(crate) fn meta(id: &str) -> Meta {
        Meta {
            id: id.into(),
            goal: "fix | the lint".into(),
            until: "`make lint` exits 0".into(),
            instructions: "fix the lint".into(),
            verify: Some("make lint".into()),
            verify_source: Some("--verify".into()),
            mode: Mode::Auto,
            max: 10,
            recon: false,
            recon_done: false,
            agent: None,
            status: SessionStatus::Active,
            iteration_count: 0,
            in_progress: None,
            empty_streak: 0,
            blockers_seen: vec![],
            stopped_reason: None,
            created: "t0".into(),
            updated: "t0".into(),
            runs: vec![],
            budget: BudgetLimits::default(),
            spent: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::meta;
    use super::*;

    fn writer() -> impl Fn(&Path, &str) -> std::io::Result<()> {
        |p: &Path, t: &str| fsx::write_atomic(p, t.as_bytes())
    }

    #[test]
    fn meta_round_trips_through_markdown() {
        let m = meta("a");
        let text = m.render();
        assert!(text.contains("| goal | fix \\| the lint |"));
        assert_eq!(Meta::parse(&text, Path::new("meta.md")).expect("parse"), m);
        assert!(Meta::parse("# nothing", Path::new("meta.md")).is_err());
    }

    #[test]
    fn init_list_and_resolve_resume() {
        let d = tempfile::tempdir().expect("tempdir");
        let w = writer();
        assert!(matches!(resolve_resume(d.path(), None), Resolution::Nothing(_)));
        let mut a = meta("fix-lint");
        a.updated = "2026-01-01T00:00:01Z".into();
        init_session(d.path(), a, &w).expect("init");
        let mut b = meta("write-docs");
        b.goal = "write the docs".into();
        b.updated = "2026-01-01T00:00:02Z".into();
        init_session(d.path(), b, &w).expect("init");
        let mut c = meta("finished");
        c.status = SessionStatus::Done;
        init_session(d.path(), c, &w).expect("init");
        assert!(d.path().join("sessions/fix-lint/master.md").exists());
        assert_eq!(free_id(d.path(), "fix-lint"), "fix-lint-2");
        match resolve_resume(d.path(), None) {
            Resolution::Candidates(c) => {
                let ids: Vec<_> = c.iter().map(|s| s.meta.id.as_str()).collect();
                assert_eq!(ids, vec!["write-docs", "fix-lint"]);
            }
            other => panic!("{other:?}"),
        }
        match resolve_resume(d.path(), Some("DOCS")) {
            Resolution::Candidates(c) => assert_eq!(c[0].meta.id, "write-docs"),
            other => panic!("{other:?}"),
        }
        match resolve_resume(d.path(), Some("write-docs")) {
            Resolution::Candidates(c) => assert!(is_definite_pick(Some("write-docs"), &c), "an exact id"),
            Resolution::Nothing(m) => panic!("{m}"),
        }
        match resolve_resume(d.path(), Some("docs")) {
            Resolution::Candidates(c) => assert!(!is_definite_pick(Some("docs"), &c), "a fuzzy hint"),
            Resolution::Nothing(m) => panic!("{m}"),
        }
        match resolve_resume(d.path(), None) {
            Resolution::Candidates(c) => assert!(!is_definite_pick(None, &c), "two open sessions: a recommendation"),
            Resolution::Nothing(m) => panic!("{m}"),
        }
        assert!(matches!(resolve_resume(d.path(), Some("finish")), Resolution::Nothing(_)), "a fuzzy hint skips done");
        match resolve_resume(d.path(), Some("finished")) {
            Resolution::Candidates(c) => assert_eq!(c[0].meta.status, SessionStatus::Done, "an exact id"),
            Resolution::Nothing(m) => panic!("{m}"),
        }
        assert!(matches!(resolve_resume(d.path(), Some("zzz")), Resolution::Nothing(_)));
    }

    #[test]
    fn slugs() {
        assert_eq!(slugify("Fix the Lint in src/!"), "fix-the-lint-in-src");
        assert_eq!(slugify("!!!"), "session");
        assert!(check_slug("a-b-1").is_ok());
        assert!(check_slug("A b").is_err());
        assert!(check_slug("../x").is_err());
    }
}
