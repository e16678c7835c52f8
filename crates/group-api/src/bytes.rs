//! Compact serde encodings of byte strings, shared by the group's wire
//! format and the engine's write-sets (`#[serde(with = ...)]`).

/// `#[serde(with = "byte_vec")]` on a `Vec<u8>` field: written and read as
/// one byte string rather than element by element. Under bincode the bytes
/// on the wire are the same as a sequence of u8 (a length, then the bytes),
/// so peers of either encoding understand each other; a snapshot of
/// hundreds of MiB is no longer hundreds of millions of calls.
pub mod byte_vec {
    use serde::de::{SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(ByteVec)
    }

    struct ByteVec;

    impl<'de> Visitor<'de> for ByteVec {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }

        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            // The size hint comes from the peer: it only caps the first
            // allocation.
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }
}

/// `#[serde(with = "byte_vecs")]` on a `Vec<Vec<u8>>` field: each element as
/// [`byte_vec`] writes it, so the bytes are again those of the plain type.
pub mod byte_vecs {
    use serde::de::{SeqAccess, Visitor};
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::fmt;

    #[derive(Serialize)]
    struct Out<'a>(#[serde(with = "super::byte_vec")] &'a Vec<u8>);

    #[derive(Deserialize)]
    struct In(#[serde(with = "super::byte_vec")] Vec<u8>);

    pub fn serialize<S: Serializer>(v: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for item in v {
            seq.serialize_element(&Out(item))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        d.deserialize_seq(ByteVecs)
    }

    struct ByteVecs;

    impl<'de> Visitor<'de> for ByteVecs {
        type Value = Vec<Vec<u8>>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a sequence of byte strings")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Vec<u8>>, A::Error> {
            // As in `byte_vec`: the peer's size hint only caps the first allocation.
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(256));
            while let Some(In(item)) = seq.next_element()? {
                out.push(item);
            }
            Ok(out)
        }
    }
}
