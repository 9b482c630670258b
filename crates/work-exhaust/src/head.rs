//! A finished journal's head: what a rerun of a finished task reports, kept in the log's
//! header so that the rerun reads one small file instead of parsing the whole snapshot.
//!
//! The header of a finished journal's log (written with the stop's snapshot) carries the
//! [`Head`] and the snapshot's [`Stamp`] (size, inode, mtime, ctime right after the write). The
//! head is believed only while the snapshot's stamp is unchanged — ctime cannot be set by a
//! process, so any rewrite, replacement or edit of the snapshot since shows — and while the log
//! holds its header only; otherwise the journal is loaded whole (and its digest checked).

use crate::journal::Journal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use work_runtime::budget::Spent;

/// How many accepted items a head lists (a stop's summary shows at most these).
pub const HEAD_ITEMS: usize = 20;

/// A file's identity right after a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stamp {
    size: u64,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    /// The stamp of the file at `path` now; `None` when it cannot be read.
    pub fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Stamp {
            size: m.size(),
            ino: m.ino(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        })
    }
}

/// What a rerun of a finished task needs of its journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Head {
    /// The task slug.
    pub task: String,
    /// What was discovered.
    pub what: String,
    /// Why the loop stopped.
    pub stopped_reason: Option<String>,
    /// `rounds.len()`.
    pub rounds: usize,
    /// `seen.len()`.
    pub seen: usize,
    /// `rejected.len()`.
    pub rejected: usize,
    /// `anglesUsed.len()`.
    pub angles_used: usize,
    /// `givenUp.len()`.
    pub given_up: usize,
    /// `completenessGaps` (a head written before they were kept reads as none).
    #[serde(default)]
    pub completeness_gaps: Vec<String>,
    /// Spending over every run of the journal.
    pub spent: Spent,
    /// The same, per role.
    pub spent_by_role: BTreeMap<String, Spent>,
    /// The first [`HEAD_ITEMS`] accepted items.
    pub first_items: Vec<Value>,
}

impl Head {
    /// The head of `j`.
    pub fn of(j: &Journal) -> Head {
        Head {
            task: j.task.clone(),
            what: j.what.clone(),
            stopped_reason: j.stopped_reason.clone(),
            rounds: j.rounds.len(),
            seen: j.seen.len(),
            rejected: j.rejected.len(),
            angles_used: j.angles_used.len(),
            given_up: j.given_up.len(),
            completeness_gaps: j.completeness_gaps.clone(),
            spent: j.spent,
            spent_by_role: j.spent_by_role.clone(),
            first_items: j.items.iter().take(HEAD_ITEMS).map(crate::Item::value).collect(),
        }
    }

    /// True when the loop ended for good (see [`Journal::is_final`]).
    pub fn is_final(&self) -> bool {
        crate::journal::is_final_reason(self.stopped_reason.as_deref())
    }
}
