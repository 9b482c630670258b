//! work exhaust.
