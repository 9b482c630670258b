//! `work exhaust` end to end.
