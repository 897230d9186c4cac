//! Weight matrices and the one product the decoder needs: `out = x · Wᵀ` for
//! a batch of token rows. Every storage kind (f32 now, quantized blocks later)
//! is a variant of [`Matrix`] behind the same `matmul`, so the forward pass
//! never looks at how a weight is stored.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::ModelBytes;
use crate::ggml::GgmlType;
use crate::quant::{self, dot, dot_f32, QMatrix, QuantizedActs};

/// A byte range of a shared model file: quantized weights stay where the
/// file (or its memory map) holds them.
#[derive(Clone)]
pub struct SharedBytes {
    file: Arc<ModelBytes>,
    start: usize,
    len: usize,
}

impl SharedBytes {
    /// The range `start..start + len` of `file`; an error if it runs past the end.
    pub fn new(file: Arc<ModelBytes>, start: usize, len: usize) -> Result<Self> {
        match start.checked_add(len) {
            Some(end) if end <= file.len() => Ok(SharedBytes { file, start, len }),
            _ => Err(Error::InvalidArgument(format!(
                "byte range {start}+{len} is past the end of a {}-byte file",
                file.len()
            ))),
        }
    }

    /// Owned bytes (e.g. rows copied out of a larger matrix).
    pub fn owned(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        SharedBytes {
            file: Arc::new(ModelBytes::from_vec(bytes)),
            start: 0,
            len,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.file.as_slice()[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedBytes({} bytes at {})", self.len, self.start)
    }
}

impl PartialEq for SharedBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

/// A `rows × cols` weight matrix, row-major: row `r` maps an input vector of
/// length `cols` to output element `r` (the PyTorch `Linear.weight` layout).
#[derive(Debug, Clone, PartialEq)]
pub enum Matrix {
    F32 {
        rows: usize,
        cols: usize,
        data: Vec<f32>,
    },
    /// ggml blocks (quantized, or f16/bf16/f32 rows), multiplied without
    /// expanding the matrix: see [`crate::quant::matmul`].
    Quant {
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: SharedBytes,
    },
}

/// Below this many multiply-adds a product runs on the calling thread:
/// spawning costs more than it saves.
const PARALLEL_MIN_WORK: usize = 1 << 18;

impl Matrix {
    /// An f32 matrix; `data.len()` must equal `rows * cols`.
    pub fn from_f32(rows: usize, cols: usize, data: Vec<f32>) -> Result<Matrix> {
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::InvalidArgument(format!("matrix {rows}x{cols} is too large")))?;
        if n != data.len() {
            return Err(Error::InvalidArgument(format!(
                "matrix {rows}x{cols} needs {n} values, got {}",
                data.len()
            )));
        }
        Ok(Matrix::F32 { rows, cols, data })
    }

    /// A ggml-block matrix over `bytes`, which must hold exactly `rows` rows.
    pub fn quant(ty: GgmlType, rows: usize, cols: usize, bytes: SharedBytes) -> Result<Matrix> {
        QMatrix::new(ty, rows, cols, bytes.as_slice())?;
        Ok(Matrix::Quant {
            ty,
            rows,
            cols,
            bytes,
        })
    }

    pub fn rows(&self) -> usize {
        match self {
            Matrix::F32 { rows, .. } | Matrix::Quant { rows, .. } => *rows,
        }
    }

    pub fn cols(&self) -> usize {
        match self {
            Matrix::F32 { cols, .. } | Matrix::Quant { cols, .. } => *cols,
        }
    }

    /// The same matrix with every row expanded to f32 (reference runs and
    /// tests; it multiplies the memory by up to 8).
    pub fn to_f32(&self) -> Result<Matrix> {
        if let Matrix::F32 { .. } = self {
            return Ok(self.clone());
        }
        let (rows, cols) = (self.rows(), self.cols());
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::InvalidArgument("matrix too large".into()))?;
        let mut data = vec![0.0f32; n];
        for (r, row) in data.chunks_exact_mut(cols.max(1)).enumerate() {
            self.gather_row(r, row)?;
        }
        Matrix::from_f32(rows, cols, data)
    }

    /// The same matrix quantized to `ty` (Q8_0 or Q4_0) from its f32 values;
    /// block matrices are left as they are.
    pub fn quantized(&self, ty: GgmlType) -> Result<Matrix> {
        match self {
            Matrix::F32 { rows, cols, data } => {
                let bytes = quant::quantize_weights(ty, data, *rows, *cols)?;
                Matrix::quant(ty, *rows, *cols, SharedBytes::owned(bytes))
            }
            Matrix::Quant { .. } => Ok(self.clone()),
        }
    }

    /// The storage type's name, for reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Matrix::F32 { .. } => "F32",
            Matrix::Quant { ty, .. } => ty.name(),
        }
    }

    fn qmatrix(&self) -> Result<Option<QMatrix<'_>>> {
        match self {
            Matrix::F32 { .. } => Ok(None),
            Matrix::Quant {
                ty,
                rows,
                cols,
                bytes,
            } => Ok(Some(QMatrix::new(*ty, *rows, *cols, bytes.as_slice())?)),
        }
    }

    /// The activation type a block matrix multiplies (ggml's vec_dot_type),
    /// `None` for f32 weights: matrices with the same type and input can
    /// share one [`QuantizedActs`] (q/k/v, gate/up).
    pub fn act_type(&self) -> Option<GgmlType> {
        match self {
            Matrix::F32 { .. } => None,
            Matrix::Quant { ty, .. } => quant::vec_dot_type(*ty),
        }
    }

    /// [`Matrix::matmul`] of a block matrix over activations already
    /// converted to its [`Matrix::act_type`].
    pub fn matmul_acts(&self, acts: &QuantizedActs, out: &mut [f32], threads: usize) -> Result<()> {
        let q = self
            .qmatrix()?
            .ok_or_else(|| Error::InvalidArgument("matmul_acts: not a block matrix".into()))?;
        let work = q
            .rows
            .saturating_mul(q.cols)
            .saturating_mul(acts.n_tokens());
        let threads = crate::par::usable(threads)
            .min(q.rows.max(1))
            .min(work / PARALLEL_MIN_WORK + 1);
        quant::matmul_quantized(&q, acts, out, threads)
    }

    /// Copies row `r` as f32 into `out` (length `cols`): the embedding gather.
    pub fn gather_row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        match self {
            Matrix::F32 { rows, cols, data } => {
                let src = (r < *rows)
                    .then(|| data.get(r * cols..(r + 1) * cols))
                    .flatten()
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!("row {r} out of range for {rows} rows"))
                    })?;
                if out.len() != *cols {
                    return Err(Error::InvalidArgument(format!(
                        "gather_row: output holds {} values, row has {cols}",
                        out.len()
                    )));
                }
                out.copy_from_slice(src);
                Ok(())
            }
            Matrix::Quant { .. } => {
                let q = self
                    .qmatrix()?
                    .ok_or_else(|| Error::InvalidArgument("not a block matrix".into()))?;
                if r >= q.rows || out.len() != q.cols {
                    return Err(Error::InvalidArgument(format!(
                        "gather_row: row {r} of {} rows into {} values (row has {})",
                        q.rows,
                        out.len(),
                        q.cols
                    )));
                }
                q.dequantize_row(r, out)
            }
        }
    }

    /// A new f32 matrix made of the listed rows, in order (LM-head PRMs need
    /// two vocabulary rows, not all of them).
    pub fn select_rows(&self, rows: &[u32]) -> Result<Matrix> {
        if let Some(q) = self.qmatrix()? {
            // Copy the blocks, not dequantized values: the product then runs
            // with the same quantized arithmetic as the full matrix.
            let mut bytes = Vec::with_capacity(rows.len().saturating_mul(q.row_bytes()));
            for &r in rows {
                bytes.extend_from_slice(q.row(r as usize)?);
            }
            return Matrix::quant(q.ty, rows.len(), q.cols, SharedBytes::owned(bytes));
        }
        let cols = self.cols();
        let len = rows
            .len()
            .checked_mul(cols)
            .ok_or_else(|| Error::InvalidArgument("too many rows selected".into()))?;
        let mut data = vec![0.0f32; len];
        for (dst, &r) in data.chunks_exact_mut(cols.max(1)).zip(rows) {
            self.gather_row(r as usize, dst)?;
        }
        Matrix::from_f32(rows.len(), cols, data)
    }

    /// `out[t * rows + r] = Σ_c W[r, c] · x[t * cols + c]` for `n_tokens` rows
    /// of `x`, split over up to `threads` threads by weight rows.
    pub fn matmul(
        &self,
        x: &[f32],
        n_tokens: usize,
        out: &mut [f32],
        threads: usize,
    ) -> Result<()> {
        let (rows, cols) = (self.rows(), self.cols());
        if Some(x.len()) != n_tokens.checked_mul(cols)
            || Some(out.len()) != n_tokens.checked_mul(rows)
        {
            return Err(Error::InvalidArgument(format!(
                "matmul: weight {rows}x{cols}, {n_tokens} tokens, but input holds {} and output {} values",
                x.len(),
                out.len()
            )));
        }
        if n_tokens == 0 || rows == 0 {
            return Ok(());
        }
        let work = rows.saturating_mul(cols).saturating_mul(n_tokens);
        let threads = crate::par::usable(threads)
            .min(rows)
            .min(work / PARALLEL_MIN_WORK + 1);
        match self {
            Matrix::Quant { .. } => {
                let q = self
                    .qmatrix()?
                    .ok_or_else(|| Error::InvalidArgument("not a block matrix".into()))?;
                quant::matmul(&q, x, n_tokens, out, threads)
            }
            Matrix::F32 { data, .. } => {
                if threads <= 1 {
                    f32_rows_block(data, cols, 0..rows, x, n_tokens, out, rows);
                    return Ok(());
                }
                // Each thread owns a band of weight rows and writes a private
                // [n_tokens × band] block; the bands are then interleaved into
                // the token-major output.
                let band = rows.div_ceil(threads);
                let bands: Vec<usize> = (0..rows).step_by(band).collect();
                let blocks = crate::par::map(bands, |start| {
                    let end = (start + band).min(rows);
                    let mut local = vec![0.0f32; n_tokens * (end - start)];
                    f32_rows_block(data, cols, start..end, x, n_tokens, &mut local, end - start);
                    (start, local)
                });
                let mut covered = 0;
                for (start, local) in blocks {
                    let width = local.len() / n_tokens;
                    covered += width;
                    for (t, src) in local.chunks_exact(width).enumerate() {
                        out[t * rows + start..t * rows + start + width].copy_from_slice(src);
                    }
                }
                if covered != rows {
                    return Err(Error::InvalidArgument(
                        "matmul: a worker thread failed".into(),
                    ));
                }
                Ok(())
            }
        }
    }
}

/// Computes weight rows `range` for all tokens into `out`, whose rows are
/// `out_stride` wide and whose column 0 is weight row `range.start`.
fn f32_rows_block(
    w: &[f32],
    cols: usize,
    range: std::ops::Range<usize>,
    x: &[f32],
    n_tokens: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    // Four tokens per pass over a weight row: the row is read from memory once
    // for four dot products.
    let mut t = 0;
    while t + 4 <= n_tokens {
        let xs = [
            &x[t * cols..(t + 1) * cols],
            &x[(t + 1) * cols..(t + 2) * cols],
            &x[(t + 2) * cols..(t + 3) * cols],
            &x[(t + 3) * cols..(t + 4) * cols],
        ];
        for (j, r) in range.clone().enumerate() {
            let d = dot_f32::<4>(&w[r * cols..(r + 1) * cols], &xs);
            for (k, v) in d.into_iter().enumerate() {
                out[(t + k) * out_stride + j] = v;
            }
        }
        t += 4;
    }
    while t < n_tokens {
        let xt = &x[t * cols..(t + 1) * cols];
        for (j, r) in range.clone().enumerate() {
            out[t * out_stride + j] = dot(&w[r * cols..(r + 1) * cols], xt);
        }
        t += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // proptest forks and times out through OS processes: native only.
    #[cfg(not(target_arch = "wasm32"))]
    use proptest::prelude::*;

    #[cfg(not(target_arch = "wasm32"))]
    fn naive(w: &[f32], rows: usize, cols: usize, x: &[f32], n: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; n * rows];
        for t in 0..n {
            for r in 0..rows {
                let mut s = 0.0f64;
                for c in 0..cols {
                    s += w[r * cols + c] as f64 * x[t * cols + c] as f64;
                }
                out[t * rows + r] = s as f32;
            }
        }
        out
    }

    #[test]
    fn hand_worked_2x3() {
        // W = [[1,2,3],[4,5,6]], x = [1,0,-1] -> [1-3, 4-6] = [-2, -2]
        let m = Matrix::from_f32(2, 3, vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let mut out = [0.0f32; 2];
        m.matmul(&[1., 0., -1.], 1, &mut out, 1).unwrap();
        assert_eq!(out, [-2.0, -2.0]);
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let m = Matrix::from_f32(2, 3, vec![0.0; 6]).unwrap();
        let mut out = [0.0f32; 2];
        assert!(m.matmul(&[1., 0.], 1, &mut out, 1).is_err());
        assert!(Matrix::from_f32(2, 3, vec![0.0; 5]).is_err());
        assert!(m.gather_row(2, &mut [0.0; 3]).is_err());
    }

    #[cfg(not(target_arch = "wasm32"))]
    proptest! {
        #[test]
        fn matches_naive_for_any_shape_and_threads(
            rows in 1usize..40, cols in 1usize..70, n in 1usize..11, threads in 1usize..5, seed in 0u64..1000
        ) {
            let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1); ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5 };
            let w: Vec<f32> = (0..rows * cols).map(|_| next()).collect();
            let x: Vec<f32> = (0..n * cols).map(|_| next()).collect();
            let m = Matrix::from_f32(rows, cols, w.clone()).unwrap();
            let mut out = vec![0.0f32; n * rows];
            m.matmul(&x, n, &mut out, threads).unwrap();
            let want = naive(&w, rows, cols, &x, n);
            for (a, b) in out.iter().zip(&want) {
                prop_assert!((a - b).abs() < 1e-4, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn threaded_large_matches_single() {
        // Large enough to cross PARALLEL_MIN_WORK so threads really run.
        let (rows, cols, n) = (257, 129, 9);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let x: Vec<f32> = (0..n * cols)
            .map(|i| ((i * 11 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let m = Matrix::from_f32(rows, cols, w).unwrap();
        let mut a = vec![0.0f32; n * rows];
        let mut b = vec![0.0f32; n * rows];
        m.matmul(&x, n, &mut a, 1).unwrap();
        m.matmul(&x, n, &mut b, 3).unwrap();
        assert_eq!(a, b);
    }
}
