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

    /// The char range of bytes `start..end`, widened to whole characters
    /// (a byte-level token can start or end inside one).
    pub fn char_span(&self, start: usize, end: usize) -> (usize, usize) {
        match &self.bytes {
            None => (start.min(self.chars), end.min(self.chars)),
            Some(bytes) => (
                bytes.partition_point(|&x| x <= start).saturating_sub(1),
                bytes.partition_point(|&x| x < end).min(self.chars),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CharIndex;

    #[test]
    fn char_spans_widen_to_whole_characters() {
        // "×" 2 bytes, "😀" 4 bytes: chars 7 0, × 1, 8 2, 😀 3, 4 4 (bytes 0, 1, 3, 4, 8).
        let ix = CharIndex::new("7×8😀4");
        assert_eq!(ix.char_span(1, 3), (1, 2));
        assert_eq!(ix.char_span(4, 6), (3, 4));
        assert_eq!(ix.char_span(6, 9), (3, 5));
        assert_eq!(ix.char_span(8, 9), (4, 5));
        assert_eq!(CharIndex::new("abc").char_span(1, 3), (1, 3));
    }
}
