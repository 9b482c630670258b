//! `docs/protocol.md` is generated here from the code's own answer schemas, and kept equal to
//! what the code sends: run `WORK_WRITE_DOCS=1 cargo nextest run -p work-cli -E 'test(/protocol/)'`
//! after changing a schema, and commit the document. Every example answer validates against its
//! schema.

use serde_json::{Value, json};
use work_runtime::dispatch::validate;

/// One role of one workflow: what it is sent and what it answers.
struct Role {
    workflow: &'static str,
    role: &'static str,
    access: &'static str,
    context: &'static str,
    schema: Value,
    example: Value,
}

fn roles() -> Vec<Role> {
    use work_implement::prompts as im;
    use work_loop_run::prompts as lr;
    vec![
        Role {
            workflow: "exhaust",
            role: "finder",
            access: "read-only",
            context: "`angle`, `round`, `what`, `context` (the `--context` text or null), `k`, `dryCounter`, `seen` (`id`, `location` of the 100 most recently found items, oldest first), `seenTotal` (how many items are known in all)",
            schema: work_exhaust::finder_schema(),
            example: json!({"angle": "error-paths", "items": [{"id": "src/lib.rs:12", "title": "unwrap on user input",
                "location": "src/lib.rs:12", "evidence": "let n = s.parse::<u32>().unwrap();", "severity": "medium"}],
                "roundNotes": "searched unwrap through error-paths"}),
        },
        Role {
            workflow: "until",
            role: "worker",
            access: "workspace-write",
            context: "`iteration` (1, 2, …), `max`, `session_id`, `session_dir`, `handoff_path`, `until`, `goal`, `verify`",
            schema: work_until::report::report_schema(),
            example: json!({"status": "continue", "summary": "wrote the parser", "changes_claimed": ["src/parse.rs"],
                "blocker": null, "next_steps": ["wire the parser into main"], "decisions": ["keep the grammar LL(1)"],
                "evidence": ["cargo test parse: 4 passed"], "notes": null}),
        },
        Role {
            workflow: "until",
            role: "worker (recon, `--recon`)",
            access: "read-only",
            context: "`iteration` = 0, `recon` = true, `session_id`, `until`, `goal`",
            schema: work_until::report::recon_schema(),
            example: json!({"summary": "a CLI in src/main.rs; tests in tests/", "map": ["src/main.rs: argument parsing"],
                "risks": ["no test covers --help"], "recommended_next": ["add the failing test first"]}),
        },
        Role {
            workflow: "implement",
            role: "plan-index",
            access: "read-only",
            context: "`task_id` = `index`, `iter_id`, `plan_path` (free-form plans only)",
            schema: im::index_schema(),
            example: json!({"total_tasks": 2, "tasks": [{"id": "1", "title": "Add greeting", "est_bytes": 400},
                {"id": "2", "title": "Document greeting", "est_bytes": 300}]}),
        },
        Role {
            workflow: "implement",
            role: "plan-extract (all tasks)",
            access: "read-only",
            context: "`task_id` = `all`, `task_ids`, `iter_id`, `plan_path`",
            schema: im::extract_all_schema(),
            example: json!({"tasks": [{"id": "1", "text": "Create hello.txt containing hi."}]}),
        },
        Role {
            workflow: "implement",
            role: "plan-extract (one task)",
            access: "read-only",
            context: "`task_id` (the task), `iter_id`, `plan_path`",
            schema: im::extract_one_schema(),
            example: json!({"id": "1", "text": "Create hello.txt containing hi."}),
        },
        Role {
            workflow: "implement",
            role: "implementer",
            access: "workspace-write",
            context: "`task_id` (`mini` in mini mode), `iter_id`, `phase` (`implement`, `spec-repair`, `quality-repair`, `mini`), `round`, `task_title`; mini mode: `red_test`",
            schema: im::implementer_schema(),
            example: json!({"status": "DONE_WITH_CONCERNS", "summary": "created hello.txt", "applied_changes": true,
                "concerns": ["the plan does not say which newline"], "held": [], "reason": null}),
        },
        Role {
            workflow: "implement",
            role: "spec-reviewer",
            access: "read-only",
            context: "`task_id`, `iter_id`, `phase` = `spec-review`, `round`, `task_title`; a diff reviewed in parts: `review_part` = `{index, count}`; when the task's change touches what its text does not plan (`docs/plan-format.md`, `Touches:`): `out_of_scope` = `{\"type\": \"array\", \"items\": {\"type\": \"string\"}}`, the repository-relative paths, also named at the end of the prompt (judge whether each belongs to the task)",
            schema: im::spec_schema(),
            example: json!({"status": "compliant", "issues": [], "ambiguity": null, "files_read": ["hello.txt", "PLAN.md"]}),
        },
        Role {
            workflow: "implement",
            role: "quality-reviewer",
            access: "read-only",
            context: "`task_id`, `iter_id`, `phase` = `quality-review`, `round`, `task_title`; a diff reviewed in parts: `review_part` = `{index, count}`; when the task's change touches what its text does not plan (`docs/plan-format.md`, `Touches:`): `out_of_scope` = `{\"type\": \"array\", \"items\": {\"type\": \"string\"}}`, the repository-relative paths, also named at the end of the prompt (judge whether each belongs to the task)",
            schema: im::quality_schema(),
            example: json!({"verdict": "changes_requested", "issues": [{"severity": "minor", "text": "stale comment in main.rs"}], "files_read": ["src/main.rs"]}),
        },
        Role {
            workflow: "implement",
            role: "tester",
            access: "read-only",
            context: "`task_id`, `iter_id`, `phase` = `e2e` (tasks marked E2E), `fixtures_dir` (a directory outside the tree: the only place it writes); a change shown in parts: `review_part` = `{index, count}`",
            schema: im::tester_schema(),
            example: json!({"status": "DONE", "fixtures": 2, "summary": "two end-to-end fixtures under the fixtures directory"}),
        },
        Role {
            workflow: "edit",
            role: "editor",
            access: "workspace-write",
            context: "`task_id` = `edit`, `iter_id`, `def_site`, `round`",
            schema: im::editor_schema(),
            example: json!({"status": "DONE", "applied_changes": true, "sites": 3, "hole": null,
                "summary": "renamed Foo to Bar at 3 sites", "reason": null}),
        },
        Role {
            workflow: "ultra",
            role: "implementer",
            access: "workspace-write",
            context: "`goal_id`, `attempt`, `tier`; LIGHT: `criteria` (ids), HEAVY: `criterion` (one id)",
            schema: work_ultra::brief::answer_schema(),
            example: json!({"status": "done", "summary": "added scripts/greet.sh",
                "claims": [{"criterion": "happy", "claim": "prints hello, NAME", "evidence": "sh scripts/greet.sh world"}],
                "cleanup": [], "blocker": null}),
        },
        Role {
            workflow: "loop run",
            role: "spec-drafter",
            access: "workspace-write",
            context: "`phase` = `draft`, `spec_dir`, `mode`, `missing` (the files to write)",
            schema: lr::drafter_schema(),
            example: json!({"status": "drafted", "summary": "wrote spec.md and plan.md"}),
        },
        Role {
            workflow: "loop run",
            role: "adversarial-reviewer / quality-reviewer",
            access: "read-only",
            context: "`phase` (`spec-plan` or `code`), `spec_dir`, `review_unit`, `round`",
            schema: lr::report_schema(),
            example: json!({"verdict": "findings", "files_read": ["src/lib.rs"], "findings": [{"id": "F1", "severity": "concern", "title": "no test for the error path",
                "file": "src/lib.rs", "line": 40, "detail": "parse() returns Err but no test reaches it", "fix": "add a failing test"}]}),
        },
        Role {
            workflow: "loop run",
            role: "finding-adjudicator",
            access: "read-only",
            context: "`phase`, `spec_dir`, `review_unit`, `round`, the report's findings",
            schema: lr::adjudication_schema(),
            example: json!({"findings": [{"id": "F1", "disposition": "sustained", "severity": "concern",
                "reason": "the error path is untested", "fix": "add a failing test"},
                {"id": "F2", "disposition": "refuted", "reason": "the input is checked before the call",
                "evidence": {"location": "src/lib.rs:12", "quote": "if input.is_empty() {"}}]}),
        },
        Role {
            workflow: "loop run",
            role: "implementer",
            access: "workspace-write",
            context: "`phase` (`implement` or `fix`), `spec_dir`, `task_id`, `title`, `wave_index`; fixes: `fix_kind`, `detail`",
            schema: lr::implementer_schema(),
            example: json!({"status": "done", "summary": "task 1 done", "files_changed": ["src/lib.rs"]}),
        },
    ]
}

const HEAD: &str = r#"# The dispatch protocol (`work.dispatch.v1`)

<!-- Generated by crates/work-cli/tests/cli/protocol.rs from the code's own schemas; do not edit by hand. -->

Every judgement step of every workflow is one **dispatch** to an agent. With the command
backend (`--agent 'command:PROGRAM ARGS'`), `work` starts the program once per dispatch, in
the repository root, writes ONE JSON request to its stdin and closes it:

```json
{
  "protocol": "work.dispatch.v1",
  "run_id": "r-20260101-000000-abcd", "dispatch_id": "d0001", "attempt": 1,
  "workflow": "exhaust", "role": "finder",
  "model": "sonnet", "effort": "high",
  "access": "read-only",
  "cwd": "/absolute/path/of/the/repository",
  "prompt": "the full brief, as text",
  "schema": { "type": "object", "…": "the JSON Schema of the answer (below), or null" },
  "context": { "angle": "error-paths", "round": 1, "…": "the role's context fields (below)" }
}
```

`access` is `read-only` or `workspace-write`. The program answers with ONE JSON document on
stdout and exit code 0. When `schema` is not null the document must validate against it. The
document may instead be an envelope that also reports usage:

```json
{"work_result": {"…": "the answer"}, "usage": {"input_tokens": 1200, "output_tokens": 340, "cost_usd": 0.004}}
```

in which case `work_result` is what is validated and the usage is accounted against the
budgets.

- Exit code ≠ 0, a kill or the dispatch timeout ⇒ the dispatch **failed**: it contributes
  nothing and is never read as an empty answer.
- Output that is not JSON or fails the schema ⇒ **malformed**: retried exactly once with the
  validation error added to the prompt (`attempt` = 2); malformed twice ⇒ dropped.
- A dispatch that outlives its timeout is killed with its whole process group.

Every schema below is plain JSON Schema: no `$schema` key, no `anyOf`/`oneOf` at the root,
every object closed (`additionalProperties: false`), status words as `enum`s, one name per
field. The engine folds the case and surrounding blanks of a status word; it never reads a
field under another name.

Runnable example agents for every workflow are in `examples/agents/`.

## Roles
"#;

fn render() -> String {
    let mut s = HEAD.to_string();
    s.push_str("\n| workflow | role | access |\n|---|---|---|\n");
    for r in roles() {
        s.push_str(&format!("| `{}` | {} | `{}` |\n", r.workflow, r.role, r.access));
    }
    for r in roles() {
        let schema = serde_json::to_string_pretty(&r.schema).unwrap_or_default();
        let example = serde_json::to_string_pretty(&r.example).unwrap_or_default();
        s.push_str(&format!(
            "\n### `{}` — {}\n\nAccess: `{}`. Context: {}.\n\nAnswer schema:\n\n```json\n{schema}\n```\n\nExample answer:\n\n```json\n{example}\n```\n",
            r.workflow, r.role, r.access, r.context
        ));
    }
    s
}

fn doc_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md")
}

#[test]
fn every_example_answer_validates_against_its_schema_and_the_schemas_are_portable() {
    for r in roles() {
        assert!(
            validate(&r.schema, &r.example).is_ok(),
            "{} {}: {:?}",
            r.workflow,
            r.role,
            validate(&r.schema, &r.example)
        );
        let text = r.schema.to_string();
        assert!(!text.contains("$schema"), "{} {}: $schema", r.workflow, r.role);
        assert!(r.schema.get("anyOf").is_none() && r.schema.get("oneOf").is_none(), "{} {}", r.workflow, r.role);
        assert!(!text.contains("(?i"), "{} {}: inline regex flags", r.workflow, r.role);
    }
}

#[test]
fn the_protocol_doc_is_what_the_code_sends() {
    let want = render();
    if std::env::var_os("WORK_WRITE_DOCS").is_some() {
        std::fs::write(doc_path(), &want).expect("write docs/protocol.md");
    }
    let have = std::fs::read_to_string(doc_path()).unwrap_or_default();
    assert!(
        have == want,
        "docs/protocol.md differs from the code's schemas: run WORK_WRITE_DOCS=1 cargo nextest run -p work-cli -E 'test(/protocol/)' and commit it"
    );
}

/// The examples in the document are answers the schemas accept: read them back from the file.
#[test]
fn every_example_in_the_doc_parses_as_json() {
    let have = std::fs::read_to_string(doc_path()).unwrap_or_default();
    let blocks: Vec<&str> = have.split("```json\n").skip(1).filter_map(|b| b.split("```").next()).collect();
    assert!(blocks.len() > 2 * roles().len(), "the doc holds every schema and example");
    for b in blocks {
        assert!(serde_json::from_str::<Value>(b).is_ok(), "not JSON:\n{b}");
    }
}

/// Every example answer goes through the real binary: `work agents try` dispatches to an agent
/// that prints the example, under the role's schema, and the engine must accept it at the
/// first attempt.
#[test]
fn every_example_answer_is_accepted_by_the_binary() {
    let s = crate::support::Scenario::new();
    for (i, r) in roles().into_iter().enumerate() {
        let role = r.role.split([' ', '/']).next().unwrap_or(r.role);
        let schema = format!("schema-{i}.json");
        s.write(&schema, &r.schema.to_string());
        let agent = s.agent(&format!("example-{i}.py"), &format!("print({:?})", r.example.to_string()));
        let out =
            s.run_json(&["agents", "try", "--agent", &agent, "--role", role, "--schema", &schema, "--json", "x"], 0);
        assert_eq!(out["outcome"], "ok", "{} {}: {out}", r.workflow, r.role);
        assert_eq!(out["attempts"], 1, "{} {}: {out}", r.workflow, r.role);
    }
}
