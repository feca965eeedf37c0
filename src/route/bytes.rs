//! Byte-level helpers of the keyword search: which bytes are word characters, 64 at a time
//! as bit masks; ASCII case folding 8 bytes at a time; the hash of a word.

/// The first `len` bytes of `t[at..]`, ASCII-lowercased, as two zero-padded words; `None`
/// when `len` is over 16 or fewer than 16 bytes can be read there.
#[inline(always)]
pub(super) fn lower16(t: &[u8], at: usize, len: usize) -> Option<(u64, u64)> {
    let (m0, m1) = *KEEP.get(len)?;
    let b = t.get(at..at + 16)?;
    let w0 = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let w1 = u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
    Some((lower8(w0) & m0, lower8(w1) & m1))
}

/// `t` equals `lower` (ASCII lower case) but for the case of ASCII letters; 8 bytes a step.
pub(super) fn eq_lower(t: &[u8], lower: &[u8]) -> bool {
    let word = |c: &[u8]| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    let (mut a, mut b) = (t.chunks_exact(8), lower.chunks_exact(8));
    t.len() == lower.len()
        && (&mut a)
            .zip(&mut b)
            .all(|(x, y)| lower8(word(x)) == word(y))
        && a.remainder()
            .iter()
            .zip(b.remainder())
            .all(|(x, y)| x.to_ascii_lowercase() == *y)
}

/// ASCII upper-case letters of 8 bytes to lower case; every other byte as it is.
#[inline]
fn lower8(x: u64) -> u64 {
    let low7 = x & !HIGH_BITS;
    let ge_a = low7 + (0x80 - u64::from(b'A')) * ONES;
    let gt_z = low7 + (0x80 - u64::from(b'Z') - 1) * ONES;
    let upper = ge_a & !gt_z & !x & HIGH_BITS;
    x | (upper >> 2)
}

pub(super) const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Bit `j` of the first mask: byte `j` of the block is an ASCII word character; of the
/// second: byte `j` begins a character that is not ASCII (it is 0xC0 or more). With SSE2
/// (part of x86-64), 16 bytes a step.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub(super) fn masks(block: &[u8]) -> (u64, u64) {
    // SAFETY: `masks_sse2` needs only SSE2, which this build enables (the `cfg` above); it
    // reads memory only through the slice.
    unsafe { masks_sse2(block) }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
#[inline]
fn masks_sse2(block: &[u8]) -> (u64, u64) {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8, _mm_set_epi64x,
    };
    let (mut word, mut lead) = (0u64, 0u64);
    for (k, c) in block.chunks_exact(16).enumerate() {
        let lo = i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let hi = i64::from_le_bytes([c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]]);
        let v = _mm_set_epi64x(hi, lo);
        // Signed compares: bytes >= 0x80 are negative, so never in a range below.
        let within = |v: __m128i, lo: u8, hi: u8| {
            _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8(lo as i8 - 1)),
                _mm_cmplt_epi8(v, _mm_set1_epi8(hi as i8 + 1)),
            )
        };
        let letter = within(_mm_or_si128(v, _mm_set1_epi8(0x20)), b'a', b'z');
        let digit = within(v, b'0', b'9');
        let underscore = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'_' as i8));
        let w = _mm_or_si128(_mm_or_si128(letter, digit), underscore);
        // 0xC0..=0xFF are -64..=-1: of the bytes above -65, those with the high bit.
        let leads = _mm_movemask_epi8(v) & _mm_movemask_epi8(_mm_cmpgt_epi8(v, _mm_set1_epi8(-65)));
        word |= u64::from(_mm_movemask_epi8(w) as u16) << (16 * k);
        lead |= u64::from(leads as u16) << (16 * k);
    }
    (word, lead)
}

/// [`masks`] without SSE2: 8 bytes a step.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn masks_swar(block: &[u8]) -> (u64, u64) {
    let (mut word, mut lead) = (0u64, 0u64);
    for (k, chunk) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        let (w, l) = masks8(x);
        word |= w << (8 * k);
        lead |= l << (8 * k);
    }
    (word, lead)
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
pub(super) fn masks(block: &[u8]) -> (u64, u64) {
    masks_swar(block)
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// [`masks`] of 8 bytes (little-endian in `x`), with no table and no branch.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
#[inline]
fn masks8(x: u64) -> (u64, u64) {
    let low7 = x & !HIGH_BITS;
    // Per byte (each < 0x80, so no carry crosses bytes): the high bit says `>= bound`.
    let at_least = |bound: u8| low7 + (0x80 - u64::from(bound)) * ONES;
    let lower = low7 | (0x20 * ONES);
    let at_least_lower = |bound: u8| lower + (0x80 - u64::from(bound)) * ONES;
    let letter = at_least_lower(b'a') & !at_least_lower(b'z' + 1);
    let digit = at_least(b'0') & !at_least(b'9' + 1);
    let underscore = !((low7 ^ (u64::from(b'_') * ONES)) + (0x7f * ONES));
    let word = (letter | digit | underscore) & !x & HIGH_BITS;
    // Lead bytes 0xC0..=0xFF: bits 7 and 6 set.
    (gather(word), gather(x & (x << 1) & HIGH_BITS))
}

/// The high bit of each byte of `x` (nothing else set) to bits 0..8.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
#[inline]
fn gather(x: u64) -> u64 {
    ((x >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

/// Every byte of a word with its 0x20 bit set: ASCII letters to lower case, digits as they
/// are, `_` to DEL (never in a word), other bytes >= 0x80 paired up: a hash key that folds
/// ASCII case, collisions settled by comparing the words.
const FOLD: u64 = 0x20 * ONES;
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// The hash of a word of up to 16 bytes from its two 8-byte halves, folded and zero-padded.
#[inline(always)]
fn hash16(k0: u64, k1: u64) -> u64 {
    (k0 ^ k1.rotate_left(29)).wrapping_mul(K)
}

/// The hash of a word, ASCII case folded (see [`FOLD`]).
pub(super) fn hash(word: &[u8]) -> u64 {
    let chunk = |k: usize| {
        let mut c = [0u8; 8];
        let from = (8 * k).min(word.len());
        let to = (8 * k + 8).min(word.len());
        c[..to - from].copy_from_slice(&word[from..to]);
        let mask = u64::MAX
            .checked_shr(8 * (8 - (to - from)) as u32)
            .unwrap_or(0);
        (u64::from_le_bytes(c) | FOLD) & mask
    };
    if word.len() <= 16 {
        return hash16(chunk(0), chunk(1));
    }
    let mut h = (word.len() as u64).wrapping_mul(K);
    for k in 0..word.len().div_ceil(8) {
        h = (h.rotate_left(23) ^ chunk(k)).wrapping_mul(K);
    }
    h
}

/// For a word of `len` bytes, which bytes of its two 8-byte halves to keep.
const KEEP: [(u64, u64); 17] = {
    let mut m = [(0, 0); 17];
    let mut len = 0;
    while len <= 16 {
        let mut i = 0;
        while i < len {
            if i < 8 {
                m[len].0 |= 0xff << (8 * i);
            } else {
                m[len].1 |= 0xff << (8 * (i - 8));
            }
            i += 1;
        }
        len += 1;
    }
    m
};

/// [`hash`] of `t[start..start + len]` and the word's [`FOLD`]ed halves, zero-padded, when
/// it is at most 16 bytes long and 16 bytes can be read there; else `None`.
#[inline(always)]
pub(super) fn folded(t: &[u8], start: usize, len: usize) -> Option<(u64, (u64, u64))> {
    let (m0, m1) = *KEEP.get(len)?;
    let b = t.get(start..start + 16)?;
    let w0 = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let w1 = u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
    let key = ((w0 | FOLD) & m0, (w1 | FOLD) & m1);
    Some((hash16(key.0, key.1), key))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ASCII bytes that are word characters (letters, digits, `_`); 0 for every byte >= 0x80.
    const ASCII_WORD: [bool; 256] = {
        let mut t = [false; 256];
        let mut b = 0;
        while b < 128 {
            t[b] = (b as u8).is_ascii_alphanumeric() || b == b'_' as usize;
            b += 1;
        }
        t
    };

    #[test]
    fn masks_match_a_byte_at_a_time() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (w, h) = masks8(x);
            let bytes = x.to_le_bytes();
            for (j, &b) in bytes.iter().enumerate() {
                assert_eq!(w >> j & 1 == 1, ASCII_WORD[b as usize], "{b:#x}");
                assert_eq!(h >> j & 1 == 1, b >= 0xC0, "{b:#x}");
            }
        }
        for b in 0..=255u8 {
            let (w, h) = masks8(u64::from(b) << 24);
            assert_eq!(w, u64::from(ASCII_WORD[b as usize]) << 3, "{b:#x}");
            assert_eq!(h, u64::from(b >= 0xC0) << 3, "{b:#x}");
        }
    }

    #[test]
    fn masks_match_without_simd() {
        let mut x = 0x0bad_cafe_1234_5678u64;
        let pieces: [&[u8]; 9] = [
            b"a",
            b"Z",
            b"_",
            b"9",
            b" ",
            b"@",
            b"`",
            "\u{e4}".as_bytes(),
            "\u{1F600}".as_bytes(),
        ];
        for _ in 0..2000 {
            let mut block = Vec::new();
            while block.len() < 64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x.is_multiple_of(3) {
                    block.push(x.to_le_bytes()[1]);
                } else {
                    block.extend_from_slice(pieces[(x >> 8) as usize % pieces.len()]);
                }
            }
            assert_eq!(masks(&block[..64]), masks_swar(&block[..64]), "{block:?}");
        }
    }

    #[test]
    fn eq_lower_is_ascii_case_insensitive_equality() {
        let words: [&[u8]; 8] = [
            b"",
            b"a",
            b"A",
            b"unit test",
            b"UNIT TEST",
            b"Unit_Test_1234567",
            b"unit_test_1234567",
            "Gr\u{f6}\u{df}e".as_bytes(),
        ];
        for a in words {
            for b in words {
                let lower = b.to_ascii_lowercase();
                assert_eq!(
                    eq_lower(a, &lower),
                    a.eq_ignore_ascii_case(b),
                    "{a:?} {b:?}"
                );
            }
            for x in 0..=255u8 {
                let y = [x; 9];
                assert!(eq_lower(&y, &y.to_ascii_lowercase()));
                assert_eq!(lower8(u64::from(x)), u64::from(x.to_ascii_lowercase()));
            }
        }
    }

    #[test]
    fn folded_hashes_as_hash_does() {
        let text = b"Hello WORLD_ and a-much-longer-word1234567890 x";
        for start in 0..text.len() {
            for len in 1..=text.len() - start {
                let folded = text[start..start + len].to_ascii_lowercase();
                let h = super::folded(text, start, len).map(|(h, _)| h);
                assert_eq!(
                    h.unwrap_or_else(|| hash(&folded)),
                    hash(&folded),
                    "{start} {len}"
                );
            }
        }
    }
}
