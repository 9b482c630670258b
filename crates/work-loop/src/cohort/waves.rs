//! `cohort wave advance` / `wave check` and `record-attempt`: the wave pointer and the retry counters.

use super::*;

/// `cohort wave advance --from-index N`: N → N+1; a no-op when the pointer is already N+1.
pub fn wave_advance(sd: &SpecDir, from: usize, expect: Option<&str>) -> LoopResult {
    mutate(sd, "wave advance", expect, |st| {
        let n = st.schedule_waves.len();
        if st.current_wave_index == from + 1 && from + 1 < n {
            let doc = json!({ "current_wave_index": st.current_wave_index, "wave_count": n });
            return Ok((false, doc, format!("already at wave {} (no-op)", st.current_wave_index)));
        }
        if st.current_wave_index != from {
            return Err(LoopError::refused(
                format!("advance the wave: the current wave is {}, not {from}", st.current_wave_index),
                json!({ "current_wave_index": st.current_wave_index, "wave_count": n }),
            ));
        }
        if from + 1 >= n {
            return Err(LoopError::refused(
                format!("advance the wave: wave {from} is the last of {n}"),
                json!({ "current_wave_index": st.current_wave_index, "wave_count": n }),
            ));
        }
        st.current_wave_index = from + 1;
        Ok((true, json!({ "current_wave_index": from + 1, "wave_count": n }), format!("advanced to wave {}", from + 1)))
    })
}

/// What `wave check --expect` asserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaveExpect {
    /// A wave after the current one exists.
    More,
    /// The current wave is the last (or nothing is scheduled).
    Last,
}

/// `cohort wave check --expect more|last`: exit 0 when it holds, 1 otherwise.
pub fn wave_check(
    sd: &SpecDir,
    expect_kind: WaveExpect,
    wave_index: Option<usize>,
    expect: Option<&str>,
) -> LoopResult {
    let st = load_required(sd, "wave check")?;
    check_run_id(&st, "wave check", expect)?;
    if let Some(n) = wave_index
        && n != st.current_wave_index
    {
        return Err(LoopError::refused(
            format!("wave check: current_wave_index={} does not match --wave-index {n}", st.current_wave_index),
            json!({ "reason": "wave_index", "current_wave_index": st.current_wave_index, "wave_index": n }),
        ));
    }
    let more = st.more_waves();
    let holds = match expect_kind {
        WaveExpect::More => more,
        WaveExpect::Last => !more,
    };
    let doc = json!({
        "ok": holds,
        "expect": if expect_kind == WaveExpect::More { "more" } else { "last" },
        "current_wave_index": st.current_wave_index,
        "wave_count": st.schedule_waves.len(),
        "more_waves": more,
    });
    let (i, total) = (st.current_wave_index, st.schedule_waves.len());
    // The scripts' lines: a holding answer on stdout, a failing one is a stop on stderr.
    let text = match (expect_kind, holds) {
        (WaveExpect::More, true) => format!("wave check more — wave_index={i} has more waves (total={total})"),
        (WaveExpect::Last, true) => format!("wave check last — wave_index={i} is the last wave (total={total})"),
        (WaveExpect::More, false) => format!("wave check more: no more waves (current={i}, total={total})"),
        (WaveExpect::Last, false) => format!("wave check last: not the last wave (current={i}, total={total})"),
    };
    let out = Outcome::with(if holds { ExitStatus::Done } else { ExitStatus::Unsuccessful }, doc, text);
    Ok(if holds { out } else { out.text_to_stderr() })
}

/// `cohort record-attempt --phase implement --cycle-id C`: counts a gate failure once per C.
pub fn record_attempt(sd: &SpecDir, cycle_id: &str, expect: Option<&str>) -> LoopResult {
    validate_cycle_id(cycle_id)?;
    mutate(sd, "record-attempt", expect, |st| {
        // `<run_id>:<decimal sequence>`, and the run id is this cohort's.
        let shape = cycle_id.split_once(':').filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let Some((prefix, _)) = shape else {
            return Err(LoopError::refused(
                format!("record the attempt: --cycle-id must be `<run_id>:<decimal sequence>` (got `{cycle_id}`)"),
                json!({ "reason": "cycle_id_shape", "cycle_id": cycle_id }),
            ));
        };
        if prefix != st.run_id {
            return Err(LoopError::refused(
                format!(
                    "record the attempt: the run id in --cycle-id (`{prefix}`) is not the cohort's `{}`",
                    st.run_id
                ),
                json!({ "reason": "cycle_id_run_id", "cycle_id": cycle_id, "run_id": st.run_id }),
            ));
        }
        if st.attempt_cycle_ids.iter().any(|c| c == cycle_id) {
            let doc = json!({ "implementation_retry_count": st.implementation_retry_count, "cycle_id": cycle_id });
            return Ok((false, doc, format!("cycle {cycle_id} already recorded (no-op)")));
        }
        st.attempt_cycle_ids.push(cycle_id.to_string());
        st.last_record_attempt_cycle_id = Some(cycle_id.to_string());
        st.implementation_retry_count += 1;
        let doc = json!({
            "implementation_retry_count": st.implementation_retry_count,
            "implementation_retry_cap": st.implementation_retry_cap,
            "cycle_id": cycle_id,
        });
        Ok((true, doc, format!("implementation attempt {} recorded", st.implementation_retry_count)))
    })
}

/// The longest `--cycle-id` accepted.
pub const MAX_CYCLE_ID_LEN: usize = 200;

/// A cycle id is non-empty, at most [`MAX_CYCLE_ID_LEN`] characters of `[A-Za-z0-9._:-]`
/// (the engine's ids are `<run_id>:<transition_sequence>`).
pub fn validate_cycle_id(cycle_id: &str) -> Result<(), LoopError> {
    if cycle_id.is_empty() {
        return Err(LoopError::bad("use `--cycle-id`: it is empty"));
    }
    if cycle_id.len() > MAX_CYCLE_ID_LEN {
        return Err(LoopError::bad(format!(
            "use `--cycle-id`: it is {} characters long (at most {MAX_CYCLE_ID_LEN})",
            cycle_id.len()
        )));
    }
    if let Some(c) = cycle_id.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))) {
        return Err(LoopError::bad(format!(
            "use `--cycle-id {}`: character {c:?} is not allowed (only A-Z a-z 0-9 . _ : -)",
            cycle_id.escape_debug()
        )));
    }
    Ok(())
}
