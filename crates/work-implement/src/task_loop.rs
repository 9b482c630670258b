//! The per-task loop: implementer (write) → spec reviewer → quality reviewer, each a separate
//! pinned dispatch; re-loops are code.
//!
//! - Spec `unclear` ⇒ spec-ambiguous BLOCKED at once.
//! - Quality findings carry `severity: important|minor`. An all-minor `changes_requested`
//!   after at least one quality repair ends the loop with the findings as concerns (the minor
//!   valve); important findings use the whole repair budget, then BLOCK.
//! - The repair dispatch gets the task text and the HOLD clause; `held` findings are recorded
//!   and surface as concerns (seed #10).
//! - Every reviewed diff state's fingerprint is kept in a set: a repair that lands on an
//!   already-seen state (no-op, or A-B-A) stops re-reviewing; with an important finding
//!   standing that is BLOCKED, otherwise a neutral concern.
//! - A quality repair that changes the diff goes back through the spec reviewer before the next
//!   quality review (same spec repair budget): a repair that drifts off the task cannot end
//!   DONE, and every diff state the quality reviewer approves was spec-compliant.
//! - HEAD must stay where the preflight found it: after every implementer dispatch and at the
//!   end of the task, a moved HEAD (an agent committed, reset or switched branches) is BLOCKED
//!   `head-moved`, naming the new commits — committed work would escape `git diff HEAD`, the
//!   fingerprints, the snapshot guard and end-verify.
//! - Reviewers prove they looked: a `compliant` or `approved` verdict names, in `files_read`,
//!   at least one file the task changed; one that does not is asked once more with the
//!   reason, then the task is BLOCKED `review-unproven` (never taken as clean).
//! - Reviewers see all of the task's change: a diff larger than one brief is reviewed in parts
//!   ([`crate::parts`]), each part by its own dispatch that must prove it looked at its own
//!   part; too large even in parts is BLOCKED `too-large-to-review`.
//! - Reviewers are read-only: one whose dispatch changed the tree is BLOCKED
//!   `reviewer-wrote-tree`, its answer dropped.
//! - `applied_changes` (OR-ed over the first dispatch and every repair) only ever feeds a
//!   neutral concern when it disagrees with the tree, never the outcome (seed #12).

use crate::answers;
use crate::env::Env;
use crate::parts::{self, Brief};
use crate::prompts;
use crate::report::{TaskOutcome, TaskStatus};
use crate::tree::TaskDiff;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use work_runtime::dispatch::Access;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

/// One task as the loop runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    /// The id.
    pub id: String,
    /// The title.
    pub title: String,
    /// The verbatim task text (heading and body).
    pub text: String,
    /// Whether the tester runs for it.
    pub e2e: bool,
}

/// True when a task asks for end-to-end testing: `E2E` as a word in its title, or a body line
/// `E2E: yes` (any case, optionally bold or listed).
pub fn is_e2e(title: &str, body: &str) -> bool {
    let word = |s: &str| s.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w.eq_ignore_ascii_case("e2e"));
    word(title)
        || body.lines().any(|l| {
            let l = l.trim().trim_start_matches(['-', '*', ' ']).replace("**", "");
            let lower = l.to_ascii_lowercase();
            lower.strip_prefix("e2e:").is_some_and(|v| matches!(v.trim(), "yes" | "true"))
        })
}

/// Why a task stopped early.
pub enum Stop {
    /// BLOCKED with a kind, a reason and the findings behind it.
    Blocked {
        /// The BLOCKED kind.
        kind: &'static str,
        /// Why.
        reason: String,
        /// The findings (or, for `head-moved`, the new commits).
        findings: Vec<Value>,
    },
    /// The implementer asked for context.
    NeedsContext(String),
}

fn blocked(kind: &'static str, reason: String) -> Stop {
    Stop::Blocked { kind, reason, findings: Vec::new() }
}

fn git_err(e: work_git::GitError) -> Stop {
    blocked("git", format!("read the tree: {e}"))
}

fn strings(v: &Value) -> Vec<String> {
    answers::strings(v)
}

fn finding_text(i: &Value) -> String {
    format!("[{}] {}", i["severity"].as_str().unwrap_or("?"), i["text"].as_str().unwrap_or(""))
}

fn held_text(h: &Value) -> String {
    match h {
        Value::String(s) => s.clone(),
        other => {
            let f = other["finding"].as_str().or(other["text"].as_str()).unwrap_or("");
            match other["reason"].as_str() {
                Some(r) if !r.is_empty() => format!("{f} — {r}"),
                _ => f.to_string(),
            }
        }
    }
}

/// Folds an implementer answer into the outcome; stops on BLOCKED / NEEDS_CONTEXT.
fn absorb(out: &mut TaskOutcome, doc: &Value, phase: &str) -> Result<(), Stop> {
    if let Some(b) = doc["applied_changes"].as_bool() {
        out.applied_changes_claimed = Some(out.applied_changes_claimed.unwrap_or(false) || b);
    }
    for c in strings(&doc["concerns"]) {
        out.concerns.push(format!("task {} ({phase}): {c}", out.id));
    }
    if let Some(h) = doc["held"].as_array() {
        out.held.extend(h.iter().cloned());
    }
    let reason = doc["reason"].as_str().or(doc["summary"].as_str()).unwrap_or("no reason given").to_string();
    match doc["status"].as_str() {
        Some("BLOCKED") => Err(blocked(
            "implementer-blocked",
            format!("task {}: the implementer reported BLOCKED ({phase}): {reason}", out.id),
        )),
        Some("NEEDS_CONTEXT") => {
            Err(Stop::NeedsContext(format!("task {}: the implementer needs context ({phase}): {reason}", out.id)))
        }
        _ => Ok(()),
    }
}

/// Runs one task through the loop. `start` is the tree's diff fingerprint when the task first
/// started, for a task redone after a crash (its change is measured from there, not from
/// what the killed attempt left); `None` measures from now.
pub async fn run_task(env: &Env, iter: &str, task: &TaskSpec, start: Option<Option<String>>) -> TaskOutcome {
    let mut out = TaskOutcome::new(&task.id, &task.title);
    out.e2e = task.e2e;
    env.run.emit(Event::TaskStart { task_id: json!(task.id), title: json!(task.title), done: None, total: None });
    env.run.progress(&format!("task {}: {}", task.id, task.title));
    let fp_start = start.unwrap_or_else(|| env.tree.fingerprint().ok());
    let mut result = drive(env, iter, task, &mut out, fp_start.as_deref()).await;
    // A reviewer (or anything else) may have committed too: the last word is HEAD's.
    if !matches!(&result, Err(Stop::Blocked { kind, .. }) if *kind == StopReason::HeadMoved.as_str())
        && let Err(stop) = head_guard(env, &task.id, "the task")
    {
        result = Err(stop);
    }
    let fp_end = env.tree.fingerprint().ok();
    out.tree_changed = fp_start.is_some() && fp_end.is_some() && fp_start != fp_end;
    match result {
        Ok(()) => out.status = TaskStatus::Done,
        Err(Stop::Blocked { kind, reason, findings }) => {
            out.status = TaskStatus::Blocked;
            out.kind = Some(kind.into());
            out.reason = Some(reason);
            out.findings = findings;
        }
        Err(Stop::NeedsContext(reason)) => {
            out.status = TaskStatus::NeedsContext;
            out.kind = Some("needs-context".into());
            out.reason = Some(reason);
        }
    }
    match out.applied_changes_claimed {
        Some(true) if !out.tree_changed => out.concerns.push(format!(
            "task {}: the implementer reported applied_changes but the diff state did not change",
            task.id
        )),
        Some(false) if out.tree_changed => out
            .concerns
            .push(format!("task {}: the implementer reported no applied_changes but the diff state changed", task.id)),
        _ => {}
    }
    for h in out.held.clone() {
        out.concerns.push(format!(
            "task {}: quality finding held to the plan (verify by hand): {}",
            task.id,
            held_text(&h)
        ));
    }
    env.run.emit(Event::TaskEnd {
        task_id: json!(task.id),
        status: json!(out.status),
        reason: Some(json!(out.reason)),
        dispatches: Some(json!(out.spent.dispatches)),
        repairs: Some(json!(out.repairs)),
    });
    out
}

/// BLOCKED `head-moved` when HEAD moved in a way no honest commit moves it (reset below the
/// run's base, the base rewritten, another branch checked out; see `work_git::head`). An
/// implementer's commits on top of the base are its change: the reviewers, fingerprints,
/// snapshot guard and end-verify measure from the base, so they see it. The finding names
/// the breach.
pub fn head_guard(env: &Env, task_id: &str, during: &str) -> Result<(), Stop> {
    match env.head_moved() {
        None if env.git_failed().is_err() => Err(blocked("git", format!("task {task_id}: git failed judging HEAD"))),
        None => Ok(()),
        Some(m) => Err(Stop::Blocked {
            kind: StopReason::HeadMoved.as_str(),
            reason: format!("task {task_id}: during {during}, {}", m.describe()),
            findings: vec![Value::String(m.breach.as_str().into())],
        }),
    }
}

/// What the task's change touches outside what its text plans (`work_git::scope::unplanned`),
/// kept in the outcome and named in the journal (`scope.unplanned`); with `--scope strict`,
/// BLOCKED `out-of-scope` before any reviewer reads the change.
fn out_of_scope(env: &Env, task: &TaskSpec, out: &mut TaskOutcome, names: &[String]) -> Result<Vec<String>, Stop> {
    let outside = work_git::scope::unplanned(names, &task.text);
    if !outside.is_empty() && outside != out.out_of_scope {
        env.run.emit(Event::ScopeUnplanned { task_id: json!(task.id), paths: json!(outside) });
    }
    out.out_of_scope = outside.clone();
    if env.settings.scope_strict && !outside.is_empty() {
        return Err(Stop::Blocked {
            kind: "out-of-scope",
            reason: format!(
                "task {}: the change touches what the task's text does not plan ({}); with --scope strict a task changes only the files its text names, the directories it names with a trailing `/`, its `Touches:` globs and tests",
                task.id,
                outside.join(", ")
            ),
            findings: outside.iter().cloned().map(Value::String).collect(),
        });
    }
    Ok(outside)
}

/// A reviewer's context with the task's out-of-scope paths (`out_of_scope`), when it has any.
fn scoped(mut ctx: Value, outside: &[String]) -> Value {
    if let (false, Value::Object(o)) = (outside.is_empty(), &mut ctx) {
        o.insert("out_of_scope".into(), json!(outside));
    }
    ctx
}

/// A reviewer's prompt with the out-of-scope paths named, when there are any.
fn scoped_prompt(prompt: String, outside: &[String]) -> String {
    if outside.is_empty() {
        return prompt;
    }
    format!(
        "{prompt}\n\nOut of scope: the change touches these paths, which the task's text does not plan (not named, no `Touches:` glob, not tests): {}. Judge whether each belongs to the task; an unrelated change is an issue.",
        outside.join(", ")
    )
}

fn context(task: &TaskSpec, iter: &str, phase: &str, round: u32) -> Value {
    json!({"task_id": task.id, "iter_id": iter, "phase": phase, "round": round, "task_title": task.title})
}

/// One implementer dispatch (write access): the answer folded, HEAD checked, the answer
/// absorbed (BLOCKED / NEEDS_CONTEXT stop).
async fn implementer_turn(
    env: &Env,
    iter: &str,
    task: &TaskSpec,
    out: &mut TaskOutcome,
    prompt: String,
    phase: &str,
    round: u32,
) -> Result<Value, Stop> {
    let doc = env
        .ask(
            &mut out.spent,
            "implementer",
            Access::WorkspaceWrite,
            prompt,
            prompts::implementer_schema(),
            context(task, iter, phase, round),
            &task.id,
        )
        .await
        .map_err(|r| blocked(env.failed_kind(), format!("task {}: {r}", task.id)))?;
    let doc = answers::implementer(&doc);
    head_guard(env, &task.id, &format!("the implementer's {phase} dispatch"))?;
    if let Some(why) = env.git_tampered() {
        return Err(blocked(StopReason::GitTampered.as_str(), format!("task {} ({phase}): {why}", task.id)));
    }
    if let Some(why) = nested_repositories(env, &task.text) {
        return Err(blocked(work_git::nested::NESTED, format!("task {} ({phase}): {why}", task.id)));
    }
    // A git that failed above judged nothing: the run ends with its error (`Env::git_failed`).
    if env.git_failed().is_err() {
        return Err(blocked("git", format!("task {}: git failed judging the implementer's turn", task.id)));
    }
    absorb(out, &doc, phase)?;
    Ok(doc)
}

/// The spec-compliance state of one task: the non-compliant diff states seen and the spec
/// repairs spent (one budget for the whole task, re-checks after quality repairs included).
#[derive(Default)]
struct SpecState {
    seen: BTreeSet<String>,
    repairs: u32,
    summary: String,
}

/// The spec gate: review the current diff; `non_compliant` ⇒ repair (within the task's spec
/// repair budget) and review again; `unclear` ⇒ spec-ambiguous BLOCKED at once.
async fn spec_gate(
    env: &Env,
    iter: &str,
    task: &TaskSpec,
    out: &mut TaskOutcome,
    st: &mut SpecState,
    when: &str,
    start: Option<&str>,
) -> Result<(), Stop> {
    let max = env.settings.max_repairs;
    loop {
        let (d, briefs) = review_diff(env, task, start)?;
        let outside = out_of_scope(env, task, out, &d.names)?;
        let fp = d.tree.clone();
        out.reviews += 1;
        let make = |diff: &str| Review {
            role: "spec-reviewer",
            prompt: scoped_prompt(prompts::spec_review(&task.id, &task.text, &st.summary, diff), &outside),
            schema: prompts::spec_schema(),
            context: scoped(context(task, iter, "spec-review", st.repairs), &outside),
            fold: answers::spec,
            clean: |r| r["status"].as_str() == Some("compliant"),
        };
        let r = reviewed(env, out, task, &briefs, make, parts::merge_spec).await?;
        let issues = strings(&r["issues"]);
        match r["status"].as_str() {
            Some("compliant") => return Ok(()),
            Some("unclear") => {
                let what = r["ambiguity"].as_str().map(str::to_string).unwrap_or_else(|| issues.join("; "));
                return Err(Stop::Blocked {
                    kind: "spec-ambiguous",
                    reason: format!(
                        "task {}: spec-ambiguous — the task text is contradicted or unclear{when}: {what}",
                        task.id
                    ),
                    findings: issues.into_iter().map(Value::String).collect(),
                });
            }
            _ => {
                st.seen.insert(fp);
                if st.repairs >= max {
                    return Err(Stop::Blocked {
                        kind: "review-loop-exhausted",
                        reason: format!(
                            "task {}: still non-compliant{when} after {} spec repair(s): {}",
                            task.id,
                            st.repairs,
                            issues.join("; ")
                        ),
                        findings: issues.into_iter().map(Value::String).collect(),
                    });
                }
                let round = st.repairs + 1;
                let doc = implementer_turn(
                    env,
                    iter,
                    task,
                    out,
                    prompts::spec_repair(
                        &task.id,
                        &task.text,
                        &issues,
                        &parts::repair_diff(&d, &issues, &briefs, prompts::DIFF_CAP),
                    ),
                    "spec-repair",
                    round,
                )
                .await?;
                st.repairs = round;
                out.repairs += 1;
                if let Some(s) = doc["summary"].as_str() {
                    st.summary = s.to_string();
                }
                let fp2 = env.tree.fingerprint().map_err(git_err)?;
                if st.seen.contains(&fp2) {
                    return Err(Stop::Blocked {
                        kind: "spec-unresolved",
                        reason: format!(
                            "task {}: the spec repair{when} left the diff in an already-reviewed state; non-compliance stands: {}",
                            task.id,
                            issues.join("; ")
                        ),
                        findings: issues.into_iter().map(Value::String).collect(),
                    });
                }
            }
        }
    }
}

/// One reviewer dispatch: who, what it is asked, how its answer is folded and read as clean.
struct Review {
    role: &'static str,
    prompt: String,
    schema: Value,
    context: Value,
    fold: fn(&Value) -> Value,
    clean: fn(&Value) -> bool,
}

/// A reviewer's folded answer once it proves the reviewer looked: a clean verdict must name, in
/// `files_read`, at least one of `changed` (the task's own changed paths; see
/// [`work_git::looked::check_files_read`]). A clean verdict that does not is refused: the
/// reviewer is asked once more with the reason, and a second such answer is not accepted —
/// the task is BLOCKED `review-unproven` (an unproven clean verdict is never taken as clean).
async fn proven_review(
    env: &Env,
    out: &mut TaskOutcome,
    review: Review,
    task: &TaskSpec,
    changed: &[String],
) -> Result<Value, Stop> {
    let Review { role, prompt, schema, context, fold, clean } = review;
    let mut prompt = prompt;
    for attempt in 1..=2u32 {
        let r = env
            .ask(&mut out.spent, role, Access::ReadOnly, prompt.clone(), schema.clone(), context.clone(), &task.id)
            .await
            .map_err(|r| blocked(env.failed_kind(), format!("task {}: {r}", task.id)))?;
        let r = fold(&r);
        if !clean(&r) {
            return Ok(r);
        }
        let Err(why) = work_git::looked::check_files_read(&answers::strings(&r["files_read"]), changed) else {
            return Ok(r);
        };
        env.run.emit(Event::ReviewUnproven {
            task_id: Some(json!(task.id)),
            reviewer: json!(role),
            why: json!(why),
            attempt: json!(attempt),
        });
        if attempt == 2 {
            return Err(Stop::Blocked {
                kind: "review-unproven",
                reason: format!(
                    "task {}: the {role}'s clean verdict was refused twice: {why}; a reviewer that did not read the change does not approve it",
                    task.id
                ),
                findings: vec![json!({"reviewer": role, "files_read": r["files_read"], "changed": changed})],
            });
        }
        prompt = format!("{prompt}\n\nYOUR PREVIOUS ANSWER WAS REFUSED: {why}. Read the change, then answer again.");
    }
    Err(blocked("review-unproven", format!("task {}: the {role} gave no accepted answer", task.id)))
}

/// The task's own diff for a reviewer, with the tree it shows, and the briefs it is reviewed
/// in: whole when it fits a reviewer's brief, else in parts ([`parts::briefs`]); a diff is
/// never cut for a reviewer (what is cut is not reviewed). BLOCKED `too-large-to-review` when
/// it cannot be reviewed even in parts.
fn review_diff(env: &Env, task: &TaskSpec, start: Option<&str>) -> Result<(TaskDiff, Vec<Brief>), Stop> {
    let d = env.tree.task_diff(start).map_err(git_err)?;
    match parts::briefs(&d, prompts::DIFF_CAP, parts::Reader::Reviewer) {
        Ok(briefs) => Ok((d, briefs)),
        Err(why) => Err(Stop::Blocked {
            kind: "too-large-to-review",
            reason: format!(
                "task {}: the task's diff is too large to review ({} bytes; a reviewer reads at most {} per brief, in at most {} parts): {why}: {}; split the task or leave generated and bulk files out of the tree",
                task.id,
                d.text.len(),
                prompts::DIFF_CAP,
                parts::MAX_PARTS,
                d.paths.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
            ),
            findings: d.paths.iter().cloned().map(Value::String).collect(),
        }),
    }
}

/// One review of the task's diff: a proven reviewer dispatch per brief (the whole diff, or
/// each part of it with `context.review_part`), the verdicts combined by `merge` when there
/// are parts — one non-clean part makes the verdict non-clean, with every part's findings.
/// A reviewer is read-only (`crate::read_only`), and one that changed the tree (code nobody
/// reviews) is BLOCKED `reviewer-wrote-tree`, its answer dropped.
async fn reviewed(
    env: &Env,
    out: &mut TaskOutcome,
    task: &TaskSpec,
    briefs: &[Brief],
    make: impl Fn(&str) -> Review,
    merge: fn(&[Value]) -> Value,
) -> Result<Value, Stop> {
    let mut verdicts = Vec::new();
    for b in briefs {
        let mut review = make(&b.diff);
        let role = review.role;
        if let (Some((i, n)), Value::Object(o)) = (b.part, &mut review.context) {
            o.insert("review_part".into(), json!({"index": i, "count": n}));
            env.run.progress(&format!("task {}: {} reads part {i} of {n} of the diff", task.id, review.role));
            env.run.emit(Event::ReviewPart {
                task_id: json!(task.id),
                reviewer: json!(review.role),
                index: json!(i),
                count: json!(n),
            });
        }
        let guard = crate::read_only::Guard::take(env, &[env.run.run_dir()]);
        let verdict = proven_review(env, out, review, task, &b.names).await?;
        read_only_kept(env, task, role, guard.writes(env))?;
        verdicts.push(verdict);
    }
    match verdicts.len() {
        1 => Ok(verdicts.remove(0)),
        _ => Ok(merge(&verdicts)),
    }
}

/// BLOCKED `reviewer-wrote-tree` when a read-only reviewer's dispatch wrote `paths`, naming them.
fn read_only_kept(env: &Env, task: &TaskSpec, role: &str, paths: Vec<String>) -> Result<(), Stop> {
    env.git_failed().map_err(git_err)?;
    if paths.is_empty() {
        return Ok(());
    }
    env.run.emit(Event::ReviewWroteTree { task_id: json!(task.id), reviewer: json!(role), paths: json!(paths) });
    Err(Stop::Blocked {
        kind: "reviewer-wrote-tree",
        reason: format!(
            "task {}: the {role} changed the tree ({}); a reviewer is read-only: its answer is dropped, and a change nobody reviewed is not taken — undo it and run again",
            task.id,
            paths.join(", ")
        ),
        findings: paths.into_iter().map(Value::String).collect(),
    })
}

async fn drive(env: &Env, iter: &str, task: &TaskSpec, out: &mut TaskOutcome, start: Option<&str>) -> Result<(), Stop> {
    let max = env.settings.max_repairs;
    let doc = implementer_turn(
        env,
        iter,
        task,
        out,
        prompts::implementer(iter, &task.id, &task.title, &task.text),
        "implement",
        0,
    )
    .await?;
    let mut spec = SpecState { summary: doc["summary"].as_str().unwrap_or("").to_string(), ..SpecState::default() };

    // Spec compliance.
    spec_gate(env, iter, task, out, &mut spec, "", start).await?;

    // Quality. Every state the quality reviewer sees has passed the spec gate: a quality
    // repair that changes the diff goes back through it first (a repair must not drift off
    // the task), within the same spec repair budget.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut repairs = 0u32;
    loop {
        let (d, briefs) = review_diff(env, task, start)?;
        let outside = out_of_scope(env, task, out, &d.names)?;
        seen.insert(d.tree.clone());
        out.fingerprints = seen.len();
        out.reviews += 1;
        let make = |diff: &str| Review {
            role: "quality-reviewer",
            prompt: scoped_prompt(prompts::quality_review(&task.id, diff), &outside),
            schema: prompts::quality_schema(),
            context: scoped(context(task, iter, "quality-review", repairs), &outside),
            fold: answers::quality,
            clean: |r| r["verdict"].as_str() == Some("approved"),
        };
        let r = reviewed(env, out, task, &briefs, make, parts::merge_quality).await?;
        let issues: Vec<Value> = r["issues"].as_array().cloned().unwrap_or_default();
        if r["verdict"].as_str() == Some("approved") {
            for i in &issues {
                out.concerns.push(format!("task {}: quality note on approval: {}", task.id, finding_text(i)));
            }
            return Ok(());
        }
        let important: Vec<&Value> = issues.iter().filter(|i| i["severity"].as_str() == Some("important")).collect();
        let listed = issues.iter().map(finding_text).collect::<Vec<_>>().join("; ");
        if important.is_empty() && repairs >= 1 {
            for i in &issues {
                out.concerns.push(format!(
                    "task {}: minor quality finding (valve after {repairs} repair(s)): {}",
                    task.id,
                    finding_text(i)
                ));
            }
            return Ok(());
        }
        if repairs >= max {
            if important.is_empty() {
                for i in &issues {
                    out.concerns.push(format!(
                        "task {}: unresolved minor quality finding: {}",
                        task.id,
                        finding_text(i)
                    ));
                }
                return Ok(());
            }
            return Err(Stop::Blocked {
                kind: "review-loop-exhausted",
                reason: format!("task {}: important quality finding(s) after {repairs} repair(s): {listed}", task.id),
                findings: issues,
            });
        }
        let doc = implementer_turn(
            env,
            iter,
            task,
            out,
            prompts::quality_repair(
                &task.id,
                &task.text,
                &issues,
                &parts::repair_diff(
                    &d,
                    &issues.iter().map(finding_text).collect::<Vec<_>>(),
                    &briefs,
                    prompts::DIFF_CAP,
                ),
            ),
            "quality-repair",
            repairs + 1,
        )
        .await?;
        repairs += 1;
        out.repairs += 1;
        let fp2 = env.tree.fingerprint().map_err(git_err)?;
        if seen.contains(&fp2) {
            if !important.is_empty() {
                let names = important.iter().map(|i| finding_text(i)).collect::<Vec<_>>().join("; ");
                return Err(Stop::Blocked {
                    kind: "important-on-unchanged-diff",
                    reason: format!(
                        "task {}: important quality finding(s) stand over an unchanged diff state (the repair was a no-op or cycled back): {names}",
                        task.id
                    ),
                    findings: issues,
                });
            }
            let what = if listed.is_empty() { "(no findings reported)".to_string() } else { listed };
            out.concerns.push(format!(
                "task {}: quality changes requested over an already-seen diff state (no-op or cycled repair; adjudicate before committing): {what}",
                task.id
            ));
            return Ok(());
        }
        if let Some(s) = doc["summary"].as_str() {
            spec.summary = s.to_string();
        }
        spec_gate(env, iter, task, out, &mut spec, &format!(" after quality repair {repairs}"), start).await?;
    }
}

/// A changed path that is a git repository of its own (a new nested repository, or a submodule
/// whose work tree changed) and that the task's text does not name: its files are one gitlink
/// in every snapshot, so no reviewer or tester would read them. Fails closed.
fn nested_repositories(env: &Env, text: &str) -> Option<String> {
    let none: [&str; 0] = [];
    let against = match env.base_head.as_deref() {
        Some(b) => work_git::Base::Commit(b),
        None => work_git::Base::Empty,
    };
    let changed: Vec<String> = match env.tree.git().tree_state(against, &none) {
        Ok(st) => st.paths.into_keys().collect(),
        Err(e) => {
            // No verdict about the implementer: the run ends with git's error.
            env.fail_git(e);
            return None;
        }
    };
    let nested = work_git::nested::unnamed(&env.run.root, &changed, text);
    (!nested.is_empty()).then(|| work_git::nested::message(&nested, "the task", "run again"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2e_marks() {
        assert!(is_e2e("E2E: login flow", ""));
        assert!(is_e2e("Login (e2e)", ""));
        assert!(is_e2e("Login", "Some text\n**E2E:** yes\n"));
        assert!(!is_e2e("Login", "E2E: no"));
        assert!(!is_e2e("Add e2etools dep", ""));
    }
}
