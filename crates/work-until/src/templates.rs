//! The templates as code: the hand-off (`handoff.md`, what the next worker is told),
//! the worker brief (the dispatch prompt) and the recon brief.

use crate::ledger::{DECISIONS_VERBATIM, Item, Ledger, VerifyResult, one_line};
use crate::session::Meta;

/// Renders `handoff.md` for iteration `n` from the session and the (compacted) ledger.
pub fn handoff(meta: &Meta, ledger: &Ledger, n: u32, last_verify: Option<&VerifyResult>) -> String {
    let mut o = format!("# Hand-off — iteration {n:02} of {} · session `{}`\n\n", meta.max, meta.id);
    o.push_str(&format!("## Until (the condition that ends the loop)\n\n{}\n\n", meta.until.trim()));
    o.push_str(&format!("## Goal\n\n{}\n\n", meta.goal.trim()));
    o.push_str(&format!("## Instructions\n\n{}\n\n", meta.instructions.trim()));
    match &meta.verify {
        Some(v) => o.push_str(&format!(
            "## How `done` is checked\n\nThe engine runs `{v}` in the repository root when you report `done`; \
             `done` counts only when it exits 0.\n\n"
        )),
        None => o.push_str(
            "## How `done` is checked\n\nThere is no verify command: a `done` report stops the loop for a person to check.\n\n",
        ),
    }
    o.push_str("## Where things stand\n\n");
    match ledger.iterations.last() {
        Some(e) => {
            o.push_str(&format!("Last iteration ({:02}, {}):\n", e.n, e.heading));
            for b in e.body.iter().filter(|b| !b.trim().is_empty()).take(10) {
                o.push_str(&format!("{b}\n"));
            }
        }
        None if !ledger.recon.is_empty() => {
            o.push_str("Recon map (iteration 00):\n");
            for r in ledger.recon.iter().filter(|b| !b.trim().is_empty()).take(10) {
                o.push_str(&format!("{r}\n"));
            }
        }
        None => o.push_str("This is the first iteration.\n"),
    }
    let section = |o: &mut String, title: &str, items: &[Item]| {
        if !items.is_empty() {
            o.push_str(&format!("\n### {title}\n\n"));
            for i in items {
                o.push_str(&format!("- {}\n", one_line(&i.text, 400)));
            }
        }
    };
    section(&mut o, "Open blockers", &ledger.open_blockers);
    section(&mut o, "Decisions already taken (keep them)", &brief_decisions(&ledger.decisions));
    section(&mut o, "Next steps", &ledger.next_steps);
    let recent_truth: Vec<_> = ledger.ground_truth.iter().rev().take(5).rev().cloned().collect();
    section(&mut o, "Ground truth notes (the engine checks claims against git)", &recent_truth);
    if let Some(v) = last_verify
        && !v.passed
    {
        o.push_str(&format!("\n### The last `done` did not verify\n\n`{}` ended with {}.\n", v.command, v.end));
        if !v.tail.is_empty() {
            o.push_str("\n```text\n");
            for t in &v.tail {
                o.push_str(&format!("{t}\n"));
            }
            o.push_str("```\n");
        }
    }
    o
}

/// The decisions a brief names: the newest [`DECISIONS_VERBATIM`] word for word, after the
/// ledger's fold line and a count of the ones in between (all of them are in `master.md`), so
/// the brief does not grow with the session.
fn brief_decisions(all: &[Item]) -> Vec<Item> {
    if all.len() <= DECISIONS_VERBATIM + 1 {
        return all.to_vec();
    }
    let mut out = Vec::new();
    let folded = all.first().filter(|i| i.iter.is_none());
    out.extend(folded.cloned());
    let between = all.len() - DECISIONS_VERBATIM - usize::from(folded.is_some());
    if between > 0 {
        out.push(Item { iter: None, text: format!("{between} more earlier decisions: see the session's master.md") });
    }
    out.extend(all[all.len() - DECISIONS_VERBATIM..].iter().cloned());
    out
}

/// The worker brief (the dispatch prompt) for one iteration, around the hand-off text.
pub fn worker_prompt(meta: &Meta, handoff_text: &str, n: u32) -> String {
    format!(
        "You are the worker for iteration {n} of a `work until` session (`{id}`). You are one worker; \
there is no other. Do real work in the repository toward the goal, as far as you can in this iteration, \
then report.\n\n\
Rules:\n\
- Edit files in the repository only. Never edit anything under the `.work/` directory (the session files \
belong to the engine).\n\
- Do not run the whole loop yourself and do not pretend: the engine compares your claimed changes with \
the working tree's content before and after your turn; a claim the tree does not back is recorded against you and is not progress.\n\
- Report `done` only when you believe the until-clause holds; the engine verifies it. Report `blocked` \
only when you cannot go on (name the blocker). Otherwise report `continue` with precise next steps.\n\n\
Answer with exactly one JSON object (no prose around it):\n\
{{\"status\": \"done|continue|blocked\", \"summary\": \"what you did\", \
\"changes_claimed\": [\"repository-relative paths you changed\"], \"blocker\": null, \
\"next_steps\": [\"…\"], \"decisions\": [\"…\"], \"evidence\": [\"commands you ran and what they showed\"]}}\n\n\
----- hand-off -----\n\n{handoff_text}",
        id = meta.id
    )
}

/// The recon brief (iteration 0, read-only).
pub fn recon_prompt(meta: &Meta) -> String {
    format!(
        "You are the recon for a `work until` session (`{id}`), iteration 0. Read only: change nothing. \
Map the part of the repository that matters for the goal, so that the first worker knows where to start.\n\n\
Until: {until}\nGoal: {goal}\nInstructions: {instr}\n\n\
Answer with exactly one JSON object: {{\"summary\": \"the map in a few lines\", \"map\": [\"path: what it is\"], \
\"risks\": [\"…\"], \"recommended_next\": [\"what iteration 1 should do\"]}}",
        id = meta.id,
        until = meta.until.trim(),
        goal = meta.goal.trim(),
        instr = meta.instructions.trim()
    )
}
