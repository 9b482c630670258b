//! The HTML report rendered by a real browser: headless Chromium loads a report of a real
//! exhaust run (its finder injects markup into an item title) and must render it without
//! script or errors, with the charts present. The browser's path comes from
//! `WORK_TEST_CHROMIUM` (`scripts/test-tools/chromium.sh` prints it); without it the test fails.

use crate::history::{INJECTED, exhaust_run, jobs_repo};
use std::path::Path;

fn chromium() -> String {
    std::env::var("WORK_TEST_CHROMIUM").unwrap_or_else(|_| {
        panic!(
            "WORK_TEST_CHROMIUM is not set: run scripts/test.sh (or eval \"$(scripts/test-tools/chromium.sh)\") to install headless Chromium"
        )
    })
}

fn browse(browser: &str, profile: &Path, extra: &[String], page: &Path) -> (String, String) {
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.extend_from_slice(extra);
    args.push(format!("file://{}", page.display()));
    #[expect(clippy::disallowed_methods, reason = "the test drives an external browser")]
    let out = std::process::Command::new(browser).args(&args).output().expect("run chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_report_renders_in_chromium_with_its_charts_and_no_script() {
    let browser = chromium();
    let s = jobs_repo();
    exhaust_run(&s, "2026-01-01T00:00:00Z");
    let (code, _, err) = s.run(&["report", "retry-sites", "-o", "report.html"]);
    assert_eq!(code, 0, "{err}");
    let page = s.path("report.html");
    let profile = tempfile::tempdir().expect("profile dir");

    let (dom, log) = browse(&browser, profile.path(), &["--dump-dom".into()], &page);
    assert!(dom.contains("<h1>exhaust run"), "the page rendered: {dom}");
    for chart in ["rounds", "spend", "latency"] {
        let at = dom.find(&format!("data-chart=\"{chart}\"")).unwrap_or_else(|| panic!("chart {chart} not in the DOM"));
        let end = dom[at..].find("</svg>").map(|e| at + e).expect("svg closes");
        assert!(dom[at..end].contains("data-value="), "chart {chart} has no data marks");
    }
    assert!(dom.matches("<svg").count() >= 3);
    assert!(!dom.to_ascii_lowercase().contains("<script"), "no script element reached the DOM");
    assert!(!dom.contains("<img"), "the injected <img> stayed text");
    assert!(dom.contains("&lt;script&gt;"), "the injected title is shown as text");
    assert!(!INJECTED.is_empty());
    for bad in ["Uncaught", "Refused to", "SyntaxError"] {
        assert!(!log.contains(bad), "browser reported `{bad}`:\n{log}");
    }

    let shot = s.path("report.png");
    browse(
        &browser,
        profile.path(),
        &[format!("--screenshot={}", shot.display()), "--window-size=1200,2400".into(), "--hide-scrollbars".into()],
        &page,
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a real screenshot ({} bytes)", png.len());
    if let Ok(dir) = std::env::var("WORK_TEST_SCREENSHOT_DIR") {
        let _ = std::fs::copy(&shot, Path::new(&dir).join("report.png"));
    }
}
