use core::mem::size_of;

use crate::*;

#[test]
fn view_info_size_covers_all_members() {
    assert_eq!(size_of::<wsrep_member_info_t>(), 304);
    // The declared struct already holds one member; 0 members must not shrink below it.
    assert_eq!(wsrep_view_info_size(0), 360);
    assert_eq!(wsrep_view_info_size(1), 360);
    assert_eq!(wsrep_view_info_size(2), 56 + 2 * 304);
    assert_eq!(wsrep_view_info_size(3), 968);
    // Usable in const context (e.g. fixed-size buffers for small views).
    const FIVE: usize = wsrep_view_info_size(5);
    assert_eq!(FIVE, 56 + 5 * 304);
}

const FLAGS: [u32; 10] = [
    WSREP_FLAG_TRX_END,
    WSREP_FLAG_ROLLBACK,
    WSREP_FLAG_ISOLATION,
    WSREP_FLAG_PA_UNSAFE,
    WSREP_FLAG_COMMUTATIVE,
    WSREP_FLAG_NATIVE,
    WSREP_FLAG_TRX_START,
    WSREP_FLAG_TRX_PREPARE,
    WSREP_FLAG_SNAPSHOT,
    WSREP_FLAG_IMPLICIT_DEPS,
];

#[test]
fn flags_are_distinct_bits_and_mask_is_exactly_their_union() {
    let mut union = 0u32;
    for (bit, flag) in FLAGS.iter().enumerate() {
        assert_eq!(*flag, 1 << bit, "flag {bit} out of order");
        assert_eq!(union & flag, 0, "flag {bit} overlaps");
        union |= flag;
    }
    assert_eq!(union, WSREP_FLAGS_MASK);
    // The combinations the contract quotes from observed traces.
    assert_eq!(WSREP_FLAG_TRX_START | WSREP_FLAG_TRX_END, 0x41);
    assert_eq!(WSREP_FLAG_TRX_END | WSREP_FLAG_PA_UNSAFE, 0x9);
}

#[test]
fn capability_bits_are_distinct_and_in_bit_order() {
    let mut union: wsrep_cap_t = 0;
    for (bit, (cap, name)) in WSREP_CAPS.iter().enumerate() {
        assert_eq!(*cap, 1 << bit, "{name} out of order");
        assert_eq!(union & cap, 0, "{name} overlaps");
        assert!(!name.is_empty() && !name.starts_with("WSREP_"));
        union |= cap;
    }
    assert_eq!(union, (1 << 18) - 1);
    assert_eq!(WSREP_CAP_NBO, 1 << 17);
}

#[test]
fn undefined_ids() {
    assert_eq!(WSREP_UUID_UNDEFINED.data, [0; 16]);
    assert_eq!(WSREP_UUID_UNDEFINED, wsrep_uuid_t::default());
    assert_eq!(WSREP_GTID_UNDEFINED.uuid, WSREP_UUID_UNDEFINED);
    assert_eq!(WSREP_GTID_UNDEFINED.seqno, -1);
    assert_eq!(WSREP_SEQNO_UNDEFINED, -1);
}

#[test]
fn strings_are_nul_terminated_c_strings() {
    let all: [(&[u8], &str); 5] = [
        (WSREP_INTERFACE_VERSION, "26"),
        (WSREP_NONE, "none"),
        (WSREP_STATE_TRANSFER_TRIVIAL, "trivial"),
        (WSREP_STATE_TRANSFER_NONE, "none"),
        (WSREP_CERTIFY_V1, "wsrep_certify_v1"),
    ];
    for (bytes, text) in all {
        let c = core::ffi::CStr::from_bytes_with_nul(bytes).expect("one trailing NUL");
        assert_eq!(c.to_str().unwrap(), text);
    }
}

#[test]
fn enum_values_match_contract() {
    assert_eq!([WSREP_OK, WSREP_WARNING, WSREP_TRX_MISSING, WSREP_TRX_FAIL, WSREP_BF_ABORT], [0, 1, 2, 3, 4]);
    assert_eq!([WSREP_SIZE_EXCEEDED, WSREP_CONN_FAIL, WSREP_NODE_FAIL, WSREP_FATAL], [5, 6, 7, 8]);
    assert_eq!([WSREP_NOT_IMPLEMENTED, WSREP_NOT_ALLOWED], [9, 10]);
    assert_eq!([WSREP_MEMBER_UNDEFINED, WSREP_MEMBER_ERROR, WSREP_MEMBER_MAX], [0, 5, 6]);
    assert_eq!([WSREP_VIEW_PRIMARY, WSREP_VIEW_DISCONNECTED, WSREP_VIEW_MAX], [0, 2, 3]);
    assert_eq!([WSREP_KEY_SHARED, WSREP_KEY_EXCLUSIVE], [0, 3]);
    assert_eq!([WSREP_LOG_FATAL, WSREP_LOG_DEBUG], [0, 4]);
    assert_eq!([WSREP_ALLOWLIST_KEY_IP, WSREP_ALLOWLIST_KEY_SSL], [0, 1]);
    assert_eq!(WSREP_NODE_ISOLATION_FORCE_DISCONNECT, 2);
    assert_eq!(WSREP_NODE_ISOLATION_INVALID_VALUE, 1);
}

#[test]
fn vtable_has_45_pointer_slots() {
    assert_eq!(size_of::<wsrep_t>(), 45 * size_of::<usize>());
    // NULL function slots are representable (the loader checks for them).
    assert_eq!(size_of::<wsrep_log_cb_t>(), size_of::<usize>());
    assert_eq!(size_of::<Option<wsrep_loader_fun>>(), size_of::<usize>());
}
