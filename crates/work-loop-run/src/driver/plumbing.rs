//! The driver's plumbing: state files, engine transitions, reports, the read-only guard around a
//! dispatch, and the views of the tree the reviewers and the boundaries read.

use super::*;
use serde_json::json;
use work_git::readonly::{View, Watch};
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

impl Driver {
    pub(super) fn engine(&self) -> Result<EngineState, LoopError> {
        engine::load(&self.sd)?
            .ok_or_else(|| LoopError::bad(format!("read `{}/engine-state.json`: it disappeared", self.sd.rel())))
    }

    pub(super) fn cohort(&self) -> Result<CohortState, LoopError> {
        cohort::load(&self.sd)?
            .ok_or_else(|| LoopError::bad(format!("read `{}/state.json`: it disappeared", self.sd.rel())))
    }

    pub(super) fn save(&self) -> Result<(), LoopError> {
        let p = self.sd.file(STATE_FILE)?;
        work_runtime::fsx::digests::cover(&p);
        self.run
            .write_state(&p, &self.rs)
            .map_err(|e| LoopError::bad(format!("write `{}/{STATE_FILE}`: {e}", self.sd.rel())))
    }

    pub(super) fn rel(&self, name: &str) -> String {
        format!("{}/{name}", self.sd.rel())
    }

    pub(super) fn write_json(&self, name: &str, v: &Value) -> Result<String, LoopError> {
        let p = self.sd.file(name)?;
        self.run.write_state(&p, v).map_err(|e| LoopError::bad(format!("write `{}`: {e}", self.rel(name))))?;
        Ok(self.rel(name))
    }

    pub(super) fn status_of(&self, file: &str) -> Result<Option<String>, LoopError> {
        Ok(self.sd.read_optional(file)?.as_deref().and_then(read_status))
    }

    pub(super) fn set_status(&self, file: &str, value: &str) -> Result<(), LoopError> {
        let text = self.sd.read_optional(file)?.unwrap_or_default();
        if read_status(&text).as_deref() == Some(value) {
            return Ok(());
        }
        let p = self.sd.file(file)?;
        work_runtime::fsx::write_atomic(&p, crate::status::set_status(&text, value).as_bytes())
            .map_err(|e| LoopError::bad(format!("write `{}`: {e}", self.rel(file))))?;
        self.run.progress(&format!("{}: Status: {value}", self.rel(file)));
        Ok(())
    }

    pub(super) fn fire(&mut self, event: &str, opts: TransitionOpts) -> Result<EngineState, LoopError> {
        let out = engine::transition(&self.sd, event, opts, self.run.clock.as_ref())?;
        self.transitions.push(out.text.clone());
        self.run.emit(Event::LoopTransition { event: json!(event), text: json!(out.text) });
        self.run.progress(&format!("loop: {}", out.text));
        self.engine()
    }

    pub(super) fn run_id(&self) -> String {
        self.rs.run_id.clone()
    }

    pub(super) fn report(&self, outcome: &str, reason: &str, message: String, next: Option<Value>) -> Report {
        let st = engine::load(&self.sd).ok().flatten();
        let co = cohort::load(&self.sd).ok().flatten();
        let exit = match outcome {
            "done" => ExitStatus::Done,
            "paused" => ExitStatus::Paused,
            _ => ExitStatus::Unsuccessful,
        };
        let verdict = self.rs.verdicts.last().cloned();
        let verdict_state = verdict.as_ref().and_then(|v| {
            let name = v.strip_prefix(&format!("{}/", self.sd.rel()))?;
            let text = self.sd.read_optional(name).ok()??;
            let doc: Value = serde_json::from_str(&text).ok()?;
            serde_json::from_value(doc.get("state")?.clone()).ok()
        });
        Report {
            ok: outcome == "done",
            outcome: outcome.into(),
            reason: reason.into(),
            message,
            spec_dir: self.sd.rel().into(),
            run_id: st.as_ref().map(|s| s.run_id.clone()),
            state: st.as_ref().map(|s| s.state.clone()),
            mode: st.as_ref().map(|s| s.mode.clone()),
            review_mode: self.rs.review_mode.map(|m| m.name().to_string()),
            review_mode_reasons: self.rs.mode_reasons.clone(),
            next,
            verdict,
            verdict_state,
            verdicts: self.rs.verdicts.clone(),
            transitions: self.transitions.clone(),
            implementation_retry_count: co.as_ref().map(|c| c.implementation_retry_count),
            review_retry_count: co.as_ref().map(|c| c.review_retry_count),
            lost_work: self.rs.lost_work.clone().filter(|_| reason == boundary::LOSS),
            work_run: self.run.run_id.clone(),
            exit,
        }
    }

    pub(super) fn blocked(&self, reason: &str, message: String) -> Report {
        self.run.progress(&format!("loop: BLOCKED ({reason}): {message}"));
        self.report("blocked", reason, message, None)
    }

    pub(super) fn resume_cmd(&self) -> String {
        format!("work loop run {} --resume", self.sd.rel())
    }

    pub(super) fn paused(&self, reason: &str, message: String, mut next: Value) -> Report {
        if let Value::Object(o) = &mut next {
            o.entry("resume").or_insert(json!(self.resume_cmd()));
        }
        // The command to continue is said once, in the run's summary.
        self.run.progress(&format!("loop: waiting for a person ({reason})"));
        self.report("paused", reason, message, Some(next))
    }

    /// Hashes of the loop's own state files and review artifacts: no agent may change them.
    pub(super) fn state_files_digest(&self) -> Result<String, LoopError> {
        let mut all = String::new();
        for f in ["engine-state.json", "state.json", STATE_FILE] {
            // A file its digest refuses (an agent rewrote it) reads as changed, not as an error.
            match self.sd.read_optional(f) {
                Ok(t) => all.push_str(&t.map(|t| sha256_hex(t.as_bytes())).unwrap_or_default()),
                Err(e) => all.push_str(&format!("<{e}>")),
            }
            all.push('|');
        }
        let mut files = Vec::new();
        collect_files(&self.sd.dir().join("reviews"), &mut files);
        files.sort();
        for p in files {
            let h = std::fs::read(&p).map(|b| sha256_hex(&b)).unwrap_or_else(|_| "<unreadable>".into());
            all.push_str(&format!("{}={h}|", p.display()));
        }
        Ok(all)
    }

    /// The state directory, repository-relative with a trailing `/`, when it lies inside the
    /// repository.
    pub(super) fn state_prefix(&self) -> Option<String> {
        self.run.state_dir.strip_prefix(&self.run.root).ok().map(|p| format!("{}/", p.display())).filter(|p| p != "/")
    }

    /// What a read-only dispatch must leave as it was: `work_git::readonly`'s one meaning of
    /// read-only (HEAD, the snapshot tree, the index, git's seal, the git directory's own
    /// files), the state directory aside (its files are held by their digest).
    pub(super) fn read_only_before(&self) -> Result<View, LoopError> {
        self.git.read_only_view(&self.read_only_watch()).map_err(git_failed)
    }

    fn read_only_watch(&self) -> Watch {
        Watch { exclude: self.state_prefix().into_iter().collect(), ..Watch::default() }
    }

    pub(super) async fn ask(
        &self,
        role: &str,
        access: Access,
        prompt: String,
        schema: Value,
        context: Value,
        label: &str,
    ) -> Result<Value, AskError> {
        let Some(rd) = self.roles.get(role) else {
            return Err(AskError::failed(format!("no agent is configured for role {role}")));
        };
        let before = self.state_files_digest().map_err(|e| AskError::failed(e.to_string()))?;
        let tree_before = if access == Access::ReadOnly {
            Some(self.read_only_before().map_err(|e| AskError::fatal("git", e.to_string()))?)
        } else {
            None
        };
        let spec = DispatchSpec {
            role: role.into(),
            model: rd.model.clone(),
            effort: rd.effort.clone(),
            access,
            prompt,
            schema: Some(schema),
            context,
            label: label.into(),
        };
        let outcome = match self.replayed(&spec) {
            Some(o) => o,
            None => rd.dispatcher.dispatch(spec).await,
        };
        let id = outcome.dispatch_id().to_string();
        self.guard(role, &id, &before, tree_before.as_ref())?;
        match outcome {
            DispatchOutcome::Ok { output, .. } => Ok(output),
            // Not the agent's failure: the run stops with reason `budget`, and a resume with a
            // bigger budget redoes this dispatch.
            DispatchOutcome::OverBudget { .. } => {
                Err(AskError::fatal(StopReason::Budget.as_str(), self.budget_message(role, &id)))
            }
            other => Err(AskError::failed(format!(
                "{role} dispatch {id} {}",
                other.failure_reason().unwrap_or_else(|| "gave no answer".into())
            ))),
        }
    }

    /// Why the run stops at a dispatch the budget refused, and how to go on.
    pub(super) fn budget_message(&self, who: &str, dispatch: &str) -> String {
        format!(
            "{}; the {who} dispatch {dispatch} was not run and nothing was counted: resume with a bigger budget (`{} --budget-dispatches N` / `--budget-tokens N` / `--budget-usd X`; the budget is per invocation)",
            self.run.budget.stop_line(),
            self.resume_cmd()
        )
    }

    /// A review round the budget cut short: it is taken back (round number, reviewer outcomes
    /// and findings of this round), so a resume with a bigger budget runs it again as the same
    /// round, and the run stops with reason `budget`.
    pub(super) fn budget_round(&mut self, round_no: u32, msg: String) -> Result<Round, LoopError> {
        self.rs.unit_rounds = round_no.saturating_sub(1);
        self.rs.unit_reviews.retain(|o| o.round != round_no);
        self.rs.unit_findings.retain(|f| f.round != round_no);
        self.save()?;
        Ok(Round { results: Vec::new(), stop: Some((StopReason::Budget.into(), msg, ExitStatus::Unsuccessful)) })
    }

    /// After a dispatch (or a fan-out of them): the loop's state files and review artifacts
    /// must be as they were, and a read-only dispatch must have left the tree as it was. Either
    /// violation is fatal (BLOCKED, whatever the caller would do with a failed dispatch).
    pub(super) fn guard(
        &self,
        who: &str,
        dispatch: &str,
        state_before: &str,
        tree_before: Option<&View>,
    ) -> Result<(), AskError> {
        if self.state_files_digest().map_err(|e| AskError::failed(e.to_string()))? != state_before {
            return Err(AskError::fatal(
                "state-tampered",
                format!(
                    "{who} dispatch {dispatch} changed the loop's state files (engine-state.json, state.json, {STATE_FILE} or reviews/ in `{}`); no agent may edit them: inspect and restore them before resuming",
                    self.sd.rel()
                ),
            ));
        }
        if let Some(before) = tree_before {
            let changed = self
                .git
                .read_only_changes(before, &self.read_only_watch())
                .map_err(|e| AskError::fatal("git", e.to_string()))?;
            if !changed.is_empty() {
                let list = changed.join(", ");
                return Err(AskError::fatal(
                    "read-only-violated",
                    format!(
                        "{who} dispatch {dispatch} is read-only but changed the working tree or git's view of it ({list}); its report is not used: inspect the change before resuming"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// HEAD as a base reference (`""` on an unborn branch).
    pub(super) fn head_ref(&self) -> String {
        self.git.head_sha().unwrap_or_default()
    }

    /// Why HEAD moved in a way no honest commit moves it since the code phase began (reset
    /// below its base, the base rewritten, another branch checked out), if it did; commits on
    /// top of the base are the implementer's change (`work_git::head`). A run recorded
    /// before the branch was kept is judged on the branch it is on.
    ///
    /// A git that fails judging HEAD ends the run with an error (exit 1), never a breach.
    pub(super) fn head_breach(&self) -> Result<Option<String>, LoopError> {
        let Some(sha) = self.rs.code_base.clone() else { return Ok(None) };
        let base = work_git::head::HeadAt {
            sha: Some(sha).filter(|s| !s.is_empty()),
            branch: self.rs.code_branch.clone().or_else(|| self.git.branch()),
        };
        let Some(why) = self.git.judge_head(&base).map_err(git_failed)?.describe(&base) else { return Ok(None) };
        self.run.emit(Event::HeadMoved {
            from: json!(base.sha),
            to: json!(self.git.head_sha()),
            breach: None,
            branch: json!(self.git.branch()),
        });
        Ok(Some(why))
    }

    /// The change against `base` (`""`: no commit), outside the spec and state directories:
    /// every path that differs from it (committed, staged or not) or is untracked.
    pub(super) fn tree_since(&self, base: &str) -> Result<TreeState, LoopError> {
        let against = if base.is_empty() { Base::Empty } else { Base::Commit(base) };
        self.git
            .tree_state(against, &self.review_excludes())
            .map_err(|e| LoopError::bad(format!("read the working tree's change: {e}")))
    }

    /// What code review leaves out: the spec directory and the state directory.
    pub(super) fn review_excludes(&self) -> Vec<String> {
        let mut v = vec![self.sd.rel().to_string()];
        v.extend(self.state_prefix());
        v
    }

    /// The change against `base`, outside the spec and state directories: path ⇒ content hash
    /// of the working-tree file. Committed work counts: it differs from the base.
    pub(super) fn snapshot_since(&self, base: &str) -> Result<BTreeMap<String, String>, LoopError> {
        Ok(self.tree_since(base)?.content_map("<absent>"))
    }

    /// The base code review measures against: HEAD when the code phase began (HEAD now for a
    /// run started before the base was recorded).
    pub(super) fn review_base(&self) -> String {
        self.rs.code_base.clone().unwrap_or_else(|| self.head_ref())
    }

    /// The full diff reviewers see: `git diff <base>` (committed work included) plus every
    /// untracked file as an addition, outside the spec and state directories. Never cut: once
    /// it is over [`MAX_DIFF_BYTES`] the rest is not read, and [`crate::review_diff::whole`]
    /// refuses it.
    pub(super) fn diff_text(&self, base: &str) -> String {
        let mut text = String::new();
        if !base.is_empty() {
            match self.git.diff_text(base, &["--no-color", "--no-renames"], &self.review_excludes()) {
                Ok(d) => text.push_str(&d),
                Err(e) => text.push_str(&format!("(git diff {base} failed: {e})\n")),
            }
        }
        // Without a base there is no `git diff`: every file is an addition.
        let added: Vec<String> = match self.tree_since(base) {
            Ok(st) if base.is_empty() => st.paths.into_keys().collect(),
            Ok(st) => st.untracked().map(str::to_string).collect(),
            Err(_) => Vec::new(),
        };
        for p in added {
            if text.len() > MAX_DIFF_BYTES {
                break;
            }
            text.push_str(&format!("diff --git a/{p} b/{p}\nnew file (untracked)\n--- /dev/null\n+++ b/{p}\n"));
            // Never read as empty: a directory (a nested git repository git lists as one path)
            // or an unreadable path is said to be one, so no reviewer takes it for nothing.
            let full = self.run.root.join(&p);
            let bytes = match std::fs::read(&full) {
                Ok(b) => b,
                Err(_) if full.join(".git").exists() => {
                    text.push_str(&format!(
                        "(`{p}` is a nested git repository: its files are not in this diff and were not reviewed)\n"
                    ));
                    continue;
                }
                Err(e) => {
                    text.push_str(&format!(
                        "(`{p}` could not be read as a file: {e}; its content is not in this diff)\n"
                    ));
                    continue;
                }
            };
            match std::str::from_utf8(&bytes) {
                Ok(t) => {
                    for line in t.lines() {
                        text.push('+');
                        text.push_str(line);
                        text.push('\n');
                    }
                }
                Err(_) => text.push_str(&format!("Binary file {p} ({} bytes)\n", bytes.len())),
            }
        }
        text
    }

    pub(super) fn target(&self) -> Target {
        let base = self.review_base();
        let snap = self.snapshot_since(&base).unwrap_or_default();
        let fp = serde_json::to_string(&snap).ok().map(|s| sha256_hex(s.as_bytes()));
        Target {
            base: Some(base).filter(|b| !b.is_empty()),
            head: self.git.head_sha(),
            diff_fingerprint: fp,
            changed_paths: snap.into_keys().collect(),
        }
    }
}

/// The run's error when a git the engine ran to judge it failed (exit 128, killed): exit 1 with
/// git's command and stderr, never a verdict about the implementer.
pub(super) fn git_failed(e: work_git::GitError) -> LoopError {
    LoopError::refused(e.to_string(), json!({"reason": "git"}))
}
