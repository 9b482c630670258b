//! The one integration-test binary: every test drives the real `work` binary against a
//! scratch git repository with scripted agents (see `support`).

mod support;

mod agents;
mod containment;
mod exhaust;
mod exhaust_truth;
mod ext_chromium;
mod ext_claude;
mod ext_codex;
mod ext_harness;
mod ext_mcp;
mod ext_nats;
mod ext_real_model;
mod ext_workflows;
mod fs_safety;
mod harness;
mod history;
mod implement;
mod loop_cmd;
mod loop_conformance;
mod loop_run;
mod mcp;
mod protocol;
mod self_contained;
mod soak;
mod ultra;
mod until;
mod walkthrough;
