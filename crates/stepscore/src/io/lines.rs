//! Reading one line with a hard cap on the bytes kept in memory, so a
//! multi-gigabyte line costs at most the cap, and a second cap on how far an
//! over-long line is skipped, so a stream without line breaks (`/dev/zero`)
//! ends with an error instead of being read forever.

use std::io::{self, BufRead};

/// What [`read_bounded_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// The stream is exhausted; nothing was read.
    Eof,
    /// A whole line is in the buffer, without its `\n` / `\r\n`.
    Line,
    /// The line had `len` bytes, more than the cap; it was skipped through
    /// its end and the buffer holds nothing useful.
    TooLong { len: u64 },
    /// `len` bytes (more than `max_skip`) went by without a line break; they
    /// were consumed and the rest of the stream was not looked at.
    Unterminated { len: u64 },
}

/// Reads the next line into `buf` (cleared first), keeping at most `max`
/// bytes. A longer line is consumed to its end without being stored, unless
/// it runs past `max_skip` bytes without ending.
pub(crate) fn read_bounded_line<R: BufRead + ?Sized>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
    max_skip: u64,
) -> io::Result<LineRead> {
    buf.clear();
    let mut len: u64 = 0;
    let mut too_long = false;
    let mut saw_any = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        saw_any = true;
        let (part, used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], i + 1, true),
            None => (chunk, chunk.len(), false),
        };
        len += part.len() as u64;
        if !too_long {
            if buf.len() + part.len() <= max {
                buf.extend_from_slice(part);
            } else {
                too_long = true;
                buf.clear();
                // Give back the memory a near-cap line took; normal lines are short.
                buf.shrink_to(1 << 16);
            }
        }
        r.consume(used);
        if done {
            break;
        }
        if len > max_skip {
            buf.clear();
            return Ok(LineRead::Unterminated { len });
        }
    }
    if !saw_any {
        return Ok(LineRead::Eof);
    }
    if too_long {
        return Ok(LineRead::TooLong { len });
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(LineRead::Line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    #[test]
    fn lines_and_limits() {
        // A 3-byte buffer forces lines across several fill_buf chunks.
        let data: &[u8] = b"ab\r\n\nabcdefgh\nxyz";
        let mut r = BufReader::with_capacity(3, data);
        let mut buf = Vec::new();
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 5, 100).unwrap(),
            LineRead::Line
        );
        assert_eq!(buf, b"ab");
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 5, 100).unwrap(),
            LineRead::Line
        );
        assert_eq!(buf, b"");
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 5, 100).unwrap(),
            LineRead::TooLong { len: 8 }
        );
        assert!(buf.capacity() <= 8, "kept more than the cap");
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 5, 100).unwrap(),
            LineRead::Line
        );
        assert_eq!(buf, b"xyz");
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 5, 100).unwrap(),
            LineRead::Eof
        );
    }

    #[test]
    fn endless_line_stops_after_the_skip_cap() {
        // An endless stream of zeros, read in 7-byte chunks.
        let mut r = BufReader::with_capacity(7, std::io::repeat(0));
        let mut buf = Vec::new();
        match read_bounded_line(&mut r, &mut buf, 5, 40).unwrap() {
            LineRead::Unterminated { len } => assert!((41..=47).contains(&len), "{len}"),
            other => panic!("{other:?}"),
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn exact_cap_fits() {
        let mut r: &[u8] = b"12345\n";
        let mut buf = Vec::new();
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 5, 100).unwrap(),
            LineRead::Line
        );
        assert_eq!(buf, b"12345");
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 5, 100).unwrap(),
            LineRead::Eof
        );
    }
}
