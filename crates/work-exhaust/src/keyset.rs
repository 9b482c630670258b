//! The dedup keys of everything seen, kept small: a `loc:PATH:LINE` key is its interned path's
//! number and its line (8 bytes; a repository's items cite the same files again and again),
//! every other key (`id:…`, `concept:…`) its text in one allocation.
//!
//! The keys are the strings [`crate::items::dedup_keys`] and [`crate::items::concept_key`]
//! make; a set answers for the same strings whichever way it keeps them.

use std::collections::{HashMap, HashSet};

/// A set of dedup keys.
#[derive(Debug, Default, Clone)]
pub struct KeySet {
    /// Every path a kept location names, numbered.
    paths: HashMap<Box<str>, u32>,
    /// `loc:PATH:LINE` keys: (the path's number, the line).
    locs: HashSet<(u32, u32)>,
    /// Every other key, as given.
    other: HashSet<Box<str>>,
}

/// A `loc:PATH:LINE` key's path and line, when its line is a number written the one way.
fn split_loc(key: &str) -> Option<(&str, u32)> {
    let (path, line) = key.strip_prefix("loc:")?.rsplit_once(':')?;
    let n: u32 = line.parse().ok()?;
    (n.to_string() == line).then_some((path, n))
}

impl KeySet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when `key` is in the set.
    pub fn contains(&self, key: &str) -> bool {
        match split_loc(key) {
            Some((path, line)) => self.paths.get(path).is_some_and(|p| self.locs.contains(&(*p, line))),
            None => self.other.contains(key),
        }
    }

    /// Adds `key`; true when it was not there.
    pub fn insert(&mut self, key: &str) -> bool {
        match split_loc(key) {
            Some((path, line)) => {
                let next = self.paths.len() as u32;
                let p = *self.paths.entry(path.into()).or_insert(next);
                self.locs.insert((p, line))
            }
            None => self.other.insert(key.into()),
        }
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.locs.len() + self.other.len()
    }

    /// True when the set holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<S: AsRef<str>> Extend<S> for KeySet {
    fn extend<I: IntoIterator<Item = S>>(&mut self, keys: I) {
        for k in keys {
            self.insert(k.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_answers_for_the_strings_it_was_given() {
        let mut s = KeySet::new();
        let keys =
            ["id:x", "loc:src/a.rs:7", "loc:src/a.rs:8", "loc:b:1:2", "loc:c:007", "loc:d:99999999999", "concept:y"];
        for k in keys {
            assert!(s.insert(k), "{k}");
        }
        assert!(!s.insert("loc:src/a.rs:7"), "already there");
        for k in keys {
            assert!(s.contains(k), "{k}");
        }
        for k in ["id:y", "loc:src/a.rs:9", "loc:src/b.rs:7", "loc:b:1", "loc:c:7", "loc:src/a.rs:07", "x"] {
            assert!(!s.contains(k), "{k}");
        }
        assert_eq!((s.len(), s.paths.len()), (keys.len(), 2));
    }
}
