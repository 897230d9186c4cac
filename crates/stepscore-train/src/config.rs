//! What a training run is asked for, without burn: the head's shape, the
//! optimiser's settings and their defaults ([`TrainConfig`]), and the command-line
//! flags that set them ([`TrainFlags`]), shared by `stepscore train` and
//! `stepscore-train` so each flag and default is written once. The CLI
//! depends on this module in every build; the trainer itself (burn) is behind
//! this crate's `burn` feature.

use stepscore::prm::StepStat;

use crate::data::RowLayout;

/// Which head to train.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadKind {
    Linear,
    /// One hidden layer of this many ReLU units.
    Mlp {
        hidden: usize,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct TrainConfig {
    pub head: HeadKind,
    pub epochs: usize,
    pub batch_size: usize,
    pub learning_rate: f64,
    /// L2 penalty added to the gradient by Adam (0 = none).
    pub weight_decay: f32,
    /// Stop after this many epochs without a better validation AUROC.
    pub patience: usize,
    /// Seeds burn's initialization and the minibatch shuffle.
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            head: HeadKind::Linear,
            epochs: 30,
            batch_size: 256,
            learning_rate: 1e-3,
            weight_decay: 1e-4,
            patience: 5,
            seed: 20250607,
        }
    }
}

/// Hidden units of an MLP head when `--hidden` is not given.
pub const DEFAULT_MLP_HIDDEN: usize = 64;

/// The flags of a training run, with [`TrainConfig::default`]'s values as defaults.
#[derive(clap::Args, Debug, Clone)]
pub struct TrainFlags {
    /// Head: `linear` or `mlp` (Linear(width, --hidden) -> ReLU -> Linear(--hidden, 1)).
    #[arg(long, default_value = "linear", value_parser = ["linear", "mlp"])]
    pub head: String,

    /// Hidden units of the MLP head.
    #[arg(long, default_value_t = DEFAULT_MLP_HIDDEN, value_parser = positive)]
    pub hidden: usize,

    /// Step statistics joined to each step's features, in order, comma-separated:
    /// log1p_tokens, mean_logprob, min_logprob, mean_entropy, digit_log1p_tokens,
    /// digit_min_logprob, digit_mean_logprob, plus_minus_min_logprob, result_min_logprob,
    /// operand_min_logprob, times_divide_min_logprob, operation_min_logprob, false_equation
    /// (they need the backbone's LM head); recorded as `stepscore.step_stats`.
    #[arg(long, value_delimiter = ',', value_parser = str::parse::<StepStat>)]
    pub stats: Vec<StepStat>,

    /// The head reads the --stats alone, not the hidden state (`stepscore.stats_only`): a head
    /// of a few weights that needs no layer's states.
    #[arg(long, requires = "stats")]
    pub stats_only: bool,

    #[arg(long, default_value_t = TrainConfig::default().epochs, value_parser = positive)]
    pub epochs: usize,

    #[arg(long, default_value_t = TrainConfig::default().batch_size, value_parser = positive)]
    pub batch_size: usize,

    #[arg(long, default_value_t = TrainConfig::default().learning_rate)]
    pub lr: f64,

    #[arg(long, default_value_t = TrainConfig::default().weight_decay)]
    pub weight_decay: f32,

    /// Epochs without a better validation AUROC before stopping.
    #[arg(long, default_value_t = TrainConfig::default().patience)]
    pub patience: usize,

    #[arg(long, default_value_t = TrainConfig::default().seed)]
    pub seed: u64,
}

impl TrainFlags {
    /// The run these flags ask for.
    pub fn config(&self) -> TrainConfig {
        TrainConfig {
            head: if self.head == "mlp" {
                HeadKind::Mlp {
                    hidden: self.hidden,
                }
            } else {
                HeadKind::Linear
            },
            epochs: self.epochs,
            batch_size: self.batch_size,
            learning_rate: self.lr,
            weight_decay: self.weight_decay,
            patience: self.patience,
            seed: self.seed,
        }
    }

    /// The feature rows these flags ask for over `layers` (empty: the final layer).
    pub fn layout(&self, layers: Vec<usize>) -> RowLayout {
        RowLayout {
            layers,
            stats: self.stats.clone(),
            stats_only: self.stats_only,
        }
    }
}

/// A count that must be at least 1: the value parser of both CLIs' count
/// flags (`stepscore`'s re-exports it), here because this is the lowest
/// crate that parses flags.
pub fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: TrainFlags,
    }

    #[test]
    fn no_flags_give_the_default_config() {
        let cli = Cli::try_parse_from(["t"]).unwrap();
        assert_eq!(cli.flags.config(), TrainConfig::default());
        assert_eq!(cli.flags.hidden, DEFAULT_MLP_HIDDEN);
    }

    #[test]
    fn flags_set_the_config_and_zero_sizes_are_refused() {
        let cli =
            Cli::try_parse_from(["t", "--head", "mlp", "--hidden", "8", "--epochs", "3"]).unwrap();
        let c = cli.flags.config();
        assert_eq!(c.head, HeadKind::Mlp { hidden: 8 });
        assert_eq!(c.epochs, 3);
        for bad in ["--hidden", "--epochs", "--batch-size"] {
            assert!(Cli::try_parse_from(["t", bad, "0"]).is_err(), "{bad} 0");
        }
        assert!(Cli::try_parse_from(["t", "--stats-only"]).is_err());
    }
}
