//! Python indexes strings by code point, the core by UTF-8 byte: every
//! offset crossing the boundary is converted here, once.

use crate::errors::InvalidArgumentError;
use pyo3::prelude::*;

/// Byte offset of every char index of one string (and of its end).
pub struct CharIndex {
    /// `None` for ASCII text, where the two agree.
    bytes: Option<Vec<usize>>,
    chars: usize,
}

impl CharIndex {
    pub fn new(text: &str) -> Self {
        if text.is_ascii() {
            return CharIndex {
                bytes: None,
                chars: text.len(),
            };
        }
        let mut bytes: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
        let chars = bytes.len();
        bytes.push(text.len());
        CharIndex {
            bytes: Some(bytes),
            chars,
        }
    }

    /// The byte offset of char index `i`; `what` names it in the error.
    pub fn byte(&self, i: usize, what: &dyn Fn() -> String) -> PyResult<usize> {
        if i > self.chars {
            return Err(InvalidArgumentError::new_err(format!(
                "{} is {i}, past the end of the {}-character text",
                what(),
                self.chars
            )));
        }
        Ok(self.bytes.as_ref().map_or(i, |b| b[i]))
    }

    /// The char index of byte offset `b` (a char boundary).
    pub fn char(&self, b: usize) -> usize {
        match &self.bytes {
            None => b,
            Some(bytes) => bytes.partition_point(|&x| x < b),
        }
    }
}
