//! JSON parsing that refuses duplicate object keys and numbers it cannot
//! keep. serde_json keeps the last of two equal keys without a word, so
//! `{"label": -1, "label": 2}` would silently mean `2`; here it is an error
//! naming the key's path.
//!
//! Numbers. serde_json keeps integers of up to 64 bits exactly and reads any
//! other number as the nearest f64, so `123456789012345678912345` would come
//! out as `1.2345678901234568e23` and two different ids could become one. Its
//! `arbitrary_precision` feature would keep every number's text, but it is
//! workspace-wide and changes what every crate sees (a `Number` serializes
//! as a private map, which serde-wasm-bindgen hands to JS as an object, and a
//! visitor such as this one receives maps instead of numbers; numbers of good
//! input would be written back as typed, `1e-07`, rather than as before). So
//! the parser instead finds each number's text in the row and compares it
//! with the value serde_json read: a top-level `id` or answer field
//! (`answer`, `reference_answer`, ...: `fields::keeps_number_text`) keeps its
//! text (an id is a name, and an answer is compared as written, so
//! `0.1000000000000000000001` is not the answer `0.1`), and any other number
//! that a float would change is refused, naming its path, rather than
//! rounded.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::fields::keeps_number_text;

/// A JSON parse failure: serde_json's error, plus the path of the value at
/// fault (`steps[1].score`) when a duplicated key or a number that cannot be
/// kept is what failed.
#[derive(Debug)]
pub(crate) struct StrictError {
    pub json: serde_json::Error,
    pub field: Option<String>,
}

/// Parses one JSON value, refusing duplicate keys at any depth and numbers
/// that would be rounded (module docs).
pub(crate) fn from_slice(bytes: &[u8]) -> Result<Value, StrictError> {
    parse(bytes, true)
}

/// [`from_slice`] refusing duplicate keys only, numbers read as serde_json
/// reads them: for JSON that is not a row (a streamed completion's chunk,
/// whose `logprobs` and `timings` floats are the server's, not ours to refuse).
pub(crate) fn unique_keys(bytes: &[u8]) -> Result<Value, StrictError> {
    parse(bytes, false)
}

fn parse(bytes: &[u8], exact: bool) -> Result<Value, StrictError> {
    let numbers = if exact {
        number_tokens(bytes)
    } else {
        Vec::new()
    };
    let ctx = Context {
        bad: RefCell::new(None),
        text: bytes,
        numbers: RefCell::new(numbers.into_iter()),
        exact,
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = ValueSeed {
        path: &Path::Root,
        ctx: &ctx,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    parsed.map_err(|json| StrictError {
        json,
        field: ctx.bad.into_inner(),
    })
}

/// What the visitors share: the path of the value at fault, and the row's
/// number tokens in document order (serde_json visits values in that order).
struct Context<'a> {
    bad: RefCell<Option<String>>,
    text: &'a [u8],
    numbers: RefCell<std::vec::IntoIter<(usize, usize)>>,
    /// Numbers are kept or refused (module docs); else taken as read.
    exact: bool,
}

impl Context<'_> {
    /// The text of the number being visited.
    fn next_number(&self) -> &str {
        let range = self.numbers.borrow_mut().next();
        range
            .and_then(|(a, b)| self.text.get(a..b))
            .and_then(|t| std::str::from_utf8(t).ok())
            .unwrap_or("")
    }
}

/// The byte ranges of the number tokens of a JSON text (outside strings, a
/// run of number characters starting with `-` or a digit). Only used on text
/// serde_json accepts, whose numbers are exactly these runs.
fn number_tokens(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut strings = super::JsonStrings::default();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        // A number's bytes hold no quote, so skipping them leaves the tracker right.
        if !strings.structural(b) {
            i += 1;
        } else if b == b'-' || b.is_ascii_digit() {
            let len = bytes[i..]
                .iter()
                .take_while(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .count();
            out.push((i, i + len));
            i += len;
        } else {
            i += 1;
        }
    }
    out
}

/// A decimal number's value as (negative, significant digits without leading
/// or trailing zeros, power of ten of the last digit); `None` when it is not
/// a plain decimal. Zero has no digits and is never negative.
fn decimal_value(text: &str) -> Option<(bool, String, i64)> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    let kept = digits.trim_end_matches('0');
    let frac_len = i64::try_from(frac.len()).ok()?;
    let trailing = i64::try_from(digits.len() - kept.len()).ok()?;
    let exp = exp.checked_sub(frac_len)?.checked_add(trailing)?;
    Some(if kept.is_empty() {
        (false, String::new(), 0)
    } else {
        (neg, kept.to_string(), exp)
    })
}

/// Whether `x`, the float serde_json read from `text`, is exactly the number
/// written there (Rust's `{:e}` is the shortest text that reads back as `x`,
/// so equal decimal values mean nothing was rounded).
fn float_is_exact(text: &str, x: f64) -> bool {
    match (decimal_value(text), decimal_value(&format!("{x:e}"))) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
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
    ctx: &'a Context<'a>,
}

impl ValueSeed<'_> {
    /// A top-level `id` or answer field, whose number keeps its text.
    fn keeps_text(&self) -> bool {
        matches!(self.path, Path::Key(Path::Root, key) if keeps_number_text(key))
    }

    /// An error about the value at this path.
    fn fail<E: de::Error>(&self, message: String) -> E {
        *self.ctx.bad.borrow_mut() = Some(self.path.to_string());
        E::custom(message)
    }

    /// A number that is exact as read, or an id's or answer's text.
    fn number<E: de::Error>(self, value: Number) -> Result<Value, E> {
        if !self.ctx.exact {
            return Ok(Value::Number(value));
        }
        let text = self.ctx.next_number();
        if self.keeps_text() && !text.is_empty() {
            return Ok(Value::String(text.to_string()));
        }
        Ok(Value::Number(value))
    }
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

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        self.number(n.into())
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        self.number(n.into())
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Value, E> {
        if self.ctx.exact && !self.keeps_text() {
            let text = self.ctx.next_number();
            if !float_is_exact(text, x) {
                return Err(self.fail(format!(
                    "the number {text} cannot be kept exactly (it would be read as {x:e}); \
                     write it as a string"
                )));
            }
        }
        // serde_json only hands out finite floats.
        match Number::from_f64(x) {
            Some(n) if self.keeps_text() => self.number(n),
            Some(n) => Ok(Value::Number(n)),
            None => Ok(Value::Null),
        }
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
                ctx: self.ctx,
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
            let seed = ValueSeed {
                path: &path,
                ctx: self.ctx,
            };
            if out.contains_key(&key) {
                return Err(seed.fail(format!("duplicate key `{path}`")));
            }
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
            assert_eq!(e.field.as_deref(), Some(path), "{doc}");
            assert!(e.json.to_string().contains("duplicate key"), "{}", e.json);
        }
        // Equal keys in different objects are fine.
        assert!(from_slice(br#"{"a": {"x": 1}, "b": {"x": 2}}"#).is_ok());
    }

    /// The shortest text of any f64 (Rust's `{}`, Python's repr, JS's
    /// String()) reads back as that f64: the reader refuses inexact text,
    /// never a float another program wrote exactly.
    #[test]
    fn every_float_written_exactly_is_read() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        // Found by the results-table script: one ulp off without float_roundtrip.
        let mut xs = vec![
            0.9428695374378335f64,
            0.050610957904528284,
            0.9401233615839523,
        ];
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Probabilities, and any finite double.
            xs.push((s >> 11) as f64 / (1u64 << 53) as f64);
            let any = f64::from_bits(s);
            if any.is_finite() {
                xs.push(any);
            }
        }
        for x in xs {
            let doc = format!("{{\"x\": [{x:?}, {x:e}]}}");
            let v = from_slice(doc.as_bytes()).unwrap_or_else(|e| panic!("{doc}: {}", e.json));
            for got in v["x"].as_array().unwrap() {
                assert_eq!(got.as_f64().unwrap().to_bits(), x.to_bits(), "{doc}");
            }
        }
    }

    /// Issue 23, item 7: numbers keep their text or are refused, never
    /// rounded; two different ids stay two.
    #[test]
    fn numbers_are_never_rounded() {
        let doc = br#"{"id": 123456789012345678912345, "n": 18446744073709551615, "x": [0.1, 1e-7, -2.50, 1E3]}"#;
        let v = from_slice(doc).unwrap();
        assert_eq!(v["id"], Value::String("123456789012345678912345".into()));
        assert_ne!(
            from_slice(br#"{"id": 123456789012345678912346}"#).unwrap()["id"],
            v["id"]
        );
        assert_eq!(from_slice(br#"{"id": 1.50}"#).unwrap()["id"], "1.50");
        assert_eq!(from_slice(br#"{"id": -0}"#).unwrap()["id"], "-0");
        // Exact numbers are the values serde_json gives.
        let want: Value = serde_json::from_slice(doc).unwrap();
        assert_eq!(v["n"], want["n"]);
        assert_eq!(v["x"], want["x"]);
        for (doc, path, text) in [
            (
                r#"{"n": 123456789012345678912345}"#,
                "n",
                "123456789012345678912345",
            ),
            (
                r#"{"a": [1, {"b": 0.10000000000000000001}]}"#,
                "a[1].b",
                "0.10000000000000000001",
            ),
            (
                r#"{"s": "-1 2", "x": 9007199254740993.0}"#,
                "x",
                "9007199254740993.0",
            ),
            (r#"{"x": 1e-400}"#, "x", "1e-400"),
            (
                r#"{"x": [{"id": 12345678901234567890123}]}"#,
                "x[0].id",
                "12345678901234567890123",
            ),
        ] {
            let e = from_slice(doc.as_bytes()).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(path), "{doc}");
            let msg = e.json.to_string();
            assert!(
                msg.contains(&format!("the number {text} cannot be kept exactly")),
                "{msg}"
            );
        }
    }

    /// Issue 44, D15: chunks of a stream refuse duplicate keys but take
    /// the server's numbers as read.
    #[test]
    fn unique_keys_takes_numbers_as_read() {
        let v = unique_keys(br#"{"id": 123456789012345678912345, "x": 0.10000000000000000001}"#)
            .unwrap();
        assert_eq!(v["x"], 0.1);
        assert!(v["id"].is_number());
        let e = unique_keys(br#"{"a": [{"c": "x", "c": "y"}]}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("a[0].c"));
    }

    /// Issue 44, D5: an answer keeps its number's text as an id does
    /// (`generate`/`search` had rounded `0.1000000000000000000001` to
    /// `0.1`); only top-level answer fields, other numbers stay refused.
    #[test]
    fn answers_keep_their_number_text() {
        let v = from_slice(
            br#"{"answer": 0.1000000000000000000001, "reference_answer": 12345678901234567890123, "gold": 2.50}"#,
        )
        .unwrap();
        assert_eq!(v["answer"], "0.1000000000000000000001");
        assert_eq!(v["reference_answer"], "12345678901234567890123");
        assert_eq!(v["gold"], "2.50");
        let e = from_slice(br#"{"x": {"answer": 0.1000000000000000000001}}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("x.answer"));
    }

    #[test]
    fn trailing_data_is_refused() {
        assert!(from_slice(b"{} x").is_err());
        assert!(from_slice(b"{} ").is_ok());
    }
}
