//! Target 7: uploads read with the delimiters found frame by frame as they came
//! (`multipart::Scan`) read exactly as the same body held whole, however it was split.

use arbitrary::Unstructured;
use bytes::Bytes;
use hyper::header::HeaderValue;
use labrouter::multipart::{Scan, Upload};

use super::harness::{accepted, pick, show};

type R<T> = arbitrary::Result<T>;

/// Boundaries that overlap themselves, look like CRLF or dashes, or are plain.
const BOUNDARIES: &[&str] = &["XyZ", "-", "--", "a-a", "x", "-x-", "==", "a\"b"];

/// Pieces an upload is made of, often almost right.
fn piece(u: &mut Unstructured<'_>, b: &str) -> R<Vec<u8>> {
    Ok(match u.int_in_range(0..=9)? {
        0 => format!("--{b}\r\n").into_bytes(),
        1 => format!("\r\n--{b}").into_bytes(),
        2 => format!("--{b}--\r\n").into_bytes(),
        3 => b"Content-Disposition: form-data; name=\"model\"\r\n\r\n".to_vec(),
        4 => b"Content-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n".to_vec(),
        5 => b"\r\n".to_vec(),
        6 => format!("-{}", &b[..b.len() / 2]).into_bytes(),
        7 => b"m".to_vec(),
        _ => {
            let n = u.int_in_range(0..=40)?;
            u.bytes(n)?.to_vec()
        }
    })
}

pub fn target(u: &mut Unstructured<'_>) -> R<()> {
    let b = *pick(u, BOUNDARIES)?;
    let ct = format!("multipart/form-data; boundary=\"{b}\"");
    let Ok(ct) = HeaderValue::from_str(&ct) else {
        return Ok(());
    };
    let mut body = Vec::new();
    for _ in 0..u.int_in_range(0..=24)? {
        body.extend(piece(u, b)?);
    }
    let whole = format!("{:?}", Upload::read(&ct, Bytes::from(body.clone())));
    let Ok(mut scan) = Scan::new(&ct) else {
        return Ok(());
    };
    let mut at = 0;
    while at < body.len() {
        let end = (at + u.int_in_range(1..=9)?).min(body.len());
        scan.feed(&body[at..end]);
        at = end;
    }
    let read = format!(
        "{:?}",
        Upload::scanned(&ct, Bytes::from(body.clone()), scan)
    );
    if read != whole {
        show("body", &String::from_utf8_lossy(&body));
        panic!("read frame by frame:\n{read}\nread whole:\n{whole}");
    }
    if whole.starts_with("Ok") {
        accepted();
    }
    Ok(())
}
