//! Target 3: the SSE relay's end-of-stream detection, [`DoneTail`], under any chunking.

use arbitrary::Unstructured;
use labrouter::upstream::DoneTail;

use super::harness::{accepted, one_in, pick, show};

type R<T> = arbitrary::Result<T>;

/// A stream: SSE events, `[DONE]` and near misses, random bytes between.
fn stream(u: &mut Unstructured<'_>) -> R<Vec<u8>> {
    if one_in(u, 4)? {
        return Ok(u.bytes(u.len().min(256))?.to_vec());
    }
    let mut s = Vec::new();
    let n = u.int_in_range(0..=12)?;
    for _ in 0..n {
        let piece: &[u8] = pick(
            u,
            &[
                b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n".as_slice(),
                b"data: [DONE]\n\n",
                b"data: [DONE]",
                b"[DONE]",
                b"[DONE",
                b"DONE]",
                b"[",
                b"]",
                b"D",
                b"\n\n",
                b": keep-alive\n\n",
                b"data: [done]\n\n",
                b"\xff\xfe\x00",
                b"0123456789abcdefghijklmnopqrstuvwxyz",
            ],
        )?;
        s.extend_from_slice(piece);
        if one_in(u, 4)? {
            let pad = u.int_in_range(0..=40)?;
            s.extend(std::iter::repeat_n(b'x', pad));
        }
    }
    Ok(s)
}

/// What `finished` means: `[DONE]` among the stream's last 32 bytes.
fn oracle(s: &[u8]) -> bool {
    s[s.len().saturating_sub(32)..]
        .windows(6)
        .any(|w| w == b"[DONE]")
}

pub fn target(u: &mut Unstructured<'_>) -> R<()> {
    let s = stream(u)?;
    let mut whole = DoneTail::new();
    whole.observe(&s);
    let expected = whole.finished();
    if expected {
        accepted();
    }
    assert_eq!(
        expected,
        oracle(&s),
        "one chunk: {:?}",
        String::from_utf8_lossy(&s)
    );
    // Several splits of the same bytes, empty chunks included.
    for _ in 0..4 {
        let mut cuts: Vec<usize> = (0..u.int_in_range(0..=8)?)
            .map(|_| u.int_in_range(0..=s.len()))
            .collect::<R<_>>()?;
        cuts.sort_unstable();
        let mut t = DoneTail::new();
        let mut at = 0;
        let mut chunks = Vec::new();
        for c in cuts.into_iter().chain([s.len()]) {
            chunks.push(&s[at..c]);
            t.observe(&s[at..c]);
            at = c;
        }
        show(
            "chunks",
            &chunks
                .iter()
                .map(|c| String::from_utf8_lossy(c))
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            t.finished(),
            expected,
            "split {chunks:?} disagrees with the whole stream"
        );
    }
    Ok(())
}
