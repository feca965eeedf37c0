//! What keyword routing reads of a list of messages (chat's `messages`, a Responses
//! `input` list), gathered in one pass as serde reads it: whether any message carries an
//! image part, and the last user message's content. No list is kept, and a content is read
//! in place: serde's `untagged` enums buffer every content into a value of their own first
//! and then try each shape against it (a fifth of a proxied request's parsing).
//!
//! As lenient as the `untagged` reading was: a content that is neither a string nor a list
//! of parts (objects whose `type` and `text` are strings when present) is read as no text
//! and no image, never as an error.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The summary of a list of messages.
#[derive(Default)]
pub(super) struct Messages<'a> {
    pub(super) has_image: bool,
    /// The content of the last message whose role is `user` (`None` inside: it had none).
    last_user: Option<Option<Content<'a>>>,
}

impl Messages<'_> {
    /// The last user message's text: its string, or its parts' texts joined by lines.
    pub(super) fn last_user_text(&self) -> String {
        match self.last_user.as_ref().and_then(Option::as_ref) {
            Some(Content::Text(t)) => t.to_string(),
            Some(Content::Parts(parts)) => {
                let texts: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
                texts.join("\n")
            }
            _ => String::new(),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Messages<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct List<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for List<'a> {
            type Value = Messages<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages<'a>, A::Error> {
                let mut out = Messages::default();
                while let Some(m) = seq.next_element::<Message<'a>>()? {
                    if let Some(Content::Parts(parts)) = &m.content {
                        out.has_image |= parts.iter().any(Part::is_image);
                    }
                    if m.role.as_deref() == Some("user") {
                        out.last_user = Some(m.content);
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_seq(List(PhantomData))
    }
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<Content<'a>>,
}

/// A message's content: a string, a list of parts, or anything else (read past).
enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
    /// `null` inside a part (a message's `null` content is serde's `None`).
    Null,
    Other,
}

struct Part<'a> {
    kind: Option<Cow<'a, str>>,
    text: Option<Cow<'a, str>>,
}

impl Part<'_> {
    fn is_image(&self) -> bool {
        self.kind.as_deref().is_some_and(|k| k.contains("image"))
    }
}

/// A visitor's methods for the numbers and booleans it reads past as `$past`.
macro_rules! past_scalars {
    ($past:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($past)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($past)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($past)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($past)
        }
    };
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor(PhantomData))
    }
}

/// Reads a content of any shape; only a string or a list of well-formed parts says
/// anything.
struct ContentVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ContentVisitor<'a> {
    type Value = Content<'a>;
    past_scalars!(Content::Other);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Content<'a>, E> {
        Ok(Content::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Content<'a>, E> {
        Ok(Content::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Content<'a>, E> {
        Ok(Content::Text(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content<'a>, A::Error> {
        let mut parts = Vec::new();
        let mut well_formed = true;
        while let Some(part) = seq.next_element::<MaybePart<'a>>()? {
            match part.0 {
                Some(p) if well_formed => parts.push(p),
                _ => well_formed = false,
            }
        }
        Ok(if well_formed {
            Content::Parts(parts)
        } else {
            Content::Other
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content<'a>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Content::Other)
    }
    fn visit_unit<E>(self) -> Result<Content<'a>, E> {
        Ok(Content::Null)
    }
    fn visit_none<E>(self) -> Result<Content<'a>, E> {
        Ok(Content::Null)
    }
}

/// A list element: a part when it is an object whose `type` and `text` are strings (or
/// null, or absent) and named once each; `None` for anything else, read past.
struct MaybePart<'a>(Option<Part<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybePart<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PartVisitor(PhantomData))
    }
}

struct PartVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for PartVisitor<'a> {
    type Value = MaybePart<'a>;
    past_scalars!(MaybePart(None));
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MaybePart<'a>, A::Error> {
        let (mut kind, mut text) = (None, None);
        let mut well_formed = true;
        while let Some(key) = map.next_key::<Key>()? {
            let slot = match key {
                Key::Type => &mut kind,
                Key::Text => &mut text,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            match map.next_value::<Field<'a>>()? {
                Field::Text(t) if slot.is_none() => *slot = Some(Some(t)),
                Field::Null if slot.is_none() => *slot = Some(None),
                _ => well_formed = false,
            }
        }
        Ok(MaybePart(well_formed.then(|| Part {
            kind: kind.flatten(),
            text: text.flatten(),
        })))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MaybePart<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(MaybePart(None))
    }
    fn visit_borrowed_str<E>(self, _: &'de str) -> Result<MaybePart<'a>, E> {
        Ok(MaybePart(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<MaybePart<'a>, E> {
        Ok(MaybePart(None))
    }
    fn visit_unit<E>(self) -> Result<MaybePart<'a>, E> {
        Ok(MaybePart(None))
    }
}

/// A part's key: the two read, or another (no copy made of it).
enum Key {
    Type,
    Text,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "type" => Key::Type,
                    "text" => Key::Text,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// A part's `type` or `text`: a string, `null`, or anything else (which makes the part
/// not one).
enum Field<'a> {
    Text(Cow<'a, str>),
    Null,
    Bad,
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Content::deserialize(d)? {
            Content::Text(t) => Field::Text(t),
            Content::Null => Field::Null,
            Content::Parts(_) | Content::Other => Field::Bad,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> (String, bool) {
        let m: Messages<'_> = serde_json::from_str(json).expect(json);
        (m.last_user_text(), m.has_image)
    }

    #[test]
    fn reads_the_last_user_message_and_any_image_part() {
        let cases = [
            (r#"[{"role":"user","content":"hi"}]"#, "hi", false),
            (
                r#"[{"role":"user","content":"a\"b\u00e9"}]"#,
                "a\"bé",
                false,
            ),
            (
                r#"[{"role":"user","content":[{"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"x"}},{"text":"two","type":null}]}]"#,
                "one\ntwo",
                true,
            ),
            // An image in an earlier message counts; the text is the last user message's.
            (
                r#"[{"role":"user","content":[{"type":"input_image"}]},{"role":"assistant","content":"x"},{"role":"user","content":"last"}]"#,
                "last",
                true,
            ),
            // The last user message without content says nothing, even after one that did.
            (
                r#"[{"role":"user","content":"first"},{"role":"user"}]"#,
                "",
                false,
            ),
            (r#"[{"role":"user","content":null}]"#, "", false),
            // Not a list of parts: read past, no text and no image.
            (
                r#"[{"role":"user","content":[{"type":"image"},"loose"]}]"#,
                "",
                false,
            ),
            (
                r#"[{"role":"user","content":[{"type":"image","text":5}]}]"#,
                "",
                false,
            ),
            (
                r#"[{"role":"user","content":[{"type":"image","type":"image"}]}]"#,
                "",
                false,
            ),
            (r#"[{"role":"user","content":[null]}]"#, "", false),
            (r#"[{"role":"user","content":{"text":"x"}}]"#, "", false),
            (r#"[{"role":"user","content":7}]"#, "", false),
            (r#"[]"#, "", false),
        ];
        for (json, text, image) in cases {
            assert_eq!(read(json), (text.to_string(), image), "{json}");
        }
    }

    #[test]
    fn a_list_that_is_not_one_or_a_broken_message_is_an_error() {
        for json in [
            r#""x""#,
            r#"{"role":"user"}"#,
            r#"[{"role":5}]"#,
            r#"[{"role":"user","content":[{"type":"text"]}]"#,
        ] {
            assert!(
                serde_json::from_str::<Messages<'_>>(json).is_err(),
                "{json}"
            );
        }
        let e = serde_json::from_str::<Messages<'_>>(r#""x""#)
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("expected a sequence")));
    }
}
