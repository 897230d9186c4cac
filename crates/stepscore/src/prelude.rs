//! The names most programs need, in one import: `use stepscore::prelude::*;`.
//! A scorer and its options, traces and their readers, aggregation, the
//! choice among candidates, search and generation options, and the metrics.
//! Everything else stays under its module (`stepscore::prm`, `stepscore::io`, ...).

#[cfg(not(target_arch = "wasm32"))]
pub use crate::catalog::open;
pub use crate::{
    aggregate::{aggregate, first_error, Aggregation},
    io::{open_traces, read_text, ReadOptions},
    metrics::{auroc, processbench_from_traces, step_auroc_from_traces},
    prm::{
        GenerateOptions, HeadFile, HeadSource, Scorer, ScorerOptions, SearchEvent, SearchMethod,
        SearchOptions, TraceScore,
    },
    select::{select, Selection},
    Error, Result, Step, Trace,
};
