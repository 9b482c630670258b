//! `work loop` end to end.
