//! Choosing the next token from a model's logits: greedy, or sampling with
//! a repetition penalty, top-k, top-p, min-p and a temperature, from a seeded
//! generator. The filters run in llama.cpp's default order (penalties,
//! top-k, top-p, min-p, temperature, then the draw), so its documentation
//! of each option applies. The same seed gives the same tokens on every
//! engine and platform: the engines' logits are bit-identical, e^x is the
//! engines' own function (`quant::exp`, not the platform's libm), sums run in
//! one order in f64, and the generator is SplitMix64.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::quant::exp::exp;

/// How the next token is chosen. Defaults are llama.cpp's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sampling {
    /// Divides the logits before the draw; 0, or anything below 1e-4
    /// (`GREEDY_BELOW`), is greedy: the most likely token, ties to the
    /// lowest id (default 0.8).
    pub temperature: f64,
    /// Keeps the k most likely tokens; 0 keeps all (default 40).
    pub top_k: usize,
    /// Keeps the fewest most likely tokens whose probabilities reach p;
    /// 1 keeps all (default 0.95).
    pub top_p: f64,
    /// Drops tokens less likely than min_p times the most likely one;
    /// 0 drops none (default 0.05).
    pub min_p: f64,
    /// Tokens among the last `penalty_last_n` get their logit divided by
    /// this when positive and multiplied when negative (CTRL's rule, as
    /// llama.cpp applies it); 1 is off (default 1).
    pub repetition_penalty: f64,
    /// How many recent tokens the penalty looks at (default 64).
    pub penalty_last_n: usize,
    /// Seeds the draw (default 0).
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            penalty_last_n: 64,
            seed: 0,
        }
    }
}

impl Sampling {
    /// Greedy decoding: always the most likely token.
    pub fn greedy() -> Self {
        Sampling {
            temperature: 0.0,
            ..Sampling::default()
        }
    }

    /// Refuses values outside each option's meaning, naming the option.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, value: f64, want: &str| {
            Err(Error::InvalidArgument(format!(
                "sampling {field} = {value}: must be {want}"
            )))
        };
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad("temperature", self.temperature, "a finite number >= 0");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", self.top_p, "in (0, 1]");
        }
        if !(self.min_p >= 0.0 && self.min_p < 1.0) {
            return bad("min_p", self.min_p, "in [0, 1)");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad(
                "repetition_penalty",
                self.repetition_penalty,
                "a finite number > 0",
            );
        }
        Ok(())
    }
}

/// Temperatures below this are greedy. The draw divides f32 logit gaps by
/// the temperature in f32: a temperature that rounds to 0 there (`1e-50`)
/// made the top logit's weight 0/0 = NaN and the draw picked the last
/// candidate (issue 44, D8). Past 1e-4 nothing a draw could tell apart is
/// lost: a gap of 0.004 (f32 logits carry about 7 digits) already weighs
/// e^-40 < 2^-53, below the resolution of the 53-bit uniform the draw uses,
/// so only near-ties inside the engines' own rounding could still differ
/// from the greedy choice.
const GREEDY_BELOW: f64 = 1e-4;

/// A [`Sampling`] with its generator's state: one per sequence.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: Sampling,
    state: u64,
}

impl Sampler {
    pub fn new(params: Sampling) -> Result<Sampler> {
        params.validate()?;
        let state = params.seed;
        Ok(Sampler { params, state })
    }

    pub fn params(&self) -> &Sampling {
        &self.params
    }

    /// SplitMix64: a uniform number in [0, 1) with 53 random bits.
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// The next token given `logits` (one per vocabulary id) and the tokens
    /// so far (`history`, oldest first; the penalty reads its tail). A
    /// non-finite logit is an error naming the token: a model that produced
    /// it is broken, and a draw over it would be meaningless.
    pub fn next(&mut self, logits: &[f32], history: &[u32]) -> Result<u32> {
        if let Some(id) = logits.iter().position(|l| !l.is_finite()) {
            return Err(Error::model(
                "logits",
                format!("the logit of token {id} is {}", logits[id]),
            ));
        }
        if logits.is_empty() {
            return Err(Error::InvalidArgument("no logits to sample from".into()));
        }
        let p = &self.params;
        let mut cand: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, l))
            .collect();
        if p.repetition_penalty != 1.0 && p.penalty_last_n > 0 {
            let start = history.len().saturating_sub(p.penalty_last_n);
            let mut seen = std::collections::HashSet::new();
            let penalty = p.repetition_penalty as f32;
            for &t in &history[start..] {
                if let (true, Some(c)) = (seen.insert(t), cand.get_mut(t as usize)) {
                    c.1 = if c.1 > 0.0 {
                        c.1 / penalty
                    } else {
                        c.1 * penalty
                    };
                }
            }
        }
        if p.temperature < GREEDY_BELOW {
            // The first maximum: ties go to the lowest id.
            let best = cand
                .iter()
                .fold(cand[0], |best, &c| if c.1 > best.1 { c } else { best });
            return Ok(best.0);
        }
        // Most likely first; equal logits by id, so the order is one order.
        cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if p.top_k > 0 && p.top_k < cand.len() {
            cand.truncate(p.top_k);
        }
        if p.top_p < 1.0 {
            let probs = softmax(&cand, 1.0);
            let mut sum = 0.0;
            let keep = probs
                .iter()
                .position(|&q| {
                    sum += q;
                    sum >= p.top_p
                })
                .map_or(cand.len(), |i| i + 1);
            cand.truncate(keep.max(1));
        }
        if p.min_p > 0.0 {
            let probs = softmax(&cand, 1.0);
            let floor = probs[0] * p.min_p;
            let keep = probs.iter().take_while(|&&q| q >= floor).count();
            cand.truncate(keep.max(1));
        }
        let probs = softmax(&cand, p.temperature as f32);
        let u = self.uniform();
        let mut sum = 0.0;
        for (c, q) in cand.iter().zip(&probs) {
            sum += q;
            if u < sum {
                return Ok(c.0);
            }
        }
        // Rounding left the total a hair under u: the last candidate.
        Ok(cand[cand.len() - 1].0)
    }
}

/// Probabilities of sorted candidates at `temperature` (the first holds the
/// largest logit), summed in order in f64.
fn softmax(cand: &[(u32, f32)], temperature: f32) -> Vec<f64> {
    let max = cand[0].1;
    let e: Vec<f64> = cand
        .iter()
        .map(|c| exp((c.1 - max) / temperature) as f64)
        .collect();
    let total: f64 = e.iter().sum();
    e.into_iter().map(|x| x / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(params: Sampling, logits: &[f32], n: usize) -> Vec<u32> {
        let mut s = Sampler::new(params).unwrap();
        (0..n).map(|_| s.next(logits, &[]).unwrap()).collect()
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        assert_eq!(
            draw(Sampling::greedy(), &[0.5, 2.0, 2.0, -1.0], 3),
            [1, 1, 1]
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_tokens_and_another_seed_others() {
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
        let p = |seed| Sampling {
            seed,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            temperature: 1.0,
            ..Sampling::default()
        };
        assert_eq!(draw(p(7), &logits, 40), draw(p(7), &logits, 40));
        assert_ne!(draw(p(7), &logits, 40), draw(p(8), &logits, 40));
    }

    #[test]
    fn frequencies_follow_the_softmax() {
        // logits ln 1, ln 2, ln 3, ln 4: probabilities 0.1, 0.2, 0.3, 0.4.
        let logits: Vec<f32> = [1.0f32, 2.0, 3.0, 4.0].iter().map(|x| x.ln()).collect();
        let params = Sampling {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: 1,
            ..Sampling::default()
        };
        let n = 20_000;
        let mut counts = [0usize; 4];
        for t in draw(params, &logits, n) {
            counts[t as usize] += 1;
        }
        for (i, c) in counts.iter().enumerate() {
            let f = *c as f64 / n as f64;
            let want = (i + 1) as f64 / 10.0;
            // 4.5 standard deviations of a binomial proportion at n = 20,000.
            let tol = 4.5 * (want * (1.0 - want) / n as f64).sqrt();
            assert!((f - want).abs() < tol, "token {i}: {f} vs {want}");
        }
    }

    #[test]
    fn top_k_top_p_and_min_p_keep_only_the_likely_tokens() {
        let logits: Vec<f32> = [4.0f32, 3.0, 2.0, 1.0].iter().map(|x| x.ln()).collect();
        let base = Sampling {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Sampling::default()
        };
        let seen = |p: Sampling| {
            let mut s: Vec<u32> = draw(p, &logits, 2000);
            s.sort_unstable();
            s.dedup();
            s
        };
        assert_eq!(
            seen(Sampling {
                top_k: 2,
                ..base.clone()
            }),
            [0, 1]
        );
        // 0.4 + 0.3 = 0.7 reaches 0.7: two tokens.
        assert_eq!(
            seen(Sampling {
                top_p: 0.7,
                ..base.clone()
            }),
            [0, 1]
        );
        // 0.2 >= 0.5 * 0.4 keeps three; 0.1 does not.
        assert_eq!(
            seen(Sampling {
                min_p: 0.5,
                ..base.clone()
            }),
            [0, 1, 2]
        );
        assert_eq!(seen(base), [0, 1, 2, 3]);
    }

    /// Issue 44, D8: a temperature that is 0 in f32 (1e-50) drew the least
    /// likely candidate through NaN probabilities; below the floor it is
    /// greedy, and just above it the draw is still finite.
    #[test]
    fn tiny_temperatures_are_greedy() {
        let logits = [0.5f32, 2.0, 2.0, -1.0, 1.9];
        for t in [1e-50, 1e-300, f64::MIN_POSITIVE, 5e-5] {
            let p = Sampling {
                temperature: t,
                ..Sampling::default()
            };
            assert_eq!(draw(p, &logits, 20), [1; 20], "temperature {t}");
        }
        let p = Sampling {
            temperature: GREEDY_BELOW,
            ..Sampling::default()
        };
        assert!(draw(p, &logits, 20).iter().all(|&t| t == 1 || t == 2));
    }

    #[test]
    fn the_repetition_penalty_follows_llama_cpps_rule() {
        let mut s = Sampler::new(Sampling {
            repetition_penalty: 2.0,
            ..Sampling::greedy()
        })
        .unwrap();
        // Token 0 (3.0) is penalized to 1.5 < 2.0; negative logits are multiplied.
        assert_eq!(s.next(&[3.0, 2.0, -1.0], &[0]).unwrap(), 1);
        assert_eq!(s.next(&[-1.0, -1.5], &[1]).unwrap(), 0);
        assert_eq!(s.next(&[-1.0, -0.4], &[1]).unwrap(), 1);
    }

    #[test]
    fn out_of_range_options_and_non_finite_logits_are_errors() {
        for (p, field) in [
            (
                Sampling {
                    temperature: -1.0,
                    ..Sampling::default()
                },
                "temperature",
            ),
            (
                Sampling {
                    temperature: f64::NAN,
                    ..Sampling::default()
                },
                "temperature",
            ),
            (
                Sampling {
                    top_p: 0.0,
                    ..Sampling::default()
                },
                "top_p",
            ),
            (
                Sampling {
                    top_p: 1.5,
                    ..Sampling::default()
                },
                "top_p",
            ),
            (
                Sampling {
                    min_p: 1.0,
                    ..Sampling::default()
                },
                "min_p",
            ),
            (
                Sampling {
                    repetition_penalty: 0.0,
                    ..Sampling::default()
                },
                "repetition_penalty",
            ),
        ] {
            let e = Sampler::new(p).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
        let mut s = Sampler::new(Sampling::greedy()).unwrap();
        let e = s.next(&[0.0, f32::NAN], &[]).unwrap_err().to_string();
        assert!(e.contains("token 1"), "{e}");
    }
}
