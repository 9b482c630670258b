//! An accepted item as it is kept in memory: the compact JSON text of its object, one
//! allocation. A JSON tree of the same item (an ordered map of a dozen keys, every key and
//! string a heap allocation of its own) took about 2 kB; its text takes what it says.
//!
//! On disk nothing changes: an item is written as the JSON value its text holds (the snapshot
//! stays pretty JSON, byte for byte what it was) and read from any JSON value.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// One accepted item: the compact JSON text of its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item(Box<str>);

impl Item {
    /// The item holding `v`.
    pub fn new(v: &Value) -> Self {
        Item(v.to_string().into_boxed_str())
    }

    /// The item's value (parsed from its text, which this type wrote).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }

    /// The item's compact JSON text.
    pub fn text(&self) -> &str {
        &self.0
    }
}

impl From<Value> for Item {
    fn from(v: Value) -> Self {
        Item::new(&v)
    }
}

impl Serialize for Item {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // One item's tree at a time, while the journal is written out.
        self.value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(|v| Item::new(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_item_is_written_as_the_value_it_holds() {
        let v = json!({"z": 1, "id": "x", "a": [1.5, null, {"b": "c"}], "n": -3});
        let it = Item::new(&v);
        assert_eq!(it.value(), v);
        assert_eq!(serde_json::to_string_pretty(&it).expect("text"), serde_json::to_string_pretty(&v).expect("text"));
        assert_eq!(serde_json::to_value(&it).expect("tree"), v, "the keys keep their order");
        let back: Item = serde_json::from_str(&serde_json::to_string_pretty(&v).expect("text")).expect("read");
        assert_eq!(back, it);
    }
}
