//! `work implement` end to end.
