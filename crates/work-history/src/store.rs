//! The runs of one state directory: list, find, prune.

use crate::events::read_log;
use crate::summary::{RunState, RunSummary, parse_ts, summarize};
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};

/// The most run directories looked at (the newest by name, which starts with the UTC time).
pub const MAX_RUNS: usize = 10_000;

/// What went wrong reading the history.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The runs directory could not be listed.
    #[error("list runs in `{path}`: {source}")]
    List {
        /// The directory.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A run's log could not be read.
    #[error("read the event log `{path}`: {source}")]
    Read {
        /// The log.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// No run matches.
    #[error("find a run `{0}`: no run id, task, session or goal of that name (see `work runs list`)")]
    NotFound(String),
    /// Several runs match a prefix.
    #[error("find a run `{needle}`: the prefix names {count} runs; give more of the id")]
    Ambiguous {
        /// What was asked.
        needle: String,
        /// How many matched.
        count: usize,
    },
    /// A run directory could not be removed.
    #[error("remove `{path}`: {source}")]
    Remove {
        /// The directory.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The run history under one state directory.
#[derive(Debug, Clone)]
pub struct Store {
    state_dir: PathBuf,
}

/// What `gc` did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct GcReport {
    /// True when nothing was removed on purpose ([`Gc::Preview`]): `removed` lists what would be.
    pub dry_run: bool,
    /// Run ids removed (or, in a dry run, that would be).
    pub removed: Vec<String>,
    /// Old enough but still running (never removed).
    pub kept_running: Vec<String>,
    /// Runs younger than the cut-off.
    pub kept: usize,
}

/// What `gc` does with the runs it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gc {
    /// Remove them.
    Remove,
    /// Only report them (`work runs gc --dry-run`).
    Preview,
}

fn is_plain_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains('/') && !s.contains('\\') && !s.starts_with('.')
}

impl Store {
    /// The history of `state_dir` (`.work/`).
    pub fn new(state_dir: &Path) -> Self {
        Self { state_dir: state_dir.to_path_buf() }
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// `<state>/runs`.
    pub fn runs_dir(&self) -> PathBuf {
        self.state_dir.join("runs")
    }

    /// The run ids present, oldest first by name, at most [`MAX_RUNS`] (the newest kept).
    pub fn run_ids(&self) -> Result<Vec<String>, HistoryError> {
        let dir = self.runs_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(HistoryError::List { path: dir.display().to_string(), source }),
        };
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("events.jsonl").is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| is_plain_name(n))
            .collect();
        ids.sort();
        if ids.len() > MAX_RUNS {
            ids.drain(..ids.len() - MAX_RUNS);
        }
        Ok(ids)
    }

    /// One run's summary.
    pub fn load(&self, run_id: &str) -> Result<RunSummary, HistoryError> {
        if !is_plain_name(run_id) {
            return Err(HistoryError::NotFound(run_id.to_string()));
        }
        let dir = self.runs_dir().join(run_id);
        let path = dir.join("events.jsonl");
        let read = read_log(&path).map_err(|source| HistoryError::Read { path: path.display().to_string(), source })?;
        Ok(summarize(run_id, dir, &read, &work_runtime::fsx::process_alive))
    }

    /// Every run, newest first (by start time, then id).
    pub fn list(&self) -> Result<Vec<RunSummary>, HistoryError> {
        let mut all = Vec::new();
        for id in self.run_ids()? {
            all.push(self.load(&id)?);
        }
        all.sort_by(|a, b| (b.started.as_deref(), &b.run_id).cmp(&(a.started.as_deref(), &a.run_id)));
        Ok(all)
    }

    /// The run `needle` names: a run id, a unique prefix of one, or the newest run whose
    /// subject (exhaust task, session, goal, implement task) is `needle`.
    pub fn resolve(&self, needle: &str) -> Result<RunSummary, HistoryError> {
        let ids = self.run_ids()?;
        if ids.iter().any(|i| i == needle) {
            return self.load(needle);
        }
        let prefixed: Vec<&String> = ids.iter().filter(|i| i.starts_with(needle)).collect();
        match prefixed.len() {
            1 => return self.load(prefixed[0]),
            0 => {}
            count => return Err(HistoryError::Ambiguous { needle: needle.to_string(), count }),
        }
        self.list()?
            .into_iter()
            .find(|s| s.matches_subject(needle))
            .ok_or_else(|| HistoryError::NotFound(needle.to_string()))
    }

    /// The workflow's detail of `run` (its log read again, then its state files).
    pub fn detail(&self, run: &RunSummary) -> Result<crate::detail::Detail, HistoryError> {
        let read = read_log(&run.events_path)
            .map_err(|source| HistoryError::Read { path: run.events_path.display().to_string(), source })?;
        Ok(crate::detail::load(&self.state_dir, run, &read.events))
    }

    /// Removes the run directories that started more than `older_than_secs` before `now`,
    /// except running ones. A run whose start cannot be read is judged by its id's time.
    pub fn gc(&self, older_than_secs: i64, now: DateTime<Utc>, mode: Gc) -> Result<GcReport, HistoryError> {
        let mut report = GcReport { dry_run: mode == Gc::Preview, ..GcReport::default() };
        for run in self.list()? {
            match age(Some(&run), &run.run_id, older_than_secs, now) {
                Age::Young => report.kept += 1,
                Age::Running => report.kept_running.push(run.run_id),
                Age::Old if mode == Gc::Preview => report.removed.push(run.run_id),
                Age::Old => {
                    work_runtime::fsx::remove_state_dir(&run.run_dir)
                        .map_err(|source| HistoryError::Remove { path: run.run_dir.display().to_string(), source })?;
                    report.removed.push(run.run_id);
                }
            }
        }
        Ok(report)
    }

    /// How `gc` judges what run `run_id` left elsewhere (a parallel wave's worktrees): by its
    /// run's start and state, or by its id's time once its directory is gone.
    pub fn age_of(&self, run_id: &str, older_than_secs: i64, now: DateTime<Utc>) -> Result<Age, HistoryError> {
        let runs = self.list()?;
        Ok(age(runs.iter().find(|r| r.run_id == run_id), run_id, older_than_secs, now))
    }
}

/// Where a run stands for `gc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Age {
    /// Started within the cut-off: kept.
    Young,
    /// Old enough, but its process lives: never removed.
    Running,
    /// Old enough and not running: removed.
    Old,
}

fn age(run: Option<&RunSummary>, run_id: &str, older_than_secs: i64, now: DateTime<Utc>) -> Age {
    let started = run.and_then(|r| r.started.as_deref()).and_then(parse_ts).or_else(|| id_time(run_id));
    if started.is_none_or(|t| (now - t).num_seconds() <= older_than_secs) {
        Age::Young
    } else if run.is_some_and(|r| r.state == RunState::Running) {
        Age::Running
    } else {
        Age::Old
    }
}

/// The time at the start of a run id (`20260101T000000000Z-…`).
fn id_time(run_id: &str) -> Option<DateTime<Utc>> {
    let ts = run_id.split('-').next()?;
    chrono::NaiveDateTime::parse_from_str(ts, "%Y%m%dT%H%M%S%3fZ").ok().map(|t| t.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, id: &str, lines: &str) {
        let d = dir.join("runs").join(id);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("events.jsonl"), lines).expect("write");
    }

    #[test]
    fn list_resolve_and_gc_spare_the_running() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let me = format!("{:x}", std::process::id());
        let old_end = "{\"ts\":\"2026-01-01T00:00:00Z\",\"kind\":\"run.start\",\"workflow\":\"until\"}\n{\"ts\":\"2026-01-01T00:00:01Z\",\"kind\":\"run.end\",\"outcome\":\"done\",\"detail\":{\"session\":\"s1\"}}\n";
        run(tmp.path(), "20260101T000000000Z-until-7ffffffe", old_end);
        let live = "{\"ts\":\"2026-01-01T00:00:00Z\",\"kind\":\"run.start\",\"workflow\":\"exhaust\"}\n";
        run(tmp.path(), &format!("20260101T000000001Z-exhaust-{me}"), live);
        run(tmp.path(), "20260105T000000000Z-until-7ffffffe", &old_end.replace("2026-01-01", "2026-01-05"));
        let store = Store::new(tmp.path());
        let all = store.list().expect("list");
        assert_eq!(all[0].run_id, "20260105T000000000Z-until-7ffffffe");
        assert_eq!(store.resolve("s1").expect("by session").run_id, all[0].run_id);
        assert!(matches!(store.resolve("2026"), Err(HistoryError::Ambiguous { count: 3, .. })));
        assert!(matches!(store.resolve("../x"), Err(HistoryError::NotFound(_))));
        let now = parse_ts("2026-01-06T00:00:00Z").expect("ts");
        let preview = store.gc(2 * 86_400, now, Gc::Preview).expect("gc --dry-run");
        assert_eq!(preview.removed, ["20260101T000000000Z-until-7ffffffe"]);
        assert_eq!(store.run_ids().expect("ids").len(), 3, "a dry run removes nothing");
        let r = store.gc(2 * 86_400, now, Gc::Remove).expect("gc");
        assert!(!r.dry_run);
        assert_eq!(r.removed, ["20260101T000000000Z-until-7ffffffe"]);
        assert_eq!(r.kept_running, [format!("20260101T000000001Z-exhaust-{me}")]);
        assert_eq!(r.kept, 1);
        assert_eq!(store.run_ids().expect("ids").len(), 2);
    }
}
