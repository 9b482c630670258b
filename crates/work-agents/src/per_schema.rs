//! What an HTTP backend writes out once per schema (its converted form, its system prompt),
//! remembered for the next dispatch with the same schema: a workflow sends one schema with every
//! dispatch of a wave, so the conversion and the writing out are done once, not per request.

use serde_json::Value;
use std::sync::{Arc, Mutex};

/// The last schema seen and what was made for it. Cloning shares the memory (a backend's
/// clones share one).
#[derive(Debug)]
pub(crate) struct PerSchema<T>(Arc<Mutex<Option<Remembered<T>>>>);

/// A schema and what was made for it.
type Remembered<T> = (Value, Arc<T>);

impl<T> Clone for PerSchema<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> Default for PerSchema<T> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

impl<T> PerSchema<T> {
    /// What was made for `schema` when it is the last one seen; else `make`'s, remembered. No
    /// schema is never remembered (the next dispatch may have one).
    pub(crate) fn get_or_make(&self, schema: Option<&Value>, make: impl FnOnce() -> T) -> Arc<T> {
        if let Some(schema) = schema
            && let Ok(memo) = self.0.lock()
            && let Some((seen, made)) = memo.as_ref()
            && seen == schema
        {
            return made.clone();
        }
        let made = Arc::new(make());
        if let Some(schema) = schema
            && let Ok(mut memo) = self.0.lock()
        {
            *memo = Some((schema.clone(), made.clone()));
        }
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn made_once_per_schema_and_never_for_none() {
        let memo = PerSchema::<usize>::default();
        let calls = std::cell::Cell::new(0);
        let make = || {
            calls.set(calls.get() + 1);
            calls.get()
        };
        let a = json!({"type": "object"});
        assert_eq!(*memo.get_or_make(Some(&a), make), 1);
        assert_eq!(*memo.clone().get_or_make(Some(&a), make), 1, "a clone shares the memory");
        assert_eq!(*memo.get_or_make(None, make), 2);
        assert_eq!(*memo.get_or_make(Some(&a), make), 1, "no schema does not replace it");
        assert_eq!(*memo.get_or_make(Some(&json!({"type": "array"})), make), 3);
        assert_eq!(*memo.get_or_make(Some(&a), make), 4);
    }
}
