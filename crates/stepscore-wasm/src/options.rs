//! Options in and results out in the core's own serde form, spelled the JS
//! way: the core's field names in camelCase (`maxNewTokens` is
//! `max_new_tokens`, at every depth), values as the core writes them
//! (kebab-case names such as `best-of-n`, `step-end`). The core's types do
//! the checking (`deny_unknown_fields`, their defaults); this only renames
//! keys, and renames the field names in an error message back, so a message
//! names what the caller wrote.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Reads `value` (`undefined` / `null`: the defaults) as the core's `T`;
/// `what` names the object in messages (`generate options`).
pub fn core_options<T: DeserializeOwned + Default>(value: &Value, what: &str) -> Result<T> {
    if value.is_null() {
        return Ok(T::default());
    }
    if !value.is_object() {
        return Err(Error::invalid_argument(format!(
            "{what} must be an object, got {}",
            stepscore::io::json_type_name(value)
        )));
    }
    let snake = to_snake_keys(value, what, "")?;
    serde_path_to_error::deserialize::<_, T>(snake).map_err(|e| {
        let path = e.path().to_string();
        let message = camel_in_backticks(&e.inner().to_string());
        if path == "." {
            Error::invalid_argument(format!("{what}: {message}"))
        } else {
            Error::invalid_argument(format!("{what}: `{}`: {message}", camel_path(&path)))
        }
    })
}

/// The same value with every object key renamed from camelCase to
/// snake_case; a key already holding `_` is refused (one spelling only).
fn to_snake_keys(value: &Value, what: &str, at: &str) -> Result<Value> {
    Ok(match value {
        Value::Object(obj) => {
            let mut out = Map::with_capacity(obj.len());
            for (key, v) in obj {
                let here = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                if key.contains('_') {
                    return Err(Error::invalid_argument(format!(
                        "{what}: unknown option `{here}` (options are camelCase: `{}`)",
                        camel(key)
                    )));
                }
                out.insert(snake(key), to_snake_keys(v, what, &here)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

/// A core value serialized as JSON with every object key in camelCase.
pub fn camel_keys(value: Value) -> Value {
    match value {
        Value::Object(obj) => Value::Object(
            obj.into_iter()
                .map(|(k, v)| (camel(&k), camel_keys(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(camel_keys).collect()),
        other => other,
    }
}

/// The core's checks name fields in snake_case words (`sampling top_p = 2:
/// must be in (0, 1]`): each such word (lowercase parts joined by `_`, each
/// starting with a letter) in camelCase, as the caller wrote the option.
pub fn camel_words(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        // Each `_` between a word's parts and followed by a letter (not `q4_0`).
        let parts: Vec<&str> = word.split('_').collect();
        let field = parts.len() > 1
            && !word.contains(|c: char| c.is_ascii_uppercase())
            && parts
                .iter()
                .all(|p| p.starts_with(|c: char| c.is_ascii_lowercase()));
        if field {
            out.push_str(&camel(word));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in message.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn camel_path(path: &str) -> String {
    path.split('.').map(camel).collect::<Vec<_>>().join(".")
}

/// serde quotes field names in backticks (`unknown field `top_kk`, expected
/// one of `temperature`, `top_k`, ...`): each snake_case one back to camelCase.
fn camel_in_backticks(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for (i, part) in message.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        let identifier = !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if i % 2 == 1 && identifier {
            out.push_str(&camel(part));
        } else {
            out.push_str(part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stepscore::prm::GenerateOptions;

    #[test]
    fn camel_case_keys_reach_the_core_fields_at_every_depth() {
        let o: GenerateOptions = core_options(
            &json!({"maxNewTokens": 7, "stopAtStep": true, "sampling": {"topK": 3, "temperature": 0}}),
            "generate options",
        )
        .unwrap();
        assert_eq!(o.max_new_tokens, 7);
        assert!(o.stop_at_step);
        assert_eq!(o.sampling.top_k, 3);
        assert_eq!(o.sampling.temperature, 0.0);
        // Unset fields keep the core's defaults.
        assert_eq!(o.sampling.top_p, 0.95);
        assert!(o.chat);
        let d: GenerateOptions = core_options(&Value::Null, "generate options").unwrap();
        assert_eq!(d, GenerateOptions::default());
    }

    #[test]
    fn results_come_out_with_camel_case_keys_and_kebab_values() {
        let event = serde_json::to_value(stepscore::prm::SearchEvent::Finished {
            candidate: 2,
            stop_reason: stepscore::prm::StopReason::StepEnd,
        })
        .unwrap();
        assert_eq!(
            camel_keys(event),
            json!({"event": "finished", "candidate": 2, "stopReason": "step-end"})
        );
        assert_eq!(
            camel_keys(json!([{"a_b": {"c_d_e": 1}}])),
            json!([{"aB": {"cDE": 1}}])
        );
    }

    #[test]
    fn the_cores_checks_name_fields_in_camel_case() {
        assert_eq!(
            camel_words("sampling top_p = 2: must be in (0, 1]"),
            "sampling topP = 2: must be in (0, 1]"
        );
        assert_eq!(
            camel_words("beam_width = 3 with n = 4: n must be a positive multiple of beam_width"),
            "beamWidth = 3 with n = 4: n must be a positive multiple of beamWidth"
        );
        // Words without an inner underscore stay as they are.
        assert_eq!(camel_words("_x y_ Top_p q4_0"), "_x y_ Top_p q4_0");
    }

    #[test]
    fn errors_name_the_field_as_the_caller_wrote_it() {
        let e =
            core_options::<GenerateOptions>(&json!({"sampling": {"topKk": 3}}), "generate options")
                .unwrap_err();
        assert!(
            e.message.contains("unknown field `topKk`") && e.message.contains("`topK`"),
            "{}",
            e.message
        );
        let e = core_options::<GenerateOptions>(&json!({"maxNewTokens": 1.5}), "generate options")
            .unwrap_err();
        assert!(
            e.message
                .starts_with("generate options: `maxNewTokens`: invalid type"),
            "{}",
            e.message
        );
        let e = core_options::<GenerateOptions>(&json!({"max_new_tokens": 3}), "generate options")
            .unwrap_err();
        assert_eq!(
            e.message,
            "generate options: unknown option `max_new_tokens` (options are camelCase: `maxNewTokens`)"
        );
        let e = core_options::<GenerateOptions>(&json!([1]), "generate options").unwrap_err();
        assert_eq!(
            e.message,
            "generate options must be an object, got an array"
        );
    }
}
