//! `work loop cohort schedule`: the waves of plan.md's tasks, recorded with the canonical hash
//! of the plan they came from, and printed with each wave's predicted disjointness
//! ([`crate::touches`]).

use crate::cohort::mutate;
use crate::common::{LoopError, LoopResult, SpecDir};
use crate::{canonical, plan, touches};
use serde_json::json;

/// `cohort schedule`: waves from plan.md's tasks; resets the wave pointer. Prints each wave
/// and, for a wave of two or more tasks, its predicted disjointness from the tasks' `Touches:`
/// lines (a screen, never a green light); a dependency written after its dependant is a
/// warning (the schedule runs it first).
pub fn schedule(sd: &SpecDir, expect: Option<&str>) -> LoopResult {
    let mut warnings = Vec::new();
    let result = mutate(sd, "schedule", expect, |st| {
        let text = sd
            .read_optional("plan.md")?
            .ok_or_else(|| LoopError::bad(format!("read `{}/plan.md`: no such file", sd.rel())))?;
        let parsed =
            plan::parse_plan(&text).map_err(|e| LoopError::bad(format!("schedule `{}/plan.md`: {e}", sd.rel())))?;
        let waves = parsed.waves();
        let forward = forward_references(&parsed);
        if !forward.is_empty() {
            let pairs: Vec<String> = forward.iter().map(|(t, d)| format!("{t}->{d}")).collect();
            warnings.push(format!(
                "forward-reference(s) in {} (dependency written after its dependant; reordered below): {}",
                sd.feature(),
                pairs.join(", ")
            ));
        }
        let sha = canonical::sha256(&text, true);
        let changed = st.schedule_waves != waves
            || st.current_wave_index != 0
            || st.schedule_plan_sha256.as_deref() != Some(&sha);
        st.schedule_waves = waves.clone();
        st.current_wave_index = 0;
        st.schedule_plan_sha256 = Some(sha);
        // One `wave N: ids` line per wave (1-based), as the scripts print the order.
        let mut lines = Vec::new();
        let mut predicted = Vec::new();
        for (i, wave) in parsed.wave_tasks().iter().enumerate() {
            let ids: Vec<&str> = wave.iter().map(|t| t.id.as_str()).collect();
            lines.push(format!("wave {}: {}", i + 1, ids.join(", ")));
            let verdict = (wave.len() > 1)
                .then(|| touches::wave_disjoint(&wave.iter().map(|t| touches::task_touches(t)).collect::<Vec<_>>()));
            if let Some(v) = verdict {
                lines.push(format!(
                    "  predicted-disjoint: {}  (Touches: screen — serialize-only, never a green light)",
                    v.as_str()
                ));
            }
            predicted.push(verdict);
        }
        lines.push(format!("{} task(s) in {} wave(s)", parsed.tasks().len(), waves.len()));
        let doc = json!({
            "schedule_waves": waves,
            "current_wave_index": 0,
            "tasks": parsed.tasks(),
            "predicted_disjoint": predicted,
            "forward_references": forward,
        });
        Ok((changed, doc, lines.join("\n")))
    });
    result.map(|o| o.with_warnings(warnings))
}

/// `(task, dependency)` pairs where the dependency's heading comes after the task's.
fn forward_references(parsed: &plan::Plan) -> Vec<(String, String)> {
    let order: std::collections::BTreeMap<&str, usize> =
        parsed.tasks().iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let mut out = Vec::new();
    for (i, t) in parsed.tasks().iter().enumerate() {
        for d in &t.depends_on {
            if order.get(d.as_str()).is_some_and(|&j| j > i) {
                out.push((t.id.clone(), d.clone()));
            }
        }
    }
    out
}
