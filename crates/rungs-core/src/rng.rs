//! SplitMix64: a tiny, fast, seedable generator. The simulator needs
//! bit-for-bit reproducible streams from a seed, not cryptographic quality.

/// SplitMix64 (Steele, Lea, Flood 2014), the generator Java's
/// `SplittableRandom` and many seeders use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose stream depends only on `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max` (multiply-shift; the bias is below 2^-32 for
    /// the ranges the simulator uses).
    pub fn below_or_equal(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            return self.next_u64();
        }
        ((u128::from(self.next_u64()) * u128::from(max + 1)) >> 64) as u64
    }

    /// True with probability `ppm` parts per million.
    pub fn chance_ppm(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.below_or_equal(999_999) < u64::from(ppm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_stream() {
        // Reference values of SplitMix64 seeded with 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn ranges_and_chances() {
        let mut r = SplitMix64::new(7);
        assert!((0..1000).all(|_| r.below_or_equal(5) <= 5));
        assert!((0..1000).all(|_| !r.chance_ppm(0)));
        assert!((0..1000).all(|_| r.chance_ppm(1_000_000)));
        let hits = (0..100_000).filter(|_| r.chance_ppm(300_000)).count();
        assert!((29_000..31_000).contains(&hits), "{hits}");
    }
}
