//! `work edit`: a compiler-driven edit, observe-then-bounce (#7, #11). Make the edit at the
//! definition site, build, run the suite. The edit agent's `applied_changes` is cross-checked
//! by the engine's own `working_tree_dirty` at two points (before the build, and after the
//! suite); a clean tree — or one whose only change is what the engine's own baseline suite
//! run leaves (`__pycache__`, caches) — is BLOCKED `no-op-edit`. A hole (the build needs a design choice, or
//! new test-specifiable behaviour) bounces to specify or tdd; a red suite is a regression and
//! bounces to debug. A behaviour-preserving edit that touches only the definition site reports
//! `sites: 0`, and 0 it stays. `applied_changes` may come as a boolean or as the list of
//! changed paths (non-empty ⇒ true). An edit agent that commits (HEAD moves) is BLOCKED
//! `head-moved`. A tree changed only elsewhere — the definition site's file as at HEAD — is
//! BLOCKED `def-site-untouched`. A rename (`` Rename `old` to `new` ``, see [`crate::rename`])
//! may change a frozen check by the rename alone: the engine renames the frozen file itself
//! and the rerun with the frozen checks restored writes that version back (see
//! `renamed_checks`); any other change to a frozen check is `check-tampered`.
//!
//! An edit is an iteration of one task kept in the progress record ([`crate::resume`], as
//! standard mode's): a killed edit is continued by the same command — the dirty tree it left
//! accepted, the edit redone from the first editor dispatch on top of it, judged by what the
//! first run read and froze (the definition site's line, a rename's old sites, the check
//! surface, the seal, the suite's residue) — and a finished one rerun over the tree it left
//! prints its report again.

use crate::answers;
use crate::artifacts;
use crate::carrier::Mode;
use crate::env::{Counter, Env};
use crate::progress::{self, EditFrozen, InProgress};
use crate::prompts;
use crate::rename::{self, Rename};
use crate::report::{EndReport, Status, TaskOutcome, TaskStatus};
use crate::resume;
use crate::standard::fill_stats;
use crate::state_write::RunError;
use crate::tree::Preflight;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use work_git::surface::{CheckSurface, TestEdits};
use work_runtime::dispatch::Access;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

/// What an edit run is asked.
#[derive(Debug, Clone)]
pub struct EditInput {
    /// The iteration id (artifacts go under it).
    pub iter_id: String,
    /// What to change.
    pub description: String,
    /// Where (`PATH:LINE`).
    pub def_site: String,
    /// The definition site's file, relative to the repository's root: the edit must change it.
    pub def_site_path: String,
    /// The preflight (already checked clean).
    pub preflight: Preflight,
}

enum Step {
    Go,
    Stop,
}

fn bounce(report: &mut EndReport, kind: &str, route: &str, reason: String) {
    report.status = Status::Blocked;
    report.kind = Some(kind.into());
    report.route = Some(route.into());
    report.reason = reason;
}

/// Reads an editor answer: DONE goes on; HOLE bounces; BLOCKED stops.
fn judge(report: &mut EndReport, doc: &Value) -> Step {
    let why = doc["reason"].as_str().or(doc["summary"].as_str()).unwrap_or("no reason given").to_string();
    match doc["status"].as_str() {
        Some("HOLE") => {
            let route = match doc["hole"]["route"].as_str() {
                Some("tdd") => "tdd",
                _ => "specify",
            };
            let detail = doc["hole"]["detail"].as_str().map(str::to_string).unwrap_or(why);
            bounce(report, "hole", route, format!("the edit exposed a hole that needs {route}: {detail}"));
            Step::Stop
        }
        Some("BLOCKED") => {
            bounce(report, "editor-blocked", "specify", format!("the edit agent reported BLOCKED: {why}"));
            Step::Stop
        }
        _ => Step::Go,
    }
}

/// BLOCKED `head-moved` when the edit agent moved HEAD dishonestly (see `work_git::head`);
/// its commits on top of the base are its edit, measured from the base.
fn head_moved(env: &Env, report: &mut EndReport, detail: &mut Value) -> bool {
    let Some(m) = env.head_moved() else { return false };
    bounce(report, StopReason::HeadMoved.as_str(), "-", format!("during the edit, {}", m.describe()));
    report.route = None;
    detail["head"] = json!(m);
    true
}

/// What the edit is asked to change, for the check surface: its description and def site, and
/// every file the test command names that mentions the symbol being edited — a name the
/// description quotes (`` `name` ``) that stands on the def site's line. Such a file is a call
/// site, the code under change, not the check (`sh main.sh` where `main.sh` calls the function
/// being renamed); a script that only calls the new name stays a check. Read when the checks
/// are frozen, before any dispatch, so nothing the editor writes decides it.
fn edit_work(env: &Env, input: &EditInput, def_line: &str) -> String {
    let read = |rel: &str| {
        work_runtime::fsx::read_confined(&env.run.root, rel.trim_start_matches("./"), CALL_SITE_CAP)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let symbols: Vec<&str> = input
        .description
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_alphanumeric() || "_:.$-".contains(c)))
        .filter(|w| def_line.contains(w))
        .collect();
    let mut work = format!("{}\n{}", input.description, input.def_site);
    for word in env.settings.test_cmd.split_whitespace() {
        let Ok(text) = read(word) else { continue };
        if symbols.iter().any(|sym| text.contains(sym)) {
            work.push('\n');
            work.push_str(word.trim_start_matches("./"));
        }
    }
    work
}

/// The most of a file the test command names that [`edit_work`] reads.
const CALL_SITE_CAP: u64 = 1 << 20;

/// The definition site's line number.
fn def_line_no(input: &EditInput) -> usize {
    input.def_site.rsplit_once(':').and_then(|(_, l)| l.parse::<usize>().ok()).unwrap_or(0)
}

/// The definition site's line number and its text, read before the dispatch.
fn def_line(env: &Env, input: &EditInput) -> (usize, String) {
    def_site_line(&env.run.root, &input.def_site, &input.def_site_path)
}

/// `PATH:LINE`'s line number and its text under `root` (empty when unreadable).
fn def_site_line(root: &std::path::Path, def_site: &str, def_site_path: &str) -> (usize, String) {
    let n = def_site.rsplit_once(':').and_then(|(_, l)| l.parse::<usize>().ok()).unwrap_or(0);
    let text = work_runtime::fsx::read_confined(root, def_site_path, CALL_SITE_CAP)
        .ok()
        .and_then(|b| String::from_utf8_lossy(&b).lines().nth(n.checked_sub(1)?).map(str::to_string))
        .unwrap_or_default();
    (n, text)
}

/// The editor's first brief, as [`run_edit`] sends it (`work edit --dry-run` shows it).
pub fn first_brief(root: &std::path::Path, description: &str, def_site: &str, def_site_path: &str) -> String {
    let (_, line) = def_site_line(root, def_site, def_site_path);
    let rename = rename::recognise(description, &line);
    prompts::editor(description, def_site, None, rename.as_ref().map(|r| (r.old.as_str(), r.new.as_str())))
}

/// What the edit reads before its first dispatch: the definition site's line, and where the old
/// name of the rename the description asks for stands ([`crate::rename`]). A redone edit (its
/// run was killed) takes what the first run read, not the tree the killed editor left.
fn read_before(env: &Env, input: &EditInput) -> EditFrozen {
    let (_, line) = def_line(env, input);
    let rename_before = rename::recognise(&input.description, &line).map(|r| {
        let tracked = env.tree.git().run(&["ls-files", "-z"]).unwrap_or_default();
        let tracked: Vec<String> = tracked.split('\0').filter(|p| !p.is_empty()).map(str::to_string).collect();
        rename::before(&env.run.root, &tracked, &r).sites
    });
    EditFrozen { def_line: line, rename_before }
}

/// The rename the description asks for, and where its old name stood before the dispatch.
fn rename_of(input: &EditInput, frozen: &EditFrozen) -> Option<(Rename, rename::Before)> {
    let r = rename::recognise(&input.description, &frozen.def_line)?;
    Some((r, rename::Before { sites: frozen.rename_before.clone().unwrap_or_default() }))
}

/// The digest of what an edit is asked: the description, the definition site, the suite and
/// build commands ([`resume::request_digest`]).
pub fn request(description: &str, def_site: &str, test_cmd: &str, build_cmd: Option<&str>) -> String {
    resume::request_digest(&["edit", description, def_site, test_cmd, build_cmd.unwrap_or_default()])
}

/// Why a rename is not done: the old name still stands where it stood, or where the edit wrote
/// it (BLOCKED `rename-incomplete`); `detail.rename` records what was judged either way.
fn rename_left(
    env: &Env,
    input: &EditInput,
    surface: &CheckSurface,
    rename: Option<&(Rename, rename::Before)>,
    def_line_no: usize,
    detail: &mut Value,
) -> Option<String> {
    let (r, before) = rename?;
    let b = env.byproducts();
    let changed: Vec<String> =
        env.tree.dirty_paths().unwrap_or_default().into_iter().filter(|p| !b.is_byproduct(p)).collect();
    let frozen: BTreeSet<String> = surface.paths().into_iter().map(str::to_string).collect();
    let left = rename::left(&env.run.root, r, before, &changed, &frozen, (&input.def_site_path, def_line_no));
    detail["rename"] = json!({"old": r.old, "new": r.new, "keep": r.keep, "use_sites_before": left.use_sites_before,
                              "files_before": left.files_before, "left": left.sites});
    (!left.sites.is_empty()).then(|| rename::verdict(r, &left))
}

/// The frozen check files a rename edit changed by the rename alone ([`rename::only_renamed`]:
/// the frozen file with every word occurrence of the old name replaced by the new one, read
/// from the tree the checks were frozen in and from a snapshot of the tree now), with the
/// engine's renamed version of each put into the frozen tree: the rerun with the frozen checks
/// restored writes that version back from then on, never the agent's file. Any other change to
/// a frozen check stays `check-tampered`; a tree that cannot be written leaves none allowed.
fn renamed_checks(env: &Env, surface: &CheckSurface, rename: Option<&(Rename, rename::Before)>) -> Vec<String> {
    let Some((r, _)) = rename else { return Vec::new() };
    let frozen = env.frozen_tree.lock().ok().and_then(|t| t.clone()).or_else(|| env.tree.base_tree().ok());
    let (Some(frozen), Ok(now)) = (frozen, env.tree.snapshot_tree()) else { return Vec::new() };
    let git = env.tree.git();
    let text = |tree: &str, path: &str| git.file_in_tree(tree, path).and_then(|b| String::from_utf8(b).ok());
    let paths: BTreeSet<&str> = surface.paths().into_iter().collect();
    let mut ours = Vec::new();
    for c in surface.changes(&env.run.root, TestEdits::Add) {
        if !paths.contains(c.path.as_str()) {
            continue;
        }
        let (Some(was), Some(is)) = (text(&frozen, &c.path), text(&now, &c.path)) else { continue };
        if let Some(v) = rename::renamed_check(&was, r).filter(|_| rename::only_renamed(&was, &is, r)) {
            ours.push((c.path, v.into_bytes()));
        }
    }
    let Ok(tree) = git.tree_with(&frozen, &ours) else { return Vec::new() };
    let renamed: Vec<String> = ours.into_iter().map(|(p, _)| p).collect();
    if !renamed.is_empty() {
        env.rename_frozen_checks(tree);
        env.run.emit(Event::CheckSurfaceRenamed { old: json!(r.old), new: json!(r.new), paths: json!(renamed) });
    }
    renamed
}

/// The old and new names of a rename, for the editor's brief.
fn renaming(rename: Option<&(Rename, rename::Before)>) -> Option<(&str, &str)> {
    rename.map(|(r, _)| (r.old.as_str(), r.new.as_str()))
}

/// Runs an edit.
pub async fn run_edit(env: &Env, input: EditInput) -> Result<EndReport, RunError> {
    let mut report = EndReport::new(Status::Blocked, Mode::Edit, Some(input.iter_id.clone()), String::new());
    report.preflight = Some(input.preflight.clone());
    let mut task = TaskOutcome::new("edit", &input.description);
    // The iteration's record: a killed edit is redone on top of what its editor left, judged by
    // what the first run read and froze ([`resume`]).
    let asked = request(&input.description, &input.def_site, &env.settings.test_cmd, env.settings.build_cmd.as_deref());
    let mut progress = resume::resume_progress(env, &input.iter_id, &asked, &mut report)?;
    let read = progress.edit.is_none();
    let frozen = progress.edit.clone().unwrap_or_else(|| read_before(env, &input));
    progress.edit = Some(frozen.clone());
    let def_line_no = def_line_no(&input);
    let work = edit_work(env, &input, &frozen.def_line);
    // The suite once, by the engine, before the dispatch: what it leaves (`__pycache__`, a
    // cache) is residue, never an edit (it also gives the suite report's baseline).
    resume::freeze_ground_truth(env, &mut progress, &work, read).await?;
    let surface = progress.check_surface.clone().unwrap_or_default();
    let rename = rename_of(&input, &frozen);
    let start = progress.start_of("edit").unwrap_or_else(|| env.tree.fingerprint().ok());
    progress.start_task(InProgress { task_id: "edit".into(), start });
    progress::save(&env.run, &mut progress)?;
    let ctx =
        |round: u32| json!({"task_id": "edit", "iter_id": input.iter_id, "def_site": input.def_site, "round": round});
    let mut detail = json!({"def_site": input.def_site, "sites": null, "applied_changes": null,
                            "working_tree_dirty": null, "build": null});
    let first = env
        .ask(
            &mut task.spent,
            "editor",
            Access::WorkspaceWrite,
            prompts::editor(&input.description, &input.def_site, None, renaming(rename.as_ref())),
            prompts::editor_schema(),
            ctx(0),
            "edit",
        )
        .await;
    if head_moved(env, &mut report, &mut detail) {
        return end(env, report, task, detail);
    }
    let mut doc = match first.map(|d| answers::editor(&d)) {
        Ok(d) => d,
        Err(reason) => {
            bounce(&mut report, env.failed_kind(), "specify", reason);
            return end(env, report, task, detail);
        }
    };
    let mut claimed = doc["applied_changes"].as_bool().unwrap_or(false);
    if let Step::Stop = judge(&mut report, &doc) {
        return end(env, report, task, detail);
    }
    // Phase 1: the engine's own dirty check, before any build or suite run.
    let dirty = edited(env);
    if !dirty {
        detail["applied_changes"] = json!(claimed);
        detail["working_tree_dirty"] = json!(false);
        if claimed {
            report.concerns.push("the edit agent reported applied_changes but the working tree is clean".into());
        }
        bounce(&mut report, "no-op-edit", "specify", "no-op edit: the working tree is clean after the edit".into());
        report.route = None;
        return end(env, report, task, detail);
    }
    // Build, propagating mechanically while the build is red.
    if let Some(build_cmd) = env.settings.build_cmd.clone() {
        let mut round = 0u32;
        loop {
            let build = env.gate("build", &build_cmd).await;
            detail["build"] = json!(build);
            if build.green {
                break;
            }
            if round >= env.settings.max_repairs {
                bounce(
                    &mut report,
                    "hole",
                    "specify",
                    format!(
                        "the build is still red after {round} propagation round(s) ({}): a hole that needs a design choice",
                        build.end
                    ),
                );
                return end(env, report, task, detail);
            }
            round += 1;
            task.repairs += 1;
            let r = env
                .ask(
                    &mut task.spent,
                    "editor",
                    Access::WorkspaceWrite,
                    prompts::editor(
                        &input.description,
                        &input.def_site,
                        Some(&format!("{}\n{}", build.end, build.tail)),
                        renaming(rename.as_ref()),
                    ),
                    prompts::editor_schema(),
                    ctx(round),
                    "edit",
                )
                .await;
            if head_moved(env, &mut report, &mut detail) {
                return end(env, report, task, detail);
            }
            doc = match r.map(|d| answers::editor(&d)) {
                Ok(d) => d,
                Err(reason) => {
                    bounce(&mut report, env.failed_kind(), "specify", reason);
                    return end(env, report, task, detail);
                }
            };
            claimed |= doc["applied_changes"].as_bool().unwrap_or(false);
            if let Step::Stop = judge(&mut report, &doc) {
                return end(env, report, task, detail);
            }
        }
    }
    if let Some(why) = env.git_tampered() {
        report.status = crate::report::Status::Blocked;
        report.kind = Some(StopReason::GitTampered.into());
        report.reason = why.clone();
        report.blocked_detail = Some(json!({"kind": StopReason::GitTampered.as_str(), "reason": why}));
        return end(env, report, task, detail);
    }
    let checks_renamed = renamed_checks(env, &surface, rename.as_ref());
    detail["checks_renamed"] = json!(checks_renamed);
    if let Some(why) = env.check_tampered_except(&surface, &checks_renamed) {
        report.status = crate::report::Status::Blocked;
        report.kind = Some(StopReason::CheckTampered.into());
        report.reason = why.clone();
        report.blocked_detail = Some(json!({"kind": StopReason::CheckTampered.as_str(), "reason": why}));
        return end(env, report, task, detail);
    }
    let copy = env.copy();
    let suite = env.gate_on("suite", &env.settings.test_cmd, &copy).await;
    report.suite_green = Some(suite.green);
    report.suite = Some(suite.clone());
    if !suite.green && env.no_suite() {
        report.status = crate::report::Status::Blocked;
        report.kind = Some("no-suite".into());
        report.reason = suite.end.clone();
        return end(env, report, task, detail);
    }
    if !suite.green {
        bounce(
            &mut report,
            "regression",
            "debug",
            format!("the suite is red after the edit ({}): a regression", suite.end),
        );
        return end(env, report, task, detail);
    }
    if let Some(why) = env.suite_lost(&surface, &copy).await {
        report.status = crate::report::Status::Blocked;
        report.kind = Some(StopReason::CheckTampered.into());
        report.reason = why.clone();
        report.blocked_detail = Some(json!({"kind": StopReason::CheckTampered.as_str(), "reason": why}));
        return end(env, report, task, detail);
    }
    if let Some((why, d)) =
        env.frozen_verdict(&surface, std::slice::from_ref(&env.settings.test_cmd), &mut report.concerns).await
    {
        report.status = crate::report::Status::Blocked;
        report.kind = Some(StopReason::CheckTampered.into());
        report.reason = why;
        detail["frozen_rerun"] = d;
        return end(env, report, task, detail);
    }
    // Phase 3: the authoritative backstop, never told what the edit agent claimed.
    let dirty = edited(env);
    detail["working_tree_dirty"] = json!(dirty);
    detail["applied_changes"] = json!(claimed);
    detail["sites"] = doc["sites"].as_u64().map(|n| json!(n)).unwrap_or(Value::Null);
    if !dirty {
        bounce(
            &mut report,
            "no-op-edit",
            "specify",
            "no-op edit: build and suite green over a clean working tree".into(),
        );
        report.route = None;
        return end(env, report, task, detail);
    }
    if let Some(why) = def_site_untouched(env, &input.def_site_path) {
        detail["def_site_changed"] = json!(false);
        bounce(&mut report, "def-site-untouched", "specify", why);
        report.route = None;
        return end(env, report, task, detail);
    }
    if let Some(why) = rename_left(env, &input, &surface, rename.as_ref(), def_line_no, &mut detail) {
        bounce(&mut report, "rename-incomplete", "specify", why);
        report.route = None;
        return end(env, report, task, detail);
    }
    if !claimed {
        report.concerns.push("the edit agent reported no applied_changes but the working tree is dirty".into());
    }
    task.status = TaskStatus::Done;
    report.status = Status::Done;
    let claimed_sites = doc["sites"].as_u64().map(|n| n.to_string()).unwrap_or_else(|| "unknown".into());
    let in_checks = match checks_renamed.as_slice() {
        [] => String::new(),
        paths => format!(", and in the frozen checks {} by the engine's substitution", paths.join(", ")),
    };
    let sites = match &detail["rename"] {
        Value::Null => format!("{claimed_sites} use site(s) claimed"),
        r => format!(
            "`{}` renamed at {} use site(s) in {} file(s) read before and after{in_checks}; {claimed_sites} claimed",
            r["old"].as_str().unwrap_or_default(),
            r["use_sites_before"],
            r["files_before"]
        ),
    };
    report.reason = format!("edit applied at {} ({sites}), build clean, suite green", input.def_site);
    end(env, report, task, detail)
}

/// Why the edit is not the one asked for, when the definition site's file is the same as at HEAD
/// (the tree changed elsewhere only: a note, a use site, a byproduct).
fn def_site_untouched(env: &Env, def_site_path: &str) -> Option<String> {
    let changed = match env.tree.dirty_paths() {
        Ok(c) => c,
        Err(e) => return Some(format!("the definition site `{def_site_path}` could not be checked: {e}")),
    };
    if changed.iter().any(|p| p == def_site_path) {
        return None;
    }
    let b = env.byproducts();
    let elsewhere: Vec<&str> = changed.iter().filter(|p| !b.is_byproduct(p)).map(String::as_str).take(8).collect();
    Some(format!(
        "the edit did not change the definition site `{def_site_path}` (changed: {}): the edit is made at the definition site",
        elsewhere.join(", ")
    ))
}

/// Whether the tree differs from HEAD by more than what the engine's own suite run leaves
/// (hashed through a whole-tree snapshot, never read from the index).
fn edited(env: &Env) -> bool {
    let b = env.byproducts();
    env.tree.dirty_paths().map(|p| p.iter().any(|p| !b.is_byproduct(p))).unwrap_or(false)
}

fn end(env: &Env, mut report: EndReport, mut task: TaskOutcome, detail: Value) -> Result<EndReport, RunError> {
    env.git_failed()?;
    let budget = env.budget_refused();
    if budget.is_some() {
        task.status = TaskStatus::Blocked;
        task.kind = Some(StopReason::Budget.into());
        task.reason = Some("not finished: the budget is spent".into());
    }
    if task.status == TaskStatus::NotAttempted {
        task.status = TaskStatus::Blocked;
        task.kind = report.kind.clone();
        task.reason = Some(report.reason.clone());
    }
    report.tasks.push(task);
    if let Some(refused) = &budget {
        report.stop_for_budget(refused, &env.run.budget.stop_line());
    }
    if let Ok(lines) = env.tree.porcelain() {
        let lines = env.evidence(lines);
        report.files_touched = Some(lines.len());
        report.files = lines;
    }
    if report.status != Status::Done && budget.is_none() {
        report.blocked_detail = Some(detail.clone());
    }
    report.detail = Some(detail);
    fill_stats(env, &mut report, Counter::default());
    artifacts::finalize(&env.run, &mut report)?;
    // The last write of the run: the iteration's record finished, its report kept.
    resume::finish(env, &report)?;
    env.run.emit(Event::IterationEnd { status: json!(report.status), reason: json!(report.reason) });
    Ok(report)
}
