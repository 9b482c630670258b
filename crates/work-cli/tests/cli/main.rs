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
mod ext_mcp_hosts;
mod ext_nats;
mod ext_real_model;
mod ext_workflows;
mod fs_safety;
mod harness;
mod help;
mod history;
mod implement;
mod liars_implement;
mod liars_loop;
mod liars_matrix;
mod liars_review_parts;
mod liars_suite;
mod loop_cmd;
mod loop_conformance;
mod loop_conformance_refs;
mod loop_run;
mod mcp;
mod mcp_client;
mod progress;
mod progress_quiet;
mod progress_tasks;
mod protocol;
mod self_contained;
mod soak;
mod state_digests;
mod ultra;
mod ultra_resume;
mod until;
mod until_truth;
mod walkthrough;
