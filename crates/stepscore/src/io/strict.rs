//! JSON parsing that refuses duplicate object keys. serde_json keeps the
//! last of two equal keys without a word, so `{"label": -1, "label": 2}`
//! would silently mean `2`; here it is an error naming the key's path.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON parse failure: serde_json's error, plus the path of a duplicated
/// key (`steps[1].score`) when that is what failed.
#[derive(Debug)]
pub(crate) struct StrictError {
    pub json: serde_json::Error,
    pub duplicate: Option<String>,
}

/// Parses one JSON value, refusing duplicate keys at any depth.
pub(crate) fn from_slice(bytes: &[u8]) -> Result<Value, StrictError> {
    let dup = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = ValueSeed {
        path: &Path::Root,
        dup: &dup,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    parsed.map_err(|json| StrictError {
        json,
        duplicate: dup.into_inner(),
    })
}

/// Where a value sits, as a linked list on the stack (no allocation unless
/// a duplicate is found).
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(parent, key) => {
                if matches!(parent, Path::Root) {
                    write!(f, "{key}")
                } else {
                    write!(f, "{parent}.{key}")
                }
            }
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

#[derive(Clone, Copy)]
struct ValueSeed<'a> {
    path: &'a Path<'a>,
    dup: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, x: f64) -> Result<Value, E> {
        // serde_json only hands out finite floats.
        Ok(Number::from_f64(x).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        loop {
            let path = Path::Index(self.path, out.len());
            let seed = ValueSeed {
                path: &path,
                dup: self.dup,
            };
            match seq.next_element_seed(seed)? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = Path::Key(self.path, &key);
            if out.contains_key(&key) {
                let shown = path.to_string();
                let message = format!("duplicate key `{shown}`");
                *self.dup.borrow_mut() = Some(shown);
                return Err(de::Error::custom(message));
            }
            let seed = ValueSeed {
                path: &path,
                dup: self.dup,
            };
            let value = map.next_value_seed(seed)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_values_as_serde_json() {
        for doc in [
            r#"{"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c": 18446744073709551615}"#,
            "[]",
            r#""\u00e9\n""#,
            "-0.0",
            "1e-300",
        ] {
            let want: Value = serde_json::from_str(doc).unwrap();
            assert_eq!(from_slice(doc.as_bytes()).unwrap(), want, "{doc}");
        }
    }

    #[test]
    fn duplicates_are_named_by_path() {
        let cases = [
            (r#"{"label": -1, "label": 2}"#, "label"),
            (
                r#"{"steps": [{"text": "a"}, {"score": 1, "score": 0}]}"#,
                "steps[1].score",
            ),
            (r#"[{"a": {"b": 1, "b": 2}}]"#, "[0].a.b"),
        ];
        for (doc, path) in cases {
            let e = from_slice(doc.as_bytes()).unwrap_err();
            assert_eq!(e.duplicate.as_deref(), Some(path), "{doc}");
            assert!(e.json.to_string().contains("duplicate key"), "{}", e.json);
        }
        // Equal keys in different objects are fine.
        assert!(from_slice(br#"{"a": {"x": 1}, "b": {"x": 2}}"#).is_ok());
    }

    #[test]
    fn trailing_data_is_refused() {
        assert!(from_slice(b"{} x").is_err());
        assert!(from_slice(b"{} ").is_ok());
    }
}
