//! The public APIs of the core crate and of the engine crate under it, each
//! checked against a snapshot (`crates/stepscore/public-api.txt`,
//! `crates/stepscore-engine/public-api.txt`) so a change to either is
//! deliberate: adding, removing or re-typing a public item fails this test
//! until the snapshots are rewritten with `STEPSCORE_BLESS=1 cargo test -p
//! stepscore --test integration public_api::` and the change is committed with them.
//!
//! The listing is read from the source, without rustdoc (nightly-only JSON):
//! every `pub` item of a public module (a chain of `pub mod` from lib.rs) at
//! the top level of its file, `pub` methods and fields of its types, and
//! every `pub use`; each with its declaration up to the body, whitespace
//! collapsed, and the features it needs (`[gpu]`, `[testing]`). Items under
//! `#[cfg(test)]`, `#[cfg(doctest)]` and `pub(crate)` ones are not API.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A crate whose API is read: its name in paths and its folder.
struct Crate {
    name: &'static str,
    dir: PathBuf,
}

fn crates() -> [Crate; 2] {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        Crate {
            name: "stepscore",
            dir: here.clone(),
        },
        Crate {
            name: "stepscore_engine",
            dir: here.join("../stepscore-engine"),
        },
    ]
}

/// The file of module `path` (`["prm", "scorer"]`) of `krate`, if any.
fn module_file(krate: &Crate, path: &[String]) -> Option<PathBuf> {
    let mut base = krate.dir.join("src");
    if path.is_empty() {
        return Some(base.join("lib.rs"));
    }
    for p in &path[..path.len() - 1] {
        base = base.join(p);
    }
    let last = &path[path.len() - 1];
    [
        base.join(format!("{last}.rs")),
        base.join(last).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// The features an attribute line requires, or `None` for `cfg(test)` and
/// `cfg(doctest)` (items only rustdoc's test runner compiles).
fn cfg_tag(attr: &str) -> Option<String> {
    let attr = attr.replace(' ', "");
    if attr.starts_with("#[cfg(test)]") || attr.starts_with("#[cfg(doctest)]") {
        return None;
    }
    let mut tags = Vec::new();
    for f in ["gpu", "testing"] {
        if attr.contains(&format!("feature=\"{f}\"")) {
            tags.push(f);
        }
    }
    if attr.contains("target_arch=\"wasm32\"") && !attr.contains("not(target_arch=\"wasm32\")") {
        tags.push("wasm32");
    }
    if attr.contains("not(target_arch=\"wasm32\")") {
        tags.push("native");
    }
    Some(if tags.is_empty() {
        String::new()
    } else {
        format!(" [{}]", tags.join(","))
    })
}

/// Where a declaration ends.
#[derive(Clone, Copy, PartialEq)]
enum Ends {
    /// An item: at its body, `;`, or a const's `=` (its value is not API).
    Item,
    /// A `pub use`: at `;`.
    Use,
    /// A field: at `,` or the struct's `}`.
    Field,
}

/// The declaration starting at line `i`, whitespace collapsed.
fn declaration(lines: &[&str], i: usize, ends: Ends) -> String {
    let mut out = String::new();
    let mut depth = 0i32;
    for line in &lines[i..] {
        let code = line.split("//").next().unwrap_or("");
        for c in code.chars() {
            let arrow = out.ends_with('-') || out.ends_with('=');
            match c {
                '(' | '<' | '[' => depth += 1,
                '>' if arrow => {}
                ')' | '>' | ']' => depth -= 1,
                '{' if ends == Ends::Use => depth += 1,
                '}' if ends == Ends::Use => depth -= 1,
                '{' | ';' if depth <= 0 && ends == Ends::Item => return collapse(&out),
                ';' if ends == Ends::Use => return collapse(&out),
                ',' | '}' if depth <= 0 && ends == Ends::Field => return collapse(&out),
                '=' if depth <= 0 && ends == Ends::Item && !out.ends_with(['<', '>', '=', '!']) => {
                    return collapse(&out);
                }
                _ => {}
            }
            out.push(c);
        }
        out.push(' ');
    }
    collapse(&out)
}

fn collapse(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("( ", "(")
        .replace(" )", ")")
        .replace(", )", ")")
        .replace(",)", ")")
}

const ITEM_STARTS: [&str; 10] = [
    "pub fn ",
    "pub async fn ",
    "pub unsafe fn ",
    "pub const fn ",
    "pub struct ",
    "pub enum ",
    "pub trait ",
    "pub type ",
    "pub const ",
    "pub static ",
];

/// The names a file re-exports (`pub use x::{A, B as C}` gives A, B), but
/// not those re-exported for tests only (`cfg(test)`, feature `testing`: the
/// engine's `testing` module lists them).
fn reexported(lines: &[&str]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, line) in lines.iter().enumerate() {
        let for_tests = i > 0
            && lines[i - 1].starts_with("#[cfg")
            && cfg_tag(lines[i - 1]).is_none_or(|t| t.contains("testing"));
        if line.starts_with("pub use ") && !for_tests {
            let decl = declaration(lines, i, Ends::Use);
            let list = decl.split_once('{').map_or(decl.as_str(), |(_, l)| l);
            for item in list.split(',') {
                let item = item.trim().trim_end_matches('}').trim();
                let name = item
                    .split(" as ")
                    .next()
                    .unwrap_or("")
                    .rsplit("::")
                    .next()
                    .unwrap_or("");
                if !name.is_empty() {
                    names.insert(name.to_string());
                }
            }
        }
    }
    names
}

/// The public API lines of module `path` and, recursively, of its public
/// submodules; `only`: for a private module, the names its parent re-exports.
/// `types`: the crate's public types, whose inherent `pub` methods are API
/// wherever their `impl` block is (the CPU engine's `impl Transformer`).
fn listing(
    krate: &Crate,
    path: &[String],
    out: &mut BTreeSet<String>,
    only: Option<&BTreeSet<String>>,
    types: &BTreeSet<String>,
) {
    let Some(file) = module_file(krate, path) else {
        return;
    };
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let exported = reexported(&lines);
    let wanted = |name: &str| only.is_none_or(|o| o.contains(name));
    let module = if path.is_empty() {
        krate.name.to_string()
    } else {
        format!("{}::{}", krate.name, path.join("::"))
    };
    // The attribute lines right above an item decide its features.
    let mut tag = Some(String::new());
    // The impl block being read (indent 0 `impl ... {` up to its `}`), with its type and tag.
    let mut in_impl: Option<(String, Option<String>)> = None;
    let mut in_test_module = false;
    let mut in_type: Option<String> = None;
    for (i, line) in lines.iter().enumerate() {
        if in_test_module {
            break;
        }
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if indent == 0 && trimmed.starts_with("#[") {
            if trimmed.starts_with("#[cfg") {
                tag = cfg_tag(trimmed);
            }
            continue;
        }
        if indent == 0 && trimmed.starts_with("mod tests") && tag.is_none() {
            in_test_module = true;
            continue;
        }
        if indent == 0
            && !trimmed.is_empty()
            && !trimmed.starts_with("//")
            && !trimmed.starts_with('}')
        {
            let item_tag = tag.take();
            tag = Some(String::new());
            in_impl = None;
            in_type = None;
            let Some(t) = item_tag else { continue };
            if let Some(rest) = trimmed
                .strip_prefix("pub mod ")
                .filter(|r| r.ends_with(';'))
            {
                let name = rest.trim_end_matches(';').trim().to_string();
                // Under a private module a `pub mod` is reached only through
                // re-exports: whole when re-exported itself (`pub use
                // model::synthetic`), else what this file re-exports from it.
                let whole = only.is_none_or(|o| o.contains(&name));
                let mut sub = path.to_vec();
                sub.push(name);
                listing(krate, &sub, out, (!whole).then_some(&exported), types);
                continue;
            }
            // An inline public module (the engine's `testing`): its re-exports.
            if let Some(rest) = trimmed
                .strip_prefix("pub mod ")
                .filter(|r| r.ends_with('{'))
            {
                let name = rest.trim_end_matches('{').trim();
                let mut inner = Some(String::new());
                for (j, l) in lines.iter().enumerate().skip(i + 1) {
                    if l.starts_with('}') {
                        break;
                    }
                    let lt = l.trim_start();
                    if lt.starts_with("#[cfg") {
                        inner = cfg_tag(lt);
                    } else if lt.starts_with("pub use ") {
                        if let Some(it) = inner.take() {
                            let tags: Vec<&str> = [t.as_str(), it.as_str()]
                                .iter()
                                .flat_map(|x| x.trim().trim_matches(['[', ']']).split(','))
                                .filter(|x| !x.is_empty())
                                .collect();
                            let tag = if tags.is_empty() {
                                String::new()
                            } else {
                                format!(" [{}]", tags.join(","))
                            };
                            out.insert(format!(
                                "{module}::{name}: {}{tag}",
                                declaration(&lines, j, Ends::Use)
                            ));
                        }
                        inner = Some(String::new());
                    }
                }
                continue;
            }
            // A private module: what the file re-exports from it is API.
            if let Some(rest) = trimmed.strip_prefix("mod ").filter(|r| r.ends_with(';')) {
                let name = rest.trim_end_matches(';').trim().to_string();
                let mut sub = path.to_vec();
                sub.push(name);
                listing(krate, &sub, out, Some(&exported), types);
                continue;
            }
            if trimmed.starts_with("pub use ") && only.is_none() {
                out.insert(format!(
                    "{module}: {}{t}",
                    declaration(&lines, i, Ends::Use)
                ));
                continue;
            }
            if trimmed.starts_with("impl") && !trimmed.contains(" for ") {
                let head = declaration(&lines, i, Ends::Item);
                let ty = head
                    .rsplit(' ')
                    .next()
                    .unwrap_or("")
                    .split('<')
                    .next()
                    .unwrap_or("")
                    .to_string();
                let t = if wanted(&ty) || types.contains(&ty) {
                    Some(t)
                } else {
                    None
                };
                in_impl = Some((ty, t));
                continue;
            }
            if ITEM_STARTS.iter().any(|s| trimmed.starts_with(s)) {
                let decl = declaration(&lines, i, Ends::Item);
                let name = decl
                    .split(['(', '<', ':', ' ', '='])
                    .filter(|w| !w.is_empty())
                    .find(|w| {
                        ![
                            "pub", "fn", "async", "unsafe", "const", "struct", "enum", "trait",
                            "type", "static",
                        ]
                        .contains(w)
                    })
                    .unwrap_or("");
                if !wanted(name) {
                    continue;
                }
                out.insert(format!("{module}: {decl}{t}"));
                if trimmed.starts_with("pub struct ") && trimmed.ends_with('{') {
                    let name = decl["pub struct ".len()..]
                        .split(['<', ' ', '('])
                        .next()
                        .unwrap_or("")
                        .to_string();
                    in_type = Some(format!("{name}{t}"));
                }
            }
            continue;
        }
        // Inside an impl: its `pub` methods (attributes at indent 4 gate them).
        if indent == 4 {
            if let Some((ty, impl_tag)) = &in_impl {
                if trimmed.starts_with("#[cfg") {
                    tag = cfg_tag(trimmed);
                    continue;
                }
                if trimmed.starts_with("#[") || trimmed.starts_with("///") {
                    continue;
                }
                let item_tag = tag.take();
                tag = Some(String::new());
                if ITEM_STARTS.iter().any(|s| trimmed.starts_with(s)) {
                    if let (Some(t), Some(it)) = (item_tag, impl_tag) {
                        let t = if t.is_empty() { it.clone() } else { t };
                        out.insert(format!(
                            "{module}: impl {ty}: {}{t}",
                            declaration(&lines, i, Ends::Item)
                        ));
                    }
                }
            } else if let Some(ty) = &in_type {
                if trimmed.starts_with("pub ") && !trimmed.starts_with("pub(") {
                    out.insert(format!(
                        "{module}: {ty} field {}",
                        declaration(&lines, i, Ends::Field)
                    ));
                }
            }
        }
    }
}

fn current(krate: &Crate) -> BTreeSet<String> {
    // Two passes: the first finds the public types.
    let mut first = BTreeSet::new();
    listing(krate, &[], &mut first, None, &BTreeSet::new());
    let types: BTreeSet<String> = first
        .iter()
        .filter_map(|l| {
            let decl = l.split_once(": ")?.1;
            let rest = decl
                .strip_prefix("pub struct ")
                .or_else(|| decl.strip_prefix("pub enum "))?;
            Some(rest.split(['<', ' ', '(', '{', ';']).next()?.to_string())
        })
        .collect();
    let mut out = BTreeSet::new();
    listing(krate, &[], &mut out, None, &types);
    out
}

#[test]
fn the_public_api_is_the_snapshot() {
    for krate in crates() {
        check_snapshot(&krate);
    }
}

fn check_snapshot(krate: &Crate) {
    let now = current(krate);
    assert!(
        now.len() > 20,
        "{}: found only {} items: the reader is broken",
        krate.name,
        now.len()
    );
    let path = krate.dir.join("public-api.txt");
    let text: String = now.iter().map(|l| format!("{l}\n")).collect();
    if std::env::var_os("STEPSCORE_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let saved: BTreeSet<String> = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    let added: Vec<&String> = now.difference(&saved).collect();
    let removed: Vec<&String> = saved.difference(&now).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public API changed ({} added, {} removed); if that is deliberate, rewrite {} with \
         `STEPSCORE_BLESS=1 cargo test -p stepscore --test integration public_api::` and commit it.\n\
         added:\n  {}\nremoved:\n  {}",
        added.len(),
        removed.len(),
        path.display(),
        added
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
        removed
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

/// The reader sees items, methods, fields, features and submodules, and not
/// test code or crate-private items (a check that cannot fail checks nothing).
#[test]
fn the_reader_sees_what_is_public() {
    let [core, engine] = crates();
    let mut now = current(&core);
    now.extend(current(&engine));
    let has = |s: &str| now.iter().any(|l| l.contains(s));
    assert!(has("stepscore::prm::open: impl Scorer: pub fn open(path: impl AsRef<Path>, options: &ScorerOptions) -> Result<Scorer>"));
    assert!(has(
        "stepscore::prm::options: ScorerOptions field pub max_tokens: Option<usize>"
    ));
    assert!(has(
        "stepscore::recompute: pub fn recompute(text: &str) -> Recomputed"
    ));
    assert!(
        has("simulate_device_loss(&self) [gpu,testing]"),
        "feature tags"
    );
    assert!(
        has("stepscore_engine::cpu::forward: impl Transformer: pub fn forward(&self, tokens: &[u32], cache: Option<&mut KvCache>) -> Result<Hidden>"),
        "a public type's methods are API in a private module too"
    );
    assert!(
        has("stepscore_engine::model::transformer: pub struct Transformer"),
        "a `pub mod` under a private module shows what is re-exported from it"
    );
    assert!(
        !has("stepscore_engine::model::decoder: pub struct Block"),
        "and nothing else of it"
    );
    assert!(
        has("stepscore_engine::model::synthetic: pub fn generate_with("),
        "a re-exported module is whole"
    );
    assert!(
        has("stepscore_engine::testing: pub use crate::gpu::round_acts16 [testing,gpu,native]"),
        "an inline module's re-exports, with its features and theirs"
    );
    assert!(!has("fn with_spans"), "pub(crate) is not API");
    assert!(!has("arbitrary_text_never_panics"), "tests are not API");
    let _ = Path::new("");
}
