//! work implement.
