//! The commit points of a session and rolling forward from them: the ledger log's records
//! (`ledger.jsonl`, see [`crate::store`]), with the archives `reports/NN.md` for sessions
//! written before the log existed, and the tree each iteration started from.

use super::Ctx;
use crate::ledger::{IterationRecord, Ledger, ReconRecord, machine_block};
use crate::session::{Session, SessionError, SessionStatus};
use crate::store::{LedgerStore, Replayed};

/// The committed records a start can roll forward from.
pub(super) struct Committed {
    replayed: Replayed,
}

impl Committed {
    /// Iteration `k`'s committed record: from the log, else from its archive.
    pub(super) fn iteration(&self, s: &Session, k: u32) -> Option<IterationRecord> {
        self.replayed.iterations.get(&k).cloned().or_else(|| read_archive(s, k))
    }

    /// The recon's committed record.
    pub(super) fn recon(&self, s: &Session) -> Option<ReconRecord> {
        self.replayed.recon.clone().or_else(|| read_archive(s, 0))
    }
}

/// The session's ledger and its store: the snapshot with its log merged, or — for a session
/// written before the log existed — `master.md` parsed (its next snapshot starts the log).
pub(super) fn load_ledger(s: &Session) -> Result<(Ledger, LedgerStore, Committed), SessionError> {
    let path = s.dir.join(crate::store::SNAPSHOT_FILE);
    match LedgerStore::load(&s.dir) {
        Ok(Some((ledger, store, replayed))) => Ok((ledger, store, Committed { replayed })),
        Ok(None) => Ok((s.load_ledger()?, LedgerStore::new(&s.dir), Committed { replayed: Replayed::default() })),
        Err(e) => Err(SessionError::Io { action: "read", path: path.display().to_string(), reason: e.to_string() }),
    }
}

/// Applies the commits newer than `meta.md` (iterations committed by a run killed before it
/// wrote the meta) to the meta: the iteration count, the stall state, the status and the
/// spending. Returns
/// the stop the last of them made, if it made one.
pub(super) fn roll_meta_forward(session: &mut Session, c: &Committed) -> Option<(SessionStatus, String)> {
    if session.meta.recon
        && !session.meta.recon_done
        && let Some(r) = c.recon(session)
    {
        session.meta.recon_done = true;
        session.meta.in_progress = None;
        session.meta.spent = r.spent.unwrap_or(session.meta.spent);
    }
    let mut stop = None;
    while let Some(r) = c.iteration(session, session.meta.iteration_count + 1) {
        let Some(c) = r.commit.filter(|_| r.iteration == session.meta.iteration_count + 1) else { break };
        let m = &mut session.meta;
        m.iteration_count = r.iteration;
        m.in_progress = None;
        m.empty_streak = c.empty_streak;
        m.blockers_seen = c.blockers_seen;
        m.status = c.status;
        m.stopped_reason = c.stopped_reason.clone();
        m.spent = c.spent.unwrap_or(m.spent);
        stop = match c.status {
            SessionStatus::Active | SessionStatus::Running => None,
            s => Some((s, c.stopped_reason.unwrap_or_default())),
        };
    }
    stop
}

/// The tree before the first attempt of an iteration (`iteration-start.json`), recorded before
/// its dispatch so that a redo after a crash measures the change against the tree the
/// iteration started from, not against the killed attempt's edits.
#[derive(serde::Serialize, serde::Deserialize)]
struct IterationStart {
    iteration: u32,
    /// The whole working tree as a git tree id (see [`super::snapshot`]).
    tree: String,
}

fn start_path(s: &Session) -> std::path::PathBuf {
    s.dir.join("iteration-start.json")
}

/// The tree iteration `n` started from: the recorded one when `n` is being redone, else the
/// tree now (recorded before the dispatch).
pub(super) fn iteration_start(
    cx: &Ctx<'_, '_>,
    s: &Session,
    n: u32,
    redo: bool,
) -> Result<Option<String>, SessionError> {
    let recorded = || -> Option<String> {
        let text = work_runtime::fsx::read_optional(&start_path(s)).ok()??;
        let st: IterationStart = serde_json::from_str(&text).ok()?;
        (st.iteration == n).then_some(st.tree)
    };
    if redo && let Some(t) = recorded() {
        return Ok(Some(t));
    }
    let Some(now) = cx.git.as_ref().and_then(|g| super::snapshot(g, &cx.exclude)) else { return Ok(None) };
    let st = IterationStart { iteration: n, tree: now.clone() };
    let path = start_path(s);
    cx.env.run.write_state(&path, &st).map_err(|e| SessionError::Io {
        action: "write",
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(Some(now))
}

pub(super) fn read_archive<T: for<'de> serde::Deserialize<'de>>(s: &Session, n: u32) -> Option<T> {
    let text = std::fs::read_to_string(s.archive_path(n)).ok()?;
    machine_block(&text)
}
