//! The one renderer of a run's progress on stderr, fed by the runtime's typed events
//! ([`work_runtime::events::Observed`]); workflows never print.
//!
//! | stderr | verbosity | what is drawn |
//! |---|---|---|
//! | a terminal | normal / verbose | a live status list (`●` running, `✓` done, `○` idle, `⚠` blocked): one row for the run; for a plan (implement, loop run) one row per task, the running one with the role, model and elapsed time of its dispatch in flight; one row per other dispatch in flight with role, model and elapsed time; and a done/total bar when a total is known; the workflow's progress lines (and, verbose, each dispatch's start and end) scroll above it |
//! | not a terminal | normal | the workflow's progress lines, plain (no escape code) |
//! | not a terminal | verbose | the same, and one plain line per dispatch start and end (role, model, duration, tokens, cost) and per task end |
//! | either | quiet | nothing (errors and the final summary line are printed elsewhere; [`crate::output::human`] and [`crate::output::note`] are left out) |
//!
//! Colour is [`crate::color::stderr`]'s one decision (`--color`, `NO_COLOR`); `TERM=dumb`
//! makes the display plain. The live display is drawn with `indicatif` (rate-limited redraws, a steady tick so
//! elapsed times move while an agent thinks) and cleared before the end-of-run summary.

use crate::output;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use work_runtime::clock::Clock;
use work_runtime::events::{AttemptEnd, Observed, Observer, Unit};
use work_runtime::run::RunContext;

/// How much `work` says on stderr (`-q` / `-v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// `-q`: errors and the final summary line only (nothing but the document with `--json`);
    /// a workflow's human result lines and the notes are left out, data is printed.
    Quiet,
    /// The default: progress lines (a live status list on a terminal) and the summary.
    Normal,
    /// `-v`: also every dispatch's start and end with role, model, duration and tokens.
    Verbose,
}

static VERBOSITY: AtomicU8 = AtomicU8::new(1);

/// Sets the verbosity for the rest of the process (from the global flags).
pub fn set_verbosity(v: Verbosity) {
    VERBOSITY.store(v as u8, Ordering::SeqCst);
}

/// The verbosity in force.
pub fn verbosity() -> Verbosity {
    match VERBOSITY.load(Ordering::SeqCst) {
        0 => Verbosity::Quiet,
        2 => Verbosity::Verbose,
        _ => Verbosity::Normal,
    }
}

/// How stderr is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A live display on a terminal, with or without colour.
    Live {
        /// [`crate::color::stderr`].
        color: bool,
    },
    /// Plain lines.
    Plain,
}

/// The mode for this process's stderr and environment.
pub fn mode() -> Mode {
    let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
    if !std::io::stderr().is_terminal() || dumb {
        return Mode::Plain;
    }
    Mode::Live { color: crate::color::stderr() }
}

/// The live display currently drawn, if any: [`output::err_line`] writes above it.
static ACTIVE: Mutex<Option<MultiProgress>> = Mutex::new(None);

fn active() -> MutexGuard<'static, Option<MultiProgress>> {
    ACTIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `f` (a write to stderr) with the live display out of the way.
pub fn suspended<R>(f: impl FnOnce() -> R) -> R {
    let multi = active().clone();
    match multi {
        Some(m) => m.suspend(f),
        None => f(),
    }
}

/// Clears the live display for good (before the end-of-run summary).
pub fn finish() {
    if let Some(m) = active().take() {
        let _ = m.clear();
        // Rows still ticking draw nowhere from now on.
        m.set_draw_target(ProgressDrawTarget::hidden());
    }
}

/// Attaches the renderer to a run: from now on its events are drawn on stderr. The run's own
/// progress lines must be logged only (`ProgressSink::Silent`): the renderer prints them.
pub fn attach(run: &RunContext) {
    let v = verbosity();
    let live = match (mode(), v) {
        (_, Verbosity::Quiet) | (Mode::Plain, _) => None,
        (Mode::Live { color }, _) => Some(Live::new(color)),
    };
    if let Some(l) = &live {
        *active() = Some(l.multi.clone());
    }
    let r = Renderer {
        clock: run.clock.clone(),
        verbose: v == Verbosity::Verbose,
        quiet: v == Verbosity::Quiet,
        state: Mutex::new(State { workflow: run.workflow.clone(), ..State::default() }),
        live,
        cleared: Default::default(),
    };
    r.refresh(&mut r.lock());
    run.events.observe(Arc::new(r));
    crate::signals::set_run(&run.run_id, run.budget.clone());
}

/// One dispatch attempt in flight.
struct Flight {
    role: String,
    model: String,
    attempt: u64,
    started: chrono::DateTime<chrono::Utc>,
    /// Its own row; None when the running task's row shows it (or there is no display).
    row: Option<ProgressBar>,
    /// True when it runs inside the running task.
    in_task: bool,
}

/// The task running (implement, loop run): its row shows the dispatch in flight.
struct Task {
    id: String,
    title: String,
    started: chrono::DateTime<chrono::Utc>,
    dispatches: u64,
    tokens: u64,
    row: Option<ProgressBar>,
}

#[derive(Default)]
struct State {
    workflow: String,
    flights: BTreeMap<String, Flight>,
    /// Rows of ended dispatches, oldest first (cleared when the next step starts).
    ended: VecDeque<ProgressBar>,
    done: BTreeMap<Unit, u64>,
    totals: BTreeMap<Unit, u64>,
    /// The step in progress ("round 3", "task 2").
    current: Option<String>,
    /// The tasks running (one, or a parallel wave's), by id.
    tasks: BTreeMap<String, Task>,
    /// Rows of ended tasks, oldest first.
    tasks_ended: VecDeque<ProgressBar>,
    passing: BTreeSet<String>,
    blocked: Option<String>,
    dispatches: u64,
    tokens: u64,
    cost_usd: f64,
    over: bool,
    /// The done/total bar, once a total is known.
    bar: Option<ProgressBar>,
}

/// The drawn part: the status row, the dispatch rows, the bar.
struct Live {
    multi: MultiProgress,
    status: ProgressBar,
    color: bool,
}

/// How many rows of ended dispatches stay on screen.
const ENDED_ROWS: usize = 4;

/// How many rows of ended tasks stay on screen.
const TASK_ROWS: usize = 8;

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner())
}

impl Live {
    fn new(color: bool) -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10));
        let status = multi.add(ProgressBar::new_spinner().with_style(style("{msg}")));
        status.enable_steady_tick(Duration::from_millis(250));
        Live { multi, status, color }
    }

    fn paint(&self, glyph: Glyph) -> String {
        let (g, code) = match glyph {
            Glyph::Running => ("●", "33"),
            Glyph::Done => ("✓", "32"),
            Glyph::Idle => ("○", "2"),
            Glyph::Blocked => ("⚠", "31"),
        };
        crate::color::paint(g, code, self.color)
    }
}

/// The four states of the status list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Glyph {
    Running,
    Done,
    Idle,
    Blocked,
}

struct Renderer {
    clock: Arc<dyn Clock>,
    verbose: bool,
    quiet: bool,
    state: Mutex<State>,
    live: Option<Live>,
    /// Set once the run ended: the display is gone, lines are plain again.
    cleared: std::sync::atomic::AtomicBool,
}

fn tokens_text(n: u64) -> String {
    if n >= 10_000 { format!("{:.1}k tokens", n as f64 / 1000.0) } else { format!("{n} tokens") }
}

/// What a dispatch row names as what runs: the pinned model when the backend runs the pin (a
/// bare `claude` or `codex`, or a log that names no backend); otherwise the backend itself —
/// `command:finder.py` (the program, without its interpreter and directory), `openai:gpt-x`,
/// `claude:opus` — since a pin it ignores never runs.
fn backend_label(agent: &str, model: &str) -> String {
    const INTERPRETERS: [&str; 9] = ["python3", "python", "sh", "bash", "node", "env", "ruby", "perl", "uv"];
    if agent.is_empty() || agent == "claude" || agent == "codex" {
        return model.to_string();
    }
    let Some(argv) = agent.strip_prefix("command:") else { return one_line(agent, 40) };
    let program = argv
        .split_whitespace()
        .find(|w| !w.starts_with('-') && !INTERPRETERS.contains(&w.rsplit('/').next().unwrap_or(w)))
        .or_else(|| argv.split_whitespace().next())
        .unwrap_or("");
    one_line(&format!("command:{}", program.rsplit('/').next().unwrap_or(program)), 40)
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max { format!("{}…", flat.chars().take(max).collect::<String>()) } else { flat }
}

/// A task's row without what follows it: "● task 2 Add the parser".
fn task_text(l: &Live, glyph: Glyph, t: &Task) -> String {
    format!("{} task {} {}", l.paint(glyph), t.id, t.title)
}

fn secs(d: chrono::TimeDelta) -> String {
    format!("{:.1}s", d.num_milliseconds().max(0) as f64 / 1000.0)
}

impl Renderer {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A line above the display (or plain on stderr).
    fn say(&self, line: &str) {
        match &self.live {
            Some(l) if !self.cleared.load(Ordering::SeqCst) => {
                let _ = l.multi.println(line);
            }
            _ => output::err_line(line),
        }
    }

    fn on_start(&self, st: &mut State, id: &str, attempt: u64, role: &str, model: &str) {
        if self.verbose {
            self.say(&format!("dispatch {id} start: {role} · {model} (attempt {attempt})"));
        }
        // A dispatch belongs to the task running when one task runs; in a parallel wave each
        // task keeps its own row and each dispatch gets one of its own.
        let sole = if st.tasks.len() == 1 { st.tasks.values().next() } else { None };
        let in_task = sole.is_some();
        let row = match (&self.live, sole) {
            (Some(l), Some(t)) => {
                if let Some(row) = &t.row {
                    row.reset_elapsed();
                    row.set_prefix(format!("{} · {role} · {model} ·", task_text(l, Glyph::Running, t)));
                    row.set_style(style("  {prefix} {elapsed}"));
                }
                None
            }
            (Some(l), None) => {
                let row = self.new_row(l, st);
                row.set_style(style("  {prefix} {elapsed:>4}"));
                row.set_prefix(format!("{} {role:<16} {model:<10} {id}", l.paint(Glyph::Running)));
                Some(row)
            }
            (None, _) => None,
        };
        let started = self.clock.now();
        let flight = Flight { role: role.into(), model: model.into(), attempt, started, row, in_task };
        st.flights.insert(id.to_string(), flight);
    }

    /// A new ticking row above the bar.
    fn new_row(&self, l: &Live, st: &State) -> ProgressBar {
        let row = match &st.bar {
            Some(bar) => l.multi.insert_before(bar, ProgressBar::new_spinner()),
            None => l.multi.add(ProgressBar::new_spinner()),
        };
        row.enable_steady_tick(Duration::from_millis(500));
        row
    }

    fn on_task_start(&self, st: &mut State, id: &str, title: &str) {
        self.clear_ended(st);
        if let Some(t) = st.tasks.remove(id) {
            // A task that never said it ended (not expected): its row goes.
            if let (Some(l), Some(row)) = (&self.live, t.row) {
                l.multi.remove(&row);
            }
        }
        st.current = Some(format!("task {id}"));
        let mut task = Task {
            id: id.into(),
            title: one_line(title, 60),
            started: self.clock.now(),
            dispatches: 0,
            tokens: 0,
            row: None,
        };
        if let Some(l) = &self.live {
            let row = self.new_row(l, st);
            row.set_style(style("  {prefix}"));
            row.set_prefix(task_text(l, Glyph::Running, &task));
            task.row = Some(row);
        }
        st.tasks.insert(id.to_string(), task);
    }

    fn on_task_end(&self, st: &mut State, id: &str, done: bool, reason: Option<&str>) {
        if done {
            *st.done.entry(Unit::Task).or_insert(0) += 1;
        }
        let Some(t) = st.tasks.remove(id) else { return };
        let took = secs(self.clock.now() - t.started);
        let spent = format!("{} dispatch(es) · {took} · {}", t.dispatches, tokens_text(t.tokens));
        let why = match (done, reason) {
            (true, _) => String::new(),
            (false, Some(r)) => format!(" · blocked: {}", one_line(r, 60)),
            (false, None) => " · blocked".into(),
        };
        if self.verbose {
            let word = if done { "DONE" } else { "not done" };
            self.say(&format!("task {} {word}: {spent}{why}", t.id));
        }
        let (Some(l), Some(row)) = (&self.live, &t.row) else { return };
        let glyph = if done { Glyph::Done } else { Glyph::Blocked };
        row.set_style(style("  {prefix}"));
        row.set_prefix(format!("{} · {spent}{why}", task_text(l, glyph, &t)));
        row.finish();
        st.tasks_ended.push_back(row.clone());
        while st.tasks_ended.len() > TASK_ROWS {
            if let Some(old) = st.tasks_ended.pop_front() {
                l.multi.remove(&old);
            }
        }
    }

    fn on_end(&self, st: &mut State, id: &str, end: AttemptEnd, reason: Option<&str>, tokens: u64, cost: f64) {
        st.dispatches += 1;
        st.tokens += tokens;
        st.cost_usd += cost;
        let Some(f) = st.flights.remove(id) else { return };
        if f.in_task {
            self.task_dispatch_ended(st, tokens);
        }
        let took = secs(self.clock.now() - f.started);
        let word = match end {
            AttemptEnd::Ok => "ok",
            AttemptEnd::Malformed => "malformed",
            AttemptEnd::Failed => "failed",
        };
        let cost_text = if cost > 0.0 { format!(" · ${cost:.4}") } else { String::new() };
        let why = reason.map(|r| format!(": {}", one_line(r, 100))).unwrap_or_default();
        if self.verbose {
            let (role, model, a) = (&f.role, &f.model, f.attempt);
            self.say(&format!(
                "dispatch {id} {word}{why}: {role} · {model} · attempt {a} · {took} · {}{cost_text}",
                tokens_text(tokens)
            ));
        }
        if let (Some(l), Some(row)) = (&self.live, f.row) {
            let glyph = if end == AttemptEnd::Ok { Glyph::Done } else { Glyph::Blocked };
            row.set_style(style("  {prefix}"));
            let (role, model) = (&f.role, &f.model);
            row.set_prefix(format!(
                "{} {role:<16} {model:<10} {id} {took} · {}{why}",
                l.paint(glyph),
                tokens_text(tokens)
            ));
            row.finish();
            st.ended.push_back(row);
            while st.ended.len() > ENDED_ROWS {
                if let Some(old) = st.ended.pop_front() {
                    l.multi.remove(&old);
                }
            }
        }
    }

    /// The running task's row once one of its dispatches ended: what it spent so far, or the
    /// next dispatch still in flight.
    fn task_dispatch_ended(&self, st: &mut State, tokens: u64) {
        let still = st.flights.values().any(|f| f.in_task);
        if st.tasks.len() != 1 {
            return;
        }
        let Some(t) = st.tasks.values_mut().next() else { return };
        t.dispatches += 1;
        t.tokens += tokens;
        if let (Some(l), Some(row), false) = (&self.live, &t.row, still) {
            row.set_style(style("  {prefix}"));
            row.set_prefix(format!(
                "{} · {} dispatch(es) · {}",
                task_text(l, Glyph::Running, t),
                t.dispatches,
                tokens_text(t.tokens)
            ));
        }
    }

    fn clear_ended(&self, st: &mut State) {
        if let Some(l) = &self.live {
            for row in st.ended.drain(..) {
                l.multi.remove(&row);
            }
        }
    }

    /// The unit the bar counts: the first with a known total.
    fn bar_unit(st: &State) -> Option<(Unit, u64)> {
        st.totals.iter().next().map(|(u, t)| (*u, *t))
    }

    fn refresh(&self, st: &mut State) {
        let Some(l) = &self.live else { return };
        if self.cleared.load(Ordering::SeqCst) {
            return;
        }
        let glyph = if st.blocked.is_some() {
            Glyph::Blocked
        } else if st.flights.is_empty() {
            Glyph::Idle
        } else {
            Glyph::Running
        };
        let mut parts = vec![st.workflow.clone()];
        parts.extend(st.current.clone());
        parts.push(match glyph {
            Glyph::Running => format!("{} in flight", st.flights.len()),
            Glyph::Blocked => format!("blocked: {}", st.blocked.as_deref().unwrap_or_default()),
            Glyph::Idle | Glyph::Done => "idle".into(),
        });
        let cost = if st.cost_usd > 0.0 { format!(" · ${:.4}", st.cost_usd) } else { String::new() };
        parts.push(format!("{} dispatch(es) · {}{cost}", st.dispatches, tokens_text(st.tokens)));
        if st.over {
            parts.push("budget reached".into());
        }
        l.status.set_message(format!("{} {}", l.paint(glyph), parts.join(" · ")));
        if let Some((unit, total)) = Self::bar_unit(st) {
            let done = match unit {
                Unit::Criterion => st.passing.len() as u64,
                _ => st.done.get(&unit).copied().unwrap_or(0),
            };
            let bar = st.bar.get_or_insert_with(|| {
                let bar = l.multi.add(ProgressBar::new(total));
                bar.set_style(style("  {bar:30} {pos}/{len} {msg}").progress_chars("█▌░"));
                bar
            });
            bar.set_length(total);
            bar.set_position(done.min(total));
            bar.set_message(unit.plural());
        }
    }

    fn handle(&self, st: &mut State, e: &Observed) {
        match e {
            Observed::RunStarted { workflow } => st.workflow = workflow.clone(),
            Observed::Line(line) => self.say(line),
            Observed::DispatchStarted { dispatch_id, attempt, role, model, agent } => {
                self.on_start(st, dispatch_id, *attempt, role, &backend_label(agent, model))
            }
            Observed::DispatchEnded { dispatch_id, end, reason, tokens, cost_usd, .. } => {
                self.on_end(st, dispatch_id, *end, reason.as_deref(), *tokens, *cost_usd)
            }
            Observed::OverBudget { dispatch_id } => {
                st.over = true;
                if self.verbose {
                    self.say(&format!("dispatch {dispatch_id} refused: the budget is spent"));
                }
            }
            Observed::StepStarted { unit, n } => {
                self.clear_ended(st);
                st.current = Some(match n {
                    Some(n) => format!("{} {n}", unit.as_str()),
                    None => unit.as_str().to_string(),
                });
            }
            Observed::TaskStarted { id, title, done, total } => {
                if let Some(t) = total {
                    st.totals.insert(Unit::Task, *t);
                }
                if let Some(d) = done {
                    st.done.insert(Unit::Task, *d);
                }
                self.on_task_start(st, id, title)
            }
            Observed::TaskEnded { id, done, reason } => self.on_task_end(st, id, *done, reason.as_deref()),
            Observed::StepEnded { unit, done } => {
                let d = st.done.entry(*unit).or_insert(0);
                *d = done.unwrap_or(*d + 1);
            }
            Observed::Total { unit, total } => {
                st.totals.insert(*unit, *total);
            }
            Observed::Criterion { id, pass } => {
                if *pass {
                    st.passing.insert(id.clone());
                } else {
                    st.passing.remove(id);
                }
            }
            Observed::Blocked { reason } => {
                if self.verbose && self.live.is_none() {
                    self.say(&format!("⚠ blocked: {reason}"));
                }
                st.blocked = Some(reason.clone());
            }
            Observed::RunEnded { .. } => {
                if let Some(l) = &self.live {
                    let rows = st.flights.values_mut().filter_map(|f| f.row.take());
                    let running: Vec<ProgressBar> =
                        std::mem::take(&mut st.tasks).into_values().filter_map(|t| t.row).collect();
                    let tasks = running.into_iter().chain(st.tasks_ended.drain(..));
                    for row in rows.chain(st.ended.drain(..)).chain(tasks).chain(st.bar.take()) {
                        row.finish_and_clear();
                    }
                    l.status.finish_and_clear();
                    self.cleared.store(true, Ordering::SeqCst);
                    finish();
                }
            }
        }
    }
}

impl Observer for Renderer {
    fn observe(&self, e: &Observed) {
        if self.quiet {
            return;
        }
        let mut st = self.lock();
        self.handle(&mut st, e);
        if !matches!(e, Observed::RunEnded { .. }) {
            self.refresh(&mut st);
        }
    }
}
