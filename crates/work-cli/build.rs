//! Puts the commit into `work --version`: `WORK_VERSION` is `<crate version> (<short sha>)`,
//! or the bare version when git or the repository is not there (a source tarball). The
//! commit is HEAD's: uncommitted changes are not marked (that would rebuild on every `git add`).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    #[allow(clippy::disallowed_methods, reason = "a build script runs before the runtime exists")]
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[allow(clippy::disallowed_macros, reason = "a build script talks to cargo on stdout")]
fn main() {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let full = match git(&["rev-parse", "--short=10", "HEAD"]) {
        Some(sha) if !sha.is_empty() => format!("{version} ({sha})"),
        _ => version,
    };
    println!("cargo:rustc-env=WORK_VERSION={full}");
    // Rebuild when HEAD moves (a commit, a checkout); worktrees keep HEAD in their own git dir.
    for p in ["HEAD", "logs/HEAD"] {
        if let Some(path) = git(&["rev-parse", "--git-path", p]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
