//! Briefs and answer schemas of every role. The briefs carry the pipeline's rules that the agents
//! must know (no file-level discard, the HOLD clause, the unclear route, honest severity); the
//! engine enforces every rule it can in code regardless.

use crate::answers::{self, word_enum};
use serde_json::{Value, json};

/// The most diff text one brief holds (reviewers, the E2E tester, a repair brief): a larger
/// diff is never cut — it is read in parts ([`crate::parts::briefs`]), or a repair brief shows
/// the files its findings name ([`crate::parts::repair_diff`]).
pub const DIFF_CAP: usize = 120_000;

/// Cuts `text` to at most `cap` bytes on a character boundary, saying so.
pub fn cap(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… cut at {cap} bytes of {}]", &text[..end], text.len())
}

/// A task's change as its reviewers read it: what earlier tasks changed (summarised, already
/// reviewed), then the task's own diff, whole (the engine refuses one too large to review).
pub fn render_task_diff(d: &crate::tree::TaskDiff) -> String {
    let mut out = String::new();
    if !d.earlier.is_empty() {
        out.push_str("EARLIER TASKS OF THIS RUN CHANGED (already reviewed; not this task's change):\n");
        for p in &d.earlier {
            out.push_str(&format!("- {p}\n"));
        }
        out.push('\n');
    }
    if d.paths.is_empty() {
        out.push_str("THIS TASK CHANGED NOTHING.\n");
    } else {
        out.push_str(&format!("THIS TASK'S CHANGE ({}):\n", d.paths.join(", ")));
        out.push_str(&d.text);
    }
    out
}

const NO_DISCARD: &str = "Never discard work with `git checkout -- <file>`, `git restore <file>`, `git stash`, \
`git reset` or `git clean`: other tasks' uncommitted work shares this tree. Over-reach is undone by editing back; a \
broken intermediate state is repaired forward or reported BLOCKED. You may commit your own work on the current \
branch; never amend, reset, rebase or switch branches.";

const LOOKED: &str = "Name every file you read in `files_read` (repository paths): a compliant or approved verdict \
that names none of the files this task changed is refused — you are asked once more, then the task is BLOCKED.";

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn text() -> Value {
    json!({"type": ["string", "null"]})
}

/// A closed object schema: `required` and `properties`, no other field.
fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": required, "properties": properties})
}

/// The implementer's answer: only `status` is required (read by [`crate::answers::implementer`]).
pub fn implementer_schema() -> Value {
    let held = object(&["finding", "reason"], json!({"finding": {"type": "string"}, "reason": {"type": "string"}}));
    object(
        &["status"],
        json!({
            "status": word_enum(&answers::IMPLEMENTER_STATUS),
            "summary": text(),
            "applied_changes": {"type": "boolean", "description": "whether you changed the tree"},
            "concerns": strings(),
            "held": {"type": "array", "items": held},
            "reason": text()
        }),
    )
}

/// `files_read`: the files a reviewer read (a clean verdict must name one the task changed).
fn files_read() -> Value {
    json!({"type": "array", "items": {"type": "string"},
           "description": "the files you read; a compliant/approved verdict must name at least one file of the task's change"})
}

/// The spec reviewer's answer: `status` is required (read by [`crate::answers::spec`]); a
/// `compliant` one names the files it read (`files_read`).
pub fn spec_schema() -> Value {
    object(
        &["status"],
        json!({"status": word_enum(&answers::SPEC_STATUS), "issues": strings(), "ambiguity": text(),
               "files_read": files_read()}),
    )
}

/// The quality reviewer's answer (findings are `{severity, text}`): `verdict` is required;
/// `issues` defaults to none (see [`crate::answers::quality`]); an `approved` one names the
/// files it read (`files_read`).
pub fn quality_schema() -> Value {
    let issue =
        object(&["severity", "text"], json!({"severity": word_enum(&answers::SEVERITY), "text": {"type": "string"}}));
    object(
        &["verdict"],
        json!({"verdict": word_enum(&answers::QUALITY_VERDICT), "issues": {"type": "array", "items": issue},
               "files_read": files_read()}),
    )
}

/// The tester's answer (read by [`crate::answers::tester`]).
pub fn tester_schema() -> Value {
    object(
        &["status"],
        json!({
            "status": word_enum(&answers::TESTER_STATUS),
            "fixtures": {"type": "integer", "minimum": 0},
            "summary": text()
        }),
    )
}

/// The plan index's answer.
pub fn index_schema() -> Value {
    let task = object(
        &["id", "title"],
        json!({"id": {"type": "string"}, "title": {"type": "string"}, "est_bytes": {"type": "integer", "minimum": 0}}),
    );
    object(
        &["total_tasks", "tasks"],
        json!({"total_tasks": {"type": "integer", "minimum": 0}, "tasks": {"type": "array", "items": task}}),
    )
}

/// The batched plan extract's answer.
pub fn extract_all_schema() -> Value {
    let task = object(&["id", "text"], json!({"id": {"type": "string"}, "text": {"type": "string"}}));
    object(&["tasks"], json!({"tasks": {"type": "array", "items": task}}))
}

/// One task's plan extract answer.
pub fn extract_one_schema() -> Value {
    object(&["text"], json!({"id": {"type": "string"}, "text": {"type": "string"}}))
}

/// The edit agent's answer (read by [`crate::answers::editor`]).
pub fn editor_schema() -> Value {
    let mut hole =
        object(&["route", "detail"], json!({"route": word_enum(&answers::HOLE_ROUTE), "detail": {"type": "string"}}));
    hole["type"] = json!(["object", "null"]);
    object(
        &["status"],
        json!({
            "status": word_enum(&answers::EDITOR_STATUS),
            "applied_changes": {"type": "boolean"},
            "sites": {"type": "integer", "minimum": 0},
            "hole": hole,
            "summary": text(),
            "reason": text()
        }),
    )
}

/// The implementer's first brief for a task.
pub fn implementer(iter: &str, id: &str, title: &str, text: &str) -> String {
    format!(
        "You are the IMPLEMENTER of task {id} (\"{title}\") in iteration {iter}.\n\n\
TASK TEXT (verbatim from the plan):\n-----\n{text}\n-----\n\n\
Make exactly this change in the working tree, leaving it unstaged. {NO_DISCARD}\n\
If the task text contradicts verified reality or itself, implement what you can and document the deviation in \
`concerns`; do not invent requirements.\n\n\
Answer with one JSON object: {{\"status\": \"DONE\"|\"DONE_WITH_CONCERNS\"|\"BLOCKED\"|\"NEEDS_CONTEXT\", \
\"summary\": \"…\", \"applied_changes\": true|false, \"concerns\": [\"…\"], \"reason\": \"… (when BLOCKED or NEEDS_CONTEXT)\"}}.\n\
The engine checks the tree and runs the suite itself: your report never decides the outcome."
    )
}

/// A repair brief after a spec review; `diff` is what [`crate::parts::repair_diff`] shows.
pub fn spec_repair(id: &str, text: &str, issues: &[String], diff: &str) -> String {
    format!(
        "You are the IMPLEMENTER repairing task {id} after a SPEC-COMPLIANCE review.\n\n\
TASK TEXT (verbatim):\n-----\n{text}\n-----\n\nTHE REVIEWER FOUND:\n{}\n\nTHE CURRENT DIFF:\n{diff}\n\n\
Fix the non-compliance. {NO_DISCARD}\n\
Answer with one JSON object: {{\"status\": …, \"summary\": \"…\", \"applied_changes\": true|false, \"concerns\": [], \"reason\": \"…\"}}.",
        issues.iter().map(|i| format!("- {i}")).collect::<Vec<_>>().join("\n"),
    )
}

/// A repair brief after a quality review: carries the task text and the HOLD clause; `diff` is
/// what [`crate::parts::repair_diff`] shows.
pub fn quality_repair(id: &str, text: &str, issues: &[Value], diff: &str) -> String {
    let list: Vec<String> = issues
        .iter()
        .map(|i| format!("- [{}] {}", i["severity"].as_str().unwrap_or("?"), i["text"].as_str().unwrap_or("")))
        .collect();
    format!(
        "You are the IMPLEMENTER repairing task {id} after a QUALITY review.\n\n\
TASK TEXT (verbatim — the plan you implement):\n-----\n{text}\n-----\n\n\
THE QUALITY REVIEWER FOUND (it does not see the task text):\n{}\n\nTHE CURRENT DIFF:\n{diff}\n\n\
HOLD CLAUSE: when a finding's only remedy contradicts a name, signature or behaviour the task text prescribes, \
and keeping the plan leaves build and tests green, KEEP the plan: do not change the code for it and record it in \
`held` as {{\"finding\": \"…\", \"reason\": \"…\"}}. When you judge a finding correctness-breaking and it cannot \
be fixed within the plan, answer status BLOCKED with the reason — never hold it silently. Fix every other finding.\n\
{NO_DISCARD}\n\
Answer with one JSON object: {{\"status\": …, \"summary\": \"…\", \"applied_changes\": true|false, \"held\": [], \
\"concerns\": [], \"reason\": \"…\"}}.",
        list.join("\n"),
    )
}

/// The spec reviewer's brief (the unclear route for contradicted task text).
pub fn spec_review(id: &str, text: &str, implementer_summary: &str, diff: &str) -> String {
    format!(
        "You are the SPEC-COMPLIANCE REVIEWER of task {id}. Read-only.\n\n\
TASK TEXT (verbatim):\n-----\n{text}\n-----\n\nTHE IMPLEMENTER SAYS: {implementer_summary}\n\n\
THE DIFF (the task's own change, untracked files included):\n{diff}\n\n\
Check that the diff does what the task text requires — no more, no less. Do not trust the implementer's summary: \
read the diff.\n\
TASK TEXT VS REALITY: when a requirement's literal is contradicted by verified reality, or by another requirement \
of the same task, the plan is defective: answer `unclear` and name the contradiction in `ambiguity`. unclear \
outranks non_compliant for a verified contradiction. Verify a documented deviation yourself; an unforced deviation \
stays non_compliant.\n\
{LOOKED}\n\
Answer with one JSON object: {{\"status\": \"compliant\"|\"non_compliant\"|\"unclear\", \"issues\": [\"…\"], \
\"ambiguity\": \"…\", \"files_read\": [\"…\"]}}."
    )
}

/// The quality reviewer's brief (blind to the task text by design).
pub fn quality_review(id: &str, diff: &str) -> String {
    format!(
        "You are the QUALITY REVIEWER of task {id}. Read-only. You review the code, not the plan.\n\n\
THE DIFF (the task's own change, untracked files included):\n{diff}\n\n\
Look for real bugs, missing error handling, unclear names, dead code, missing tests. Classify every finding \
honestly: `important` when it is a defect that must not ship; `minor` for polish (naming, comments, style). \
{LOOKED}\n\
Answer with one JSON object: {{\"verdict\": \"approved\"|\"changes_requested\", \"issues\": [{{\"severity\": \
\"important\"|\"minor\", \"text\": \"…\"}}], \"files_read\": [\"…\"]}}."
    )
}

/// The tester's brief for an E2E task: read-only in the tree, fixtures under `fixtures_dir`;
/// `diff` is the run's change, or one part of it ([`crate::parts::briefs`]).
pub fn tester(id: &str, text: &str, diff: &str, fixtures_dir: &str) -> String {
    format!(
        "You are the TESTER of E2E task {id}. Exercise the change end to end with fixtures. You are READ-ONLY in the \
repository: write every fixture, scratch file and output under `{fixtures_dir}` (outside the tree) and nowhere \
else; the engine compares the tree before and after you and a tester that changed it is BLOCKED. Never edit a \
test, the code or a check. Answer FAILED when the change does not work end to end: the engine blocks on it.\n\n\
TASK TEXT:\n-----\n{text}\n-----\n\n{diff}\n\n\
Answer with one JSON object: {{\"status\": \"DONE\"|\"FAILED\"|\"BLOCKED\", \"fixtures\": N, \"summary\": \"…\"}}."
    )
}

/// The plan index brief.
pub fn plan_index(plan_path: &str, plan: &str) -> String {
    format!(
        "You are the PLAN INDEXER. Read-only. Enumerate every task of the plan at `{plan_path}` (below): its id and \
a one-line title only, plus `est_bytes`, the byte length of its verbatim block. Count `total_tasks` over the whole \
plan independently of the list you emit.\n\nPLAN:\n-----\n{plan}\n-----\n\n\
Answer with one JSON object: {{\"total_tasks\": N, \"tasks\": [{{\"id\": \"…\", \"title\": \"…\", \"est_bytes\": N}}]}}."
    )
}

/// A plan-index or plan-extract brief asked again after the engine refused the answers.
pub fn after_refusal(brief: String, refused: Option<&str>) -> String {
    match refused {
        None => brief,
        Some(why) => format!(
            "{brief}\n\nYOUR PREVIOUS ANSWER WAS REFUSED BY THE ENGINE: {why}.\nEvery step of the plan belongs to some task, and \
a task's text is copied verbatim from the plan."
        ),
    }
}

/// The batched extract brief.
pub fn plan_extract_all(plan_path: &str, plan: &str, ids: &[String]) -> String {
    format!(
        "You are the PLAN EXTRACTOR. Read-only. Copy the VERBATIM block of each of these tasks of the plan at \
`{plan_path}`: {}.\n\nPLAN:\n-----\n{plan}\n-----\n\n\
Answer with one JSON object: {{\"tasks\": [{{\"id\": \"…\", \"text\": \"…verbatim…\"}}]}} with every id listed.",
        ids.join(", ")
    )
}

/// One task's extract brief.
pub fn plan_extract_one(plan_path: &str, plan: &str, id: &str) -> String {
    format!(
        "You are the PLAN EXTRACTOR. Read-only. Copy the VERBATIM block of task {id} of the plan at `{plan_path}`.\n\n\
PLAN:\n-----\n{plan}\n-----\n\nAnswer with one JSON object: {{\"id\": \"{id}\", \"text\": \"…verbatim…\"}}."
    )
}

/// The mini-mode implementer brief.
pub fn mini(iter: &str, red_test: &str, cause: &str) -> String {
    format!(
        "You are the IMPLEMENTER of a debug fix (iteration {iter}). The RED test `{red_test}` fails; the debugger \
found the cause:\n-----\n{cause}\n-----\n\nFix the cause so that the RED test passes without breaking the suite. Do \
not edit the RED test. {NO_DISCARD}\n\
Answer with one JSON object: {{\"status\": \"DONE\"|\"DONE_WITH_CONCERNS\"|\"BLOCKED\"|\"NEEDS_CONTEXT\", \"summary\": \
\"…\", \"applied_changes\": true|false, \"concerns\": [], \"reason\": \"…\"}}.\n\
The engine re-runs the RED test and the suite itself."
    )
}

/// The edit agent's brief.
pub fn editor(description: &str, def_site: &str, build_error: Option<&str>, rename: Option<(&str, &str)>) -> String {
    let build = match build_error {
        Some(e) => format!(
            "\n\nTHE BUILD FAILS AFTER YOUR EDIT:\n{}\nPropagate the edit mechanically to the use sites. If fixing it \
needs a design choice, answer HOLE with route `specify`; if it needs new test-specifiable behaviour, HOLE with \
route `tdd`.",
            cap(e, 20_000)
        ),
        None => String::new(),
    };
    let checks = match rename {
        Some((old, new)) => format!(
            "\nThe tests and check scripts are frozen: one may change only by this rename — every `{old}` standing as a \
whole word in it (code, strings and comments alike) replaced by `{new}`, nothing else; any other change to it stops \
the edit BLOCKED check-tampered."
        ),
        None => String::new(),
    };
    format!(
        "You are the COMPILER-DRIVEN EDITOR. Make this edit at the definition site `{def_site}`:\n-----\n{description}\n\
-----\nthen propagate it mechanically to every use site the compiler finds. A behaviour-preserving edit may touch \
only the definition site (`sites`: 0).{build}{checks}\n{NO_DISCARD}\n\
Answer with one JSON object: {{\"status\": \"DONE\"|\"HOLE\"|\"BLOCKED\", \"applied_changes\": true|false, \"sites\": \
N, \"hole\": null|{{\"route\": \"specify\"|\"tdd\", \"detail\": \"…\"}}, \"summary\": \"…\"}}.\n\
The engine checks the tree, builds and runs the suite itself."
    )
}
