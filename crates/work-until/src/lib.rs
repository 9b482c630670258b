//! work until.
