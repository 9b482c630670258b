//! `--color auto|always|never`: the one colour decision, through the real binary.

use crate::progress::{exhaust_args, on_a_terminal, repo, slow_finder, strip_escapes};

const SGR_COLOUR: [&str; 5] = ["\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[2m", "\x1b[0m"];

#[test]
fn never_drops_the_colour_on_a_terminal_without_no_color() {
    let s = repo();
    let agent = slow_finder(&s);
    let mut args = vec!["--color".to_string(), "never".to_string()];
    args.extend(exhaust_args(&agent));
    let (_, _, tty) = on_a_terminal(&s, &args, false);
    let text = strip_escapes(&tty);
    assert!(text.contains("● finder") && text.contains("✓ finder"), "the live display is drawn:\n{text}");
    for code in SGR_COLOUR {
        assert!(!tty.contains(code), "--color never: no colour code {code:?} in {tty:?}");
    }
}

#[test]
fn always_colours_the_error_prefix_into_a_pipe_even_under_no_color() {
    let s = repo();
    let out = s.work().args(["--color", "always", "show", "no-such-run"]).env("NO_COLOR", "1").output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("\x1b[31merror:\x1b[0m failed to"), "a red prefix: {err:?}");
    assert!(out.stdout.is_empty(), "stdout never carries colour");
}

#[test]
fn auto_and_never_leave_a_pipe_plain() {
    let s = repo();
    for args in [vec!["show", "no-such-run"], vec!["--color", "never", "show", "no-such-run"]] {
        let out = s.work().args(&args).env_remove("NO_COLOR").env("TERM", "xterm-256color").output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("error: failed to"), "{args:?}: {err:?}");
        assert!(!err.contains('\x1b'), "{args:?}: no escape code: {err:?}");
    }
}

#[test]
fn a_mistyped_colour_is_refused_with_the_values() {
    let s = repo();
    let (code, _, err) = s.run(&["--color", "alway", "runs", "list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("error: failed to parse arguments:") && err.contains("always"), "{err}");
}
