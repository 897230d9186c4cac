//! `stepscore bench --decode N`: generation speed of the CPU engine, N
//! single-token forward steps on the KV cache after a prompt, each followed
//! by the full-vocabulary logits of its row (what [`Scorer::generate`] runs
//! per token), beside the same steps in llama.cpp
//! (scripts/bench/bench_llama_cpp.py --decode). The inputs are fixed token ids
//! (the synthetic trace's next tokens), not sampled ones, so both runtimes
//! run exactly the same steps.
//!
//! Also times every distinct weight matrix of the model on one row (the
//! decode shape of each matmul), so a slow step can be traced to a format
//! and shape.

use std::collections::BTreeMap;
use std::time::Instant;

use stepscore::engine::{Matrix, QuantizedActs};
use stepscore::prm::Scorer;

use super::{progress, time, SyntheticTrace, Timing};
use crate::Failure;

/// The decode timing and what it ran.
pub(super) struct Decode {
    pub prompt: usize,
    pub steps: usize,
    pub timing: Timing,
    pub shapes: Vec<ShapeTiming>,
}

impl Decode {
    pub(super) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "prompt_tokens": self.prompt,
            "decode_tokens": self.steps,
            "decode": self.timing.json(self.steps),
            "shapes": self.shapes.iter().map(ShapeTiming::json).collect::<Vec<_>>(),
            "matmul_ms_per_token": self.matmul_ms_per_token(),
        })
    }

    /// What the matmuls of one step cost, from the per-shape timings.
    pub(super) fn matmul_ms_per_token(&self) -> f64 {
        self.shapes
            .iter()
            .map(|s| s.count as f64 * s.best_s)
            .sum::<f64>()
            * 1e3
    }
}

/// One weight shape on one activation row.
pub(super) struct ShapeTiming {
    /// Which matrices: e.g. "q", "gate/up", "vocab".
    pub roles: String,
    pub ty: &'static str,
    pub rows: usize,
    pub cols: usize,
    /// How many matmuls of this shape one decode step runs.
    pub count: usize,
    /// Weight bytes one matmul reads.
    pub bytes: u64,
    /// Seconds per matmul (activations already converted).
    pub best_s: f64,
}

impl ShapeTiming {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "roles": self.roles,
            "type": self.ty,
            "rows": self.rows,
            "cols": self.cols,
            "count_per_token": self.count,
            "best_us": self.best_s * 1e6,
            "gb_per_s": self.bytes as f64 / self.best_s / 1e9,
        })
    }
}

/// Runs the decode benchmark: a `prompt`-token prefix once, then `warmup +
/// repeats` timed runs of `steps` single-token steps, the cache cut back to
/// the prefix before each. Returns the token ids too (prompt, then steps).
pub(super) fn run(
    scorer: &Scorer,
    prompt: usize,
    steps: usize,
    warmup: usize,
    repeats: usize,
) -> Result<(Decode, Vec<u32>), Failure> {
    let total = prompt + steps;
    if steps == 0 || prompt == 0 || total > scorer.max_tokens() {
        return Err(Failure::Usage(format!(
            "--decode {steps} after --decode-prompt {prompt} must be within 1..={} tokens in all, each at least 1",
            scorer.max_tokens()
        )));
    }
    scorer.can_generate()?;
    let trace = SyntheticTrace::build(scorer, total.max(8))?;
    let refs: Vec<&str> = trace.steps.iter().map(String::as_str).collect();
    let mut tokens = scorer.encode(&trace.problem, &refs)?.tokens;
    tokens.truncate(total);
    let (head, tail) = tokens.split_at(prompt);
    let model = scorer.model();
    let mut cache = scorer.new_cache();
    progress(&format!("cpu: prompt of {prompt} tokens"));
    scorer.forward(head, Some(&mut cache))?;
    progress(&format!(
        "cpu: decode, {steps} tokens x {} runs",
        warmup + repeats
    ));
    let mut checksum = 0.0f32;
    let timing = time(warmup, repeats, || {
        cache.truncate(prompt);
        for &t in tail {
            let hidden = scorer.forward(&[t], Some(&mut cache))?;
            let logits = model.logits_for(&hidden.data, None)?;
            checksum += logits.last().copied().unwrap_or(0.0);
        }
        Ok(())
    })?;
    std::hint::black_box(checksum);
    progress("cpu: one-row matmul per weight shape");
    let shapes = shape_timings(scorer)?;
    Ok((
        Decode {
            prompt,
            steps,
            timing,
            shapes,
        },
        tokens,
    ))
}

/// Every distinct (format, rows, cols) of the model's matrices on one row,
/// with how often a decode step runs it.
fn shape_timings(scorer: &Scorer) -> Result<Vec<ShapeTiming>, Failure> {
    let model = scorer.model();
    let threads = model.threads();
    let w = model.weights();
    let mut uses: Vec<(&'static str, &Matrix)> = Vec::new();
    for l in &w.layers {
        uses.extend([
            ("q", &l.q),
            ("k", &l.k),
            ("v", &l.v),
            ("o", &l.o),
            ("gate", &l.gate),
            ("up", &l.up),
            ("down", &l.down),
        ]);
    }
    if let Some(m) = w.vocab_projection() {
        uses.push(("vocab", m));
    }
    // (type, rows, cols) -> (roles, count, a matrix of that shape)
    type Uses<'m> = (Vec<&'static str>, usize, &'m Matrix);
    let mut distinct: BTreeMap<(&'static str, usize, usize), Uses> = BTreeMap::new();
    for (role, m) in uses {
        let e = distinct
            .entry((m.type_name(), m.rows(), m.cols()))
            .or_insert((Vec::new(), 0, m));
        if !e.0.contains(&role) {
            e.0.push(role);
        }
        e.1 += 1;
    }
    let mut out = Vec::new();
    for ((ty, rows, cols), (roles, count, m)) in distinct {
        // A deterministic, non-degenerate activation row.
        let x: Vec<f32> = (0..cols)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.5)
            .collect();
        let mut y = vec![0.0f32; rows];
        let best_s = match m.act_type() {
            Some(act) => {
                let acts = QuantizedActs::new(act, &x, 1, cols)?;
                best_of(|| m.matmul_acts(&acts, &mut y, threads))?
            }
            None => best_of(|| m.matmul(&x, 1, &mut y, threads))?,
        };
        let bytes = match m {
            Matrix::Quant { ty, .. } => ty.bytes_for(cols as u64).unwrap_or(0) * rows as u64,
            Matrix::F32 { .. } => (rows * cols * 4) as u64,
        };
        out.push(ShapeTiming {
            roles: roles.join("/"),
            ty,
            rows,
            cols,
            count,
            bytes,
            best_s,
        });
    }
    Ok(out)
}

/// The fastest of enough runs of `f` to fill ~0.2 s (at least 5).
fn best_of(mut f: impl FnMut() -> stepscore::Result<()>) -> Result<f64, Failure> {
    f()?;
    let started = Instant::now();
    let mut best = f64::INFINITY;
    let mut runs = 0;
    while runs < 5 || (started.elapsed().as_secs_f64() < 0.2 && runs < 1000) {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
        runs += 1;
    }
    Ok(best)
}
