//! Heads: from the decoder's hidden states to one score per step, written
//! once over the engines' kernel interface ([`Kernels`]): the CPU engine
//! and the WGSL engine run the same definition. The engine computes what
//! is large (the score head's matrices, the "+"/"-" vocabulary rows, the
//! LM's token statistics); the final arithmetic runs in f64 on the host,
//! and so do value heads, whose few weights per step cost less than
//! reading their output back.

use super::template::Encoded;
use super::token_classes::{operation_logprobs, DigitConfidence, OperatorRows};
use crate::engine::{Kernels, Linear, Matrix, States, Taps, Transformer};
use crate::{Error, Result};

/// Tensor names of the heads, as the reference checkpoints store them.
pub(crate) const SCORE_0_WEIGHT: &str = "score.0.weight";
pub(crate) const SCORE_0_BIAS: &str = "score.0.bias";
pub(crate) const SCORE_2_WEIGHT: &str = "score.2.weight";
pub(crate) const SCORE_2_BIAS: &str = "score.2.bias";
pub const V_HEAD_WEIGHT: &str = "v_head.summary.weight";
/// `*ForSequenceClassification`'s head, `[num_labels, h]`, and its bias
/// (most reward models have none).
pub(crate) const OUTCOME_WEIGHT: &str = "score.weight";
pub(crate) const OUTCOME_BIAS: &str = "score.bias";
pub const V_HEAD_BIAS: &str = "v_head.summary.bias";
/// The MLP value head, `nn.Sequential(Linear(w, k), ReLU, Linear(k, 1))`
/// naming (what stepscore-train exports).
pub const V_HEAD_MLP_0_WEIGHT: &str = "v_head.summary.0.weight";
pub const V_HEAD_MLP_0_BIAS: &str = "v_head.summary.0.bias";
pub const V_HEAD_MLP_2_WEIGHT: &str = "v_head.summary.2.weight";
pub const V_HEAD_MLP_2_BIAS: &str = "v_head.summary.2.bias";

/// One statistic of a step's own tokens that a value head can join to the
/// hidden state; a head file lists the ones it reads, in order, under
/// `stepscore.step_stats` (see `head_file.rs`). Each is rounded to f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepStat {
    /// `ln(1 + tokens)`.
    Log1pTokens,
    MeanLogprob,
    MinLogprob,
    /// Mean entropy (nats) of the distributions that predict the tokens.
    MeanEntropy,
    /// `ln(1 + digit tokens)` (see [`DigitConfidence`]).
    DigitLog1pTokens,
    DigitMinLogprob,
    DigitMeanLogprob,
    /// The least likely "+" or "-" token (see [`DigitConfidence`]).
    PlusMinusMinLogprob,
    /// The least likely digit of a result, of an operand, and the least
    /// likely times/divide sign (see [`ArithmeticConfidence`]).
    ResultMinLogprob,
    OperandMinLogprob,
    TimesDivideMinLogprob,
    /// The least likely operation of the step's operators, in any notation
    /// (see [`DigitConfidence::operation_min_logprob`]).
    OperationMinLogprob,
    /// 1 when exact arithmetic finds an equation of the step's text false
    /// (see [`DigitConfidence::false_equations`]), else 0: no model involved.
    FalseEquation,
}

/// Which of a step's tokens a head's score reads through the LM's token
/// statistics (a front end shades those): every token (confidence, or a
/// statistic over all of them such as `mean_logprob`), only numbers and
/// operation signs (the arithmetic statistics), or none (hidden states alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokensRead {
    All,
    Arithmetic,
    None,
}

impl TokensRead {
    /// The name front ends use (`info().tokensRead` in npm).
    pub fn name(self) -> &'static str {
        match self {
            TokensRead::All => "all",
            TokensRead::Arithmetic => "arithmetic",
            TokensRead::None => "none",
        }
    }

    /// What a head reading `stats` reads.
    fn of(stats: impl Iterator<Item = StepStat>) -> TokensRead {
        let mut read = TokensRead::None;
        for s in stats {
            if !s.reads_digit_confidence() {
                return TokensRead::All;
            }
            read = TokensRead::Arithmetic;
        }
        read
    }
}

impl StepStat {
    pub const ALL: [StepStat; 13] = [
        StepStat::Log1pTokens,
        StepStat::MeanLogprob,
        StepStat::MinLogprob,
        StepStat::MeanEntropy,
        StepStat::DigitLog1pTokens,
        StepStat::DigitMinLogprob,
        StepStat::DigitMeanLogprob,
        StepStat::PlusMinusMinLogprob,
        StepStat::ResultMinLogprob,
        StepStat::OperandMinLogprob,
        StepStat::TimesDivideMinLogprob,
        StepStat::OperationMinLogprob,
        StepStat::FalseEquation,
    ];
    /// The layout `stepscore.confidence_features = true` means (the first
    /// heads over hidden state + statistics were trained on these four).
    pub const CONFIDENCE: [StepStat; 4] = [
        StepStat::Log1pTokens,
        StepStat::MeanLogprob,
        StepStat::MinLogprob,
        StepStat::MeanEntropy,
    ];

    /// The name head files and feature files use.
    pub fn name(self) -> &'static str {
        match self {
            StepStat::Log1pTokens => "log1p_tokens",
            StepStat::MeanLogprob => "mean_logprob",
            StepStat::MinLogprob => "min_logprob",
            StepStat::MeanEntropy => "mean_entropy",
            StepStat::DigitLog1pTokens => "digit_log1p_tokens",
            StepStat::DigitMinLogprob => "digit_min_logprob",
            StepStat::DigitMeanLogprob => "digit_mean_logprob",
            StepStat::PlusMinusMinLogprob => "plus_minus_min_logprob",
            StepStat::ResultMinLogprob => "result_min_logprob",
            StepStat::OperandMinLogprob => "operand_min_logprob",
            StepStat::TimesDivideMinLogprob => "times_divide_min_logprob",
            StepStat::OperationMinLogprob => "operation_min_logprob",
            StepStat::FalseEquation => "false_equation",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<StepStat> {
        StepStat::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the statistic is one of the step's [`DigitConfidence`].
    pub fn reads_digit_confidence(self) -> bool {
        !StepStat::CONFIDENCE.contains(&self)
    }

    /// Whether it needs the operator rows' logits
    /// ([`DigitConfidence::operation_min_logprob`]).
    pub(crate) fn reads_operations(self) -> bool {
        self == StepStat::OperationMinLogprob
    }

    /// The optional field of `d` it reads when that field is absent (feature
    /// files written before the field existed), else `None`.
    pub fn missing_field(self, d: &DigitConfidence) -> Option<&'static str> {
        match self {
            StepStat::ResultMinLogprob
            | StepStat::OperandMinLogprob
            | StepStat::TimesDivideMinLogprob
                if d.arithmetic.is_none() =>
            {
                Some("arithmetic")
            }
            StepStat::OperationMinLogprob if d.operation_min_logprob.is_none() => {
                Some("operation_min_logprob")
            }
            StepStat::FalseEquation if d.false_equations.is_none() => Some("false_equations"),
            _ => None,
        }
    }

    /// Its value for one step.
    pub fn value(self, s: &StepConfidence, d: &DigitConfidence) -> f32 {
        let v = match self {
            StepStat::Log1pTokens => (s.tokens as f64).ln_1p(),
            StepStat::MeanLogprob => s.mean_logprob,
            StepStat::MinLogprob => s.min_logprob,
            StepStat::MeanEntropy => s.mean_entropy,
            StepStat::DigitLog1pTokens => (d.tokens as f64).ln_1p(),
            StepStat::DigitMinLogprob => d.min_logprob,
            StepStat::DigitMeanLogprob => d.mean_logprob,
            StepStat::PlusMinusMinLogprob => d.plus_minus_min_logprob,
            // The engine always fills `arithmetic`; feature files without it
            // are refused before any value is read (stepscore-train).
            StepStat::ResultMinLogprob => d.arithmetic.map_or(0.0, |a| a.result_min_logprob),
            StepStat::OperandMinLogprob => d.arithmetic.map_or(0.0, |a| a.operand_min_logprob),
            StepStat::TimesDivideMinLogprob => {
                d.arithmetic.map_or(0.0, |a| a.times_divide_min_logprob)
            }
            StepStat::OperationMinLogprob => d.operation_min_logprob.unwrap_or(0.0),
            StepStat::FalseEquation => f64::from(u8::from(d.false_equations.unwrap_or(0) > 0)),
        };
        v as f32
    }
}

impl std::str::FromStr for StepStat {
    type Err = String;

    /// A statistic by [`StepStat::name`]; the error lists the known names.
    fn from_str(name: &str) -> std::result::Result<StepStat, String> {
        StepStat::from_name(name.trim()).ok_or_else(|| {
            let known: Vec<&str> = StepStat::ALL.iter().map(|s| s.name()).collect();
            format!("unknown statistic `{name}` (known: {})", known.join(", "))
        })
    }
}

/// What a head reads besides its weights, and the threshold it ships with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeadInput {
    /// The layers whose hidden states the head reads, strictly ascending,
    /// joined in this order; empty: the final one (see
    /// [`Transformer::forward_tapped`] for the definition).
    pub layers: Vec<usize>,
    /// The step statistics joined to the hidden state, in row order (a
    /// value head of width `h + stats.len()`); empty: the hidden state alone.
    pub stats: Vec<StepStat>,
    /// The head reads the statistics alone, not the hidden state (width
    /// `stats.len()`): no layer's states leave the engine.
    pub stats_only: bool,
    /// The first-error threshold chosen with the head on validation data
    /// (a step scored below it is flagged); `None`: the head has none.
    pub threshold: Option<f64>,
    /// The solution threshold for use with the model's verdict
    /// ([`crate::prm::verdict::solution_score`]); `None`: the head has none.
    pub solution_threshold: Option<f64>,
    /// Flag a step when either this head or a built-in guard head does:
    /// the step score is `min(p_guard, p_head^power)` (issue 40: a head
    /// trained on real errors beside the arithmetic head, which catches the
    /// slips it misses).
    pub min_with: Option<MinWith>,
}

/// The guard of a value head ([`HeadInput::min_with`]).
#[derive(Debug, Clone, PartialEq)]
pub struct MinWith {
    /// A built-in head over step statistics alone (a name
    /// [`crate::prm::head_file::HeadFile::embedded`] knows).
    pub head: String,
    /// The power in (0, 1] this head's probability is raised to before the
    /// minimum, so that it ranks arithmetic slips below the guard's no less.
    pub power: f64,
}

/// A head and its weights, `W` being the engine's weight storage.
#[derive(Debug, Clone)]
pub struct Head<W = Matrix> {
    pub(crate) kind: Kind<W>,
    /// The layers the engine must tap (empty: the final states).
    pub(crate) layers: Vec<usize>,
    pub(crate) threshold: Option<f64>,
    pub(crate) solution_threshold: Option<f64>,
}

/// The shape of a head, which the families' files build (`family/`) and
/// [`Head::apply`] runs.
#[derive(Debug, Clone)]
pub(crate) enum Kind<W> {
    /// Linear(h,h) -> ReLU -> Linear(h,2), softmax, class 1.
    Score {
        w0: W,
        b0: Vec<f32>,
        w2: W,
        b2: [f32; 2],
    },
    /// Linear or MLP -> sigmoid, on the host; the operator rows when a
    /// statistic reads the operations.
    Value(ValueHead, Option<OperatorRows<W>>),
    /// Softmax over the "+" and "-" logits (those two vocabulary rows, in
    /// that order), probability of "+".
    PlusMinus { rows: W },
    /// Token log-probabilities of each step under the LM itself.
    Confidence,
    /// One score for the whole solution: `Linear(h,1)` (`score.weight`, and
    /// `bias` when the checkpoint has one) on the last token's final state,
    /// sigmoid; the earlier steps are not scored.
    Outcome { weight: W, bias: f32 },
}

/// A value head: `sigmoid(Linear(x))` or `sigmoid(Linear(ReLU(Linear(x))))`
/// over the row `x` = hidden state (joined with the step's confidence
/// statistics `stats`), all in f64.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueHead {
    width: usize,
    /// `[units, width]` row-major, and `[units]`; one unit for a linear head.
    w0: Vec<f32>,
    b0: Vec<f32>,
    /// The MLP's output layer `[1, units]` and its bias, after a ReLU.
    out: Option<(Vec<f32>, f32)>,
    pub(crate) stats: Vec<StepStat>,
    /// Rows are the statistics alone (see [`HeadInput::stats_only`]).
    pub(crate) stats_only: bool,
    /// Some statistic reads the step's [`DigitConfidence`].
    pub(crate) reads_digits: bool,
    /// A stats-only head whose probability caps this one's, and the power
    /// this head's probability is raised to first ([`HeadInput::min_with`]).
    pub(crate) guard: Option<(Box<ValueHead>, f64)>,
}

impl ValueHead {
    /// The statistics its score reads: its own, then its guard's.
    pub(crate) fn read_stats(&self) -> impl Iterator<Item = StepStat> + '_ {
        let guard = self.guard.iter().flat_map(|(g, _)| g.stats.iter());
        self.stats.iter().chain(guard).copied()
    }

    /// The tensor a non-finite logit is blamed on: the first of the head's
    /// tensors that holds a NaN or an infinity (issue 44: a +inf bias was
    /// blamed on the weight), else the first layer's weight (finite weights
    /// whose sum overflowed).
    fn tensor_name(&self) -> &'static str {
        let bad = |v: &[f32]| v.iter().any(|x| !x.is_finite());
        let tensors: Vec<(bool, &'static str)> = match &self.out {
            None => vec![(bad(&self.w0), V_HEAD_WEIGHT), (bad(&self.b0), V_HEAD_BIAS)],
            Some((w2, b2)) => vec![
                (bad(&self.w0), V_HEAD_MLP_0_WEIGHT),
                (bad(&self.b0), V_HEAD_MLP_0_BIAS),
                (bad(w2), V_HEAD_MLP_2_WEIGHT),
                (bad(&[*b2]), V_HEAD_MLP_2_BIAS),
            ],
        };
        tensors
            .iter()
            .find(|(bad, _)| *bad)
            .map_or(tensors[0].1, |(_, name)| name)
    }

    /// The head's logit for one input row of `width` values.
    fn logit(&self, x: &[f32]) -> f64 {
        let dot = |w: &[f32]| -> f64 { x.iter().zip(w).map(|(x, w)| *x as f64 * *w as f64).sum() };
        match &self.out {
            None => dot(&self.w0) + self.b0[0] as f64,
            Some((w2, b2)) => {
                let mut z = 0.0f64;
                for ((w, b), v) in self.w0.chunks_exact(self.width).zip(&self.b0).zip(w2) {
                    z += (dot(w) + *b as f64).max(0.0) * *v as f64;
                }
                z + *b2 as f64
            }
        }
    }

    /// Each step's token statistics, and its digit statistics when the
    /// head reads them (zeros otherwise: they are not used then).
    async fn step_stats<K: Kernels>(
        &self,
        k: &K,
        last: &K::Hidden,
        operators: Option<&OperatorRows<K::Weights>>,
        enc: &Encoded,
    ) -> Result<(Vec<(StepConfidence, DigitConfidence)>, Vec<Vec<(f64, f64)>>)> {
        let per_token = step_token_logprobs(k, last, enc).await?;
        let operations = match operators {
            Some(ops) => Some(operation_logprobs(k, last, ops, enc).await?),
            None => None,
        };
        let stats = per_token
            .iter()
            .zip(enc.step_texts.iter().zip(&enc.step_spans))
            .enumerate()
            .map(|(i, (lps, (text, spans)))| {
                let digits = if self.reads_digits {
                    let ops = operations
                        .as_ref()
                        .and_then(|o| o.get(i))
                        .map(Vec::as_slice);
                    DigitConfidence::of(text, spans, lps, ops)
                } else {
                    DigitConfidence::default()
                };
                (StepConfidence::of(lps), digits)
            })
            .collect::<Vec<_>>();
        Ok((stats, per_token))
    }
}

/// What the confidence family measures on one step's tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepConfidence {
    pub tokens: usize,
    pub mean_logprob: f64,
    pub min_logprob: f64,
    /// Mean entropy (nats) of the predictive distributions of the step's tokens.
    pub mean_entropy: f64,
}

/// A head's result for one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadOutput {
    /// One per step; `None` for a step the head does not score (an outcome
    /// head scores the last step only).
    pub scores: Vec<Option<f64>>,
    /// An outcome head's logit, before the sigmoid.
    pub outcome_logit: Option<f64>,
    pub confidence: Option<Vec<StepConfidence>>,
    /// Per step, its tokens' `(log-prob, entropy)`, when the head read them.
    pub token_logprobs: Option<Vec<Vec<(f64, f64)>>>,
}

/// A named tensor as (shape, f32 values), or `None` when absent.
pub type TensorLookup<'a> = dyn Fn(&str) -> Result<Option<(Vec<usize>, Vec<f32>)>> + 'a;

pub(crate) fn require(get: &TensorLookup<'_>, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
    match get(name)? {
        None => Err(Error::model(
            name,
            format!("missing head tensor (expected shape {shape:?})"),
        )),
        Some((s, _)) if s != shape => Err(Error::model(
            name,
            format!(
                "head tensor has shape {s:?}, expected {shape:?}{}",
                width_hint(&s, shape)
            ),
        )),
        Some((_, data)) => Ok(data),
    }
}

/// Says what a head width off by a number of step statistics means.
fn width_hint(got: &[usize], want: &[usize]) -> String {
    match (got.last(), want.last()) {
        (Some(&g), Some(&w)) if g > w && g - w <= StepStat::ALL.len() => format!(
            " (a head {} values wider than its input: a head over the hidden state and {} step statistics must name them in `stepscore.step_stats`)",
            g - w,
            g - w
        ),
        (Some(&g), Some(&w)) if g < w && w - g <= StepStat::ALL.len() => format!(
            " (the file names {} more step statistics than the head has columns for)",
            w - g
        ),
        _ => String::new(),
    }
}

/// A one-unit head's bias: 0 when the checkpoint has none.
pub(crate) fn optional_bias(get: &TensorLookup<'_>, name: &str) -> Result<f32> {
    match get(name)? {
        None => Ok(0.0),
        Some((s, d)) if s == [1] => Ok(d[0]),
        Some((s, _)) => Err(Error::model(name, format!("has shape {s:?}, expected [1]"))),
    }
}

pub(crate) fn value_head(
    get: &TensorLookup<'_>,
    width: usize,
    stats: &[StepStat],
) -> Result<ValueHead> {
    if get(V_HEAD_WEIGHT)?.is_some() {
        let w0 = require(get, V_HEAD_WEIGHT, &[1, width])?;
        let b = optional_bias(get, V_HEAD_BIAS)?;
        return Ok(ValueHead {
            width,
            w0,
            b0: vec![b],
            out: None,
            stats: stats.to_vec(),
            stats_only: false,
            reads_digits: false,
            guard: None,
        });
    }
    let units = match get(V_HEAD_MLP_0_WEIGHT)? {
        Some((s, _)) if s.len() == 2 && s[0] > 0 => s[0],
        Some((s, _)) => {
            return Err(Error::model(
                V_HEAD_MLP_0_WEIGHT,
                format!("head tensor has shape {s:?}, expected [k, {width}] with k > 0"),
            ))
        }
        None => {
            return Err(Error::model(
                V_HEAD_WEIGHT,
                format!("missing head tensor: a value head has `{V_HEAD_WEIGHT}` [1, {width}] (linear) or `{V_HEAD_MLP_0_WEIGHT}` [k, {width}] (MLP)"),
            ))
        }
    };
    let w0 = require(get, V_HEAD_MLP_0_WEIGHT, &[units, width])?;
    let b0 = require(get, V_HEAD_MLP_0_BIAS, &[units])?;
    let w2 = require(get, V_HEAD_MLP_2_WEIGHT, &[1, units])?;
    let b2 = require(get, V_HEAD_MLP_2_BIAS, &[1])?;
    Ok(ValueHead {
        width,
        w0,
        b0,
        out: Some((w2, b2[0])),
        stats: stats.to_vec(),
        stats_only: false,
        reads_digits: false,
        guard: None,
    })
}

/// The guard `min_with` names, from its head file's input and tensors
/// (`guard`, which the caller reads: a built-in head over step statistics
/// alone), and the power of the guarded head's probability.
pub(crate) fn guard_head(
    min_with: &MinWith,
    guard: Option<(&HeadInput, &TensorLookup<'_>)>,
) -> Result<(Box<ValueHead>, f64)> {
    let what = format!("guard head {}", min_with.head);
    let (input, get) = guard.ok_or_else(|| {
        Error::Internal(format!(
            "{what}: the head file names it, and it was not loaded"
        ))
    })?;
    if !input.stats_only || input.min_with.is_some() {
        return Err(Error::model(
            &what,
            "a guard must read step statistics alone and have no guard of its own",
        ));
    }
    let mut g = value_head(get, input.stats.len(), &input.stats)?;
    g.stats_only = true;
    g.reads_digits = g.stats.iter().any(|s| s.reads_digit_confidence());
    Ok((Box::new(g), min_with.power))
}

/// The "+" and "-" rows of the vocabulary projection, in that order (the
/// families scored by the LM's own "+"/"-" logits).
pub(crate) fn plus_minus_rows(
    model: &Transformer,
    (plus, minus): (u32, u32),
) -> Result<Kind<Matrix>> {
    let vocab = model.config().vocab_size;
    if let Some(r) = [plus, minus].into_iter().find(|&r| r as usize >= vocab) {
        return Err(Error::InvalidArgument(format!(
            "vocabulary row {r} is out of range for vocabulary size {vocab}"
        )));
    }
    Ok(Kind::PlusMinus {
        rows: model.vocab_projection()?.select_rows(&[plus, minus])?,
    })
}

impl Head {
    /// The head with its weights in `k`'s storage (the WGSL engine's).
    #[cfg(feature = "gpu")]
    pub fn upload<K: Kernels>(&self, k: &K) -> Result<Head<K::Weights>> {
        let kind = match &self.kind {
            Kind::Score { w0, b0, w2, b2 } => Kind::Score {
                w0: k.upload(w0)?,
                b0: b0.clone(),
                w2: k.upload(w2)?,
                b2: *b2,
            },
            Kind::Value(v, ops) => {
                Kind::Value(v.clone(), ops.as_ref().map(|o| o.upload(k)).transpose()?)
            }
            Kind::PlusMinus { rows } => Kind::PlusMinus {
                rows: k.upload(rows)?,
            },
            Kind::Confidence => Kind::Confidence,
            Kind::Outcome { weight, bias } => Kind::Outcome {
                weight: k.upload(weight)?,
                bias: *bias,
            },
        };
        Ok(Head {
            kind,
            layers: self.layers.clone(),
            threshold: self.threshold,
            solution_threshold: self.solution_threshold,
        })
    }
}

impl<W> Head<W> {
    /// The layers the engine must also return (empty: the final states
    /// are enough).
    pub fn layers(&self) -> &[usize] {
        &self.layers
    }

    /// The first-error threshold the head ships with, if any.
    pub fn threshold(&self) -> Option<f64> {
        self.threshold
    }

    /// The solution threshold the head ships with, if any.
    pub fn solution_threshold(&self) -> Option<f64> {
        self.solution_threshold
    }

    /// Whether the head reads the LM's token statistics (which need the
    /// final states and the vocabulary projection).
    pub fn needs_token_stats(&self) -> bool {
        match &self.kind {
            Kind::Confidence => true,
            Kind::Value(v, _) => !v.stats.is_empty() || v.guard.is_some(),
            _ => false,
        }
    }

    /// Which tokens the score reads through the LM's token statistics (a
    /// guard's statistics included).
    pub fn tokens_read(&self) -> TokensRead {
        match &self.kind {
            Kind::Confidence => TokensRead::All,
            Kind::Value(v, _) => TokensRead::of(v.read_stats()),
            _ => TokensRead::None,
        }
    }

    /// Makes the head read the final states of a model cut to its first
    /// `max(`[`Head::layers`]`)` blocks (see [`Transformer::truncate_layers`]):
    /// a single layer is then the final states; of several, the last is
    /// (its tap is the final states themselves).
    pub(crate) fn read_final_states(&mut self) {
        if self.layers.len() == 1 {
            self.layers.clear();
        }
    }

    /// Scores every step of `enc` from the states of all its tokens.
    pub async fn apply<K: Kernels<Weights = W>>(
        &self,
        k: &K,
        states: &Taps<K::Hidden>,
        enc: &Encoded,
    ) -> Result<HeadOutput> {
        let input = states.head_input();
        let reads_markers = !matches!(self.kind, Kind::Confidence);
        if let Some(&p) = enc
            .markers
            .iter()
            .find(|&&p| reads_markers && p >= input.n_tokens())
        {
            return Err(Error::InvalidArgument(format!(
                "marker position {p} is past the prompt"
            )));
        }
        let n = enc.markers.len();
        let mut confidence = None;
        let mut token_logprobs = None;
        let mut outcome_logit = None;
        let scores: Vec<Option<f64>> = match &self.kind {
            Kind::Score { w0, b0, w2, b2 } => {
                let layers = [
                    Linear {
                        weight: w0,
                        bias: Some(b0),
                        relu: true,
                    },
                    Linear {
                        weight: w2,
                        bias: None,
                        relu: false,
                    },
                ];
                let l = k.rows(input, &enc.markers, &layers).await?;
                l.chunks_exact(2)
                    .enumerate()
                    .map(|(i, l)| {
                        let (a, b) = (l[0] as f64 + b2[0] as f64, l[1] as f64 + b2[1] as f64);
                        if !(a.is_finite() && b.is_finite()) {
                            // A non-finite bias is named; the weights live in
                            // the engine's storage and are named together.
                            let what = if b0.iter().any(|x| !x.is_finite()) {
                                format!("head {SCORE_0_BIAS}")
                            } else if b2.iter().any(|x| !x.is_finite()) {
                                format!("head {SCORE_2_BIAS}")
                            } else {
                                format!("head {SCORE_0_WEIGHT}/{SCORE_2_WEIGHT}")
                            };
                            finite_logits(&what, i, &[a, b])?;
                        }
                        Ok(Some(softmax2(a, b).1))
                    })
                    .collect::<Result<Vec<_>>>()?
            }
            Kind::PlusMinus { rows } => {
                let layers = [Linear {
                    weight: rows,
                    bias: None,
                    relu: false,
                }];
                let l = k.rows(&states.last, &enc.markers, &layers).await?;
                l.chunks_exact(2)
                    .enumerate()
                    .map(|(i, l)| {
                        let (a, b) = (l[0] as f64, l[1] as f64);
                        finite_logits("the LM head's \"+\"/\"-\" rows", i, &[a, b])?;
                        Ok(Some(softmax2(a, b).0))
                    })
                    .collect::<Result<Vec<_>>>()?
            }
            Kind::Value(v, ops) => {
                let stats = if v.stats.is_empty() && v.guard.is_none() {
                    None
                } else {
                    let (s, per_token) = v.step_stats(k, &states.last, ops.as_ref(), enc).await?;
                    if s.len() != n {
                        return Err(Error::InvalidArgument(format!(
                            "{} steps have statistics, {n} have markers",
                            s.len()
                        )));
                    }
                    token_logprobs = Some(per_token);
                    Some(s)
                };
                // Per layer read, each step's row of its states.
                let mut per_layer = Vec::new();
                if !v.stats_only {
                    let read: Vec<&K::Hidden> = if states.layers.is_empty() {
                        vec![&states.last]
                    } else {
                        states.layers.iter().collect()
                    };
                    for h in read {
                        per_layer.push((h.width(), k.rows(h, &enc.markers, &[]).await?));
                    }
                }
                let mut x = Vec::with_capacity(v.width);
                let scores = (0..n)
                    .map(|i| {
                        x.clear();
                        for (width, rows) in &per_layer {
                            let row = rows.get(i * width..(i + 1) * width).ok_or_else(|| {
                                Error::InvalidArgument(format!(
                                    "the engine returned no hidden state for step {i}"
                                ))
                            })?;
                            x.extend_from_slice(row);
                        }
                        if let Some((s, d)) = stats.as_ref().and_then(|s| s.get(i)) {
                            x.extend(v.stats.iter().map(|stat| stat.value(s, d)));
                        }
                        if x.len() != v.width {
                            return Err(Error::InvalidArgument(format!(
                                "the value head reads rows of {} values, the engine gave {}",
                                v.width,
                                x.len()
                            )));
                        }
                        let z = v.logit(&x);
                        if !z.is_finite() {
                            // Say whether the head or what it read is at fault.
                            let what = if x.iter().all(|x| x.is_finite()) {
                                format!("head {}", v.tensor_name())
                            } else {
                                "the model's hidden state (or step statistics) read by the value head"
                                    .to_string()
                            };
                            finite_logits(&what, i, &[z])?;
                        }
                        let p = sigmoid(z);
                        let Some((g, power)) = &v.guard else {
                            return Ok(p);
                        };
                        let (s, d) = stats.as_ref().and_then(|s| s.get(i)).ok_or_else(|| {
                            Error::InvalidArgument(format!("no step statistics for step {i}"))
                        })?;
                        let gx: Vec<f32> = g.stats.iter().map(|stat| stat.value(s, d)).collect();
                        let zg = g.logit(&gx);
                        if !zg.is_finite() {
                            finite_logits(&format!("guard head {}", g.tensor_name()), i, &[zg])?;
                        }
                        Ok(sigmoid(zg).min(p.powf(*power)))
                    })
                    .collect::<Result<Vec<f64>>>()?;
                confidence = stats.map(|s| s.into_iter().map(|(s, _)| s).collect());
                scores.into_iter().map(Some).collect()
            }
            Kind::Confidence => {
                let per_token = step_token_logprobs(k, &states.last, enc).await?;
                let stats: Vec<StepConfidence> =
                    per_token.iter().map(|t| StepConfidence::of(t)).collect();
                let scores: Vec<f64> = stats.iter().map(|s| s.mean_logprob.exp()).collect();
                if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
                    finite_logits("the LM head's token log-probabilities", i, &[scores[i]])?;
                }
                confidence = Some(stats);
                token_logprobs = Some(per_token);
                scores.into_iter().map(Some).collect()
            }
            Kind::Outcome { weight, bias } => {
                let layers = [Linear {
                    weight,
                    bias: None,
                    relu: false,
                }];
                let last = enc.markers[n - 1];
                let l = k.rows(&states.last, &[last], &layers).await?;
                let z = l[0] as f64 + *bias as f64;
                finite_logits(&format!("head {OUTCOME_WEIGHT}"), n - 1, &[z])?;
                outcome_logit = Some(z);
                let mut scores = vec![None; n];
                scores[n - 1] = Some(sigmoid(z));
                scores
            }
        };
        if scores.len() != n && reads_markers {
            return Err(Error::InvalidArgument(format!(
                "the engine returned {} scores for {n} markers",
                scores.len()
            )));
        }
        Ok(HeadOutput {
            scores,
            outcome_logit,
            confidence,
            token_logprobs,
        })
    }
}

/// Per step, the `(log-prob, entropy)` of each of its own tokens: token
/// `j` is predicted by the distribution at position `j - 1`.
pub(crate) async fn step_token_logprobs<K: Kernels>(
    k: &K,
    last: &K::Hidden,
    enc: &Encoded,
) -> Result<Vec<Vec<(f64, f64)>>> {
    let vocab = k.vocab().ok_or_else(|| {
        Error::InvalidArgument(
            "this checkpoint has no lm_head; only hidden states are available".into(),
        )
    })?;
    for (i, range) in enc.step_tokens.iter().enumerate() {
        if range.start == 0 || range.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "step {i} has no predictable tokens"
            )));
        }
        if range.end > last.n_tokens() + 1 || range.end > enc.tokens.len() {
            return Err(Error::InvalidArgument(format!(
                "step {i} runs past the prompt"
            )));
        }
        if let Some(&t) = enc.tokens[range.clone()]
            .iter()
            .find(|&&t| t as usize >= vocab)
        {
            return Err(Error::InvalidArgument(format!(
                "token {t} outside the vocabulary"
            )));
        }
    }
    let stats = k.token_stats(last, &enc.step_tokens, &enc.tokens).await?;
    let mut out = Vec::with_capacity(enc.step_tokens.len());
    let mut it = stats.iter();
    for range in &enc.step_tokens {
        let mut tokens = Vec::with_capacity(range.len());
        for _ in range.clone() {
            let s = it.next().ok_or_else(|| {
                Error::InvalidArgument(
                    "the engine returned fewer token statistics than tokens".into(),
                )
            })?;
            tokens.push((s.logit - s.log_z, s.entropy));
        }
        out.push(tokens);
    }
    Ok(out)
}

impl StepConfidence {
    /// The statistics of one step's `(log-prob, entropy)` per token.
    pub(crate) fn of(tokens: &[(f64, f64)]) -> StepConfidence {
        let (mut sum_lp, mut min_lp, mut sum_h) = (0.0f64, f64::INFINITY, 0.0f64);
        for &(lp, h) in tokens {
            sum_lp += lp;
            min_lp = min_lp.min(lp);
            sum_h += h;
        }
        let len = tokens.len() as f64;
        StepConfidence {
            tokens: tokens.len(),
            mean_logprob: sum_lp / len,
            min_logprob: min_lp,
            mean_entropy: sum_h / len,
        }
    }
}

/// A score is never made from a NaN or infinite logit: softmax and sigmoid
/// would turn them into NaN, or into a confident 0 or 1 that looks like a
/// real score. `what` is the model part that produced them (a model error:
/// the input is fine, the weights or the engine's arithmetic are not).
fn finite_logits(what: &str, step: usize, logits: &[f64]) -> Result<()> {
    if logits.iter().all(|x| x.is_finite()) {
        return Ok(());
    }
    let shown: Vec<String> = logits.iter().map(|x| x.to_string()).collect();
    Err(Error::model(
        what,
        format!(
            "gives a non-finite score for step {step} (logit {}): the weights or the \
             model's activations are not finite numbers",
            shown.join(", ")
        ),
    ))
}

/// The two probabilities of a 2-way softmax, computed stably.
pub(crate) fn softmax2(a: f64, b: f64) -> (f64, f64) {
    let pa = sigmoid(a - b);
    (pa, 1.0 - pa)
}

pub(crate) fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prm::token_classes::ArithmeticConfidence;

    #[test]
    fn softmax2_is_stable_and_sums_to_one() {
        let (a, b) = softmax2(1000.0, -1000.0);
        assert_eq!((a, b), (1.0, 0.0));
        let (a, b) = softmax2(0.3, 0.3);
        assert!((a - 0.5).abs() < 1e-15 && (a + b - 1.0).abs() < 1e-15);
        // softmax([2, 0])[0] = e^2 / (e^2 + 1) = 0.880797...
        assert!((softmax2(2.0, 0.0).0 - 0.8807970779778823).abs() < 1e-15);
        assert!((sigmoid(-745.0) - 0.0).abs() < 1e-300 && sigmoid(-745.0) >= 0.0);
    }

    #[test]
    fn value_heads_compute_by_hand() {
        // linear: 1*3 - 2*1 + 0.5 = 1.5
        let lin = ValueHead {
            width: 2,
            w0: vec![1.0, -2.0],
            b0: vec![0.5],
            out: None,
            stats: vec![],
            stats_only: false,
            reads_digits: false,
            guard: None,
        };
        assert_eq!(lin.logit(&[3.0, 1.0]), 1.5);
        // MLP: relu(3 + 0, 1 - 5) = (3, 0); 2*3 + 7*0 - 1 = 5
        let mlp = ValueHead {
            width: 2,
            w0: vec![1.0, 0.0, 0.0, 1.0],
            b0: vec![0.0, -5.0],
            out: Some((vec![2.0, 7.0], -1.0)),
            stats: vec![],
            stats_only: false,
            reads_digits: false,
            guard: None,
        };
        assert_eq!(mlp.logit(&[3.0, 1.0]), 5.0);
        let s = StepConfidence {
            tokens: 3,
            mean_logprob: -0.5,
            min_logprob: -2.0,
            mean_entropy: 1.25,
        };
        let d = DigitConfidence {
            tokens: 1,
            min_logprob: -7.0,
            mean_logprob: -3.5,
            plus_minus_min_logprob: -9.25,
            arithmetic: Some(ArithmeticConfidence {
                result_min_logprob: -6.5,
                operand_min_logprob: -1.5,
                times_divide_min_logprob: -4.75,
            }),
            operation_min_logprob: Some(-0.625),
            false_equations: Some(2),
        };
        let row: Vec<f32> = StepStat::ALL.iter().map(|st| st.value(&s, &d)).collect();
        assert_eq!(
            row,
            [
                4f64.ln() as f32,
                -0.5,
                -2.0,
                1.25,
                2f64.ln() as f32,
                -7.0,
                -3.5,
                -9.25,
                -6.5,
                -1.5,
                -4.75,
                -0.625,
                1.0
            ]
        );
    }

    #[test]
    fn stat_names_round_trip_and_are_distinct() {
        for st in StepStat::ALL {
            assert_eq!(StepStat::from_name(st.name()), Some(st));
        }
        assert_eq!(StepStat::from_name("min_lp"), None);
        assert_eq!(StepStat::CONFIDENCE, StepStat::ALL[..4]);
    }
}
