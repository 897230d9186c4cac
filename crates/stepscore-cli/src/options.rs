//! Option values checked while the command line is parsed: each flag's
//! range is stated once here, and every command that takes the flag uses it
//! (`#[arg(value_parser = ...)]`), so a value out of range is a usage error
//! (exit 2) before any input is read or any model loaded.

/// A threshold on step scores: a probability in [0, 1].
pub fn threshold(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!(
            "{x} is outside [0, 1] (step scores are probabilities)"
        ))
    }
}

/// A reward a trainer receives (`serve --unscored-reward`): any finite
/// number. NaN or infinity would reach the trainer as `null` or poison its
/// averages.
pub fn finite(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if x.is_finite() {
        Ok(x)
    } else {
        Err(format!("{s} is not a finite number"))
    }
}

/// A count that must be at least 1 (`--max-tokens`, `--max-line-bytes`):
/// the trainer's flags use the same parser.
pub use stepscore_train::config::positive;

/// A count from 1 to `MAX` (`serve --queue`, `--max-connections`): a
/// bound the server turns into semaphores and buffers, so a huge value is
/// refused here rather than failing after the model loaded.
pub fn bounded_count<const MAX: usize>(s: &str) -> Result<usize, String> {
    match s.trim().parse::<u128>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) if n <= MAX as u128 => Ok(n as usize),
        Ok(n) => Err(format!("{n} is over the limit of {MAX}")),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

/// The longest timeout a flag takes: one week.
const MAX_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// A duration in seconds (`serve --timeout 2.5`): positive, finite, at most a week.
pub fn seconds(s: &str) -> Result<std::time::Duration, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(x > 0.0) {
        return Err(format!("{s} is not a positive number of seconds"));
    }
    if x > MAX_SECONDS {
        return Err(format!(
            "{s} seconds is over the limit of {MAX_SECONDS} (one week)"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(x))
}

/// The longest wait in milliseconds a flag takes: one minute.
const MAX_MILLIS: u64 = 60_000;

/// A wait in milliseconds (`serve --batch-wait-ms`): at most a minute, the
/// server's default request timeout. A pass that waits longer for company
/// answers nothing in time: `--batch-wait-ms 100000000000000` was accepted
/// and every POST got 504 while `/health` said ok (issue 44, D17).
pub fn millis(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u128>() {
        Ok(n) if n <= u128::from(MAX_MILLIS) => Ok(n as u64),
        Ok(n) => Err(format!(
            "{n} ms is over the limit of {MAX_MILLIS} (one minute)"
        )),
        Err(_) => Err(format!("`{s}` is not a whole number of milliseconds")),
    }
}

/// The cores this process may use.
/// CPU threads: 0 is this process's share; a count is the core's
/// (`stepscore::engine::thread_count`: capped at the CPUs, said on stderr).
pub fn threads(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number"))?;
    if n == 0 {
        return Ok(0);
    }
    let count = stepscore::engine::thread_count(n, None);
    if count.threads != n {
        let using = count.threads;
        eprintln!("stepscore: --threads {n} is more than the {using} CPUs this process may use; using {using}");
    }
    Ok(count.threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(threshold("0.5"), Ok(0.5));
        assert_eq!(threshold("1"), Ok(1.0));
        for bad in ["2", "-0.1", "NaN", "inf", "x"] {
            assert!(threshold(bad).is_err(), "{bad}");
        }
        assert_eq!(positive("3"), Ok(3));
        assert!(positive("0").is_err() && positive("-1").is_err());
        assert_eq!(threads("0"), Ok(0));
        let cores = stepscore::engine::available();
        assert_eq!(threads("100000"), Ok(cores));
        assert!(threads("many").is_err());
        assert_eq!(millis("2"), Ok(2));
        assert_eq!(millis("60000"), Ok(60_000));
        for bad in ["60001", "100000000000000", "-1", "1.5", "x"] {
            assert!(millis(bad).is_err(), "{bad}");
        }
        assert_eq!(finite("-1.5"), Ok(-1.5));
        for bad in ["nan", "NaN", "inf", "-inf", "infinity", "1e999", "x"] {
            assert!(finite(bad).is_err(), "{bad}");
        }
    }
}
