//! The one integration-test binary: every test drives the real `work` binary against a
//! scratch git repository with scripted agents (see `support`).

mod support;

mod agents;
mod exhaust;
mod implement;
mod loop_cmd;
mod loop_run;
mod real_model;
mod soak;
mod ultra;
mod until;
