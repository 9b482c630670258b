//! Where a setting comes from, highest first: the command's flag (`--agent`, `-c`), a `WORK_*`
//! variable, the repository's `work.toml`, the user's config file, the default.

use crate::support::Scenario;
use std::path::Path;

/// Runs `work agents try hi` with `home` as HOME (and `xdg` as XDG_CONFIG_HOME when given):
/// the agent it picks is named in the refusal (every layer names a missing program).
fn picked(s: &Scenario, home: &Path, xdg: Option<&Path>, env_agent: Option<&str>, args: &[&str]) -> String {
    let mut c = s.work();
    c.env("HOME", home).env_remove("XDG_CONFIG_HOME").env_remove("WORK_AGENT");
    if let Some(x) = xdg {
        c.env("XDG_CONFIG_HOME", x);
    }
    if let Some(a) = env_agent {
        c.env("WORK_AGENT", a);
    }
    let out = c.args(args).args(["agents", "try", "hi"]).output().expect("run work");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    let Some(rest) = err.split("/nonexistent/").nth(1) else { return err };
    rest.split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap_or_default().to_string()
}

fn user_config(home: &Path, text: &str) {
    let dir = home.join(".config/work");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("config.toml"), text).expect("write");
}

#[test]
fn each_layer_beats_the_ones_below_it() {
    let s = Scenario::new();
    let home = tempfile::tempdir().expect("tempdir");
    let h = home.path();
    // The default: no agent anywhere.
    assert!(picked(&s, h, None, None, &[]).contains("choose an agent"));
    user_config(h, "agent = \"command:/nonexistent/user\"\n");
    assert_eq!(picked(&s, h, None, None, &[]), "user");
    s.write("work.toml", "agent = \"command:/nonexistent/repo\"\n");
    assert_eq!(picked(&s, h, None, None, &[]), "repo");
    assert_eq!(picked(&s, h, None, Some("command:/nonexistent/env"), &[]), "env");
    let flag = ["-c", "agent=command:/nonexistent/flag"];
    assert_eq!(picked(&s, h, None, Some("command:/nonexistent/env"), &flag), "flag");
    // An empty variable counts as unset.
    assert_eq!(picked(&s, h, None, Some(""), &[]), "repo");
}

#[test]
fn xdg_config_home_is_read_before_home() {
    let s = Scenario::new();
    let home = tempfile::tempdir().expect("tempdir");
    let xdg = tempfile::tempdir().expect("tempdir");
    user_config(home.path(), "agent = \"command:/nonexistent/home\"\n");
    std::fs::create_dir_all(xdg.path().join("work")).expect("mkdir");
    std::fs::write(xdg.path().join("work/config.toml"), "agent = \"command:/nonexistent/xdg\"\n").expect("write");
    assert_eq!(picked(&s, home.path(), Some(xdg.path()), None, &[]), "xdg");
    assert_eq!(picked(&s, home.path(), None, None, &[]), "home");
}

#[test]
fn the_user_config_merges_table_by_table_under_work_toml() {
    let s = Scenario::new();
    let home = tempfile::tempdir().expect("tempdir");
    user_config(home.path(), "[agents.mine]\nspec = \"command:/nonexistent/mine\"\n");
    s.write("work.toml", "agent = \"mine\"\n");
    assert_eq!(picked(&s, home.path(), None, None, &[]), "mine");
}

#[test]
fn a_mistyped_key_in_the_user_config_names_the_file_and_the_nearest_key() {
    let s = Scenario::new();
    let home = tempfile::tempdir().expect("tempdir");
    user_config(home.path(), "concurency = 3\n");
    let out = s.work().env("HOME", home.path()).env_remove("XDG_CONFIG_HOME").args(["runs", "list"]).output();
    let out = out.expect("run work");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    crate::support::assert_one_line_error(&err);
    let file = home.path().join(".config/work/config.toml");
    assert!(err.contains(&format!("in {}", file.display())), "names the file: {err}");
    assert!(err.contains("did you mean `concurrency`?"), "{err}");
}

#[test]
fn an_oversized_user_config_is_refused() {
    let s = Scenario::new();
    let home = tempfile::tempdir().expect("tempdir");
    user_config(home.path(), &format!("# {}\n", "x".repeat(2 * 1024 * 1024)));
    let out = s.work().env("HOME", home.path()).env_remove("XDG_CONFIG_HOME").args(["runs", "list"]).output();
    let out = out.expect("run work");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("config.toml"), "{err}");
}

#[test]
fn a_bad_work_concurrency_is_refused_naming_the_variables() {
    let s = Scenario::new();
    let out = s.work().env("WORK_CONCURRENCY", "many").args(["runs", "list"]).output().expect("run work");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("WORK_*"), "{err}");
}
