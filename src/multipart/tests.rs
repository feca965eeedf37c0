//! Uploads read as they are sent: model anywhere, every other byte passed as it came.

use axum::http::HeaderValue;
use bytes::Bytes;

use super::*;

const CT: &str = "multipart/form-data; boundary=XyZ";

fn upload(parts: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, content) in parts {
        let file = if *name == "file" {
            "; filename=\"a.wav\"\r\nContent-Type: audio/wav"
        } else {
            ""
        };
        b.extend_from_slice(
            format!("--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"{file}\r\n\r\n")
                .as_bytes(),
        );
        b.extend_from_slice(content);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"--XyZ--\r\n");
    b
}

fn read(body: Vec<u8>) -> Result<Upload, BadUpload> {
    Upload::read(&HeaderValue::from_static(CT), Bytes::from(body))
}

#[test]
fn a_model_after_the_file_is_found_and_only_it_is_rewritten() {
    let file: Vec<u8> = (0..=255u8)
        .chain([0, 0xff, b'\r', b'\n', b'-', b'-'])
        .collect();
    let body = upload(&[("file", &file), ("language", b"en"), ("model", b"whisper")]);
    let up = read(body.clone()).unwrap();
    assert_eq!(up.model(), Some("whisper"));
    assert_eq!(up.parts, 3);
    let sent = up.for_backend("whisper-large-v3").to_bytes();
    let expected = upload(&[
        ("file", &file),
        ("language", b"en"),
        ("model", b"whisper-large-v3"),
    ]);
    assert_eq!(sent, expected, "every other byte as sent");
}

#[test]
fn an_upload_without_a_model_part_gets_one_at_its_end() {
    let body = upload(&[("image", b"\x89PNG\x00\x01"), ("prompt", b"a cat")]);
    let up = read(body).unwrap();
    assert_eq!(up.model(), None);
    let sent = up.for_backend("sdxl").to_bytes();
    let expected = upload(&[
        ("image", b"\x89PNG\x00\x01"),
        ("prompt", b"a cat"),
        ("model", b"sdxl"),
    ]);
    assert_eq!(sent, expected);
    let again = read(sent.to_vec()).unwrap();
    assert_eq!(again.model(), Some("sdxl"));
}

#[test]
fn bad_uploads_are_refused_saying_where() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "multipart/form-data",
            upload(&[("model", b"m")]),
            "no boundary",
        ),
        (
            "application/json",
            upload(&[("model", b"m")]),
            "expected content type multipart/form-data",
        ),
        (CT, b"hello".to_vec(), "nowhere in the body"),
        (
            CT,
            b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end".to_vec(),
            "part 1 at byte 7: no closing boundary",
        ),
        (
            CT,
            b"--XyZ\r\nX-Other: 1\r\n\r\nv\r\n--XyZ--".to_vec(),
            "part 1 at byte 7: no Content-Disposition",
        ),
        (
            CT,
            b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nv\r\n--XyZ--".to_vec(),
            "has no name",
        ),
        (
            CT,
            b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\nv\r\n--XyZ--".to_vec(),
            "headers do not end",
        ),
        (
            CT,
            b"--XyZjunk".to_vec(),
            "expected a line break after the boundary",
        ),
    ];
    for (ct, body, says) in cases {
        let e = Upload::read(&HeaderValue::from_str(ct).unwrap(), Bytes::from(body)).unwrap_err();
        assert!(e.to_string().contains(says), "{ct}: {e} should say {says}");
    }
}

#[test]
fn a_quoted_boundary_and_a_preamble_are_read() {
    let mut body = b"preamble to ignore\r\n".to_vec();
    body.extend(upload(&[("model", b" m1 ")]));
    let up = Upload::read(
        &HeaderValue::from_static("Multipart/Form-Data; boundary=\"XyZ\""),
        Bytes::from(body),
    )
    .unwrap();
    assert_eq!(up.model(), Some("m1"));
}

/// Every start of `needle` in `hay`, overlapping ones included, the slow way.
fn starts(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    (0..hay.len().saturating_sub(needle.len() - 1))
        .filter(|&i| hay[i..].starts_with(needle))
        .collect()
}

/// `body` fed to a scan in frames of `sizes` (cycled), then read with it.
fn scanned(ct: &HeaderValue, body: &[u8], sizes: &[usize]) -> (Vec<usize>, String) {
    let mut scan = Scan::new(ct).unwrap();
    let (mut at, mut i) = (0, 0);
    while at < body.len() {
        let end = (at + sizes[i % sizes.len()]).min(body.len());
        scan.feed(&body[at..end]);
        (at, i) = (end, i + 1);
    }
    let found = scan.found[..].to_vec();
    let read = Upload::scanned(ct, Bytes::copy_from_slice(body), scan);
    (found, format!("{read:?}"))
}

#[test]
fn delimiters_found_as_frames_come_are_those_of_the_whole_body_however_it_is_split() {
    // Boundaries whose delimiter overlaps itself, a delimiter's look-alikes inside a file,
    // a broken part, a missing close: each read the same fed whole or frame by frame.
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            CT,
            upload(&[("file", b"--Xy--XyZ-\r\n--XyQ"), ("model", b"m")]),
        ),
        (
            CT,
            upload(&[("model", b"m"), ("file", &[0, 0xff, b'-', b'-', b'X'])]),
        ),
        ("multipart/form-data; boundary=-", {
            let mut b =
                b"---\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n--m-\r\n".to_vec();
            b.extend_from_slice(b"-----\r\n");
            b
        }),
        (
            CT,
            b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno close".to_vec(),
        ),
        (CT, b"--XyZ\r\nno headers end\r\n--XyZ--\r\n".to_vec()),
        (CT, b"preamble --Xy".to_vec()),
    ];
    for (ct, body) in cases {
        let ct = HeaderValue::from_str(ct).unwrap();
        let needle = format!("--{}", super::boundary(&ct).unwrap());
        let whole = format!("{:?}", Upload::read(&ct, Bytes::from(body.clone())));
        for sizes in [
            vec![body.len()],
            vec![1],
            vec![2],
            vec![3, 1],
            vec![7],
            vec![64, 5],
        ] {
            let (found, read) = scanned(&ct, &body, &sizes);
            let expected: Vec<usize> = starts(&body, needle.as_bytes())
                .into_iter()
                .filter(|&at| at + needle.len() <= body.len())
                .collect();
            assert_eq!(found, expected, "frames of {sizes:?}");
            assert_eq!(read, whole, "frames of {sizes:?}");
        }
        for split in 0..=body.len() {
            let mut scan = Scan::new(&ct).unwrap();
            scan.feed(&body[..split]);
            scan.feed(&body[split..]);
            let read = Upload::scanned(&ct, Bytes::from(body.clone()), scan);
            assert_eq!(format!("{read:?}"), whole, "split at {split}");
        }
    }
}

#[test]
fn a_body_of_more_delimiters_than_a_scan_keeps_is_read_the_same() {
    let ct = HeaderValue::from_static(CT);
    let parts: Vec<(String, Vec<u8>)> = (0..FOUND_MAX + 100)
        .map(|i| (format!("p{i}"), b"x".to_vec()))
        .chain([("model".to_string(), b"m".to_vec())])
        .collect();
    let parts: Vec<(&str, &[u8])> = parts.iter().map(|(n, c)| (n.as_str(), &c[..])).collect();
    let body = upload(&parts);
    let (found, read) = scanned(&ct, &body, &[4096]);
    assert!(
        found.len() < FOUND_MAX + 100,
        "the scan kept {} positions",
        found.len()
    );
    let whole = Upload::read(&ct, Bytes::from(body)).unwrap();
    assert_eq!(whole.parts, FOUND_MAX + 101);
    assert_eq!(whole.model(), Some("m"));
    assert_eq!(read, format!("{:?}", Ok::<_, BadUpload>(whole)));
}

#[test]
fn a_scan_fed_other_bytes_than_the_body_is_not_trusted() {
    let ct = HeaderValue::from_static(CT);
    let body = upload(&[("model", b"m")]);
    let mut scan = Scan::new(&ct).unwrap();
    scan.feed(b"--XyZ--XyZ--XyZ");
    let read = Upload::scanned(&ct, Bytes::from(body.clone()), scan).unwrap();
    assert_eq!(read.model(), Some("m"));
    assert_eq!(read.for_backend("m").to_bytes(), body);
}
