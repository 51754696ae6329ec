//! The codec toolkit every wire layout is read and written with: one
//! bounds-checked [`Reader`], one field writer ([`PutLe`], over a caller
//! buffer as [`Writer`] or over an owned `Vec<u8>`), and one [`DecodeError`].
//! The contract the codecs keep with them is stated once, in the
//! [`wire`](super) module docs.

use std::fmt;

/// Why bytes are not a valid instance of a layout: what was wrong, and where
/// it applies what was got and what was expected. Every decoder of
/// [`crate::wire`] and of the relay's stored records returns it; the event
/// payload codecs, whose errors reach the C API, carry it in
/// [`crate::Error::Malformed`] with the layout's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// The bytes end before the layout does: `got` bytes where it needs
    /// `expected`.
    TooShort {
        /// The bytes there are.
        got: usize,
        /// The bytes the layout needs up to where they ran out.
        expected: usize,
    },
    /// More bytes than the layout has: `got` where it ends after `expected`
    /// (trailing bytes, or more than its largest size).
    TooLong {
        /// The bytes there are.
        got: usize,
        /// Where the layout ends, bytes.
        expected: usize,
    },
    /// The first byte is not the layout's magic.
    BadMagic {
        /// The first byte.
        got: u8,
        /// The layout's magic.
        expected: u8,
    },
    /// The layout version is not the one this build speaks.
    BadVersion {
        /// The version byte.
        got: u8,
        /// The version this build speaks.
        expected: u8,
    },
    /// The kind byte names nothing of this layout.
    UnknownKind(u8),
    /// A field breaks a rule of the layout; the words name the field and
    /// the rule ("a turn's tag must be after its send frame").
    Invalid(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::TooShort { got, expected } => {
                write!(f, "ends after {got} bytes; the layout needs {expected}")
            }
            DecodeError::TooLong { got, expected } => {
                write!(f, "has {got} bytes; the layout ends after {expected}")
            }
            DecodeError::BadMagic { got, expected } => {
                write!(
                    f,
                    "starts with {got:#04x}; expected the magic {expected:#04x}"
                )
            }
            DecodeError::BadVersion { got, expected } => {
                write!(f, "version must be {expected}, not {got}")
            }
            DecodeError::UnknownKind(kind) => write!(f, "kind {kind} is not one of the layout's"),
            DecodeError::Invalid(rule) => f.write_str(rule),
        }
    }
}

impl std::error::Error for DecodeError {}

/// `Ok` when `got` bytes are exactly the `expected` of a fixed-size layout.
#[inline]
pub(crate) fn exact_len(got: usize, expected: usize) -> Result<(), DecodeError> {
    match got.cmp(&expected) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(DecodeError::TooShort { got, expected }),
        std::cmp::Ordering::Greater => Err(DecodeError::TooLong { got, expected }),
    }
}

/// Little-endian fields read in order from received bytes. Every read
/// checks the length first and refuses past the end with
/// [`DecodeError::TooShort`]; [`finish`](Reader::finish) refuses what is
/// left over. It never panics and never allocates.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        match self
            .at
            .checked_add(n)
            .and_then(|end| self.bytes.get(self.at..end))
        {
            Some(out) => {
                self.at += n;
                Ok(out)
            }
            None => Err(self.short(n)),
        }
    }

    #[cold]
    fn short(&self, n: usize) -> DecodeError {
        DecodeError::TooShort {
            got: self.bytes.len(),
            expected: self.at.saturating_add(n),
        }
    }

    /// The next `N` bytes, copied.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// The next byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    /// The next `u16`.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_le_bytes)
    }

    /// The next `u32`.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_le_bytes)
    }

    /// The next `u64`.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_le_bytes)
    }

    /// The next `i64`.
    #[inline]
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_le_bytes)
    }

    /// Everything not read yet (the reader is then at the end).
    #[inline]
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = self.bytes.get(self.at..).unwrap_or_default();
        self.at = self.bytes.len();
        rest
    }

    /// Bytes read so far.
    #[inline]
    pub fn position(&self) -> usize {
        self.at
    }

    /// Bytes left.
    #[inline]
    pub fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// `Ok` when every byte was read: a layout has no trailing bytes.
    #[inline]
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(DecodeError::TooLong {
                got: self.bytes.len(),
                expected: self.at,
            })
        }
    }
}

/// Little-endian fields appended in order: the one way every encoder of
/// [`crate::wire`] and of the relay's stored records writes, into a caller
/// buffer ([`Writer`]) or into a growing `Vec<u8>` (the turn messages, which
/// own their buffers).
pub trait PutLe {
    /// Append `bytes`.
    fn put(&mut self, bytes: &[u8]);

    /// Append a byte.
    #[inline]
    fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }

    /// Append a `u16`.
    #[inline]
    fn u16(&mut self, v: u16) {
        self.put(&v.to_le_bytes());
    }

    /// Append a `u32`.
    #[inline]
    fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }

    /// Append a `u64`.
    #[inline]
    fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }

    /// Append an `i64`.
    #[inline]
    fn i64(&mut self, v: i64) {
        self.put(&v.to_le_bytes());
    }
}

impl PutLe for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A bounds-checked writer into a caller buffer: a put that does not fit
/// writes nothing and fails the writer, so [`finish`](Writer::finish) gives
/// the length only when the whole message fits. It never panics and never
/// allocates.
#[derive(Debug)]
pub struct Writer<'b> {
    buf: &'b mut [u8],
    len: usize,
    ok: bool,
}

impl<'b> Writer<'b> {
    /// A writer at the start of `buf`, using at most `limit` bytes of it.
    #[inline]
    pub fn new(buf: &'b mut [u8], limit: usize) -> Writer<'b> {
        let limit = limit.min(buf.len());
        Writer {
            buf: &mut buf[..limit],
            len: 0,
            ok: true,
        }
    }

    /// Bytes written so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written yet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The message's length, or `None` when a put did not fit.
    #[inline]
    pub fn finish(self) -> Option<usize> {
        self.ok.then_some(self.len)
    }
}

impl PutLe for Writer<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        match self.buf.get_mut(self.len..end) {
            Some(dst) if self.ok => {
                dst.copy_from_slice(bytes);
                self.len = end;
            }
            _ => self.ok = false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_order_and_says_what_was_short() {
        let mut r = Reader::new(&[1, 2, 0, 3, 0, 0, 0, 9, 9]);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(2));
        assert_eq!(r.u32(), Ok(3));
        assert_eq!(r.left(), 2);
        assert_eq!(
            r.u64(),
            Err(DecodeError::TooShort {
                got: 9,
                expected: 15
            }),
            "two bytes left"
        );
        assert_eq!(r.position(), 7, "a refused read moves nothing");
        assert_eq!(
            r.finish(),
            Err(DecodeError::TooLong {
                got: 9,
                expected: 7
            })
        );
        assert_eq!(r.take(2), Ok(&[9, 9][..]));
        assert_eq!(r.finish(), Ok(()));
        assert!(r.u8().is_err());
        assert!(r.take(usize::MAX).is_err(), "no overflow");
    }

    #[test]
    fn the_writer_fails_whole_when_a_put_does_not_fit() {
        let mut buf = [0u8; 8];
        let mut w = Writer::new(&mut buf, 6);
        w.u8(1);
        w.u32(0x0504_0302);
        assert_eq!(w.len(), 5);
        w.u16(7);
        assert_eq!(w.len(), 5, "a put that does not fit writes nothing");
        assert_eq!(w.finish(), None, "limit 6, 7 bytes put");
        let mut w = Writer::new(&mut buf, 100);
        assert!(w.is_empty());
        w.u64(u64::MAX);
        assert_eq!(w.finish(), Some(8));
        let mut v = Vec::new();
        v.u16(0x0201);
        v.i64(-1);
        assert_eq!(v, [1, 2, 255, 255, 255, 255, 255, 255, 255, 255]);
    }

    #[test]
    fn exact_lengths_say_which_way_they_are_wrong() {
        assert_eq!(exact_len(5, 5), Ok(()));
        assert_eq!(
            exact_len(4, 5),
            Err(DecodeError::TooShort {
                got: 4,
                expected: 5
            })
        );
        assert_eq!(
            exact_len(6, 5).unwrap_err().to_string(),
            "has 6 bytes; the layout ends after 5"
        );
    }
}
