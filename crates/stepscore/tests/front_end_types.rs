//! The types that cross into the front ends are written by hand in the
//! npm declarations (pkg/src/index.d.ts) and the Python stubs
//! (crates/stepscore-py/python/stepscore/_stepscore.pyi); this test reads
//! both and checks them against the Rust definitions, so they cannot drift:
//! every option of `ScorerOptions` under its front-end name, every value of
//! its vocabularies (families, backends, truncation, quantization,
//! aggregations), and the fields of the result and option objects the npm
//! package passes through in the core's serde form.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;
use stepscore::aggregate::Aggregation;
use stepscore::prm::{
    Backend, Critique, Family, GenerateOptions, ScorerOptions, SearchOptions, StopReason,
    TraceScore, Truncation, QUANTIZE_NAMES,
};
use stepscore::reward::DenseMode;
use stepscore::sample::Sampling;

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

/// The parameters of `def method(` inside `class Name:`, as (name, annotation).
fn py_params(src: &str, class: &str, method: &str) -> Vec<(String, String)> {
    let class_at = src
        .find(&format!("class {class}:"))
        .unwrap_or_else(|| panic!("_stepscore.pyi: no class {class}"));
    let def = format!("def {method}(");
    let at = class_at + src[class_at..].find(&def).expect("the method");
    let body = &src[at + def.len()..];
    let body = &body[..body.find(") ->").expect("`) ->`")];
    body.split(",\n")
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
}
