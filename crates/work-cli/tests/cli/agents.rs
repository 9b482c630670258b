//! `work agents` end to end.
