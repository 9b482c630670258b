//! What a pipeline run is given: the run context, one pinned dispatcher per role, the gate
//! commands, and the repository view.

use crate::tree::Tree;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use work_git::copy::EngineCopy;
use work_runtime::dispatch::{Access, DispatchOutcome, DispatchSpec, Dispatcher};
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;
use work_runtime::run::RunContext;

/// One role's backend and pins (model and effort travel on every dispatch).
#[derive(Debug, Clone)]
pub struct RoleDispatch {
    /// The pinned model.
    pub model: String,
    /// The pinned effort.
    pub effort: String,
    /// The role's dispatcher.
    pub dispatcher: Dispatcher,
}

/// Gate commands and loop limits.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The suite (`[gates].test` or `--test-cmd`), run through `sh -c` in the root.
    pub test_cmd: String,
    /// The build check for `work edit` (`--build-cmd` or `[gates].typecheck`), if any.
    pub build_cmd: Option<String>,
    /// How to run one test by name in mini mode: `{test}` is replaced by the shell-quoted
    /// name; without a template, the name is appended to the suite command.
    pub red_test_cmd: Option<String>,
    /// Timeout of each gate command.
    pub gate_timeout: Option<Duration>,
    /// Repair dispatches allowed per review loop (spec, quality) and per edit build.
    pub max_repairs: u32,
    /// Concurrency cap of the per-task plan-extract fan-out.
    pub concurrency: usize,
    /// Batched plan extraction only under this estimate, in bytes.
    pub batch_ceiling_bytes: u64,
    /// Repository-relative paths left out of every tree measurement (the preflight's
    /// `excluded_paths`: an uncommitted plan file).
    pub exclude: Vec<String>,
    /// `--scope strict`: a task whose change touches what its text does not plan is BLOCKED
    /// `out-of-scope` before its reviews (default: named to the reviewers and in the report).
    pub scope_strict: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            test_cmd: "true".into(),
            build_cmd: None,
            red_test_cmd: None,
            gate_timeout: None,
            max_repairs: 2,
            concurrency: 4,
            batch_ceiling_bytes: 20_000,
            exclude: Vec::new(),
            scope_strict: false,
        }
    }
}

/// Dispatches and agent tokens spent on something (a task, the extraction).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Counter {
    /// Dispatches started (a retried malformed answer is still one dispatch).
    pub dispatches: u64,
    /// Input plus output tokens reported by the agents.
    pub tokens: u64,
}

/// Why a gate with no command is not green.
pub const NO_SUITE: &str = "no test command configured or detected (set `[gates].test` in work.toml or pass --test-cmd): DONE needs the engine's own suite run";

/// One run of a gate command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GateRun {
    /// The command line.
    pub command: String,
    /// Exit code 0 within the timeout.
    pub green: bool,
    /// How it ended (`exit code 1`, `timed out after …`, `could not start: …`).
    pub end: String,
    /// The last lines of its output.
    pub tail: String,
}

/// Everything a pipeline run uses.
pub struct Env {
    /// The run (events, spawner, clock, state dir).
    pub run: RunContext,
    /// Role name ⇒ its dispatcher and pins.
    pub roles: BTreeMap<String, RoleDispatch>,
    /// Gates and limits.
    pub settings: Settings,
    /// The repository view.
    pub tree: Tree,
    /// HEAD when the run started (the preflight's HEAD, the run's base): the pipeline never
    /// commits; an agent's commits on top of it are its change, any other move of HEAD is
    /// refused (see [`Env::head_moved`]).
    pub base_head: Option<String>,
    /// The first dispatch the run's budget refused, described ("spec-reviewer dispatch for
    /// task 1 (spec-review)"); once set, the run ends BLOCKED `budget` (see
    /// [`crate::report::EndReport::stop_for_budget`]).
    budget_refused: std::sync::Mutex<Option<String>>,
    /// git's view of the tree when the run started (index flags, exclude, attributes, hooks,
    /// the configuration that changes what git shows); see [`Env::git_tampered`].
    seal: std::sync::Mutex<Option<work_git::integrity::Seal>>,
    /// What the engine's own baseline check run left on its copy (never an agent's evidence).
    byproducts: std::sync::Mutex<work_git::byproducts::Byproducts>,
    /// The suite report the baseline run gave (see [`Env::baseline_suite`]), until the check
    /// surface takes it.
    baseline_report: std::sync::Mutex<Option<BaselineReport>>,
    /// The whole-tree snapshot taken when the checks were frozen (see [`Env::freeze_checks`];
    /// HEAD's tree stands in for a resumed run, whose preflight was clean).
    pub(crate) frozen_tree: std::sync::Mutex<Option<String>>,
    /// The last HEAD an agent's commits were reported at (`head.committed`).
    head_seen: std::sync::Mutex<Option<String>>,
    /// The first git that failed judging the run (see [`Env::git_failed`]).
    git_failure: std::sync::Mutex<Option<work_git::GitError>>,
    /// How a plan's independent tasks run in parallel (`crate::waves`); `None`: one at a time.
    waves: Option<crate::waves::WaveSetup>,
}

/// A check command run once before the first dispatch as its runner's report command.
struct BaselineReport {
    command: String,
    probe: work_git::suite_report::Probe,
    report: Option<work_git::suite_report::SuiteReport>,
}

/// "spec-reviewer dispatch for task 1 (spec-review)" from a dispatch's role and context.
pub fn describe_dispatch(role: &str, context: &Value) -> String {
    let task = match context["task_id"].as_str() {
        Some(t) if matches!(t, "index" | "all" | "mini" | "edit") => format!(" ({t})"),
        Some(t) => format!(" for task {t}"),
        None => String::new(),
    };
    let phase = context["phase"].as_str().map(|p| format!(" ({p})")).unwrap_or_default();
    format!("{role} dispatch{task}{phase}")
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    all[start..].join("\n")
}

impl Env {
    /// Freezes what judges the run before the first dispatch: the scripts the test command
    /// (and `extra` commands) name, the project's and the test runners' configuration, and the
    /// test tree (see `work_git::surface`); the test runners they run report their suite
    /// once here (the baseline [`Env::suite_lost`] compares with).
    pub async fn freeze_checks(&self, extra: &[String], work: &str) -> work_git::surface::CheckSurface {
        let mut cmds = vec![self.settings.test_cmd.clone()];
        cmds.extend(extra.iter().cloned());
        if let (Ok(tree), Ok(mut t)) = (self.tree.snapshot_tree(), self.frozen_tree.lock()) {
            *t = Some(tree);
        }
        let mut s = work_git::surface::CheckSurface::freeze(&self.run.root, &cmds, work_git::surface::Named::CheckLike);
        // A script only the suite command names is the check; one `work` (the plan, the
        // cause, the edit's description) names is the code under change.
        s.pin_unnamed_by(&self.run.root, &cmds, work);
        // A command the baseline already ran as its runner's report command is not run again.
        let known = self.baseline_report.lock().ok().and_then(|mut b| b.take());
        let rest: Vec<&String> = cmds.iter().filter(|c| known.as_ref().is_none_or(|k| &k.command != *c)).collect();
        if let Some(BaselineReport { probe, report: Some(report), .. }) = known {
            s.record_suite(probe, report);
        }
        if !rest.is_empty()
            && let Ok(copy) = self.copy()
        {
            s.record_suites(&self.run.spawner, copy.path(), &rest, self.settings.gate_timeout).await;
        }
        for (part, collected, skipped) in s.suites() {
            self.run.emit(Event::SuiteBaseline {
                command: json!(part),
                collected: json!(collected),
                skipped: json!(skipped),
            });
        }
        s
    }

    /// Why a green run is BLOCKED `check-tampered` when the suite's own report lost tests since
    /// the baseline (gone, skipped where they ran, added skipped); the suite reports on `copy`,
    /// where the green run ran (no copy: nothing to compare, the run was red).
    pub async fn suite_lost(
        &self,
        surface: &work_git::surface::CheckSurface,
        copy: &Result<EngineCopy, String>,
    ) -> Option<String> {
        let dir = copy.as_ref().ok()?.path();
        let lost = surface.suite_changes(&self.run.spawner, dir, self.settings.gate_timeout).await;
        if lost.is_empty() {
            return None;
        }
        let what = work_git::surface::describe(&lost);
        self.run.emit(Event::CheckSurfaceChanged { goal_id: None, changes: Some(json!(what)), restored: None });
        Some(format!(
            "the suite is green but its own report lost tests since the run started: {what}; adding tests is the only change allowed: restore them (git diff shows the change) and run again"
        ))
    }

    /// Why the run is BLOCKED `check-tampered` when an agent changed what judges it (a test
    /// may be added; a check script, the configuration or an existing test may not change).
    pub fn check_tampered(&self, surface: &work_git::surface::CheckSurface) -> Option<String> {
        self.check_tampered_except(surface, &[])
    }

    /// [`Env::check_tampered`], but a change to one of `allowed` (frozen check files a rename
    /// edit changed by the rename alone, see `crate::edit`) is not one.
    pub fn check_tampered_except(
        &self,
        surface: &work_git::surface::CheckSurface,
        allowed: &[String],
    ) -> Option<String> {
        let mut changes = surface.changes(&self.run.root, work_git::surface::TestEdits::Add);
        changes.retain(|c| !allowed.contains(&c.path));
        if changes.is_empty() {
            return None;
        }
        let what = work_git::surface::describe(&changes);
        self.run.emit(Event::CheckSurfaceChanged { goal_id: None, changes: Some(json!(what)), restored: None });
        Some(format!(
            "an agent changed what judges the run: {what}; a suite is only as honest as the scripts and tests it runs: restore them (git diff shows the change) and run again"
        ))
    }

    /// Why the run is BLOCKED `git-tampered` when an agent changed git's view of the tree since
    /// the run started: an index flag (`assume-unchanged`, `skip-worktree`), `info/exclude`, a
    /// `.gitattributes`, a hook, or a filter or diff driver in the configuration — each can hide
    /// a change from `git status` and `git diff` without touching the file.
    /// A git that fails reading the view again is no verdict: it is recorded as the run's
    /// failure ([`Env::git_failed`]) and `None` is returned.
    pub fn git_tampered(&self) -> Option<String> {
        let seal = self.seal()?;
        let now = match self.tree.git().seal() {
            Ok(s) => s,
            Err(e) => {
                self.fail_git(e);
                return None;
            }
        };
        let changes = seal.changes(&now);
        if changes.is_empty() {
            return None;
        }
        let what = work_git::integrity::describe(&changes);
        self.run.emit(Event::GitTampered { changes: json!(changes) });
        Some(format!(
            "an agent changed git's view of the tree: {what}; index flags, exclude files, attributes, hooks and drivers can hide a change from git status and git diff: undo it (e.g. `git update-index --no-skip-worktree <path>`, `git update-index --no-assume-unchanged <path>`) and run again"
        ))
    }

    /// The seal the run compares with (taken when the run started).
    pub fn seal(&self) -> Option<work_git::integrity::Seal> {
        self.seal.lock().ok().and_then(|s| s.clone())
    }

    /// Compares with `seal` from now on (a resumed run keeps the seal of its first run).
    pub fn pin_seal(&self, seal: work_git::integrity::Seal) {
        if let Ok(mut s) = self.seal.lock() {
            *s = Some(seal);
        }
    }

    /// What the checks leave behind, learned on the engine's copy (see [`Env::learn_byproducts`]).
    pub fn byproducts(&self) -> work_git::byproducts::Byproducts {
        self.byproducts.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// Leaves `b` out of the positive evidence from now on.
    pub fn pin_byproducts(&self, b: work_git::byproducts::Byproducts) {
        if let Ok(mut s) = self.byproducts.lock() {
            *s = b;
        }
    }

    /// Runs `cmd` (a gate) before any dispatch on a copy of the tree and learns what it leaves
    /// there: those files, should an agent's own run of the checks leave them in its tree, are
    /// never positive evidence (`work_git::evidence`). The gate's run is returned.
    pub async fn learn_byproducts(&self, what: &str, cmd: &str) -> GateRun {
        let copy = self.copy();
        let before = self.copy_state(&copy);
        let run = self.gate_on(what, cmd, &copy).await;
        self.learn_since(&copy, before);
        run
    }

    /// The dirty state of `copy` (see `Tree::dirty_state`).
    fn copy_state(&self, copy: &Result<EngineCopy, String>) -> Option<work_git::TreeState> {
        self.tree.dirty_state_of(copy.as_ref().ok()?.path()).ok()
    }

    /// Learns what the engine's check run on `copy` since `before` left there.
    fn learn_since(&self, copy: &Result<EngineCopy, String>, before: Option<work_git::TreeState>) {
        if let (Ok(c), Some(before), Some(after)) = (copy, before, self.copy_state(copy)) {
            let b = work_git::byproducts::Byproducts::learn(&work_git::Git::new(c.path()), &before, &after);
            if !b.is_empty() {
                self.run.emit(Event::ByproductsLearned { paths: json!(b.paths), dirs: json!(b.dirs) });
            }
            self.pin_byproducts(b);
        }
    }

    /// The suite once before the first dispatch (on a copy of the tree), serving both
    /// baselines: what it leaves is learned as residue ([`Env::learn_byproducts`]) and, when
    /// the suite command is one test runner invocation that can report
    /// (`work_git::suite_report::sole_probe`), it runs as the runner's report command and its
    /// report is the baseline the next [`Env::freeze_checks`] records instead of running the
    /// suite again. A compound command runs as it is, and its runners report in a run of
    /// their own.
    pub async fn baseline_suite(&self, what: &str) -> GateRun {
        let cmd = self.settings.test_cmd.clone();
        let Some(probe) = work_git::suite_report::sole_probe(&cmd) else {
            return self.learn_byproducts(what, &cmd).await;
        };
        let copy = self.copy();
        let before = self.copy_state(&copy);
        let (run, out) = self.gate_output(what, &probe.report_command, &copy).await;
        let report = match (&copy, out) {
            (Ok(c), Some(o)) => work_git::suite_report::read_output(&probe, &o, c.path()),
            _ => None,
        };
        self.learn_since(&copy, before);
        if let Ok(mut b) = self.baseline_report.lock() {
            *b = Some(BaselineReport { command: cmd, probe, report });
        }
        run
    }

    /// Change lines (`XY path`, see `Tree::porcelain`) without what a run of the checks leaves
    /// (learned on the engine's copy): what counts as a change.
    pub fn evidence(&self, lines: Vec<String>) -> Vec<String> {
        let b = self.byproducts();
        lines.into_iter().filter(|l| !b.is_byproduct(l.get(3..).unwrap_or("").trim())).collect()
    }

    /// A pipeline environment.
    pub fn new(run: RunContext, roles: BTreeMap<String, RoleDispatch>, settings: Settings) -> Self {
        let tree = Tree::new(&run.root, &run.state_dir).excluding(&settings.exclude);
        let base_head = tree.base().sha.clone();
        let base_head_seen = base_head.clone();
        let seal = std::sync::Mutex::new(tree.git().seal().ok());
        Self {
            run,
            roles,
            settings,
            tree,
            base_head,
            budget_refused: std::sync::Mutex::new(None),
            seal,
            byproducts: std::sync::Mutex::default(),
            baseline_report: std::sync::Mutex::new(None),
            frozen_tree: std::sync::Mutex::new(None),
            head_seen: std::sync::Mutex::new(base_head_seen),
            git_failure: std::sync::Mutex::default(),
            waves: None,
        }
    }

    /// Runs a plan's independent tasks in parallel waves as `setup` says (`crate::waves`).
    pub fn with_waves(mut self, setup: crate::waves::WaveSetup) -> Self {
        self.waves = Some(setup);
        self
    }

    /// How a plan's tasks run in parallel, when they do.
    pub fn waves(&self) -> Option<&crate::waves::WaveSetup> {
        self.waves.as_ref()
    }

    /// Whether HEAD moved dishonestly since the run started (reset below the base, the base
    /// rewritten, another branch checked out; see `work_git::head`): emits `head.moved` when it
    /// did. An agent's commits on top of the base are its change, measured with the rest of
    /// the tree against the base; they emit `head.committed` once per new HEAD.
    ///
    /// A git that fails judging HEAD is no verdict: it is recorded as the run's failure
    /// ([`Env::git_failed`]) and `None` is returned.
    pub fn head_moved(&self) -> Option<crate::tree::HeadMove> {
        let verdict = match self.tree.judge_head() {
            Ok(v) => v,
            Err(e) => {
                self.fail_git(e);
                return None;
            }
        };
        match verdict {
            work_git::head::HeadVerdict::Committed { commits } => {
                let now = self.tree.git().head_sha();
                let mut seen = self.head_seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if *seen != now {
                    self.run.emit(Event::HeadCommitted {
                        from: json!(self.base_head),
                        to: json!(now),
                        commits: json!(commits),
                    });
                    *seen = now;
                }
                None
            }
            v => {
                let m = self.tree.head_move(v)?;
                self.run.emit(Event::HeadMoved {
                    from: json!(m.from),
                    to: json!(m.to),
                    breach: Some(json!(m.breach)),
                    branch: json!(m.branch),
                });
                Some(m)
            }
        }
    }

    /// Records `e`, a git the engine ran to judge the run that failed (the first one is kept),
    /// and emits `git.failed`.
    pub fn fail_git(&self, e: work_git::GitError) {
        self.run.emit(Event::GitFailed { error: e.to_string() });
        let mut slot = self.git_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.get_or_insert(e);
    }

    /// The run's end when a git the engine ran to judge it failed: `Err` with that failure (an
    /// error of the run, exit 1 — never a verdict about an agent), else `Ok`.
    pub fn git_failed(&self) -> Result<(), work_git::GitError> {
        match self.git_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Runs one dispatch of `role`, charging `counter`; the validated output, or why none.
    #[expect(clippy::too_many_arguments, reason = "a dispatch is described by all of these")]
    pub async fn ask(
        &self,
        counter: &mut Counter,
        role: &str,
        access: Access,
        prompt: String,
        schema: Value,
        context: Value,
        label: &str,
    ) -> Result<Value, String> {
        let Some(rd) = self.roles.get(role) else {
            return Err(format!("no agent configured for role {role}"));
        };
        let what = describe_dispatch(role, &context);
        let outcome = rd.dispatcher.dispatch(self.spec(role, access, prompt, schema, context, label)).await;
        if !matches!(outcome, DispatchOutcome::OverBudget { .. }) {
            counter.dispatches += 1;
        }
        match outcome {
            DispatchOutcome::Ok { output, usage, .. } => {
                counter.tokens += usage.total_tokens();
                Ok(output)
            }
            DispatchOutcome::OverBudget { dispatch_id } => {
                self.note_budget_refused(&what);
                Err(format!("{what} ({dispatch_id}) was not run: the budget is spent"))
            }
            other => Err(format!(
                "{role} dispatch {} {}",
                other.dispatch_id(),
                other.failure_reason().unwrap_or_else(|| "gave no answer".into())
            )),
        }
    }

    /// Records that the budget refused a dispatch (the first one is kept).
    pub fn note_budget_refused(&self, what: &str) {
        if let Ok(mut r) = self.budget_refused.lock()
            && r.is_none()
        {
            self.run.emit(Event::BudgetStop { refused: json!(what), spent: json!(self.run.budget.spent()) });
            *r = Some(what.to_string());
        }
    }

    /// The first dispatch the budget refused, if any.
    pub fn budget_refused(&self) -> Option<String> {
        self.budget_refused.lock().ok().and_then(|r| r.clone())
    }

    /// The BLOCKED kind of a dispatch that gave no answer: `budget` once the budget refused
    /// one (not the agent's failure), else `dispatch-failed`.
    pub fn failed_kind(&self) -> &'static str {
        if self.budget_refused().is_some() { StopReason::Budget.as_str() } else { "dispatch-failed" }
    }

    /// The dispatch spec for `role` with its pins.
    pub fn spec(
        &self,
        role: &str,
        access: Access,
        prompt: String,
        schema: Value,
        context: Value,
        label: &str,
    ) -> DispatchSpec {
        let (model, effort) = match self.roles.get(role) {
            Some(rd) => (rd.model.clone(), rd.effort.clone()),
            None => (String::new(), String::new()),
        };
        DispatchSpec {
            role: role.into(),
            model,
            effort,
            access,
            prompt,
            schema: Some(schema),
            context,
            label: label.into(),
        }
    }

    /// The engine's copy of the agent's tree as it is now (`work_git::copy`: its snapshot, the
    /// state directory left out, the ignored entries copied in): where every check of the
    /// run runs, so nothing a check writes lands in the agent's tree. `Err` says why it could
    /// not be made; a check that was to run there is red.
    pub fn copy(&self) -> Result<EngineCopy, String> {
        self.tree.copy().map_err(|e| format!("the engine's copy could not be made: {e}"))
    }

    /// Runs a gate command (`sh -c`) on a fresh copy of the tree ([`Env::copy`]): the
    /// engine's own observation.
    pub async fn gate(&self, what: &str, cmd: &str) -> GateRun {
        self.gate_on(what, cmd, &self.copy()).await
    }

    /// Runs a gate command on `copy` (red when the copy could not be made).
    pub async fn gate_on(&self, what: &str, cmd: &str, copy: &Result<EngineCopy, String>) -> GateRun {
        self.gate_output(what, cmd, copy).await.0
    }

    /// [`Env::gate_on`], with the process's output when it ran.
    async fn gate_output(
        &self,
        what: &str,
        cmd: &str,
        copy: &Result<EngineCopy, String>,
    ) -> (GateRun, Option<work_runtime::spawn::ProcessOutput>) {
        if cmd.trim().is_empty() {
            // No command configured or detected: never green, and said so.
            return (GateRun { command: String::new(), green: false, end: NO_SUITE.into(), tail: String::new() }, None);
        }
        match copy {
            Ok(c) => self.gate_output_in(what, cmd, c.path()).await,
            Err(why) => {
                let run = GateRun { command: cmd.into(), green: false, end: why.clone(), tail: String::new() };
                self.run.emit(Event::GateEnd {
                    gate: json!(what),
                    green: false,
                    end: Some(json!(run.end)),
                    about: None,
                });
                (run, None)
            }
        }
    }

    /// Runs a gate command (`sh -c`) in `dir` (an engine copy).
    pub(crate) async fn gate_in(&self, what: &str, cmd: &str, dir: &std::path::Path) -> GateRun {
        self.gate_output_in(what, cmd, dir).await.0
    }

    /// [`Env::gate_in`], with the process's output when it ran.
    async fn gate_output_in(
        &self,
        what: &str,
        cmd: &str,
        dir: &std::path::Path,
    ) -> (GateRun, Option<work_runtime::spawn::ProcessOutput>) {
        self.run.emit(Event::GateStart { gate: json!(what), command: json!(cmd), about: None });
        let (run, out) = match self.run.spawner.shell(cmd, dir, self.settings.gate_timeout).await {
            Ok(out) => {
                let mut text = out.stdout_text();
                text.push_str(&out.stderr_text());
                let run = GateRun {
                    command: cmd.into(),
                    green: out.success(),
                    end: out.describe_end(),
                    tail: tail(&text, 20),
                };
                (run, Some(out))
            }
            Err(e) => (
                GateRun {
                    command: cmd.into(),
                    green: false,
                    end: format!("could not start: {e}"),
                    tail: String::new(),
                },
                None,
            ),
        };
        self.run.emit(Event::GateEnd { gate: json!(what), green: run.green, end: Some(json!(run.end)), about: None });
        (run, out)
    }

    /// True when no suite command is configured (DONE is then impossible: BLOCKED `no-suite`).
    pub fn no_suite(&self) -> bool {
        self.settings.test_cmd.trim().is_empty()
    }

    /// The command that runs one test by name (mini mode).
    pub fn red_test_command(&self, name: &str) -> String {
        let quoted = shell_words::quote(name).into_owned();
        match &self.settings.red_test_cmd {
            Some(t) if t.contains("{test}") => t.replace("{test}", &quoted),
            Some(t) => format!("{t} {quoted}"),
            None => format!("{} {quoted}", self.settings.test_cmd),
        }
    }
}
