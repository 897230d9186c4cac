//! The allowed direction of imports between the top-level modules of the
//! core crate and of the engine crate under it (docs/ARCHITECTURE.md,
//! "Import directions"): every module has a
//! layer, and code may only name (`crate::m`, in `use` lines or paths)
//! modules of a lower layer. Layers make cycles impossible; the cycle
//! search below still reports one by name if the table is ever edited into
//! one. A module missing from the table fails the test, so a new module
//! gets a place. Comments are ignored (doc links are not imports).
//!
//! Inside a module the same holds without a layer table: the submodules of
//! one module (its files and folders, beside `mod.rs`) import each other
//! (`super::x`, `crate::m::x`, or an item `mod.rs` re-exports from `x`)
//! without a circle. Test modules (`#[cfg(test)] mod tests`) are left out:
//! a test may use any sibling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// (module, layer): a module may import only modules of a lower layer.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("answer", 0),
    ("rational", 0),
    ("recompute", 1),
    ("trace", 1),
    ("ggml", 1),
    ("par", 1),
    ("validate", 2),
    ("segment", 3),
    ("aggregate", 3),
    ("reward", 3),
    ("quant", 3),
    ("format", 3),
    ("io", 4),
    ("metrics", 4),
    ("select", 4),
    ("tokenizer", 4),
    ("model", 4),
    ("stream", 5),
    ("cpu", 5),
    ("gpu", 5),
    ("sample", 5),
    ("prm", 6),
    ("catalog", 7),
    ("testing", 8),
    ("prelude", 8),
];

/// The top-level modules each file names through `crate::`, by module.
fn imports(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in files {
        let deps = out.entry(module.clone()).or_default();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                    // `use crate::{a::X, b};`: the first segment of each item.
                    let end = group.find('}').unwrap_or(group.len());
                    group[..end]
                        .split(',')
                        .map(|item| item.trim().split("::").next().unwrap_or(""))
                        .collect()
                } else {
                    vec![rest
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or("")]
                };
                for n in names {
                    if !n.is_empty()
                        && n != module
                        && n.chars().next().is_some_and(|c| c.is_lowercase())
                    {
                        deps.insert(n.to_string());
                    }
                }
            }
        }
    }
    out
}

/// Every violation of the layer rule, and every cycle, as messages.
fn check(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let layer = |m: &str| LAYERS.iter().find(|(n, _)| *n == m).map(|(_, l)| *l);
    let mut errors = Vec::new();
    for (m, deps) in graph {
        let Some(lm) = layer(m) else {
            errors.push(format!(
                "module `{m}` has no layer in tests/architecture.rs"
            ));
            continue;
        };
        for d in deps {
            match layer(d) {
                // Names outside the table (`crate::Error` re-exports are
                // capitalised and skipped) are not modules.
                None => {}
                Some(ld) if ld >= lm => errors.push(format!(
                    "`{m}` (layer {lm}) imports `{d}` (layer {ld}): imports go only to lower layers"
                )),
                Some(_) => {}
            }
        }
    }
    // Depth-first search for a cycle, named module by module.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        errors: &mut Vec<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == m) {
            errors.push(format!("import cycle: {} -> {m}", path[i..].join(" -> ")));
            return;
        }
        if !done.insert(m.to_string()) {
            return;
        }
        path.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            visit(d, g, path, done, errors);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        visit(m, graph, &mut Vec::new(), &mut done, &mut errors);
    }
    errors
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source folders of the two crates: stepscore's and the engine's, whose
/// modules stepscore re-exports under the same names (`crate::model` means
/// the engine's in both), so one layer table orders them all. The compiler
/// already keeps the engine from naming stepscore's modules.
fn source_dirs() -> [PathBuf; 2] {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [here.join("src"), here.join("../stepscore-engine/src")]
}

#[test]
fn core_modules_import_only_downward_and_form_no_cycle() {
    let mut files: Vec<(String, String)> = Vec::new();
    for src in source_dirs() {
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        files.extend(paths.iter().filter_map(|p| {
            let rel = p.strip_prefix(&src).unwrap();
            let first = rel.components().next()?.as_os_str().to_str()?.to_string();
            let module = first.trim_end_matches(".rs").to_string();
            (module != "lib").then(|| (module, std::fs::read_to_string(p).unwrap()))
        }));
    }
    let graph = imports(&files);
    assert!(graph.len() >= 15, "found only {:?}", graph.keys());
    let errors = check(&graph);
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    for (m, deps) in &graph {
        eprintln!("{m} -> {deps:?}");
    }
}

#[test]
fn the_check_catches_an_upward_import_and_a_cycle() {
    let files = vec![
        (
            "gpu".to_string(),
            "use crate::prm::head::Head; // crate::io in a comment\n".to_string(),
        ),
        (
            "prm".to_string(),
            "use crate::{gpu::GpuMatrix, model};\n".to_string(),
        ),
        (
            "model".to_string(),
            "let x = crate::error::Error::Gpu(m);\n".to_string(),
        ),
    ];
    let graph = imports(&files);
    assert_eq!(graph["gpu"], BTreeSet::from(["prm".to_string()]));
    assert_eq!(
        graph["prm"],
        BTreeSet::from(["gpu".to_string(), "model".to_string()])
    );
    let errors = check(&graph);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("`gpu` (layer 5) imports `prm`")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("import cycle") && e.contains("gpu") && e.contains("prm")),
        "{errors:?}"
    );
    let mut bad = graph.clone();
    bad.insert("newmodule".into(), BTreeSet::new());
    assert!(check(&bad)
        .iter()
        .any(|e| e.contains("`newmodule` has no layer")));
}

/// A file's code without comments and without its test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The submodules of module `m` each submodule names, from `mod_rs` (the
/// module's own file, for its re-exports) and each submodule's files.
fn submodule_imports(
    m: &str,
    mod_rs: &str,
    subs: &BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, BTreeSet<String>> {
    // `pub use x::{A, B}` in mod.rs: an import of A is an import of x.
    let mut item_of: BTreeMap<String, String> = BTreeMap::new();
    for line in code_of(mod_rs).lines() {
        let Some(rest) = line.trim().split_once("use ").map(|(_, r)| r) else {
            continue;
        };
        let rest = rest.trim_start_matches("self::");
        let Some((sub, items)) = rest.split_once("::") else {
            continue;
        };
        if subs.contains_key(sub) {
            for item in items
                .trim_end_matches(';')
                .trim_matches(|c| c == '{' || c == '}')
                .split(',')
            {
                let name = item
                    .split(" as ")
                    .last()
                    .unwrap_or("")
                    .rsplit("::")
                    .next()
                    .unwrap_or("");
                if !name.trim().is_empty() {
                    item_of.insert(name.trim().to_string(), sub.to_string());
                }
            }
        }
    }
    let prefixes = ["super::".to_string(), format!("crate::{m}::")];
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (sub, texts) in subs {
        let deps = out.entry(sub.clone()).or_default();
        for text in texts {
            let code = code_of(text);
            for prefix in &prefixes {
                let mut rest = code.as_str();
                while let Some(i) = rest.find(prefix.as_str()) {
                    rest = &rest[i + prefix.len()..];
                    let names: Vec<&str> = match rest.strip_prefix('{') {
                        Some(group) => group[..group.find('}').unwrap_or(group.len())]
                            .split(',')
                            .map(|item| item.trim().split("::").next().unwrap_or(""))
                            .collect(),
                        None => vec![rest
                            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or("")],
                    };
                    for n in names {
                        let target = if subs.contains_key(n) {
                            Some(n.to_string())
                        } else {
                            item_of.get(n).cloned()
                        };
                        if let Some(t) = target.filter(|t| t != sub) {
                            deps.insert(t);
                        }
                    }
                }
            }
        }
    }
    out
}

/// Every import circle among one module's submodules, as messages.
fn circles(m: &str, graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        out: &mut Vec<String>,
        m: &str,
    ) {
        if let Some(i) = path.iter().position(|p| p == n) {
            out.push(format!(
                "import circle in {m}/: {} -> {n}",
                path[i..].join(" -> ")
            ));
            return;
        }
        if !done.insert(n.to_string()) {
            return;
        }
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            visit(d, g, path, done, out, m);
        }
        path.pop();
    }
    let (mut done, mut out) = (BTreeSet::new(), Vec::new());
    for n in graph.keys() {
        visit(n, graph, &mut Vec::new(), &mut done, &mut out, m);
    }
    out
}

#[test]
fn submodules_form_no_import_circle() {
    let mut errors = Vec::new();
    let mut modules = 0;
    let dirs = source_dirs()
        .into_iter()
        .flat_map(|src| std::fs::read_dir(src).unwrap());
    for e in dirs {
        let dir = e.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let m = dir.file_name().unwrap().to_str().unwrap().to_string();
        let mut subs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for f in std::fs::read_dir(&dir).unwrap() {
            let p = f.unwrap().path();
            let name = p.file_stem().unwrap().to_str().unwrap().to_string();
            if name == "mod" {
                continue;
            }
            let mut files = Vec::new();
            if p.is_dir() {
                rust_files(&p, &mut files);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p.clone());
            }
            let texts = files
                .iter()
                .map(|f| std::fs::read_to_string(f).unwrap())
                .collect();
            subs.insert(name, texts);
        }
        let mod_rs = std::fs::read_to_string(dir.join("mod.rs")).unwrap_or_default();
        errors.extend(circles(&m, &submodule_imports(&m, &mod_rs, &subs)));
        modules += 1;
    }
    assert!(modules >= 8, "found only {modules} module folders");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn the_submodule_check_catches_a_circle_through_a_re_export() {
    let subs: BTreeMap<String, Vec<String>> = [
        (
            "act",
            "use super::batch::Batch;\n#[cfg(test)]\nmod tests { use super::super::pool::P; }",
        ),
        ("batch", "use super::ActKind; // super::pool in a comment\n"),
        ("pool", "use crate::gpu::act;\n"),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), vec![t.to_string()]))
    .collect();
    let graph = submodule_imports("gpu", "mod act;\npub use act::{ActKind, other};\n", &subs);
    assert_eq!(graph["act"], BTreeSet::from(["batch".to_string()]));
    assert_eq!(graph["batch"], BTreeSet::from(["act".to_string()]));
    assert_eq!(graph["pool"], BTreeSet::from(["act".to_string()]));
    let found = circles("gpu", &graph);
    assert!(
        found.iter().any(|e| e.contains("act -> batch -> act")),
        "{found:?}"
    );
}
