//! The types that cross into the front ends are written by hand in the
//! npm declarations (pkg/src/index.d.ts) and the Python stubs
//! (crates/stepscore-py/python/stepscore/_stepscore.pyi); this test reads
//! both and checks them against the Rust definitions, so they cannot drift:
//! every option of `ScorerOptions` under its front-end name, every value of
//! its vocabularies (families, backends, truncation, quantization,
//! aggregations), and the fields of the result and option objects the npm
//! package passes through in the core's serde form.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Serialize;
use stepscore::aggregate::Aggregation;
use stepscore::engine::Sampling;
use stepscore::prm::{
    Backend, Critique, Family, GenerateOptions, ScorerOptions, SearchOptions, StopReason,
    TraceScore, Truncation, QUANTIZE_NAMES,
};
use stepscore::reward::DenseMode;

fn read(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ts() -> String {
    read("pkg/src/index.d.ts")
}

fn pyi() -> String {
    read("crates/stepscore-py/python/stepscore/_stepscore.pyi")
}

fn set<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> BTreeSet<String> {
    items.into_iter().map(Into::into).collect()
}

/// The serde names of an enum's values.
fn names<T: Serialize>(values: impl IntoIterator<Item = T>) -> BTreeSet<String> {
    values
        .into_iter()
        .map(|v| match serde_json::to_value(v).unwrap() {
            serde_json::Value::String(s) => s,
            other => panic!("not a name: {other}"),
        })
        .collect()
}

/// The serde field names of a struct value (every optional field set, so
/// none is skipped).
fn fields<T: Serialize>(value: &T) -> BTreeSet<String> {
    match serde_json::to_value(value).unwrap() {
        serde_json::Value::Object(map) => map.keys().cloned().collect(),
        other => panic!("not an object: {other}"),
    }
}

fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        match (c, upper) {
            ('_', _) => upper = true,
            (c, true) => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            (c, false) => out.push(c),
        }
    }
    out
}

/// `export type Name = 'a' | 'b';` as {a, b}.
fn ts_union(src: &str, name: &str) -> BTreeSet<String> {
    let head = format!("export type {name} = ");
    let start = src
        .find(&head)
        .unwrap_or_else(|| panic!("index.d.ts: no `{head}`"));
    let body = &src[start + head.len()..];
    let body = &body[..body.find(';').expect("a `;`")];
    body.split('|')
        .map(|v| v.trim().trim_matches('\'').to_string())
        .collect()
}

/// The member names of `export interface Name { ... }` (one level deep).
fn ts_interface(src: &str, name: &str) -> BTreeSet<String> {
    let head = format!("export interface {name} {{");
    let start = src
        .find(&head)
        .unwrap_or_else(|| panic!("index.d.ts: no `{head}`"));
    let mut depth = 1;
    let mut out = BTreeSet::new();
    for line in src[start + head.len()..].lines() {
        let t = line.trim();
        if t.starts_with('*') || t.starts_with("/*") || t.starts_with("//") {
            continue;
        }
        if depth == 1 {
            let ident: String = t
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let rest = &t[ident.len()..];
            if !ident.is_empty() && (rest.starts_with(':') || rest.starts_with("?:")) {
                out.insert(ident);
            }
        }
        depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
        if depth <= 0 {
            return out;
        }
    }
    panic!("index.d.ts: `{name}` does not end");
}

/// `Name = Literal["a", "b"]` in the stubs as {a, b}.
fn py_literal(src: &str, name: &str) -> BTreeSet<String> {
    let head = format!("{name} = Literal[");
    let start = src
        .find(&head)
        .unwrap_or_else(|| panic!("_stepscore.pyi: no `{head}`"));
    let body = &src[start + head.len()..];
    body[..body.find(']').expect("a `]`")]
        .split(',')
        .map(|v| v.trim().trim_matches('"').to_string())
        .collect()
}

/// The parameter list of `def method(` inside `class Name:` in the stubs.
fn py_signature<'a>(src: &'a str, class: &str, method: &str) -> &'a str {
    let class_at = src
        .find(&format!("class {class}:"))
        .unwrap_or_else(|| panic!("_stepscore.pyi: no class {class}"));
    let def = format!("def {method}(");
    let at = class_at + src[class_at..].find(&def).expect("the method");
    let body = &src[at + def.len()..];
    &body[..body.find(") ->").expect("`) ->`")]
}

/// The parameters of `def method(` inside `class Name:`, as (name, annotation).
fn py_params(src: &str, class: &str, method: &str) -> Vec<(String, String)> {
    py_signature(src, class, method)
        .split(",\n")
        .flat_map(|p| p.split(", "))
        .filter_map(|p| {
            let p = p.trim();
            let (name, rest) = p.split_once(':')?;
            let annotation = rest.split('=').next().unwrap_or("").trim();
            Some((name.trim().to_string(), annotation.to_string()))
        })
        .collect()
}

/// The `@property` names of `class Name:` in the stubs.
fn py_properties(src: &str, class: &str) -> BTreeSet<String> {
    let start = src
        .find(&format!("class {class}:"))
        .unwrap_or_else(|| panic!("_stepscore.pyi: no class {class}"));
    let mut out = BTreeSet::new();
    let mut property = false;
    for line in src[start..].lines().skip(1) {
        if !line.starts_with(' ') && !line.is_empty() {
            break;
        }
        let t = line.trim();
        if t == "@property" {
            property = true;
        } else if let Some(rest) = t.strip_prefix("def ").filter(|_| property) {
            out.insert(rest[..rest.find('(').unwrap()].to_string());
            property = false;
        }
    }
    out
}

#[test]
fn vocabularies_match_the_core() {
    let (ts, pyi) = (ts(), pyi());
    let families = names(Family::ALL);
    let backends = set(Backend::NAMES);
    let truncations = names(Truncation::ALL);
    let quantize = set(QUANTIZE_NAMES);
    let aggregations = names(Aggregation::ALL);
    // Python only: the npm package has no dense rewards.
    assert_eq!(py_literal(&pyi, "DenseModeName"), names(DenseMode::ALL));
    // Every name the core's parsers read parses, and nothing else is listed.
    for n in &backends {
        assert!(n.parse::<Backend>().is_ok(), "{n}");
    }
    for n in &quantize {
        assert!(stepscore::prm::parse_quantize(n).is_ok(), "{n}");
    }
    for (what, want, ts_name, py_name) in [
        ("family", &families, "Family", "FamilyName"),
        ("backend", &backends, "Backend", "BackendName"),
        ("truncation", &truncations, "Truncation", "TruncationName"),
        ("quantize", &quantize, "Quantize", "QuantizeName"),
        (
            "aggregation",
            &aggregations,
            "Aggregation",
            "AggregationName",
        ),
    ] {
        assert_eq!(
            &ts_union(&ts, ts_name),
            want,
            "index.d.ts {ts_name} ({what})"
        );
        assert_eq!(
            &py_literal(&pyi, py_name),
            want,
            "_stepscore.pyi {py_name} ({what})"
        );
    }
}

#[test]
fn scorer_options_are_every_front_end_s_load_options() {
    let keys = fields(&ScorerOptions::default());
    assert_eq!(
        keys,
        set([
            "family",
            "backend",
            "threads",
            "max_tokens",
            "truncation",
            "quantize"
        ])
    );
    // npm: each option in camelCase, typed by its vocabulary's name.
    let load = ts_interface(&ts(), "LoadOptions");
    for k in &keys {
        assert!(
            load.contains(&camel(k)),
            "index.d.ts LoadOptions lacks `{}`",
            camel(k)
        );
    }
    // Python: each option a keyword of Scorer(), typed by its vocabulary.
    let params = py_params(&pyi(), "Scorer", "__init__");
    let annotation = |k: &str| {
        params
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| panic!("_stepscore.pyi Scorer() lacks `{k}`"))
    };
    for k in &keys {
        let want = match k.as_str() {
            "family" => "Optional[FamilyName]",
            "backend" => "Optional[BackendName]",
            "truncation" => "Optional[TruncationName]",
            "quantize" => "Optional[QuantizeName]",
            _ => "Optional[int]",
        };
        assert_eq!(annotation(k), want, "_stepscore.pyi Scorer({k}=...)");
    }
}

#[test]
fn results_and_pass_through_options_have_the_core_s_fields() {
    let ts = ts();
    // TraceScore: every core field (optional ones set) in npm and Python.
    let score = TraceScore {
        step_scores: vec![Some(0.5)],
        tokens: 3,
        truncated_steps: 0,
        outcome_logit: Some(0.0),
        confidence: Some(vec![]),
        token_logprobs: Some(vec![]),
        critique: Some(Critique {
            text: String::new(),
            verdicts: vec![],
            stop_reason: Some(StopReason::EndOfTurn),
        }),
    };
    let core = fields(&score);
    let npm = ts_interface(&ts, "TraceScore");
    let py = py_properties(&pyi(), "TraceScore");
    for k in &core {
        assert!(
            npm.contains(&camel(k)),
            "index.d.ts TraceScore lacks `{}`",
            camel(k)
        );
        assert!(py.contains(k), "_stepscore.pyi TraceScore lacks `{k}`");
    }
    // The npm package hands these to the core as they are (camelCase keys):
    // the declarations list exactly the core's fields, plus the members the
    // package itself handles (named here).
    let js_only = |name: &str| -> BTreeSet<String> {
        match name {
            "GenerateOptions" => set(["signal"]),
            "SearchOptions" => set(["signal", "onEvent", "verifier"]),
            _ => BTreeSet::new(),
        }
    };
    // A critique's fields, as npm spells them.
    let critique = fields(score.critique.as_ref().unwrap());
    let declared = ts_interface(&ts, "Critique");
    for k in &critique {
        assert!(
            declared.contains(&camel(k)),
            "index.d.ts Critique lacks `{}`",
            camel(k)
        );
    }
    for (name, core) in [
        ("GenerateOptions", fields(&GenerateOptions::default())),
        ("SearchOptions", fields(&SearchOptions::default())),
        ("Sampling", fields(&Sampling::default())),
    ] {
        let core: BTreeSet<String> = core.iter().map(|k| camel(k)).collect();
        let declared: BTreeSet<String> = ts_interface(&ts, name)
            .difference(&js_only(name))
            .cloned()
            .collect();
        assert_eq!(declared, core, "index.d.ts {name}");
    }
}

/// The leaves of an options value's serde form, each by its field name:
/// objects (`sampling`, a search's `generate`) opened, as Python writes
/// the keywords flat.
fn leaves(value: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    for (k, v) in value.as_object().expect("an object") {
        match v {
            serde_json::Value::Object(_) => out.extend(leaves(v)),
            _ => assert!(out.insert(k.clone(), v.clone()).is_none(), "{k} twice"),
        }
    }
    out
}

/// The keyword defaults of `def method(` in `class Name:` of the stubs, as
/// JSON (Python literals: numbers, strings, True/False/None, `()`).
fn py_defaults(src: &str, class: &str, method: &str) -> BTreeMap<String, serde_json::Value> {
    py_signature(src, class, method)
        .split(",\n")
        .filter_map(|p| {
            let (name, rest) = p.trim().split_once(':')?;
            let (_, literal) = rest.split_once(" = ")?;
            let value = match literal.trim() {
                "True" => serde_json::Value::Bool(true),
                "False" => serde_json::Value::Bool(false),
                "None" => serde_json::Value::Null,
                "()" => serde_json::json!([]),
                l => serde_json::from_str(l)
                    .unwrap_or_else(|_| panic!("{method}({name}=...): literal {l}")),
            };
            Some((name.trim().to_string(), value))
        })
        .collect()
}

/// The defaults index.d.ts documents for the members of `interface name`:
/// "(default 40)", "default 0.8.", "Default 'best-of-n'."
fn ts_documented_defaults(src: &str, name: &str) -> BTreeMap<String, serde_json::Value> {
    let head = format!("export interface {name} {{");
    let start = src.find(&head).expect("the interface") + head.len();
    let body = &src[start..start + src[start..].find("\n}").expect("its end")];
    let default =
        regex::Regex::new(r"(?i)default (-?[0-9][0-9.]*[0-9]|-?[0-9]|'[^']*'|true|false)").unwrap();
    let mut out = BTreeMap::new();
    let mut doc = String::new();
    for line in body.lines() {
        let t = line.trim();
        if t.starts_with("/**") || t.starts_with('*') {
            doc.push_str(t);
            doc.push(' ');
            continue;
        }
        let member: String = t.chars().take_while(|c| c.is_alphanumeric()).collect();
        if let (false, Some(c)) = (member.is_empty(), default.captures(&doc)) {
            let literal = c[1].replace('\'', "\"");
            out.insert(member, serde_json::from_str(&literal).unwrap());
        }
        doc.clear();
    }
    out
}

/// JSON values equal as the front ends mean them: numbers by value (`1` is `1.0`).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Python keywords and npm's documented defaults against the core's
/// `GenerateOptions` and `SearchOptions` (the one table of those defaults:
/// the bindings read keywords through the core's serde types and decide
/// none). `keep` are each call's own parameters.
fn check_generation_keywords(pyi: &str, ts: &str) -> Result<(), String> {
    let generate = leaves(&serde_json::to_value(GenerateOptions::default()).unwrap());
    let search = leaves(&serde_json::to_value(SearchOptions::default()).unwrap());
    let mut search_keywords = search.clone();
    search_keywords.remove("stop_at_step");
    for (method, core, own) in [
        ("generate", &generate, &["prompt"][..]),
        ("generate_many", &generate, &["prompt", "n"][..]),
        (
            "search",
            &search_keywords,
            &["problem", "verifier", "on_event"][..],
        ),
    ] {
        let names: BTreeSet<String> = py_params(pyi, "Scorer", method)
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| !own.contains(&n.as_str()))
            .collect();
        let want: BTreeSet<String> = core.keys().cloned().collect();
        if names != want {
            return Err(format!(
                "_stepscore.pyi Scorer.{method} keywords {names:?}, core {want:?}"
            ));
        }
        for (k, v) in py_defaults(pyi, "Scorer", method) {
            let Some(core_value) = core.get(&k) else {
                continue;
            };
            // The search's system message is too long to spell in a stub:
            // None there keeps it (the binding's rule for every keyword).
            let spelled_as_none = method == "search" && k == "system" && v.is_null();
            if !same(&v, core_value) && !spelled_as_none {
                return Err(format!(
                    "_stepscore.pyi Scorer.{method}({k}={v}): the core's default is {core_value}"
                ));
            }
        }
    }
    let all: BTreeMap<String, serde_json::Value> = generate
        .iter()
        .chain(&search)
        .map(|(k, v)| (camel(k), v.clone()))
        .collect();
    for name in ["Sampling", "GenerateOptions", "SearchOptions"] {
        for (member, documented) in ts_documented_defaults(ts, name) {
            if !all.get(&member).is_some_and(|v| same(v, &documented)) {
                return Err(format!(
                    "index.d.ts {name}.{member} documents default {documented}, the core's is {:?}",
                    all.get(&member)
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn generation_and_search_keywords_have_the_core_s_names_and_defaults() {
    check_generation_keywords(&pyi(), &ts()).unwrap();
    // Most of npm's documented defaults are checked, not only a few.
    let documented: usize = ["Sampling", "GenerateOptions", "SearchOptions"]
        .iter()
        .map(|n| ts_documented_defaults(&ts(), n).len())
        .sum();
    assert!(documented >= 12, "{documented} documented defaults read");
}

/// The checks fail on a deliberate mismatch (a test that cannot fail checks
/// nothing): a stub missing an option, a declaration with a stray value.
#[test]
fn a_mismatch_is_caught() {
    let pyi = pyi().replace("        truncation: Optional[TruncationName] = None,\n", "");
    assert!(py_params(&pyi, "Scorer", "__init__")
        .iter()
        .all(|(n, _)| n != "truncation"));
    let ts = ts().replace(
        "export type Truncation = 'error' | 'drop-steps';",
        "export type Truncation = 'error' | 'drop-steps' | 'cut';",
    );
    assert_ne!(ts_union(&ts, "Truncation"), names(Truncation::ALL));
    // A front end's default that differs from the core's, in each place.
    let (pyi, ts) = (self::pyi(), self::ts());
    for (bad_pyi, bad_ts) in [
        (
            pyi.replacen("max_new_tokens: int = 512", "max_new_tokens: int = 256", 1),
            ts.clone(),
        ),
        (
            pyi.replacen("        top_k: int = 40,\n", "", 1),
            ts.clone(),
        ),
        (pyi.clone(), ts.replace("(default 40)", "(default 50)")),
    ] {
        assert!(check_generation_keywords(&bad_pyi, &bad_ts).is_err());
    }
}
