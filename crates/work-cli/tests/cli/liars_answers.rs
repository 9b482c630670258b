//! Agent answers the engine used to believe (the second lying-agent hunt): a plan index that
//! leaves out a step, a plan extract that is not the plan's text, a rename that keeps the old
//! name, and gate 2's rejections that made the real sites look known. Each liar is caught and
//! each honest twin DONE, through the real binary.

use crate::support::Scenario;
use serde_json::Value;

// ------------------------------------------------------------------------------ exhaust

/// Three real `setState(` call sites.
fn set_state_repo() -> Scenario {
    let s = Scenario::new();
    for f in ["a", "b", "c"] {
        s.write(&format!("src/{f}.js"), &format!("function {f}() {{\n  // x\n  setState(1);\n}}\n"));
    }
    s.commit("three setState calls");
    s
}

/// A finder that reports, in every round, each real `setState(` line with `evidence`.
fn set_state_finder(s: &Scenario, evidence: &str) -> String {
    s.agent(
        "finder.py",
        &format!(
            "import glob\nitems = []\nfor f in sorted(glob.glob('src/*.js')):\n    for i, l in enumerate(open(f), 1):\n        if 'setState(' in l:\n            items.append({{'id': 'site-' + f, 'title': 'a state change', 'location': '%s:%d' % (f, i), 'evidence': {evidence:?}}})\nprint(json.dumps({{'angle': ctx['angle'], 'items': items}}))"
        ),
    )
}

fn set_state_exhaust(s: &Scenario, agent: &str) -> Value {
    s.run_json(
        &[
            "exhaust",
            "every setState( call",
            "-k",
            "2",
            "--angles",
            "a1,a2,a3",
            "--final-oracle",
            "grep -rn 'setState(' src",
            "--agent",
            agent,
            "--json",
        ],
        0,
    )
}

fn item_locations(master: &Value) -> Vec<String> {
    let mut v: Vec<String> = master["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["reRead"]["source"].as_str().map(String::from))
        .collect();
    v.sort();
    v
}

/// `exhaust`: a finder reports the real sites with quotes that are not there, every round, so
/// gate 2 rejects them. A rejected item never makes a later one at its location known: the
/// final oracle's hits there are judged on their own and accepted, and the same rejection is
/// recorded once however many rounds repeat it. The honest twin quotes the lines and is done
/// with the same three items.
#[test]
fn exhaust_liar_whose_rejected_items_poison_the_final_oracle_s_hits_is_not_believed_and_its_twin_is_done() {
    let want = vec!["src/a.js:3", "src/b.js:3", "src/c.js:3"];
    let s = set_state_repo();
    let liar = set_state_finder(&s, "`unrelatedCall(42)`");
    let master = set_state_exhaust(&s, &liar);
    assert_eq!(item_locations(&master), want, "the oracle's hits were taken as known: {master}");
    assert!(master["items"].as_array().into_iter().flatten().all(|i| i["source"] == "final-oracle"), "{master}");
    assert_eq!(master["rejected"].as_array().map(Vec::len), Some(3), "one rejection per site: {}", master["rejected"]);

    let s = set_state_repo();
    let twin = set_state_finder(&s, "`setState(1);`");
    let master = set_state_exhaust(&s, &twin);
    assert_eq!(item_locations(&master), want, "{master}");
    assert_eq!(master["rejected"].as_array().map(Vec::len), Some(0), "{master}");
    assert_eq!(master["completeness"], "confirmed", "{master}");
}
