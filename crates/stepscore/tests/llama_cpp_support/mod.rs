//! What the llama.cpp comparisons share (llama_cpp_golden.rs for SmolLM2,
//! llama_cpp_logits.rs for the other catalog GGUFs): reading the committed
//! f32 rows, the top-5 rule, and the bar a quantized path must meet.

use std::path::Path;

/// A little-endian f32 file.
pub fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The five largest entries' ids, ties to the lower id (numpy's stable argsort).
pub fn top5(row: &[f32]) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..row.len() as u32).collect();
    idx.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
    idx.truncate(5);
    idx
}

/// The quantized path against llama.cpp, summed over prompts: our largest
/// and mean |Δ logit| beside llama.cpp's own between its f16 and f32 KV
/// caches on the same ids, and top-1 agreement over all positions.
#[derive(Default)]
pub struct Spread {
    pub our_max: f32,
    pub their_max: f32,
    pub our_mean: f32,
    pub their_mean: f32,
    pub agree: usize,
    pub positions: usize,
}

impl Spread {
    /// The bar: max |Δ| ≤ 1.25× llama.cpp's own largest, mean |Δ| ≤ 1.5× its
    /// own mean, top-1 agreement at ≥ 95% of all positions.
    pub fn assert_within_llama_cpp_own(&self, name: &str) {
        eprintln!(
            "{name}: max |Δ| {:.3} vs {:.3}, mean |Δ| {:.4} vs {:.4}, top-1 {}/{}",
            self.our_max,
            self.their_max,
            self.our_mean,
            self.their_mean,
            self.agree,
            self.positions
        );
        assert!(
            self.our_max <= 1.25 * self.their_max,
            "{name}: max |Δ| {} vs llama.cpp's own {}",
            self.our_max,
            self.their_max
        );
        assert!(
            self.our_mean <= 1.5 * self.their_mean,
            "{name}: mean |Δ| {} vs llama.cpp's own {}",
            self.our_mean,
            self.their_mean
        );
        assert!(
            self.agree * 100 >= self.positions * 95,
            "{name}: top-1 agreement {}/{}",
            self.agree,
            self.positions
        );
    }
}
