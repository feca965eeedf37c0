//! A multipart/form-data upload, read into its fields: checked by the router's own reader
//! ([`crate::multipart::Upload`]), so the sim refuses what labrouter refuses, then split
//! into named parts.

use bytes::Bytes;
use hyper::header::HeaderValue;
use memchr::memmem;

use crate::multipart::{param, Upload};

/// One part of the form: its name, its file name if it is a file, and its content.
pub(super) struct Field {
    pub(super) name: String,
    pub(super) filename: Option<String>,
    pub(super) content: Bytes,
}

/// The fields of an upload, in order.
pub(super) struct Form {
    fields: Vec<Field>,
}

impl Form {
    /// Reads `body` as the multipart/form-data `content_type` says; what is wrong if it is not.
    pub(super) fn read(content_type: Option<&HeaderValue>, body: Bytes) -> Result<Form, String> {
        let Some(ct) = content_type else {
            return Err("expected content type multipart/form-data, got none".into());
        };
        Upload::read(ct, body.clone()).map_err(|e| e.to_string())?;
        let boundary = ct
            .to_str()
            .ok()
            .and_then(|ct| param(ct, "boundary"))
            .ok_or("the content type has no boundary")?;
        let delimiter = format!("--{boundary}");
        let starts: Vec<usize> = memmem::find_iter(&body, delimiter.as_bytes()).collect();
        let fields = starts
            .windows(2)
            .filter_map(|w| field(&body, w[0] + delimiter.len() + 2, w[1].checked_sub(2)?))
            .collect();
        Ok(Form { fields })
    }

    /// The text of the first field called `name`, if it is text.
    pub(super) fn text(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| std::str::from_utf8(&f.content).ok())
    }

    /// The files sent under any of `names`, in order.
    pub(super) fn files<'a>(&'a self, names: &'a [&str]) -> impl Iterator<Item = &'a Field> {
        self.fields
            .iter()
            .filter(|f| f.filename.is_some() && names.contains(&f.name.as_str()))
    }
}

/// The field between `start` (after its delimiter's line break) and `end` (the line break
/// before the next delimiter), if its headers name it.
fn field(body: &Bytes, start: usize, end: usize) -> Option<Field> {
    let part = body.get(start..end)?;
    let split = memmem::find(part, b"\r\n\r\n")?;
    let headers = std::str::from_utf8(part.get(..split)?).ok()?;
    let disposition = headers.split("\r\n").find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then_some(v)
    })?;
    Some(Field {
        name: param(disposition, "name")?,
        filename: param(disposition, "filename"),
        content: body.slice(start + split + 4..end),
    })
}
