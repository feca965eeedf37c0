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
