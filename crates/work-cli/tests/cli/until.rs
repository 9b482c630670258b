//! `work until` end to end.
