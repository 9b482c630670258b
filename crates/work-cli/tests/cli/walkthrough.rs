//! README's walkthroughs, run exactly as written: every ```sh block of the "Walkthroughs"
//! section runs with `sh -e` in a scratch git repository holding a committed copy of
//! `examples/`, with the `work` binary under test first on PATH.

use crate::support::Scenario;
use std::path::Path;

fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The ```sh blocks of README's "## Walkthroughs" section.
fn blocks() -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let section = readme.split("\n## Walkthroughs\n").nth(1).expect("README has a Walkthroughs section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section.split("```sh\n").skip(1).filter_map(|b| b.split("\n```").next()).map(str::to_string).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read examples").flatten() {
        let p = e.path();
        let dest = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).expect("copy");
        }
    }
}

fn run_block(block: &str) -> (i32, String, String) {
    let s = Scenario::new();
    copy_dir(&repo_root().join("examples"), &s.path("examples"));
    s.commit("examples");
    run_in(&s, block)
}

/// Runs a shell block with `sh -e` in the scenario, the binary under test first on PATH.
fn run_in(s: &Scenario, block: &str) -> (i32, String, String) {
    let bin = assert_cmd::cargo::cargo_bin("work");
    let dir = bin.parent().expect("the binary's directory");
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    #[expect(clippy::disallowed_methods, reason = "the walkthrough is a shell script, as README shows it")]
    let out = std::process::Command::new("sh")
        .args(["-e", "-c", block])
        .current_dir(s.root())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .expect("run sh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_readme_walkthrough_runs_as_written() {
    let blocks = blocks();
    assert!(blocks.len() >= 4, "README shows a walkthrough per command ({} blocks)", blocks.len());
    for block in &blocks {
        let (code, out, err) = run_block(block);
        assert_eq!(code, 0, "walkthrough failed:\n{block}\nstdout:\n{out}\nstderr:\n{err}");
    }
}

#[test]
fn every_example_agent_and_goal_is_used_by_a_walkthrough() {
    let text = blocks().join("\n");
    for dir in ["examples/agents", "examples/goals"] {
        for e in std::fs::read_dir(repo_root().join(dir)).expect("read examples").flatten() {
            let rel = format!("{dir}/{}", e.file_name().to_string_lossy());
            assert!(text.contains(&rel), "{rel} is not used by any README walkthrough");
        }
    }
}

/// README's first command, as README shows it: `cargo run -- exhaust …` (no `-q`, so cargo's
/// own build progress shows), run in a repository holding `work.toml` and `examples/` as this
/// one does. The bundled finder lists only real call sites of what was asked, and the count
/// says so; the run's first progress line comes before anything else on stderr.
#[test]
fn readme_first_command_lists_only_real_call_sites() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let block = readme.split("```sh\n").nth(1).and_then(|b| b.split("\n```").next()).expect("README's first block");
    let first = block.lines().next().expect("README's first command");
    let args = first.strip_prefix("cargo run -- ").unwrap_or_else(|| panic!("not `cargo run -- …`: {first}"));
    assert_eq!(args, "exhaust \"unwrap and expect calls\"");

    let s = Scenario::new();
    copy_dir(&repo_root().join("examples"), &s.path("examples"));
    std::fs::copy(repo_root().join("work.toml"), s.path("work.toml")).expect("copy work.toml");
    s.write("Cargo.toml", "[workspace.lints.clippy]\nunwrap_used = \"deny\"\nexpect_used = \"deny\"\n");
    s.write(
        "src/lib.rs",
        concat!(
            "//! Docs: call `x.unwrap()` only in tests.\n",
            "pub fn a() -> u8 {\n",
            "    let v = Some(1).unwrap();\n", // line 3: a call
            "    let w = Some(2).unwrap_or(3);\n",
            "    let r: Result<u8, ()> = Ok(v + w); // then .unwrap() it\n",
            "    let note = \"never x.expect(here)\";\n",
            "    let _ = note;\n",
            "    r.expect(\"four\")\n", // line 8: a call
            "}\n",
            "#[expect(clippy::unwrap_used, reason = \"x\")]\n",
            "pub fn expect(x: u8) -> u8 {\n",
            "    x\n",
            "}\n",
            "pub const RAW: &str = r#\"\n",
            "    y.unwrap()\n",
            "\"#;\n",
        ),
    );
    s.write("notes.md", "Prefer `?` to `.unwrap()`.\n");
    s.commit("a crate");
    let (code, out, err) = run_in(&s, &format!("work {args}"));
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.starts_with("Gate 1:"), "the run's first progress line comes first:\n{err}");
    assert!(err.contains("\nfound: 2\n"), "two call sites, counted as two:\n{err}");
    let listed: Vec<&str> = err.lines().filter(|l| l.starts_with("  ")).map(str::trim).collect();
    assert_eq!(
        listed,
        ["src/lib.rs:3 let v = Some(1).unwrap();", "src/lib.rs:8 r.expect(\"four\")"],
        "only the call sites are listed:\n{err}"
    );
}
