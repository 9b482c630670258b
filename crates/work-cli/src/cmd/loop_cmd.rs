//! `work loop`: the work-loop scripts as subcommands —
//! `engine`, `cohort`, `lint-spec-status`, `workspace-status`, `base-freshness`.
//!
//! The logic lives in `work_loop`; this module parses arguments, resolves the repository root
//! and clock, and renders the outcome (`--json`: one document on stdout). Exit codes: 0 done,
//! 1 refused / negative answer (nothing changed), 2 bad input.

use crate::CmdResult;
use crate::ctx::{CliError, Ctx, Global, print_json};
use clap::{Subcommand, ValueEnum};
use work_loop::cohort::{self, Caps, CheckPhase, ReviewRecord, WaveExpect};
use work_loop::table::Mode;
use work_loop::{LoopError, LoopResult, SpecDir, engine, freshness, lint, workspace};

/// `work loop …`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the result as one JSON document on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// The script to run.
    #[command(subcommand)]
    pub command: LoopCommand,
}

/// The scripts.
#[derive(Debug, Subcommand)]
pub enum LoopCommand {
    /// The engine state machine over `<spec-dir>/engine-state.json`.
    #[command(subcommand)]
    Engine(EngineCommand),
    /// The cohort bookkeeping over `<spec-dir>/state.json`.
    #[command(subcommand)]
    Cohort(CohortCommand),
    /// Doc-drift lint over `docs/specs/*/spec.md`.
    LintSpecStatus(LintArgs),
    /// The canonical preflight over `workspace.toml`.
    WorkspaceStatus(WorkspaceArgs),
    /// Is HEAD current with its base? (exit 1 with the message when not).
    BaseFreshness(FreshnessArgs),
    /// Drive the whole PLAN → EXECUTE → GATES → REVIEW → DECIDE loop with agents (docs/loop-run.md).
    Run(crate::cmd::loop_run::RunArgs),
}

/// The spec directory of a verb: positional, or `--spec-dir DIR`; when neither is given, the
/// only `docs/specs/*/` holding engine-state.json or state.json (said on stderr).
#[derive(Debug, Clone, clap::Args)]
pub struct SpecDirArg {
    /// The spec directory (`docs/specs/<feature>`); default: the only one with loop state.
    #[arg(value_name = "SPEC_DIR")]
    pub spec_dir: Option<String>,
    /// The spec directory, as a flag (an alias of the positional SPEC_DIR).
    #[arg(long = "spec-dir", value_name = "DIR", conflicts_with = "spec_dir")]
    pub spec_dir_flag: Option<String>,
}

impl SpecDirArg {
    /// The confined spec directory.
    fn open(&self, root: &std::path::Path) -> Result<SpecDir, LoopError> {
        let rel = match (&self.spec_dir, &self.spec_dir_flag) {
            (Some(p), _) | (None, Some(p)) => p.clone(),
            (None, None) => {
                let d = work_loop::common::find_spec_dir(root)?;
                work_run::output::note(&format!(
                    "work loop: using spec directory `{d}` (the only one with loop state)"
                ));
                d
            }
        };
        SpecDir::open(root, &rel)
    }

    /// The cohort's spec directory: as [`SpecDirArg::open`], and also an absolute path outside
    /// the repository, as the scripts' cohort takes it (it refuses only `..`).
    fn open_cohort(&self, root: &std::path::Path) -> Result<SpecDir, LoopError> {
        match self.open(root) {
            Err(e) => match self.spec_dir.as_ref().or(self.spec_dir_flag.as_ref()) {
                Some(p) if p.starts_with('/') && work_loop::common::repo_relative(root, p).is_err() => {
                    SpecDir::open_outside(p)
                }
                _ => Err(e),
            },
            ok => ok,
        }
    }
}

/// `--mode`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// Implementation work.
    Code,
    /// Spec/plan-only work.
    SpecPlan,
}

/// `engine …`.
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Start a run in SPEC-PLAN-DRAFTING (refused when engine-state.json exists); prints the run id.
    Init {
        #[command(flatten)]
        dir: SpecDirArg,
        /// `code` or `spec-plan`.
        #[arg(long, value_enum)]
        mode: ModeArg,
    },
    /// Fire an event (refused, exit 1 and nothing changed, when illegal or guarded out).
    #[command(allow_missing_positional = true)]
    Transition {
        #[command(flatten)]
        dir: SpecDirArg,
        /// The event (`spec-ready`, `reviewers-clean`, …).
        event: String,
        /// The wave just verified (wave-passed, gates-clean): must be the cohort's current wave.
        #[arg(long, value_name = "N")]
        wave_index: Option<usize>,
        /// reviewers-clean on an intermediate review unit: accept spec.md `Status: Implementing`.
        #[arg(long)]
        intent_incomplete: bool,
    },
    /// The engine state (exit 2 when missing or unreadable).
    Status {
        #[command(flatten)]
        dir: SpecDirArg,
    },
    /// Delete engine-state.json (destructive: only with a person's confirmation).
    Reset {
        #[command(flatten)]
        dir: SpecDirArg,
    },
    /// Where a fresh session picks up (the Session Resumption routing), read-only.
    Resume {
        #[command(flatten)]
        dir: SpecDirArg,
    },
    /// Print the state table as implemented (markdown).
    Table,
}

/// `cohort …`.
#[derive(Debug, Subcommand)]
pub enum CohortCommand {
    /// Create state.json for a run (refused when it exists).
    Init {
        #[command(flatten)]
        dir: SpecDirArg,
        /// The engine's run id.
        #[arg(long)]
        run_id: String,
        /// The implementation retry cap.
        #[arg(long, default_value_t = cohort::DEFAULT_IMPLEMENTATION_RETRY_CAP)]
        implementation_retry_cap: u32,
        /// The review retry cap.
        #[arg(long, default_value_t = cohort::DEFAULT_REVIEW_RETRY_CAP)]
        review_retry_cap: u32,
    },
    /// Check that the cohort (and engine) belong to a run.
    Identity {
        #[command(flatten)]
        dir: SpecDirArg,
        /// The run id expected (without it, the engine and cohort must share one run).
        #[arg(long)]
        expect_run_id: Option<String>,
    },
    /// Record the approved baseline (both Status fields Approved; a no-op when unchanged;
    /// refused when spec.md or plan.md changed since the baseline, unless --rebaseline).
    ApprovePlan {
        #[command(flatten)]
        dir: SpecDirArg,
        /// Record a new baseline although spec.md or plan.md changed since the last one (an
        /// explicit decision after re-review; the old baseline is kept in baseline_history).
        #[arg(long)]
        rebaseline: bool,
        /// The run the cohort must belong to (required: the fence against changing an orphaned
        /// run's cohort).
        #[arg(long)]
        expect_run_id: String,
    },
    /// Compute the waves from plan.md's task dependencies (resets the wave pointer).
    ///
    /// `schedule check-current [SPEC_DIR]` is the read-only check that the waves were computed
    /// from plan.md as it is now (exit 1 otherwise).
    Schedule {
        #[command(flatten)]
        dir: SpecDirArg,
        /// The spec directory after `check-current`.
        #[arg(value_name = "SPEC_DIR2", hide = true)]
        second: Option<String>,
        /// plan.md (must be the spec directory's own).
        #[arg(long, value_name = "P")]
        plan: Option<String>,
        /// The run the cohort must belong to (required to schedule; `check-current` reads only).
        #[arg(long)]
        expect_run_id: Option<String>,
    },
    /// The wave pointer.
    #[command(subcommand)]
    Wave(WaveCommand),
    /// Count a gate failure once per cycle id.
    RecordAttempt {
        #[command(flatten)]
        dir: SpecDirArg,
        /// The phase (`implement`).
        #[arg(long, value_enum)]
        phase: PhaseArg,
        /// `<run_id>:<transition_sequence>`.
        #[arg(long)]
        cycle_id: String,
        /// The run the cohort must belong to (required: the fence against changing an orphaned
        /// run's cohort).
        #[arg(long)]
        expect_run_id: String,
    },
    /// Review rounds.
    #[command(subcommand)]
    Review(ReviewCommand),
    /// The plan-review freshness.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Exit 1 when a retry cap is reached (or, without --phase, the plan review is pending).
    Check {
        #[command(flatten)]
        dir: SpecDirArg,
        /// Only this cap.
        #[arg(long, value_enum)]
        phase: Option<CheckPhaseArg>,
        /// Refuse unless the cohort belongs to this run.
        #[arg(long)]
        expect_run_id: Option<String>,
    },
    /// The cohort state.
    Status {
        #[command(flatten)]
        dir: SpecDirArg,
    },
    /// Delete state.json (destructive: only with a person's confirmation).
    Reset {
        #[command(flatten)]
        dir: SpecDirArg,
    },
    /// Disabled (the scripts' parallel dispatch): always exit 1.
    DispatchDecision {
        /// Ignored.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Disabled (the scripts' parallel dispatch): always exit 1.
    AutoParallel {
        /// Ignored.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Disabled (the scripts' worktree verbs): always exit 1.
    Worktree {
        /// Ignored.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `--phase` of record-attempt.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PhaseArg {
    /// A gates-failed implementation cycle.
    Implement,
}

/// `--phase` of check.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CheckPhaseArg {
    /// The implementation phase (only checks that the state is readable).
    Implement,
    /// The implementation retry cap.
    GatesFailed,
    /// The review retry cap.
    Review,
}

/// `--expect` of wave check.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExpectArg {
    /// More waves remain.
    More,
    /// This is the last wave.
    Last,
}

/// `cohort wave …`.
#[derive(Debug, Subcommand)]
pub enum WaveCommand {
    /// Move the pointer from N to N+1 (idempotent).
    Advance {
        #[command(flatten)]
        dir: SpecDirArg,
        /// The wave just completed.
        #[arg(long, value_name = "N")]
        from_index: usize,
        /// The run the cohort must belong to (required: the fence against changing an orphaned
        /// run's cohort).
        #[arg(long)]
        expect_run_id: String,
    },
    /// Exit 0 when the expectation holds, 1 otherwise.
    Check {
        #[command(flatten)]
        dir: SpecDirArg,
        /// `more` or `last`.
        #[arg(long, value_enum)]
        expect: ExpectArg,
        /// Refuse unless this is the current wave.
        #[arg(long, value_name = "N")]
        wave_index: Option<usize>,
        /// Refuse unless the cohort belongs to this run.
        #[arg(long)]
        expect_run_id: Option<String>,
    },
}

/// `cohort review …`.
#[derive(Debug, Subcommand)]
pub enum ReviewCommand {
    /// Record a review round (not idempotent).
    #[command(group(clap::ArgGroup::new("round").required(true).args(["report", "fingerprints", "all_skipped"])))]
    Record {
        #[command(flatten)]
        dir: SpecDirArg,
        /// A clean report: a reviewer report, or with --adjudication the adjudication artifact.
        #[arg(long, value_name = "P")]
        report: Option<String>,
        /// The report is the adjudication artifact.
        #[arg(long, requires = "report")]
        adjudication: bool,
        /// The fingerprint of a sustained finding (repeatable).
        #[arg(long = "fingerprint", value_name = "FP")]
        fingerprints: Vec<String>,
        /// Every warranted reviewer was a non-mandatory named skip.
        #[arg(long)]
        all_skipped: bool,
        /// The run the cohort must belong to (required: the fence against changing an orphaned
        /// run's cohort).
        #[arg(long)]
        expect_run_id: String,
    },
    /// Classify a reviewer report (`--report`) or an adjudication (`--adjudication`) and
    /// compare it with the last round (`matches_previous_round`).
    #[command(group(clap::ArgGroup::new("artifact").required(true).args(["report", "adjudication"])))]
    Inspect {
        #[command(flatten)]
        dir: SpecDirArg,
        /// A reviewer report (every content outcome exits 0; unreadable is `invalid`).
        #[arg(long, value_name = "P")]
        report: Option<String>,
        /// The adjudication artifact.
        #[arg(long, value_name = "P")]
        adjudication: Option<String>,
        /// Refuse unless the cohort belongs to this run.
        #[arg(long)]
        expect_run_id: Option<String>,
    },
    /// Classify an adjudication artifact without any state (light mode).
    Classify {
        /// The adjudication artifact.
        path: String,
    },
}

/// `cohort plan …`.
#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Exit 1 (`plan_review_status: pending`) when plan.md changed since its last review.
    CheckCurrent {
        #[command(flatten)]
        dir: SpecDirArg,
        /// Also require a schedule computed from plan.md as it is now.
        #[arg(long)]
        require_schedule: bool,
        /// Refuse unless the cohort belongs to this run.
        #[arg(long)]
        expect_run_id: Option<String>,
    },
    /// Record plan.md as reviewed (after pre-EXECUTE review is adjudicated clean).
    MarkReviewed {
        #[command(flatten)]
        dir: SpecDirArg,
        /// The run the cohort must belong to (required: the fence against changing an orphaned
        /// run's cohort).
        #[arg(long)]
        expect_run_id: String,
    },
}

/// `lint-spec-status`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// The directory holding `docs/specs/` and `workspace.toml` (`.` = the repository root).
    #[arg(long, default_value = ".")]
    pub root: String,
    /// The base the ship transition is judged against (default: origin/HEAD, else origin/main;
    /// without one the acceptance-criteria check is skipped).
    #[arg(long, value_name = "REF")]
    pub base_ref: Option<String>,
}

/// `workspace-status`.
#[derive(Debug, clap::Args)]
pub struct WorkspaceArgs {
    /// Evaluate this spec path too (exit 1 unless it is canonical ready or active).
    #[arg(long, value_name = "PATH")]
    pub spec: Option<String>,
}

/// `base-freshness`.
#[derive(Debug, clap::Args)]
pub struct FreshnessArgs {
    /// `REMOTE/BRANCH` (required with several remotes).
    #[arg(long, value_name = "REMOTE/BRANCH")]
    pub target: Option<String>,
}

/// Runs the command.
pub fn run(global: &Global, args: Args) -> CmdResult {
    if let LoopCommand::Run(r) = args.command {
        return crate::cmd::loop_run::run(global, crate::cmd::loop_run::RunArgs { json: r.json || args.json, ..r });
    }
    let ctx = Ctx::new(global)?;
    let root = ctx.root.as_path();
    let clock = ctx.clock.as_ref();
    // base-freshness always answers with its JSON document, as the scripts' check does.
    let always_json = matches!(args.command, LoopCommand::BaseFreshness(_));
    // The engine and cohort verbs stop with exit 1 on bad input, as the scripts do, and speak
    // in the scripts' voice (`loop-cohort: stop — …`).
    let voice = match args.command {
        LoopCommand::Engine(_) => Some("loop-engine"),
        LoopCommand::Cohort(_) => Some("loop-cohort"),
        _ => None,
    };
    let script_exits = voice.is_some();
    let result: LoopResult = match args.command {
        LoopCommand::Engine(cmd) => match cmd {
            EngineCommand::Init { dir, mode } => {
                let mode = match mode {
                    ModeArg::Code => Mode::Code,
                    ModeArg::SpecPlan => Mode::SpecPlan,
                };
                dir.open(root).and_then(|d| engine::init(&d, mode, clock))
            }
            EngineCommand::Transition { dir, event, wave_index, intent_incomplete } => dir.open(root).and_then(|d| {
                engine::transition(&d, &event, engine::TransitionOpts { wave_index, intent_incomplete }, clock)
            }),
            EngineCommand::Status { dir } => dir.open(root).and_then(|d| engine::status(&d)),
            EngineCommand::Reset { dir } => dir.open(root).and_then(|d| engine::reset(&d)),
            EngineCommand::Resume { dir } => dir.open(root).and_then(|d| engine::resume(&d)),
            EngineCommand::Table => {
                let md = work_loop::table::render_markdown();
                let json = serde_json::json!({ "ok": true, "markdown": md });
                Ok(work_loop::Outcome::ok(json, md.trim_end().to_string()))
            }
        },
        LoopCommand::Cohort(cmd) => cohort_cmd(root, clock, cmd),
        LoopCommand::LintSpecStatus(a) => lint::lint(root, &a.root, a.base_ref.as_deref()),
        LoopCommand::WorkspaceStatus(a) => workspace::workspace_status(root, a.spec.as_deref()),
        LoopCommand::BaseFreshness(a) => freshness::base_freshness(root, a.target.as_deref()),
        LoopCommand::Run(_) => unreachable!("handled above"),
    };
    let result = if script_exits { result.map_err(LoopError::as_script_refusal) } else { result };
    match voice {
        Some(tool) => emit_script(tool, args.json, result),
        None => emit(args.json || always_json, result),
    }
}

/// The engine's and the cohort's output as the scripts print it: a refusal is one line
/// `<tool>: stop — <reason>` on stderr (exit 1), a `--json` document is one line in the
/// scripts' JSON form, and the cohort's answers are prefixed with its name (a negative one is
/// a stop line on stderr).
fn emit_script(tool: &str, json: bool, result: LoopResult) -> CmdResult {
    let one_line = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    match result {
        Ok(o) => {
            for w in &o.warnings {
                eprintln!("warning: {w}");
            }
            let cohort = tool == "loop-cohort";
            if json {
                work_run::output::line(work_loop::common::script_json(&o.json));
            } else if !o.text.is_empty() && o.text_on_stderr {
                if cohort {
                    eprintln!("{tool}: stop — {}", one_line(&o.text));
                } else {
                    eprintln!("{}", o.text);
                }
            } else if !o.text.is_empty() {
                if cohort && !o.text.starts_with(tool) {
                    work_run::output::line(format!("{tool}: {}", o.text));
                } else {
                    work_run::output::line(o.text);
                }
            }
            Ok(o.exit)
        }
        Err(LoopError::BadInput(m)) => Err(CliError::BadInput(m)),
        Err(LoopError::Refused { message, json: doc }) => {
            if json {
                work_run::output::line(work_loop::common::script_json(&doc));
            }
            eprintln!("{tool}: stop — {}", one_line(&message));
            Ok(work_runtime::ExitStatus::Unsuccessful)
        }
    }
}

fn cohort_cmd(root: &std::path::Path, clock: &dyn work_runtime::clock::Clock, cmd: CohortCommand) -> LoopResult {
    match cmd {
        CohortCommand::Init { dir, run_id, implementation_retry_cap, review_retry_cap } => {
            let caps = Caps { implementation: implementation_retry_cap, review: review_retry_cap };
            dir.open_cohort(root).and_then(|d| cohort::init(&d, &run_id, caps, clock))
        }
        CohortCommand::Identity { dir, expect_run_id } => {
            dir.open_cohort(root).and_then(|d| cohort::identity(&d, expect_run_id.as_deref()))
        }
        CohortCommand::ApprovePlan { dir, rebaseline, expect_run_id } => {
            dir.open_cohort(root).and_then(|d| cohort::approve_plan(&d, Some(&expect_run_id), rebaseline, clock))
        }
        CohortCommand::Schedule { dir, second, plan, expect_run_id } => {
            if dir.spec_dir.as_deref() == Some("check-current") {
                let dir = SpecDirArg { spec_dir: second, spec_dir_flag: dir.spec_dir_flag };
                return dir
                    .open_cohort(root)
                    .and_then(|d| cohort::schedule_check_current(&d, expect_run_id.as_deref()));
            }
            if let Some(extra) = second {
                return Err(LoopError::bad(format!("schedule: unexpected argument `{extra}`")));
            }
            dir.open_cohort(root).and_then(|d| {
                // As the scripts: the fence is required to schedule, and its absence is a refusal.
                let Some(expect_run_id) = expect_run_id else {
                    return Err(LoopError::refused(
                        "schedule: --expect-run-id is required",
                        serde_json::json!({ "reason": "expect_run_id_required" }),
                    ));
                };
                cohort::check_plan_flag(d.root(), &d, plan.as_deref())?;
                cohort::schedule(&d, Some(&expect_run_id))
            })
        }
        CohortCommand::Wave(WaveCommand::Advance { dir, from_index, expect_run_id }) => {
            dir.open_cohort(root).and_then(|d| cohort::wave_advance(&d, from_index, Some(&expect_run_id)))
        }
        CohortCommand::Wave(WaveCommand::Check { dir, expect, wave_index, expect_run_id }) => {
            let e = match expect {
                ExpectArg::More => WaveExpect::More,
                ExpectArg::Last => WaveExpect::Last,
            };
            dir.open_cohort(root).and_then(|d| cohort::wave_check(&d, e, wave_index, expect_run_id.as_deref()))
        }
        CohortCommand::RecordAttempt { dir, phase: PhaseArg::Implement, cycle_id, expect_run_id } => {
            // The id is checked before the directory is even looked for.
            cohort::validate_cycle_id(&cycle_id)?;
            dir.open_cohort(root).and_then(|d| cohort::record_attempt(&d, &cycle_id, Some(&expect_run_id)))
        }
        CohortCommand::Review(ReviewCommand::Record {
            dir,
            report,
            adjudication,
            fingerprints,
            all_skipped,
            expect_run_id,
        }) => {
            let modes =
                usize::from(report.is_some()) + usize::from(!fingerprints.is_empty()) + usize::from(all_skipped);
            if modes != 1 {
                return Err(LoopError::bad(
                    "record the review: give exactly one of `--report P --adjudication`, `--fingerprint FP…`, `--all-skipped`",
                ));
            }
            // As the scripts take them: lowercase sha256 hex (sha1 from older runs), or this
            // project's adjudication fingerprints (`fp-` and 16 hex digits).
            if let Some(bad) = fingerprints.iter().find(|f| !fingerprint_shape(f)) {
                return Err(LoopError::refused(
                    format!(
                        "record the review: --fingerprint `{bad}` is not lowercase 64-hex sha256 (40-hex sha1 and `fp-<16 hex>` are accepted too)"
                    ),
                    serde_json::json!({ "reason": "fingerprint_shape" }),
                ));
            }
            let what = match (report, all_skipped) {
                (Some(p), _) if adjudication => ReviewRecord::CleanReport(p),
                (Some(p), _) => ReviewRecord::CleanReviewerReport(p),
                (None, true) => ReviewRecord::AllSkipped,
                (None, false) => ReviewRecord::Fingerprints(fingerprints),
            };
            dir.open_cohort(root).and_then(|d| {
                let root = d.root().to_path_buf();
                cohort::review_record(&root, &d, &what, Some(&expect_run_id), clock)
            })
        }
        CohortCommand::Review(ReviewCommand::Inspect { dir, report, adjudication, expect_run_id }) => {
            dir.open_cohort(root).and_then(|d| match (report, adjudication) {
                (_, Some(a)) => cohort::review_inspect(d.root(), &d, &a, expect_run_id.as_deref()),
                (Some(r), None) => cohort::review_inspect_report(&d, &r, expect_run_id.as_deref()),
                (None, None) => Err(LoopError::bad("review inspect: give --report P or --adjudication P")),
            })
        }
        CohortCommand::Review(ReviewCommand::Classify { path }) => cohort::review_classify(root, &path),
        CohortCommand::Plan(PlanCommand::CheckCurrent { dir, require_schedule, expect_run_id }) => dir
            .open_cohort(root)
            .and_then(|d| cohort::plan_check_current(&d, require_schedule, expect_run_id.as_deref())),
        CohortCommand::Plan(PlanCommand::MarkReviewed { dir, expect_run_id }) => {
            dir.open_cohort(root).and_then(|d| cohort::plan_mark_reviewed(&d, Some(&expect_run_id)))
        }
        CohortCommand::Check { dir, phase, expect_run_id } => {
            let p = phase.map(|p| match p {
                CheckPhaseArg::Implement => CheckPhase::Implement,
                CheckPhaseArg::GatesFailed => CheckPhase::GatesFailed,
                CheckPhaseArg::Review => CheckPhase::Review,
            });
            dir.open_cohort(root).and_then(|d| cohort::check(&d, p, expect_run_id.as_deref()))
        }
        CohortCommand::Status { dir } => dir.open_cohort(root).and_then(|d| cohort::status(&d)),
        CohortCommand::Reset { dir } => dir.open_cohort(root).and_then(|d| cohort::reset(&d)),
        CohortCommand::DispatchDecision { .. } => cohort::disabled("dispatch-decision"),
        CohortCommand::AutoParallel { .. } => cohort::disabled("auto-parallel"),
        CohortCommand::Worktree { args } => {
            cohort::disabled(format!("worktree {}", args.first().map(String::as_str).unwrap_or_default()).trim_end())
        }
    }
}

fn fingerprint_shape(f: &str) -> bool {
    let hex = |t: &str| t.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    match f.strip_prefix("fp-") {
        Some(t) => t.len() == 16 && hex(t),
        None => (f.len() == 64 || f.len() == 40) && hex(f),
    }
}

fn emit(json: bool, result: LoopResult) -> CmdResult {
    match result {
        Ok(o) => {
            for w in &o.warnings {
                eprintln!("warning: {w}");
            }
            if json {
                print_json(&o.json);
            } else if !o.text.is_empty() && o.text_on_stderr {
                eprintln!("{}", o.text);
            } else if !o.text.is_empty() {
                work_run::output::line(o.text);
            }
            Ok(o.exit)
        }
        Err(LoopError::BadInput(m)) => Err(CliError::BadInput(m)),
        Err(LoopError::Refused { message, json: doc }) => {
            if json {
                print_json(&doc);
            }
            Err(CliError::Runtime(message))
        }
    }
}
