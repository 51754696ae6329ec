//! A cursor over received bytes for decoders: every read checks the length
//! and gives `None` past the end, so a decoder never panics on short input.

/// Little-endian fields read in order from a byte slice.
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> ByteReader<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> ByteReader<'a> {
        ByteReader { bytes, at: 0 }
    }

    /// The next `n` bytes, or `None` when fewer are left.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(out)
    }

    /// The next byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// The next `u16`.
    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    /// The next `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The next `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Bytes left.
    pub fn left(&self) -> usize {
        self.bytes.len() - self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_order_and_stops_at_the_end() {
        let mut r = ByteReader::new(&[1, 2, 0, 3, 0, 0, 0, 9, 9]);
        assert_eq!(r.u8(), Some(1));
        assert_eq!(r.u16(), Some(2));
        assert_eq!(r.u32(), Some(3));
        assert_eq!(r.left(), 2);
        assert_eq!(r.u64(), None, "two bytes left");
        assert_eq!(r.take(2), Some(&[9, 9][..]));
        assert_eq!(r.position(), 9);
        assert_eq!(r.u8(), None);
    }
}
