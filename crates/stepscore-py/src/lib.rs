//! Python bindings of stepscore (the `stepscore._stepscore` extension of the
//! `stepscore` wheel). This layer converts and nothing else: Python values
//! in (checked so errors name the argument at fault), the core's results
//! out (numpy arrays for rewards), and the core's error variants as typed
//! exceptions ([`errors`]). The adapters for RL trainers and Ray live in
//! plain Python beside it (python/stepscore/).

mod catalog;
mod errors;
mod functions;
mod generate;
mod metrics;
mod scorer;
mod text;
mod traces;
mod verify;

use pyo3::prelude::*;

#[pymodule]
fn _stepscore(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<scorer::Scorer>()?;
    m.add_class::<scorer::Session>()?;
    m.add_class::<generate::Generation>()?;
    m.add_class::<verify::StreamVerifier>()?;
    m.add_class::<scorer::TraceScore>()?;
    m.add_function(wrap_pyfunction!(catalog::cache_dir, m)?)?;
    m.add_function(wrap_pyfunction!(catalog::catalog_models, m)?)?;
    m.add_function(wrap_pyfunction!(catalog::fetch, m)?)?;
    m.add_function(wrap_pyfunction!(functions::segment, m)?)?;
    m.add_function(wrap_pyfunction!(functions::check_arithmetic, m)?)?;
    m.add_function(wrap_pyfunction!(functions::aggregate, m)?)?;
    m.add_function(wrap_pyfunction!(functions::first_error, m)?)?;
    m.add_function(wrap_pyfunction!(functions::select_best, m)?)?;
    m.add_function(wrap_pyfunction!(functions::extract_answer, m)?)?;
    m.add_function(wrap_pyfunction!(functions::normalize_answer, m)?)?;
    m.add_function(wrap_pyfunction!(functions::answers_equal, m)?)?;
    m.add_function(wrap_pyfunction!(functions::solution_score, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::auroc, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::calibration, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::processbench_f1, m)?)?;
    m.add_function(wrap_pyfunction!(functions::progress_rewards, m)?)?;
    m.add_function(wrap_pyfunction!(functions::clip_rewards, m)?)?;
    m.add_function(wrap_pyfunction!(functions::delta_rewards, m)?)?;
    m.add_function(wrap_pyfunction!(functions::papo_advantages, m)?)?;
    m.add_function(wrap_pyfunction!(functions::dense_token_rewards, m)?)?;
    m.add_function(wrap_pyfunction!(functions::dense_rewards, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
