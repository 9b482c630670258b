//! work loop.
