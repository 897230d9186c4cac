//! Every value-head kind a head file can hold — linear and MLP, over the
//! final hidden state or a chosen layer's, with or without the step's
//! confidence statistics joined to it — scored on the tiny Skywork-layout
//! checkpoint (2 layers, width 32, tied embeddings) and compared with a
//! float64 computation written here from the definitions:
//!
//! - layer 0's hidden state: RMSNorm_final(embedding row), by hand in f64;
//!   layer 1's: the final state of the same checkpoint cut to 1 block
//!   (its config edited), run as a model of its own;
//! - confidence statistics: log-softmax and entropy -Σ p ln p of the full
//!   vocabulary logits, in f64;
//! - heads: Σ w x + b, and Σ w2 relu(W0 x + b0) + b2, then sigmoid, in f64.
//!
//! Tolerances: 1e-6 on scores against the f64 reference (the engine's
//! hidden states are f32; inputs cut to f32 like the trainer's rows), 1e-4
//! on layer-0 states, 1e-4 between the GPU and CPU engines (the bar
//! is 1e-3), 1e-6 between a session's appends and full scoring.

#[cfg(feature = "gpu")]
use crate::gpu_support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::Deserialize;
use stepscore::engine::{HfCheckpoint, Transformer};
use stepscore::prm::{
    Backend, DigitConfidence, Family, HeadFile, HeadSource, Scorer, ScorerOptions, StepStat,
};
use stepscore::Error;

const H: usize = 32;
const N_LAYERS: usize = 2;

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    problem: String,
    steps: Vec<String>,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/skywork-prm-tiny")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(dir().join("reference.json")).unwrap();
    serde_json::from_str::<Reference>(&text).unwrap().cases
}

/// xorshift64*: deterministic weights.
struct Rng(u64);
impl Rng {
    fn f(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f() * scale).collect()
    }
}

/// One head kind: its weights and what it reads.
#[derive(Clone)]
struct Kind {
    name: String,
    /// The layers read, joined (empty: the final one).
    layers: Vec<usize>,
    confidence: bool,
    /// `[units, width]` and `[units]`; the MLP's `[1, units]` and bias.
    w0: Vec<f32>,
    b0: Vec<f32>,
    out: Option<(Vec<f32>, f32)>,
}

impl Kind {
    fn new(mlp: bool, layers: &[usize], confidence: bool, seed: u64) -> Kind {
        let mut rng = Rng(seed);
        let hidden = H * layers.len().max(1);
        let width = hidden + if confidence { 4 } else { 0 };
        let units = if mlp { 6 } else { 1 };
        let mut w0 = rng.vec(units * width, 0.3);
        // The statistics are O(1-10) where normed states are O(1): smaller
        // weights keep the sigmoid off its flat ends, where scores could not
        // tell a wrong input from a right one.
        for row in w0.chunks_exact_mut(width) {
            for v in &mut row[hidden..] {
                *v *= 0.1;
            }
        }
        let b0 = rng.vec(units, 0.3);
        let out = mlp.then(|| (rng.vec(units, 0.8), rng.f() * 0.2));
        Kind {
            name: format!(
                "{}{}{}",
                if mlp { "mlp" } else { "linear" },
                if layers.is_empty() {
                    String::new()
                } else {
                    format!(" @layers {layers:?}")
                },
                if confidence { " +confidence" } else { "" }
            ),
            layers: layers.to_vec(),
            confidence,
            w0,
            b0,
            out,
        }
    }

    fn width(&self) -> usize {
        self.w0.len() / self.b0.len()
    }

    /// The head file stepscore-train would write.
    fn file(&self) -> HeadFile {
        self.file_with(&[])
    }

    /// The same, with more header metadata.
    fn file_with(&self, extra: &[(&str, &str)]) -> HeadFile {
        let w = self.width();
        let units = self.b0.len();
        let mut tensors: Vec<(&str, Vec<usize>, Vec<f32>)> = match &self.out {
            None => vec![
                ("v_head.summary.weight", vec![1, w], self.w0.clone()),
                ("v_head.summary.bias", vec![1], self.b0.clone()),
            ],
            Some((w2, b2)) => vec![
                ("v_head.summary.0.weight", vec![units, w], self.w0.clone()),
                ("v_head.summary.0.bias", vec![units], self.b0.clone()),
                ("v_head.summary.2.weight", vec![1, units], w2.clone()),
                ("v_head.summary.2.bias", vec![1], vec![*b2]),
            ],
        };
        tensors.sort_by_key(|t| t.0);
        let mut meta = HashMap::new();
        meta.insert(
            "stepscore.confidence_features".to_string(),
            self.confidence.to_string(),
        );
        if !self.layers.is_empty() {
            let list: Vec<String> = self.layers.iter().map(usize::to_string).collect();
            meta.insert("stepscore.layer".to_string(), list.join(","));
        }
        meta.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        HeadFile::from_bytes(&safetensors_bytes(&tensors, meta), "kind.safetensors").unwrap()
    }

    /// The head's score for one f32 input row, in f64.
    fn score(&self, x: &[f32]) -> f64 {
        let w = self.width();
        assert_eq!(x.len(), w);
        let lin = |wr: &[f32], b: f32| {
            let mut s = b as f64;
            for (a, c) in wr.iter().zip(x) {
                s += f64::from(*a) * f64::from(*c);
            }
            s
        };
        let z = match &self.out {
            None => lin(&self.w0, self.b0[0]),
            Some((w2, b2)) => {
                let mut z = *b2 as f64;
                for (j, row) in self.w0.chunks_exact(w).enumerate() {
                    z += f64::from(w2[j]) * lin(row, self.b0[j]).max(0.0);
                }
                z
            }
        };
        1.0 / (1.0 + (-z).exp())
    }
}

/// A safetensors file written by hand (8-byte header length, JSON header
/// with `__metadata__`, then the f32 data), as the format specifies.
fn safetensors_bytes(
    tensors: &[(&str, Vec<usize>, Vec<f32>)],
    meta: HashMap<String, String>,
) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::to_value(meta).unwrap());
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        let start = data.len();
        data.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut json = serde_json::to_vec(&header).unwrap();
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    out.extend(data);
    out
}

fn kinds() -> Vec<Kind> {
    let mut out = Vec::new();
    let mut seed = 11;
    for mlp in [false, true] {
        for layers in [&[][..], &[0], &[1], &[0, 2]] {
            for confidence in [false, true] {
                seed += 1;
                out.push(Kind::new(mlp, layers, confidence, seed));
            }
        }
    }
    out
}

fn options(backend: Backend) -> ScorerOptions {
    ScorerOptions {
        threads: 1,
        backend,
        ..Default::default()
    }
}

/// The f64 reference for one trace: every step's input row of `kind`.
struct RefModel {
    full: Transformer,
    cut: Transformer,
    embed: Vec<f32>,
    norm: Vec<f32>,
    eps: f64,
    backbone: Scorer,
}

impl RefModel {
    fn new() -> RefModel {
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for name in ["config.json", "model.safetensors"] {
            files.insert(name.into(), std::fs::read(dir().join(name)).unwrap());
        }
        let full = HfCheckpoint::from_bytes(files.clone()).unwrap();
        let mut cfg: serde_json::Value = serde_json::from_slice(&files["config.json"]).unwrap();
        cfg["num_hidden_layers"] = 1.into();
        files.insert("config.json".into(), serde_json::to_vec(&cfg).unwrap());
        let cut = HfCheckpoint::from_bytes(files)
            .unwrap()
            .transformer()
            .unwrap();
        let backbone = Scorer::open_with(
            dir(),
            &HeadSource::Backbone,
            &ScorerOptions {
                family: Some(Family::ValueHead),
                threads: 1,
                ..Default::default()
            },
        )
        .unwrap();
        RefModel {
            embed: full.tensor_f32("model.embed_tokens.weight").unwrap().data,
            norm: full.tensor_f32("model.norm.weight").unwrap().data,
            eps: full.config().rms_norm_eps as f64,
            full: full.transformer().unwrap(),
            cut,
            backbone,
        }
    }

    /// One layer's hidden state (`None`: the final one) at each marker of `enc`.
    fn layer_rows(
        &self,
        enc: &stepscore::prm::template::Encoded,
        last: &stepscore::engine::Hidden,
        layer: Option<usize>,
    ) -> Vec<Vec<f32>> {
        match layer {
            None | Some(N_LAYERS) => enc
                .markers
                .iter()
                .map(|&p| last.row(p).unwrap().to_vec())
                .collect(),
            Some(1) => {
                let h = self.cut.forward(&enc.tokens, None).unwrap();
                enc.markers
                    .iter()
                    .map(|&p| h.row(p).unwrap().to_vec())
                    .collect()
            }
            Some(0) => enc
                .markers
                .iter()
                .map(|&p| {
                    let t = enc.tokens[p] as usize;
                    let e = &self.embed[t * H..(t + 1) * H];
                    let ms = e.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / H as f64;
                    let inv = 1.0 / (ms + self.eps).sqrt();
                    e.iter()
                        .zip(&self.norm)
                        .map(|(&v, &w)| (f64::from(v) * inv * f64::from(w)) as f32)
                        .collect()
                })
                .collect(),
            Some(l) => panic!("no reference for layer {l}"),
        }
    }

    /// The hidden states of `layers` (empty: the final one) at each
    /// marker, joined in order, and each step's four statistics, of `case`.
    fn rows(&self, case: &Case, layers: &[usize]) -> (Vec<Vec<f32>>, Vec<[f32; 4]>) {
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        let enc = self.backbone.encode(&case.problem, &steps).unwrap();
        let last = self.full.forward(&enc.tokens, None).unwrap();
        let one = |layer: Option<usize>| -> Vec<Vec<f32>> { self.layer_rows(&enc, &last, layer) };
        let hidden: Vec<Vec<f32>> = if layers.is_empty() {
            one(None)
        } else {
            let per: Vec<Vec<Vec<f32>>> = layers.iter().map(|&l| one(Some(l))).collect();
            (0..enc.markers.len())
                .map(|i| per.iter().flat_map(|p| p[i].clone()).collect())
                .collect()
        };

        let stats = enc
            .step_tokens
            .iter()
            .map(|range| {
                let rows: Vec<f32> = range
                    .clone()
                    .flat_map(|j| last.row(j - 1).unwrap().to_vec())
                    .collect();
                let logits = self.full.logits_for(&rows, None).unwrap();
                let vocab = logits.len() / range.len();
                let (mut sum, mut min, mut ent) = (0.0f64, f64::INFINITY, 0.0f64);
                for (row, j) in logits.chunks_exact(vocab).zip(range.clone()) {
                    let max = row
                        .iter()
                        .map(|&v| f64::from(v))
                        .fold(f64::NEG_INFINITY, f64::max);
                    let lse = max
                        + row
                            .iter()
                            .map(|&v| (f64::from(v) - max).exp())
                            .sum::<f64>()
                            .ln();
                    let lp = f64::from(row[enc.tokens[j] as usize]) - lse;
                    sum += lp;
                    min = min.min(lp);
                    ent -= row
                        .iter()
                        .map(|&v| {
                            let l = f64::from(v) - lse;
                            l.exp() * l
                        })
                        .sum::<f64>();
                }
                let n = range.len() as f64;
                [
                    (n + 1.0).ln() as f32,
                    (sum / n) as f32,
                    min as f32,
                    (ent / n) as f32,
                ]
            })
            .collect();
        (hidden, stats)
    }
}

fn score_all(scorer: &Scorer) -> Vec<Vec<f64>> {
    cases()
        .iter()
        .map(|c| {
            let steps: Vec<&str> = c.steps.iter().map(String::as_str).collect();
            let s = scorer.score_steps(&c.problem, &steps).unwrap();
            s.step_scores.into_iter().map(Option::unwrap).collect()
        })
        .collect()
}

#[test]
fn every_head_kind_matches_the_f64_reference_on_the_cpu() {
    let r = RefModel::new();
    let mut per_kind = Vec::new();
    for kind in kinds() {
        let scorer = Scorer::open_with(
            dir(),
            &HeadSource::Loaded(kind.file()),
            &options(Backend::Cpu),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", kind.name));
        assert_eq!(scorer.family(), Family::ValueHead);
        let got = score_all(&scorer);
        let mut worst = 0f64;
        for (case, scores) in cases().iter().zip(&got) {
            let (hidden, stats) = r.rows(case, &kind.layers);
            for (i, (row, s)) in hidden.iter().zip(&stats).enumerate() {
                let mut x = row.clone();
                if kind.confidence {
                    x.extend_from_slice(s);
                }
                let want = kind.score(&x);
                let d = (scores[i] - want).abs();
                worst = worst.max(d);
                assert!(
                    d <= 1e-6,
                    "{}: step {i}: engine {} reference {want}",
                    kind.name,
                    scores[i]
                );
            }
        }
        eprintln!(
            "{}: max |engine - f64 reference| = {worst:.1e} (scores {:.3?})",
            kind.name, got[0]
        );
        per_kind.push(got);
    }
    // The layer and the statistics change what a head sees: the same
    // weights at another layer score differently.
    let a = Kind::new(false, &[], false, 99);
    let mut b = a.clone();
    b.layers = vec![0];
    let sa = score_all(
        &Scorer::open_with(dir(), &HeadSource::Loaded(a.file()), &options(Backend::Cpu)).unwrap(),
    );
    let sb = score_all(
        &Scorer::open_with(dir(), &HeadSource::Loaded(b.file()), &options(Backend::Cpu)).unwrap(),
    );
    assert!(sa
        .iter()
        .flatten()
        .zip(sb.iter().flatten())
        .any(|(x, y)| (x - y).abs() > 1e-3));
}

#[test]
fn layer_features_are_the_heads_input() {
    use stepscore::prm::FeatureOptions;
    let r = RefModel::new();
    let case = &cases()[0];
    let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
    for layer in [Some(0), Some(1), Some(2), None] {
        let f = r
            .backbone
            .step_features_with(
                &case.problem,
                &steps,
                &FeatureOptions {
                    layers: layer.into_iter().collect(),
                    confidence: true,
                },
            )
            .unwrap();
        let (hidden, stats) = r.rows(case, &layer.into_iter().collect::<Vec<_>>());
        for (got, want) in f.hidden.iter().zip(&hidden) {
            for (a, b) in got.iter().zip(want) {
                assert!((a - b).abs() <= 1e-4, "layer {layer:?}: {a} vs {b}");
            }
        }
        for (c, want) in f.confidence.unwrap().iter().zip(&stats) {
            let row = StepStat::CONFIDENCE.map(|st| st.value(c, &DigitConfidence::default()));
            for (a, b) in row.iter().zip(want) {
                assert!((a - b).abs() <= 1e-5, "statistics: {a} vs {b}");
            }
        }
    }
    let err = r
        .backbone
        .step_features_with(
            &case.problem,
            &steps,
            &FeatureOptions {
                layers: vec![3],
                confidence: false,
            },
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("layer 3") && err.contains("2 layers"), "{err}");
}

#[test]
fn several_layers_are_each_layers_rows_side_by_side() {
    use stepscore::prm::FeatureOptions;
    let r = RefModel::new();
    let case = &cases()[0];
    let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
    let one = |l: usize| {
        r.backbone
            .step_features_with(
                &case.problem,
                &steps,
                &FeatureOptions {
                    layers: vec![l],
                    confidence: false,
                },
            )
            .unwrap()
    };
    let all = r
        .backbone
        .step_features_with(
            &case.problem,
            &steps,
            &FeatureOptions {
                layers: vec![0, 1, 2],
                confidence: false,
            },
        )
        .unwrap();
    let parts = [one(0), one(1), one(2)];
    assert_eq!(all.width, parts.iter().map(|p| p.width).sum::<usize>());
    for (i, row) in all.hidden.iter().enumerate() {
        let want: Vec<f32> = parts.iter().flat_map(|p| p.hidden[i].clone()).collect();
        assert_eq!(row, &want, "step {i}");
    }
    for layers in [vec![1, 0], vec![1, 1]] {
        let err = r
            .backbone
            .step_features_with(
                &case.problem,
                &steps,
                &FeatureOptions {
                    layers,
                    confidence: false,
                },
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("ascending"), "{err}");
    }
}

#[test]
fn cached_and_batched_features_are_the_full_extractions_bits() {
    use stepscore::prm::{FeatureJob, FeatureOptions};
    let r = RefModel::new();
    let case = &cases()[0];
    let options = FeatureOptions {
        layers: vec![1, 2],
        confidence: true,
    };
    let prefix: Vec<&str> = case.steps[..case.steps.len() - 1]
        .iter()
        .map(String::as_str)
        .collect();
    // Alternatives of the last step after one shared prefix, as PRM800K rates them.
    let alternatives = ["2 + 2 = 5.", "The answer is 4.", "So 3 * 3 = 9."];
    let traces: Vec<Vec<&str>> = alternatives
        .iter()
        .map(|a| prefix.iter().copied().chain([*a]).collect())
        .collect();
    let from = prefix.len();
    let full: Vec<_> = traces
        .iter()
        .map(|t| {
            r.backbone
                .step_features_with(&case.problem, t, &options)
                .unwrap()
        })
        .collect();
    // One cache carried from trace to trace: each runs only its own step.
    let mut cache = r.backbone.feature_cache();
    for (i, (t, want)) in traces.iter().zip(&full).enumerate() {
        let got = r
            .backbone
            .step_features_cached(&mut cache, &case.problem, t, from, &options)
            .unwrap();
        assert_eq!(got.first_step, from);
        assert_eq!(got.hidden, want.hidden[from..].to_vec());
        assert_eq!(
            got.confidence.unwrap(),
            want.confidence.clone().unwrap()[from..].to_vec()
        );
        assert_eq!(
            got.digit_confidence.unwrap(),
            want.digit_confidence.clone().unwrap()[from..].to_vec()
        );
        if i > 0 {
            assert!(
                got.tokens < want.tokens,
                "the prefix must come from the cache"
            );
        }
    }
    // Copies of the prefix's cache, all alternatives in one pass.
    let mut caches: Vec<_> = traces.iter().map(|_| cache.clone()).collect();
    let mut jobs: Vec<FeatureJob<'_>> = caches
        .iter_mut()
        .zip(&traces)
        .map(|(cache, t)| FeatureJob {
            cache,
            problem: &case.problem,
            steps: t,
            from,
        })
        .collect();
    let batched = r.backbone.step_features_batch(&mut jobs, &options).unwrap();
    for (got, want) in batched.into_iter().zip(&full) {
        assert_eq!(got.unwrap().hidden, want.hidden[from..].to_vec());
    }
}

#[test]
fn sessions_score_every_kind_like_full_scoring() {
    for kind in kinds() {
        let scorer = Scorer::open_with(
            dir(),
            &HeadSource::Loaded(kind.file()),
            &options(Backend::Cpu),
        )
        .unwrap();
        let full = score_all(&scorer);
        for (case, want) in cases().iter().zip(&full) {
            let mut s = scorer.session(&case.problem);
            for (i, step) in case.steps.iter().enumerate() {
                let got = s.append(step).unwrap();
                assert!(
                    (got - want[i]).abs() <= 1e-6,
                    "{}: step {i}: {got} vs {}",
                    kind.name,
                    want[i]
                );
            }
        }
    }
}

#[test]
fn head_files_that_disagree_with_their_metadata_are_named_errors() {
    let mut kind = Kind::new(false, &[], true, 5);
    kind.confidence = false; // width h + 4, metadata says no statistics
    let err = Scorer::open_with(
        dir(),
        &HeadSource::Loaded(kind.file()),
        &options(Backend::Cpu),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("v_head.summary.weight") && err.contains("stepscore.step_stats"),
        "{err}"
    );
    let mut kind = Kind::new(true, &[], false, 6);
    kind.layers = vec![7];
    let err = Scorer::open_with(
        dir(),
        &HeadSource::Loaded(kind.file()),
        &options(Backend::Cpu),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("layer 7") && err.contains("2 layers"), "{err}");
    let bytes = safetensors_bytes(
        &[("v_head.summary.weight", vec![1, H], vec![0.0; H])],
        HashMap::from([("stepscore.layer".to_string(), "last".to_string())]),
    );
    let err = HeadFile::from_bytes(&bytes, "odd.safetensors")
        .unwrap()
        .input()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("odd.safetensors") && err.contains("stepscore.layer"),
        "{err}"
    );
}

#[cfg(feature = "gpu")]
#[test]
fn every_head_kind_scores_on_the_gpu_like_the_cpu() {
    if !gpu_support::have_adapter() {
        return;
    }
    for kind in kinds() {
        let file = kind.file();
        let cpu = score_all(
            &Scorer::open_with(
                dir(),
                &HeadSource::Loaded(file.clone()),
                &options(Backend::Cpu),
            )
            .unwrap(),
        );
        let gpu_scorer = Scorer::open_with(
            dir(),
            &HeadSource::Loaded(file.clone()),
            &options(Backend::Gpu),
        )
        .unwrap();
        assert_eq!(gpu_scorer.backend_report().chosen, Backend::Gpu);
        let gpu = score_all(&gpu_scorer);
        let mut worst = 0f64;
        for (a, b) in cpu.iter().flatten().zip(gpu.iter().flatten()) {
            worst = worst.max((a - b).abs());
            assert!((a - b).abs() <= 1e-4, "{}: cpu {a} gpu {b}", kind.name);
        }
        // A session on the device, through the KV cache.
        let case = &cases()[0];
        let mut s = gpu_scorer.session(&case.problem);
        for (i, step) in case.steps.iter().enumerate() {
            let got = s.append(step).unwrap();
            assert!(
                (got - gpu[0][i]).abs() <= 1e-4,
                "{} session step {i}",
                kind.name
            );
        }
        eprintln!("{}: max |gpu - cpu| = {worst:.1e}", kind.name);
    }
}

/// A head over named step statistics alone (`stepscore.stats_only`), digit
/// and arithmetic statistics included, scores `sigmoid(w . stats + b)` of the
/// statistics `stepscore features` reports for the same trace, on every
/// engine and through a session; the sign, result and times/divide
/// statistics equal what the test finds in the token spans' own text; its
/// shipped threshold reaches the scorer.
#[test]
fn stats_only_heads_over_digit_statistics_score_their_features() {
    use stepscore::prm::FeatureOptions;
    let stats = "digit_min_logprob,min_logprob,digit_log1p_tokens,plus_minus_min_logprob,\
                 result_min_logprob,operand_min_logprob,times_divide_min_logprob,operation_min_logprob";
    let (w, b) = ([0.7f32, -0.3, 0.25, 0.45, 0.35, -0.2, 0.15, 0.3], 0.4f32);
    let bytes = safetensors_bytes(
        &[
            ("v_head.summary.weight", vec![1, 8], w.to_vec()),
            ("v_head.summary.bias", vec![1], vec![b]),
        ],
        HashMap::from([
            ("stepscore.step_stats".to_string(), stats.to_string()),
            ("stepscore.stats_only".to_string(), "true".to_string()),
            ("stepscore.threshold".to_string(), "0.375".to_string()),
        ]),
    );
    let head = HeadFile::from_bytes(&bytes, "digits.safetensors").unwrap();
    let backbone = RefModel::new().backbone;
    let problem = "What is 12 + 30?";
    let steps = [
        "12 + 30 = 42.",
        "So the answer is 42.",
        "Check: 42 - 30 = 12.",
        "2. Also 2 x 21 = 42.",
    ];
    let f = backbone
        .step_features_with(
            problem,
            &steps,
            &FeatureOptions {
                layers: Vec::new(),
                confidence: true,
            },
        )
        .unwrap();
    let (conf, digits) = (f.confidence.unwrap(), f.digit_confidence.unwrap());
    assert!(
        digits.iter().any(|d| d.tokens > 0),
        "the steps must hold digit tokens for the test to mean anything"
    );
    assert!(
        digits.iter().any(|d| d.plus_minus_min_logprob < 0.0),
        "the steps must hold a plus or minus token for the test to mean anything"
    );
    for (what, has) in [
        (
            "a result",
            digits
                .iter()
                .any(|d| d.arithmetic.unwrap().result_min_logprob < 0.0),
        ),
        (
            "an \"x\" product",
            digits
                .iter()
                .any(|d| d.arithmetic.unwrap().times_divide_min_logprob < 0.0),
        ),
        (
            "an operation the model doubted",
            digits
                .iter()
                .any(|d| d.operation_min_logprob.is_some_and(|o| o < 0.0)),
        ),
    ] {
        assert!(
            has,
            "the steps must hold {what} for the test to mean anything"
        );
    }
    let want: Vec<f64> = conf
        .iter()
        .zip(&digits)
        .map(|(c, d)| {
            let a = d
                .arithmetic
                .expect("the engine fills the arithmetic statistics");
            let x = [
                d.min_logprob,
                c.min_logprob,
                (d.tokens as f64).ln_1p(),
                d.plus_minus_min_logprob,
                a.result_min_logprob,
                a.operand_min_logprob,
                a.times_divide_min_logprob,
                d.operation_min_logprob
                    .expect("features with confidence fill the operation statistic"),
            ];
            let z: f64 = x
                .iter()
                .zip(&w)
                .map(|(x, w)| (*x as f32) as f64 * *w as f64)
                .sum::<f64>()
                + b as f64;
            1.0 / (1.0 + (-z).exp())
        })
        .collect();
    #[cfg_attr(not(feature = "gpu"), allow(unused_mut))]
    let mut backends = vec![Backend::Cpu];
    #[cfg(feature = "gpu")]
    if gpu_support::have_adapter() {
        backends.push(Backend::Gpu);
    }
    for backend in backends {
        let scorer =
            Scorer::open_with(dir(), &HeadSource::Loaded(head.clone()), &options(backend)).unwrap();
        assert_eq!(scorer.threshold(), Some(0.375));
        let scored = scorer.score_steps(problem, &steps).unwrap();
        // Per-token log-probs: one per step token, spans tiling the step's text in order,
        // their mean and minimum (and mean entropy) the statistics the head read.
        let per_step = scored
            .token_logprobs
            .as_ref()
            .expect("the head read token log-probs");
        assert_eq!(per_step.len(), steps.len());
        for (((tokens, step), c), d) in per_step.iter().zip(&steps).zip(&conf).zip(&digits) {
            assert_eq!(tokens.len(), c.tokens, "{step}");
            let mut at = 0;
            for t in tokens {
                assert!(t.start <= t.end && t.end <= step.len(), "{t:?} in {step:?}");
                assert!(t.start >= at, "spans in order: {t:?} after {at}");
                at = t.end;
            }
            assert_eq!(at, step.len(), "the last token ends the step: {step:?}");
            let lps: Vec<f64> = tokens.iter().map(|t| t.logprob).collect();
            let mean = lps.iter().sum::<f64>() / lps.len() as f64;
            let min = lps.iter().copied().fold(f64::INFINITY, f64::min);
            let tol = if backend == Backend::Cpu { 1e-9 } else { 1e-4 };
            assert!(
                (mean - c.mean_logprob).abs() <= tol,
                "{mean} vs {}",
                c.mean_logprob
            );
            assert!(
                (min - c.min_logprob).abs() <= tol,
                "{min} vs {}",
                c.min_logprob
            );
            // The plus/minus statistic, from the spans' own text (not the head's token table).
            let signs = tokens
                .iter()
                .filter(|t| matches!(step[t.start..t.end].trim(), "+" | "-" | "\u{2212}"))
                .fold(0.0f64, |m, t| m.min(t.logprob));
            assert!(
                (signs - d.plus_minus_min_logprob).abs() <= tol,
                "{signs} vs {} in {step:?}",
                d.plus_minus_min_logprob
            );
            // Results: digit tokens whose number follows "="; times/divide: "x" between numbers.
            let a = d.arithmetic.unwrap();
            let results = tokens
                .iter()
                .filter(|t| {
                    let text = step[t.start..t.end].trim();
                    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
                })
                .filter(|t| {
                    step[..t.start]
                        .trim_end_matches(|c: char| c.is_ascii_digit())
                        .trim_end()
                        .ends_with('=')
                })
                .fold(0.0f64, |m, t| m.min(t.logprob));
            let times = tokens
                .iter()
                .filter(|t| step[t.start..t.end].trim() == "x")
                .fold(0.0f64, |m, t| m.min(t.logprob));
            assert!(
                (results - a.result_min_logprob).abs() <= tol,
                "{results} vs {} in {step:?}",
                a.result_min_logprob
            );
            assert!(
                (times - a.times_divide_min_logprob).abs() <= tol,
                "{times} vs {} in {step:?}",
                a.times_divide_min_logprob
            );
            let entropy = tokens.iter().map(|t| t.entropy).sum::<f64>() / lps.len() as f64;
            assert!(
                (entropy - c.mean_entropy).abs() <= tol,
                "{entropy} vs {}",
                c.mean_entropy
            );
        }
        let got = scored.step_scores;
        let tol = if backend == Backend::Cpu { 1e-6 } else { 1e-4 };
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let g = g.unwrap();
            assert!((g - w).abs() <= tol, "{backend:?} step {i}: {g} vs {w}");
        }
        let mut session = scorer.session(problem);
        for (i, step) in steps.iter().enumerate() {
            let g = session.append(step).unwrap();
            assert!(
                (g - want[i]).abs() <= tol,
                "{backend:?} session step {i}: {g} vs {}",
                want[i]
            );
        }
        // The session's per-token log-probs are the whole-trace ones: same spans,
        // log-probs within the scores' tolerance.
        assert_eq!(session.token_logprobs().len(), per_step.len());
        for (i, (s, w)) in session.token_logprobs().iter().zip(per_step).enumerate() {
            assert_eq!(s.len(), w.len(), "session step {i}");
            for (a, b) in s.iter().zip(w) {
                assert_eq!((a.start, a.end), (b.start, b.end), "session step {i}");
                assert!(
                    (a.logprob - b.logprob).abs() <= tol,
                    "session step {i}: {a:?} vs {b:?}"
                );
            }
        }
    }
    // Statistics alone need names; a wrong count is a named width error.
    let nameless = safetensors_bytes(
        &[("v_head.summary.weight", vec![1, 8], w.to_vec())],
        HashMap::from([("stepscore.stats_only".to_string(), "true".to_string())]),
    );
    let err = Scorer::open_with(
        dir(),
        &HeadSource::Loaded(HeadFile::from_bytes(&nameless, "n.safetensors").unwrap()),
        &options(Backend::Cpu),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("stepscore.step_stats"), "{err}");
}

/// Issue 23, item 4: a head that makes a NaN or an infinite logit (NaN or
/// infinite weights) is a model error naming the head's tensor and the step,
/// on both engines, never a `None` / NaN score or a confident 0 or 1.
#[test]
fn non_finite_logits_are_model_errors_on_both_engines() {
    let gpu = || -> Option<Backend> {
        #[cfg(feature = "gpu")]
        if gpu_support::have_adapter() {
            return Some(Backend::Gpu);
        }
        None
    };
    let backends: Vec<Backend> = [Some(Backend::Cpu), gpu()].into_iter().flatten().collect();
    let case = &cases()[0];
    let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
    for (label, poison) in [("NaN", f32::NAN), ("inf", f32::INFINITY)] {
        let mut kind = Kind::new(false, &[], false, 7);
        kind.w0[3] = poison;
        for &backend in &backends {
            let scorer =
                Scorer::open_with(dir(), &HeadSource::Loaded(kind.file()), &options(backend))
                    .unwrap_or_else(|e| panic!("{label} head on {backend:?}: {e}"));
            match scorer.score_steps(&case.problem, &steps) {
                Err(Error::Model { file, message }) => {
                    assert_eq!(file, "head v_head.summary.weight", "{label} {backend:?}");
                    assert!(
                        message.contains("gives a non-finite score for step 0"),
                        "{label} {backend:?}: {message}"
                    );
                }
                other => {
                    panic!("{label} head on {backend:?}: expected a model error, got {other:?}")
                }
            }
        }
    }
    // An MLP head names the layer holding the NaN (here the output layer's
    // weight), not its first layer (issue 44's minor finding).
    let mut kind = Kind::new(true, &[], false, 8);
    let units = kind.b0.len();
    kind.out.as_mut().unwrap().0[units - 1] = f32::NAN;
    let scorer = Scorer::open_with(
        dir(),
        &HeadSource::Loaded(kind.file()),
        &options(Backend::Cpu),
    )
    .unwrap();
    match scorer.score_steps(&case.problem, &steps) {
        Err(Error::Model { file, .. }) => assert_eq!(file, "head v_head.summary.2.weight"),
        other => panic!("NaN MLP head: expected a model error, got {other:?}"),
    }
}

/// `Scorer::tokens_read` (npm `info().tokensRead`, which the demo shades by):
/// statistics over every token read all of them, the arithmetic head's only
/// numbers and signs, a hidden state none; a guard's statistics count.
#[test]
fn tokens_read_names_what_the_score_reads() {
    use stepscore::prm::head_file::QWEN15B_ARITHMETIC_HEAD_NAME;
    use stepscore::prm::TokensRead;
    let guard_meta = [
        ("stepscore.min_with", QWEN15B_ARITHMETIC_HEAD_NAME),
        ("stepscore.min_power", "0.3"),
    ];
    let read = |f: HeadFile| {
        Scorer::open_with(dir(), &HeadSource::Loaded(f), &options(Backend::Cpu))
            .unwrap()
            .tokens_read()
    };
    let hidden = Kind::new(false, &[1], false, 5);
    let confidence = Kind::new(false, &[1], true, 6);
    assert_eq!(read(hidden.file()), TokensRead::None);
    assert_eq!(read(confidence.file()), TokensRead::All);
    assert_eq!(
        read(HeadFile::embedded(QWEN15B_ARITHMETIC_HEAD_NAME).unwrap()),
        TokensRead::Arithmetic
    );
    assert_eq!(read(hidden.file_with(&guard_meta)), TokensRead::Arithmetic);
    assert_eq!(read(confidence.file_with(&guard_meta)), TokensRead::All);
}

/// Issue 40: a head with a guard (`stepscore.min_with` names a built-in
/// stats-only head, `stepscore.min_power` a power) scores each step
/// min(p_guard, p_head^power): the same, within 1e-12, as the head and the
/// guard each scored alone (each checked against the f64 reference above)
/// and combined here. A guard that reads a hidden state is refused.
#[test]
fn a_guarded_head_scores_the_minimum_of_its_guard_and_its_own_power() {
    use stepscore::prm::head_file::QWEN15B_ARITHMETIC_HEAD_NAME;
    // The built-in guard reads digit statistics, which the tiny model's
    // random weights make extreme (its scores here: 1e-16 to 0.01); a head
    // biased as low puts both sides of the minimum in play.
    let mut kind = Kind::new(false, &[1], true, 77);
    kind.b0[0] = -40.0;
    let guard_meta = [
        ("stepscore.min_with", QWEN15B_ARITHMETIC_HEAD_NAME),
        ("stepscore.min_power", "0.3"),
    ];
    let open = |f: HeadFile| {
        Scorer::open_with(dir(), &HeadSource::Loaded(f), &options(Backend::Cpu)).unwrap()
    };
    let alone = open(kind.file());
    let guard = open(HeadFile::embedded(QWEN15B_ARITHMETIC_HEAD_NAME).unwrap());
    let guarded = open(kind.file_with(&guard_meta));
    let (mut below, mut above) = (0, 0);
    for case in cases() {
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        let scores = |s: &Scorer| -> Vec<f64> {
            s.score_steps(&case.problem, &steps)
                .unwrap()
                .step_scores
                .into_iter()
                .map(Option::unwrap)
                .collect()
        };
        let (a, g, both) = (scores(&alone), scores(&guard), scores(&guarded));
        for i in 0..both.len() {
            let want = g[i].min(a[i].powf(0.3));
            assert!(
                (both[i] - want).abs() < 1e-12,
                "step {i}: {} vs {want}",
                both[i]
            );
            below += usize::from(g[i] < a[i].powf(0.3));
            above += usize::from(g[i] > a[i].powf(0.3));
        }
    }
    // Both sides of the minimum were taken somewhere, or the test shows half the rule.
    assert!(
        below > 0 && above > 0,
        "guard decided {below} steps, the head {above}"
    );
    // The GPU engine gives the guarded head the same scores (1e-4, as every kind above).
    #[cfg(feature = "gpu")]
    if gpu_support::have_adapter() {
        let gpu = Scorer::open_with(
            dir(),
            &HeadSource::Loaded(kind.file_with(&guard_meta)),
            &options(Backend::Gpu),
        )
        .unwrap();
        for case in cases() {
            let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
            let c = guarded
                .score_steps(&case.problem, &steps)
                .unwrap()
                .step_scores;
            let g = gpu.score_steps(&case.problem, &steps).unwrap().step_scores;
            for (c, g) in c.iter().zip(&g) {
                assert!((c.unwrap() - g.unwrap()).abs() < 1e-4, "{c:?} vs {g:?}");
            }
        }
    }
    // A guard must read statistics alone.
    let bad = [
        (
            "stepscore.min_with",
            "smollm2-135m-real-errors-head.safetensors",
        ),
        ("stepscore.min_power", "0.3"),
    ];
    let err = Scorer::open_with(
        dir(),
        &HeadSource::Loaded(kind.file_with(&bad)),
        &options(Backend::Cpu),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("a guard must read step statistics alone"),
        "{err}"
    );
}
