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
