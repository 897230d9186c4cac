//! GGUF v2/v3 reader (and a small writer) over a byte slice.
//!
//! Layout (little-endian): magic `GGUF`, u32 version, u64 tensor count, u64
//! metadata count, the metadata key/value pairs, the tensor infos, padding to
//! `general.alignment`, then the tensor data. Strings are a u64 length and
//! UTF-8 bytes; arrays are a u32 element type, a u64 count and the elements.
//!
//! Files are treated as hostile: every count is bounded by the bytes left in
//! the file divided by the smallest encoding of one item *before* anything is
//! allocated, array nesting is capped, every size is overflow-checked and
//! every error names the file and the key or tensor at fault.

use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use std::collections::HashSet;
use std::fmt;

const MAGIC: &[u8; 4] = b"GGUF";
/// Data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u32 = 32;
/// ggml tensors have at most four dimensions.
pub const MAX_DIMS: usize = 4;
/// Tensors must hold fewer elements than this (2^40): no real checkpoint
/// comes near, and it keeps every byte size far from u64 overflow.
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 40;
/// Arrays of arrays nest at most this deep; unbounded nesting would let a
/// small file exhaust the stack.
const MAX_ARRAY_DEPTH: usize = 8;
/// Smallest encodings, used to bound counts before allocating.
const MIN_KV_BYTES: usize = 8 + 4 + 1; // empty key, type, one-byte value
const MIN_TENSOR_INFO_BYTES: usize = 8 + 4 + 4 + 8; // empty name, n_dims=0, type, offset

/// The type tag of a metadata value, with its GGUF id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgufValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl GgufValueType {
    pub fn from_id(id: u32) -> Option<Self> {
        use GgufValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        use GgufValueType::*;
        match self {
            U8 => 0,
            I8 => 1,
            U16 => 2,
            I16 => 3,
            U32 => 4,
            I32 => 5,
            F32 => 6,
            Bool => 7,
            String => 8,
            Array => 9,
            U64 => 10,
            I64 => 11,
            F64 => 12,
        }
    }

    pub fn name(self) -> &'static str {
        use GgufValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// Fewest bytes one value of this type takes in a file.
    fn min_encoded_size(self) -> usize {
        use GgufValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 => 8,
            String => 8,
            Array => 4 + 8,
        }
    }
}

/// A homogeneous metadata array, stored typed so a 150k-entry vocabulary is
/// one `Vec<String>` rather than 150k tagged values.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    /// Arrays of arrays; each inner array carries its own element type.
    Array(Vec<GgufArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl GgufArray {
    pub fn elem_type(&self) -> GgufValueType {
        match self {
            GgufArray::U8(_) => GgufValueType::U8,
            GgufArray::I8(_) => GgufValueType::I8,
            GgufArray::U16(_) => GgufValueType::U16,
            GgufArray::I16(_) => GgufValueType::I16,
            GgufArray::U32(_) => GgufValueType::U32,
            GgufArray::I32(_) => GgufValueType::I32,
            GgufArray::F32(_) => GgufValueType::F32,
            GgufArray::Bool(_) => GgufValueType::Bool,
            GgufArray::String(_) => GgufValueType::String,
            GgufArray::Array(_) => GgufValueType::Array,
            GgufArray::U64(_) => GgufValueType::U64,
            GgufArray::I64(_) => GgufValueType::I64,
            GgufArray::F64(_) => GgufValueType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            GgufArray::U8(v) => v.len(),
            GgufArray::I8(v) => v.len(),
            GgufArray::U16(v) => v.len(),
            GgufArray::I16(v) => v.len(),
            GgufArray::U32(v) => v.len(),
            GgufArray::I32(v) => v.len(),
            GgufArray::F32(v) => v.len(),
            GgufArray::Bool(v) => v.len(),
            GgufArray::String(v) => v.len(),
            GgufArray::Array(v) => v.len(),
            GgufArray::U64(v) => v.len(),
            GgufArray::I64(v) => v.len(),
            GgufArray::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(GgufArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl GgufValue {
    pub fn value_type(&self) -> GgufValueType {
        match self {
            GgufValue::U8(_) => GgufValueType::U8,
            GgufValue::I8(_) => GgufValueType::I8,
            GgufValue::U16(_) => GgufValueType::U16,
            GgufValue::I16(_) => GgufValueType::I16,
            GgufValue::U32(_) => GgufValueType::U32,
            GgufValue::I32(_) => GgufValueType::I32,
            GgufValue::F32(_) => GgufValueType::F32,
            GgufValue::Bool(_) => GgufValueType::Bool,
            GgufValue::String(_) => GgufValueType::String,
            GgufValue::Array(_) => GgufValueType::Array,
            GgufValue::U64(_) => GgufValueType::U64,
            GgufValue::I64(_) => GgufValueType::I64,
            GgufValue::F64(_) => GgufValueType::F64,
        }
    }

    /// The value as a signed 128-bit integer, for any integer type.
    fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            GgufValue::U8(v) => v.into(),
            GgufValue::I8(v) => v.into(),
            GgufValue::U16(v) => v.into(),
            GgufValue::I16(v) => v.into(),
            GgufValue::U32(v) => v.into(),
            GgufValue::I32(v) => v.into(),
            GgufValue::U64(v) => v.into(),
            GgufValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// A short type description for error messages: `array of string`.
    fn describe(&self) -> String {
        match self {
            GgufValue::Array(a) => format!("array of {}", a.elem_type().name()),
            v => v.value_type().name().to_string(),
        }
    }
}

/// A one-line rendering; arrays are summarised, not listed.
impl fmt::Display for GgufValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgufValue::U8(v) => write!(f, "{v}"),
            GgufValue::I8(v) => write!(f, "{v}"),
            GgufValue::U16(v) => write!(f, "{v}"),
            GgufValue::I16(v) => write!(f, "{v}"),
            GgufValue::U32(v) => write!(f, "{v}"),
            GgufValue::I32(v) => write!(f, "{v}"),
            GgufValue::F32(v) => write!(f, "{v}"),
            GgufValue::Bool(v) => write!(f, "{v}"),
            GgufValue::String(s) if s.chars().count() > 80 => {
                write!(f, "{:?}…", s.chars().take(80).collect::<String>())
            }
            GgufValue::String(s) => write!(f, "{s:?}"),
            GgufValue::Array(a) => write!(f, "[{}; {}]", a.elem_type().name(), a.len()),
            GgufValue::U64(v) => write!(f, "{v}"),
            GgufValue::I64(v) => write!(f, "{v}"),
            GgufValue::F64(v) => write!(f, "{v}"),
        }
    }
}

/// Where one tensor sits and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions, ggml order: `dims[0]` is the row length (fastest varying).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
    pub n_elements: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Elements per row (`dims[0]`; 1 for a zero-dimensional tensor).
    pub fn row_len(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }

    /// Number of rows: the product of every dimension but the first.
    pub fn n_rows(&self) -> u64 {
        self.dims.iter().skip(1).product()
    }
}

/// A parsed GGUF header: metadata and tensor directory. The tensor bytes stay
/// in the caller's buffer; fetch them with [`GgufFile::tensor_data`].
#[derive(Debug, Clone)]
pub struct GgufFile {
    /// The name used in error messages.
    pub file_name: String,
    pub version: u32,
    pub alignment: u32,
    /// Key/value pairs in file order; keys are unique.
    pub metadata: Vec<(String, GgufValue)>,
    /// Tensor infos in file order; names are unique.
    pub tensors: Vec<TensorInfo>,
    /// Absolute file offset of the data section.
    pub data_offset: u64,
}

/// Reads little-endian primitives; `None` means the input ran out.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
}

/// The parser: a cursor plus the file name for errors.
struct Parser<'a> {
    cur: Cursor<'a>,
    file: &'a str,
}

macro_rules! read_le {
    ($name:ident, $t:ty) => {
        fn $name(&mut self, what: &dyn Fn() -> String) -> Result<$t> {
            const N: usize = std::mem::size_of::<$t>();
            match self.cur.array::<N>() {
                Some(b) => Ok(<$t>::from_le_bytes(b)),
                None => Err(self.truncated(N, what)),
            }
        }
    };
}

impl<'a> Parser<'a> {
    fn err(&self, message: impl Into<String>) -> Error {
        Error::model(self.file, message)
    }

    fn truncated(&self, needed: impl fmt::Display, what: &dyn Fn() -> String) -> Error {
        self.err(format!(
            "truncated: {} needs {needed} bytes at offset {}, but only {} remain",
            what(),
            self.cur.pos,
            self.cur.remaining()
        ))
    }

    read_le!(u8, u8);
    read_le!(i8, i8);
    read_le!(u16, u16);
    read_le!(i16, i16);
    read_le!(u32, u32);
    read_le!(i32, i32);
    read_le!(f32, f32);
    read_le!(u64, u64);
    read_le!(i64, i64);
    read_le!(f64, f64);

    fn bool(&mut self, what: &dyn Fn() -> String) -> Result<bool> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.err(format!("{}: bool byte is {b}, expected 0 or 1", what()))),
        }
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let len = self.u64(&|| format!("length of {}", what()))?;
        let rem = self.cur.remaining();
        if len > rem as u64 {
            return Err(self.err(format!(
                "truncated: {} claims {len} bytes at offset {}, but only {rem} remain",
                what(),
                self.cur.pos
            )));
        }
        let bytes = self
            .cur
            .take(len as usize)
            .ok_or_else(|| self.truncated(len, what))?;
        String::from_utf8(bytes.to_vec())
            .map_err(|e| self.err(format!("{} is not valid UTF-8: {e}", what())))
    }

    /// Checks that `count` items of at least `min_size` bytes each can fit in
    /// what is left, so the caller may allocate `count` slots.
    fn check_count(&self, count: u64, min_size: usize, what: &dyn Fn() -> String) -> Result<usize> {
        let fits = (self.cur.remaining() / min_size) as u64;
        if count > fits {
            return Err(self.err(format!(
                "{} count {count} cannot fit in the {} bytes left at offset {} (at least {min_size} bytes each)",
                what(),
                self.cur.remaining(),
                self.cur.pos
            )));
        }
        Ok(count as usize)
    }

    fn value_type(&mut self, what: &dyn Fn() -> String) -> Result<GgufValueType> {
        let id = self.u32(&|| format!("type of {}", what()))?;
        GgufValueType::from_id(id)
            .ok_or_else(|| self.err(format!("{}: unknown value type id {id}", what())))
    }

    fn value(&mut self, ty: GgufValueType, what: &dyn Fn() -> String) -> Result<GgufValue> {
        Ok(match ty {
            GgufValueType::U8 => GgufValue::U8(self.u8(what)?),
            GgufValueType::I8 => GgufValue::I8(self.i8(what)?),
            GgufValueType::U16 => GgufValue::U16(self.u16(what)?),
            GgufValueType::I16 => GgufValue::I16(self.i16(what)?),
            GgufValueType::U32 => GgufValue::U32(self.u32(what)?),
            GgufValueType::I32 => GgufValue::I32(self.i32(what)?),
            GgufValueType::F32 => GgufValue::F32(self.f32(what)?),
            GgufValueType::Bool => GgufValue::Bool(self.bool(what)?),
            GgufValueType::String => GgufValue::String(self.string(what)?),
            GgufValueType::Array => GgufValue::Array(self.array(what, 1)?),
            GgufValueType::U64 => GgufValue::U64(self.u64(what)?),
            GgufValueType::I64 => GgufValue::I64(self.i64(what)?),
            GgufValueType::F64 => GgufValue::F64(self.f64(what)?),
        })
    }

    fn array(&mut self, what: &dyn Fn() -> String, depth: usize) -> Result<GgufArray> {
        if depth > MAX_ARRAY_DEPTH {
            return Err(self.err(format!(
                "{}: arrays nested deeper than {MAX_ARRAY_DEPTH} levels",
                what()
            )));
        }
        let ty = self.value_type(&|| format!("elements of {}", what()))?;
        let count = self.u64(&|| format!("element count of {}", what()))?;
        let n = self.check_count(count, ty.min_encoded_size(), &|| {
            format!("{} element", what())
        })?;
        macro_rules! elems {
            ($variant:ident, $read:ident) => {{
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    v.push(self.$read(&|| format!("{} element {i}", what()))?);
                }
                GgufArray::$variant(v)
            }};
        }
        Ok(match ty {
            GgufValueType::U8 => elems!(U8, u8),
            GgufValueType::I8 => elems!(I8, i8),
            GgufValueType::U16 => elems!(U16, u16),
            GgufValueType::I16 => elems!(I16, i16),
            GgufValueType::U32 => elems!(U32, u32),
            GgufValueType::I32 => elems!(I32, i32),
            GgufValueType::F32 => elems!(F32, f32),
            GgufValueType::Bool => elems!(Bool, bool),
            GgufValueType::String => elems!(String, string),
            GgufValueType::U64 => elems!(U64, u64),
            GgufValueType::I64 => elems!(I64, i64),
            GgufValueType::F64 => elems!(F64, f64),
            GgufValueType::Array => {
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    v.push(self.array(&|| format!("{} element {i}", what()), depth + 1)?);
                }
                GgufArray::Array(v)
            }
        })
    }

    fn tensor_info(&mut self, index: u64, alignment: u32) -> Result<TensorInfo> {
        let name = self.string(&|| format!("name of tensor #{index}"))?;
        let what = || format!("tensor `{name}`");
        let n_dims = self.u32(&|| format!("dimension count of {}", what()))?;
        if n_dims as usize > MAX_DIMS {
            return Err(self.err(format!(
                "{} has {n_dims} dimensions; ggml allows at most {MAX_DIMS}",
                what()
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            dims.push(self.u64(&|| format!("dimension {d} of {}", what()))?);
        }
        let type_id = self.u32(&|| format!("type of {}", what()))?;
        let offset = self.u64(&|| format!("data offset of {}", what()))?;

        if let Some(d) = dims.iter().position(|&d| d > i64::MAX as u64) {
            return Err(self.err(format!(
                "{} dimension {d} is {}, above the ggml maximum",
                what(),
                dims[d]
            )));
        }
        let n_elements = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .filter(|&n| n < MAX_TENSOR_ELEMENTS)
            .ok_or_else(|| {
                self.err(format!(
                    "{} with dimensions {dims:?} has 2^40 or more elements",
                    what()
                ))
            })?;
        let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| {
            self.err(format!(
                "{} has unknown or unsupported ggml type id {type_id}",
                what()
            ))
        })?;
        let block = ggml_type.block_elems() as u64;
        if dims.first().copied().unwrap_or(1) % block != 0 {
            return Err(self.err(format!(
                "{} of type {} has row length {}, not a multiple of the block size {block}",
                what(),
                ggml_type.name(),
                dims.first().copied().unwrap_or(1)
            )));
        }
        let n_bytes = ggml_type
            .bytes_for(n_elements)
            .map_err(|e| self.err(format!("{}: {e}", what())))?;
        if offset % u64::from(alignment) != 0 {
            return Err(self.err(format!(
                "{} data offset {offset} is not a multiple of the alignment {alignment}",
                what()
            )));
        }
        Ok(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            n_elements,
            n_bytes,
        })
    }
}

impl GgufFile {
    /// Parses the header and tensor directory of a GGUF file held in `bytes`.
    /// `file_name` is used in error messages only.
    pub fn parse(bytes: &[u8], file_name: &str) -> Result<GgufFile> {
        let mut p = Parser {
            cur: Cursor { buf: bytes, pos: 0 },
            file: file_name,
        };

        let magic = p.cur.take(4).ok_or_else(|| {
            p.err(format!(
                "file is {} bytes, too short for a GGUF header",
                bytes.len()
            ))
        })?;
        if magic != MAGIC {
            return Err(p.err(format!(
                "not a GGUF file: magic bytes are {:?}, expected \"GGUF\"",
                String::from_utf8_lossy(magic)
            )));
        }
        let version = p.u32(&|| "version".to_string())?;
        if version != 2 && version != 3 {
            let swapped = version.swap_bytes();
            let msg = if swapped == 2 || swapped == 3 {
                format!("big-endian GGUF (version {swapped}) is not supported")
            } else {
                format!("unsupported GGUF version {version} (supported: 2, 3)")
            };
            return Err(p.err(msg));
        }
        let n_tensors = p.u64(&|| "tensor count".to_string())?;
        let n_kv = p.u64(&|| "metadata count".to_string())?;
        let n_kv = p.check_count(n_kv, MIN_KV_BYTES, &|| "metadata".to_string())?;

        let mut metadata: Vec<(String, GgufValue)> = Vec::with_capacity(n_kv);
        let mut seen = HashSet::with_capacity(n_kv);
        for i in 0..n_kv {
            let key = p.string(&|| format!("key of metadata entry #{i}"))?;
            let what = || format!("key `{key}`");
            if !seen.insert(key.clone()) {
                return Err(p.err(format!("duplicate metadata {}", what())));
            }
            let ty = p.value_type(&what)?;
            let value = p.value(ty, &|| format!("value of {}", what()))?;
            metadata.push((key, value));
        }

        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((_, GgufValue::U32(a))) if a.is_power_of_two() => *a,
            Some((_, v)) => {
                return Err(p.err(format!(
                    "key `general.alignment` must be a u32 power of two, found {}",
                    v
                )))
            }
        };

        let n_tensors =
            p.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, &|| "tensor".to_string())?;
        let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors);
        let mut names = HashSet::with_capacity(n_tensors);
        for i in 0..n_tensors {
            let info = p.tensor_info(i as u64, alignment)?;
            if !names.insert(info.name.clone()) {
                return Err(p.err(format!("duplicate tensor name `{}`", info.name)));
            }
            tensors.push(info);
        }

        let data_offset = (p.cur.pos as u64).next_multiple_of(u64::from(alignment));
        let file_len = bytes.len() as u64;
        for t in &tensors {
            let end = data_offset
                .checked_add(t.offset)
                .and_then(|s| s.checked_add(t.n_bytes));
            if end.is_none_or(|e| e > file_len) {
                return Err(p.err(format!(
                    "tensor `{}` data ({} bytes at data offset {}) lies past the end of the file ({file_len} bytes, data section at {data_offset})",
                    t.name, t.n_bytes, t.offset
                )));
            }
        }
        // No two tensors may share bytes: a write through one (or a corrupt
        // directory) would silently change the other's weights.
        let mut regions: Vec<(u64, u64, &str)> = tensors
            .iter()
            .filter(|t| t.n_bytes > 0)
            .map(|t| (t.offset, t.offset + t.n_bytes, t.name.as_str()))
            .collect();
        regions.sort_unstable();
        if let Some(w) = regions.windows(2).find(|w| w[1].0 < w[0].1) {
            let ((a0, a1, a), (b0, b1, b)) = (w[0], w[1]);
            return Err(p.err(format!(
                "tensors `{a}` (data bytes {a0}..{a1}) and `{b}` (bytes {b0}..{b1}) overlap"
            )));
        }

        Ok(GgufFile {
            file_name: file_name.to_string(),
            version,
            alignment,
            metadata,
            tensors,
            data_offset,
        })
    }

    fn err(&self, message: impl Into<String>) -> Error {
        Error::model(&self.file_name, message)
    }

    /// The value stored under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn require<T>(&self, key: &str, v: Result<Option<T>>) -> Result<T> {
        v?.ok_or_else(|| self.err(format!("missing metadata key `{key}`")))
    }

    fn wrong_type(&self, key: &str, expected: &str, found: &GgufValue) -> Error {
        self.err(format!(
            "key `{key}`: expected {expected}, found {}",
            found.describe()
        ))
    }

    /// Any integer value under `key` that fits in `T`.
    fn opt_int<T: TryFrom<i128>>(&self, key: &str, expected: &str) -> Result<Option<T>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let i = v
            .as_integer()
            .ok_or_else(|| self.wrong_type(key, expected, v))?;
        T::try_from(i)
            .map(Some)
            .map_err(|_| self.err(format!("key `{key}`: value {i} does not fit in {expected}")))
    }

    /// An integer under `key` that fits in u32 (any integer type is accepted,
    /// since converters differ in the width they write).
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        self.opt_int(key, "u32")
    }
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.require(key, self.opt_u32(key))
    }
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        self.opt_int(key, "u64")
    }
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.require(key, self.opt_u64(key))
    }
    pub fn opt_i64(&self, key: &str) -> Result<Option<i64>> {
        self.opt_int(key, "i64")
    }
    pub fn get_i64(&self, key: &str) -> Result<i64> {
        self.require(key, self.opt_i64(key))
    }

    /// An f32 (or f64, narrowed) under `key`.
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::F32(x)) => Ok(Some(*x)),
            Some(GgufValue::F64(x)) => Ok(Some(*x as f32)),
            Some(v) => Err(self.wrong_type(key, "f32", v)),
        }
    }
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.require(key, self.opt_f32(key))
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong_type(key, "bool", v)),
        }
    }
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.require(key, self.opt_bool(key))
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong_type(key, "string", v)),
        }
    }
    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.require(key, self.opt_str(key))
    }

    pub fn opt_array(&self, key: &str) -> Result<Option<&GgufArray>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.wrong_type(key, "array", v)),
        }
    }
    pub fn get_array(&self, key: &str) -> Result<&GgufArray> {
        self.require(key, self.opt_array(key))
    }

    pub fn opt_str_array(&self, key: &str) -> Result<Option<&[String]>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::Array(GgufArray::String(v))) => Ok(Some(v)),
            Some(v) => Err(self.wrong_type(key, "array of string", v)),
        }
    }
    pub fn get_str_array(&self, key: &str) -> Result<&[String]> {
        self.require(key, self.opt_str_array(key))
    }

    pub fn opt_i32_array(&self, key: &str) -> Result<Option<&[i32]>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::Array(GgufArray::I32(v))) => Ok(Some(v)),
            Some(v) => Err(self.wrong_type(key, "array of i32", v)),
        }
    }
    pub fn get_i32_array(&self, key: &str) -> Result<&[i32]> {
        self.require(key, self.opt_i32_array(key))
    }

    pub fn opt_f32_array(&self, key: &str) -> Result<Option<&[f32]>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::Array(GgufArray::F32(v))) => Ok(Some(v)),
            Some(v) => Err(self.wrong_type(key, "array of f32", v)),
        }
    }
    pub fn get_f32_array(&self, key: &str) -> Result<&[f32]> {
        self.require(key, self.opt_f32_array(key))
    }

    /// `general.architecture`, e.g. `llama` or `qwen2`.
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The bytes of `info`'s data inside `bytes` (the same buffer that was
    /// parsed), bounds-checked.
    pub fn tensor_data<'a>(&self, bytes: &'a [u8], info: &TensorInfo) -> Result<&'a [u8]> {
        let start = self.data_offset.checked_add(info.offset);
        let end = start.and_then(|s| s.checked_add(info.n_bytes));
        match (start, end) {
            (Some(s), Some(e)) if e <= bytes.len() as u64 => Ok(&bytes[s as usize..e as usize]),
            _ => Err(self.err(format!(
                "tensor `{}` data ({} bytes at data offset {}) lies past the end of the {}-byte buffer",
                info.name,
                info.n_bytes,
                info.offset,
                bytes.len()
            ))),
        }
    }
}

/// Builds GGUF files in memory: tiny checkpoints for tests and fixtures,
/// and the random-weight models of `stepscore bench --synthetic`.
#[derive(Debug, Clone)]
pub struct GgufWriter {
    version: u32,
    metadata: Vec<(String, GgufValue)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter {
            version: 3,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// GGUF version to write (2 or 3; both share this layout).
    #[cfg(any(test, feature = "testing"))]
    pub fn version(&mut self, version: u32) -> &mut Self {
        self.version = version;
        self
    }

    /// Adds a metadata entry. `general.alignment` (u32) also sets the data
    /// alignment the writer pads to.
    pub fn kv(&mut self, key: &str, value: GgufValue) -> &mut Self {
        self.metadata.push((key.to_string(), value));
        self
    }

    /// Adds a tensor; `data` must be exactly the ggml encoding of `dims`.
    pub fn tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Result<&mut Self> {
        let n: u64 = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| {
                Error::InvalidArgument(format!("tensor `{name}`: dimensions {dims:?} overflow"))
            })?;
        let expected = ty.bytes_for(n)?;
        if data.len() as u64 != expected {
            return Err(Error::InvalidArgument(format!(
                "tensor `{name}`: {} {} elements take {expected} bytes, got {}",
                n,
                ty.name(),
                data.len()
            )));
        }
        self.tensors
            .push((name.to_string(), dims.to_vec(), ty, data));
        Ok(self)
    }

    /// The file's bytes, the tensors' data moved in one by one and freed as
    /// they go, so a multi-gigabyte model is never held twice in full.
    pub fn into_bytes(self) -> Result<Vec<u8>> {
        let sizes: Vec<usize> = self.tensors.iter().map(|t| t.3.len()).collect();
        let (mut out, alignment) = self.header_bytes(&sizes)?;
        let total = sizes
            .iter()
            .fold(out.len(), |at, &n| at.next_multiple_of(alignment) + n);
        // Checked, not aborting: a synthetic 7B in f16 is 15 GiB.
        out.try_reserve_exact(total - out.len()).map_err(|_| {
            Error::InvalidArgument(format!(
                "cannot allocate {total} bytes for the GGUF image: not enough memory"
            ))
        })?;
        // Each tensor's buffer is freed as soon as it is copied, so the
        // resident peak is about one image, not two.
        for (_, _, _, data) in self.tensors {
            out.resize(out.len().next_multiple_of(alignment), 0);
            out.extend_from_slice(&data);
        }
        Ok(out)
    }

    /// The image, keeping the writer (tests write one several times).
    #[cfg(any(test, feature = "testing"))]
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let sizes: Vec<usize> = self.tensors.iter().map(|t| t.3.len()).collect();
        let (mut out, alignment) = self.header_bytes(&sizes)?;
        for (_, _, _, data) in &self.tensors {
            out.resize(out.len().next_multiple_of(alignment), 0);
            out.extend_from_slice(data);
        }
        Ok(out)
    }

    /// Header, metadata and tensor directory for tensors of `sizes` bytes,
    /// and the data alignment.
    fn header_bytes(&self, sizes: &[usize]) -> Result<(Vec<u8>, usize)> {
        let alignment = match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((_, GgufValue::U32(a))) if a.is_power_of_two() => *a,
            Some(_) => {
                return Err(Error::InvalidArgument(
                    "general.alignment must be a u32 power of two".into(),
                ))
            }
        } as usize;
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            write_str(&mut out, k);
            out.extend_from_slice(&v.value_type().id().to_le_bytes());
            write_value(&mut out, v);
        }
        let mut offset = 0usize;
        for ((name, dims, ty, _), &size) in self.tensors.iter().zip(sizes) {
            write_str(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.id().to_le_bytes());
            out.extend_from_slice(&(offset as u64).to_le_bytes());
            offset = (offset + size).next_multiple_of(alignment);
        }
        Ok((out, alignment))
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn write_value(out: &mut Vec<u8>, v: &GgufValue) {
    match v {
        GgufValue::U8(x) => out.push(*x),
        GgufValue::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::Bool(x) => out.push(u8::from(*x)),
        GgufValue::String(s) => write_str(out, s),
        GgufValue::Array(a) => write_array(out, a),
        GgufValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

fn write_array(out: &mut Vec<u8>, a: &GgufArray) {
    out.extend_from_slice(&a.elem_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        GgufArray::U8(v) => out.extend_from_slice(v),
        GgufArray::I8(v) => each!(v),
        GgufArray::U16(v) => each!(v),
        GgufArray::I16(v) => each!(v),
        GgufArray::U32(v) => each!(v),
        GgufArray::I32(v) => each!(v),
        GgufArray::F32(v) => each!(v),
        GgufArray::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        GgufArray::String(v) => v.iter().for_each(|s| write_str(out, s)),
        GgufArray::Array(v) => v.iter().for_each(|inner| write_array(out, inner)),
        GgufArray::U64(v) => each!(v),
        GgufArray::I64(v) => each!(v),
        GgufArray::F64(v) => each!(v),
    }
}
