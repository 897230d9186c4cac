//! Process reward models: the families' prompt protocols, their heads, and
//! the `Scorer` that runs a checkpoint over traces.

pub mod backend;
mod blocking;
pub mod chat;
pub mod critique;
mod engine;
pub mod family;
pub mod features;
pub mod generate;
mod head;
pub mod head_file;
pub mod least_likely;
pub mod open;
pub mod options;
pub mod score;
pub mod scorer;
pub mod search;
pub mod session;
pub mod template;
mod token_classes;
pub mod verdict;
pub mod verify;

#[cfg(not(target_arch = "wasm32"))]
pub use backend::auto_preference;
pub use backend::{is_software_adapter, Backend, BackendReport};
pub use critique::{Critique, CritiqueOptions, CRITIQUE_TOKENS};
pub use engine::EngineCache;
pub use family::generative::StepVerdict;
pub use family::Family;
pub use features::{FeatureCache, FeatureJob, FeatureOptions, StepFeatures};
pub use generate::{generate_many, GenerateOptions, GeneratedToken, Generation, StopReason};
pub use head::{HeadInput, MinWith, StepConfidence, StepStat, TokensRead};
pub use head_file::HeadFile;
pub use least_likely::{least_likely, LeastLikely};
pub use open::HeadSource;
pub use options::{parse_quantize, ScorerOptions, Truncation, QUANTIZE_NAMES};
pub use score::TraceScore;
pub use scorer::{Scorer, TokenLogprob};
pub use search::{
    search, search_async, SearchCandidate, SearchEvent, SearchMethod, SearchOptions, SearchResult,
};
pub use session::{CandidateError, Session};
pub use token_classes::{ArithmeticConfidence, DigitConfidence};
pub use verdict::Verdict;
pub use verify::{StreamVerifier, VerifyEvent};
