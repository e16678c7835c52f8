use super::*;
use proptest::prelude::*;

fn record(index: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_record(&mut out, index, payload);
    out
}

#[test]
fn record_layout_is_pinned() {
    // A golden record: if this changes, files written by an older build stop reading.
    let bytes = record(0x0102_0304_0506_0708, b"hi");
    assert_eq!(bytes.len(), RECORD_HEADER_LEN + 2);
    assert_eq!(&bytes[0..4], b"TGRC");
    assert_eq!(&bytes[4..6], &[1, 0], "version");
    assert_eq!(&bytes[6..8], &[0, 0], "flags");
    assert_eq!(&bytes[8..16], &[8, 7, 6, 5, 4, 3, 2, 1], "index, little-endian");
    assert_eq!(&bytes[16..20], &[2, 0, 0, 0], "length");
    assert_eq!(&bytes[28..], b"hi");
    let mut covered = bytes[0..20].to_vec();
    covered.extend_from_slice(b"hi");
    assert_eq!(bytes[20..24], crc32fast::hash(&covered).to_le_bytes(), "data crc");
    assert_eq!(bytes[24..28], crc32fast::hash(&bytes[0..24]).to_le_bytes(), "header crc");
}

#[test]
fn record_round_trips() {
    let bytes = record(42, b"payload");
    let header = decode_record_header(&bytes).unwrap();
    assert_eq!(header.index, 42);
    assert_eq!(header.len, 7);
    assert_eq!(header.record_len(), bytes.len() as u64);
    header.verify_payload(&bytes[RECORD_HEADER_LEN..]).unwrap();
}

#[test]
fn empty_payload_is_a_valid_record() {
    let bytes = record(7, b"");
    assert_eq!(bytes.len(), RECORD_HEADER_LEN);
    let header = decode_record_header(&bytes).unwrap();
    assert_eq!(header.len, 0);
    header.verify_payload(&[]).unwrap();
}

#[test]
fn short_header_is_reported_not_panicked() {
    let bytes = record(1, b"x");
    for cut in 0..RECORD_HEADER_LEN {
        assert_eq!(
            decode_record_header(&bytes[..cut]),
            Err(Invalid::Short { needed: RECORD_HEADER_LEN as u64, got: cut as u64 })
        );
    }
}

#[test]
fn zeroed_header_is_bad_magic() {
    assert_eq!(decode_record_header(&[0u8; RECORD_HEADER_LEN]), Err(Invalid::Magic));
}

#[test]
fn header_fields_are_covered_by_the_header_checksum() {
    let bytes = record(9, b"abc");
    for offset in 4..RECORD_HEADER_LEN {
        let mut damaged = bytes.clone();
        damaged[offset] ^= 0x01;
        assert_eq!(decode_record_header(&damaged), Err(Invalid::HeaderChecksum), "at {offset}");
    }
}

#[test]
fn payload_checksum_catches_altered_payload_and_wrong_length() {
    let bytes = record(9, b"abc");
    let header = decode_record_header(&bytes).unwrap();
    assert_eq!(header.verify_payload(b"abd"), Err(Invalid::PayloadChecksum));
    assert_eq!(header.verify_payload(b"ab"), Err(Invalid::Short { needed: 3, got: 2 }));
}

#[test]
fn future_version_and_flags_are_refused_when_checksummed() {
    // A header that is internally consistent but from another version is refused by name.
    let mut bytes = record(3, b"");
    bytes[4] = 2;
    let crc = crc32fast::hash(&bytes[0..24]);
    bytes[24..28].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_record_header(&bytes), Err(Invalid::Version(2)));
    let mut bytes = record(3, b"");
    bytes[6] = 1;
    let crc = crc32fast::hash(&bytes[0..24]);
    bytes[24..28].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_record_header(&bytes), Err(Invalid::Flags(1)));
}

#[test]
fn oversized_length_is_refused_before_allocation() {
    let mut bytes = record(3, b"");
    bytes[16..20].copy_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
    let crc = crc32fast::hash(&bytes[0..24]);
    bytes[24..28].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_record_header(&bytes), Err(Invalid::TooLarge(MAX_PAYLOAD as u64 + 1)));
}

#[test]
fn segment_header_round_trips_and_is_pinned() {
    let header = encode_segment_header(77);
    assert_eq!(&header[0..8], b"TANDMSEG");
    assert_eq!(&header[8..16], &77u64.to_le_bytes());
    assert_eq!(&header[16..20], &[1, 0, 0, 0]);
    assert_eq!(decode_segment_header(&header), Ok(77));
}

#[test]
fn segment_header_damage_is_detected_at_every_byte() {
    let header = encode_segment_header(5);
    for offset in 0..SEGMENT_HEADER_LEN {
        let mut damaged = header;
        damaged[offset] ^= 0x80;
        assert!(decode_segment_header(&damaged).is_err(), "flip at {offset} undetected");
    }
    assert!(matches!(decode_segment_header(&header[..10]), Err(Invalid::Short { .. })));
}

#[test]
fn blob_round_trips_and_is_pinned() {
    let file = encode_blob(b"vote");
    assert_eq!(file.len(), BLOB_HEADER_LEN + 4);
    assert_eq!(&file[0..8], b"TANDBLOB");
    assert_eq!(&file[12..16], &[4, 0, 0, 0]);
    assert_eq!(decode_blob(&file), Ok(&b"vote"[..]));
    assert_eq!(decode_blob(&encode_blob(b"")), Ok(&b""[..]));
}

#[test]
fn blob_with_trailing_or_missing_bytes_is_refused() {
    let mut file = encode_blob(b"vote");
    file.push(0);
    assert_eq!(decode_blob(&file), Err(Invalid::LengthMismatch { declared: 4, actual: 5 }));
    let file = encode_blob(b"vote");
    assert!(decode_blob(&file[..file.len() - 1]).is_err());
    assert!(matches!(decode_blob(&file[..3]), Err(Invalid::Short { .. })));
}

#[test]
fn invalid_reasons_read_well() {
    assert_eq!(Invalid::PayloadChecksum.to_string(), "payload checksum mismatch");
    assert_eq!(Invalid::Short { needed: 28, got: 3 }.to_string(), "short: needs 28 bytes, got 3");
    assert!(Invalid::TooLarge(5).to_string().contains("maximum"));
}

proptest! {
    #[test]
    fn any_single_byte_flip_of_a_record_is_detected(
        index in any::<u64>(),
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        position in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let mut bytes = record(index, &payload);
        let offset = position.index(bytes.len());
        bytes[offset] ^= mask;
        let detected = match decode_record_header(&bytes) {
            Err(_) => true,
            Ok(header) => {
                // Header intact means the flip is in the payload, unless the index moved.
                header.index != index
                    || header.verify_payload(&bytes[RECORD_HEADER_LEN..]).is_err()
            }
        };
        prop_assert!(detected, "flip at {} of {} undetected", offset, bytes.len());
    }

    #[test]
    fn any_single_byte_flip_of_a_blob_is_detected(
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        position in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let mut file = encode_blob(&payload);
        let offset = position.index(file.len());
        file[offset] ^= mask;
        prop_assert!(decode_blob(&file).is_err());
    }

    #[test]
    fn decoders_never_panic_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_record_header(&bytes);
        let _ = decode_segment_header(&bytes);
        let _ = decode_blob(&bytes);
    }
}
