//! Data structures passed across the boundary (contract §2.3).

use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};

use crate::consts::*;

/// Node, cluster or history id. 16 raw bytes, but the C type is a union with `size_t`, so it is
/// 8-byte aligned and every struct embedding it is laid out accordingly.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct wsrep_uuid_t {
    pub data: [u8; 16],
}
assert_layout!(wsrep_uuid_t, size = 16, align = 8, data @ 0);

pub const WSREP_UUID_UNDEFINED: wsrep_uuid_t = wsrep_uuid_t { data: [0; 16] };

/// Global transaction id: history (cluster) uuid plus global seqno.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct wsrep_gtid_t {
    pub uuid: wsrep_uuid_t,
    pub seqno: wsrep_seqno_t,
}
assert_layout!(wsrep_gtid_t, size = 24, align = 8, uuid @ 0, seqno @ 16);

pub const WSREP_GTID_UNDEFINED: wsrep_gtid_t =
    wsrep_gtid_t { uuid: WSREP_UUID_UNDEFINED, seqno: WSREP_SEQNO_UNDEFINED };

/// Source transaction id: which node, which transaction, which client connection.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct wsrep_stid_t {
    pub node: wsrep_uuid_t,
    pub trx: wsrep_trx_id_t,
    pub conn: wsrep_conn_id_t,
}
assert_layout!(wsrep_stid_t, size = 32, align = 8, node @ 0, trx @ 16, conn @ 24);

/// Ordering metadata of a write set. `certify`/`to_execute_start` receive it undefined
/// (all −1) and must fill it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct wsrep_trx_meta_t {
    pub gtid: wsrep_gtid_t,
    pub stid: wsrep_stid_t,
    pub depends_on: wsrep_seqno_t,
}
assert_layout!(wsrep_trx_meta_t, size = 64, align = 8, gtid @ 0, stid @ 24, depends_on @ 56);

/// Borrowed byte range owned by whoever passes it; valid only for the duration of the call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_buf_t {
    pub ptr: *const c_void,
    pub len: usize,
}
assert_layout!(wsrep_buf_t, size = 16, align = 8, ptr @ 0, len @ 8);

/// Per-transaction handle. `opaque` belongs to the provider; wsrep-lib stores it back only
/// from calls that take the handle mutably.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_ws_handle_t {
    pub trx_id: wsrep_trx_id_t,
    pub opaque: *mut c_void,
}
assert_layout!(wsrep_ws_handle_t, size = 16, align = 8, trx_id @ 0, opaque @ 8);

/// One certification key: an array of parts, most significant first (db, table, row).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_key_t {
    pub key_parts: *const wsrep_buf_t,
    pub key_parts_num: usize,
}
assert_layout!(wsrep_key_t, size = 16, align = 8, key_parts @ 0, key_parts_num @ 8);

/// Handle for the (unused by MariaDB) preordered API.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_po_handle_t {
    pub opaque: *mut c_void,
}
assert_layout!(wsrep_po_handle_t, size = 8, align = 8, opaque @ 0);

/// One cluster member in a view. Strings are NUL-terminated within their fixed arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_member_info_t {
    pub id: wsrep_uuid_t,
    pub name: [c_char; WSREP_MEMBER_NAME_LEN],
    pub incoming: [c_char; WSREP_INCOMING_LEN],
}
assert_layout!(wsrep_member_info_t, size = 304, align = 8, id @ 0, name @ 16, incoming @ 48);

/// A cluster view. Variable length: C declares `members[1]` but `memb_num` entries follow, so
/// allocate [`wsrep_view_info_size`] bytes and never copy it by value when `memb_num > 1`
/// (a Rust copy carries only `members[0]`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_view_info_t {
    /// History uuid and the seqno at which this view was delivered (−1 if non-primary).
    pub state_id: wsrep_gtid_t,
    /// Primary-component counter (`wsrep_cluster_conf_id`), −1 if non-primary.
    pub view: wsrep_seqno_t,
    pub status: wsrep_view_status_t,
    pub capabilities: wsrep_cap_t,
    /// Own index in `members`, −1 in the final view.
    pub my_idx: c_int,
    pub memb_num: c_int,
    /// Must stay within 0..=4 for MariaDB 10.11.
    pub proto_ver: c_int,
    pub members: [wsrep_member_info_t; 1],
}
assert_layout!(
    wsrep_view_info_t, size = 360, align = 8,
    state_id @ 0, view @ 24, status @ 32, capabilities @ 36, my_idx @ 40, memb_num @ 44,
    proto_ver @ 48, members @ 56,
);

/// Bytes to allocate for a view with `memb_num` members: the header plus `memb_num` member
/// records, but never less than `size_of::<wsrep_view_info_t>()` so that the declared
/// `members[1]` is always backed by memory (also for the 0-member final view).
#[must_use]
pub const fn wsrep_view_info_size(memb_num: usize) -> usize {
    let needed = offset_of!(wsrep_view_info_t, members) + memb_num * size_of::<wsrep_member_info_t>();
    let declared = size_of::<wsrep_view_info_t>();
    if needed > declared {
        needed
    } else {
        declared
    }
}

/// Value of a status variable; which member is live is given by `wsrep_stats_var::type_`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union wsrep_stats_value {
    pub _int64: i64,
    pub _double: f64,
    pub _string: *const c_char,
}
assert_layout!(wsrep_stats_value, size = 8, align = 8);

/// One entry of the array returned by `stats_get`; the array ends with a NULL `name`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsrep_stats_var {
    /// Variable name without the `wsrep_` prefix (the server adds it).
    pub name: *const c_char,
    pub type_: wsrep_var_type_t,
    pub value: wsrep_stats_value,
}
assert_layout!(wsrep_stats_var, size = 24, align = 8, name @ 0, type_ @ 8, value @ 16);

/// Encryption key; same shape as a buffer. Only used by the encryption service, which
/// MariaDB 10.11 never enables.
pub type wsrep_enc_key_t = wsrep_buf_t;

/// Initialisation vector of the encryption callback: 32 chars.
pub type wsrep_enc_iv_t = [c_char; 32];
assert_layout!(wsrep_enc_iv_t, size = 32, align = 1);

/// Per-stream encryption context handed to `encrypt_cb`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_enc_ctx_t {
    pub key: *const wsrep_enc_key_t,
    pub iv: *const wsrep_enc_iv_t,
    pub ctx: *mut c_void,
}
assert_layout!(wsrep_enc_ctx_t, size = 24, align = 8, key @ 0, iv @ 8, ctx @ 16);

/// Callback run by `wsrep_certify_v1` once the write set is ordered (never passed by 10.11).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_seq_cb_t {
    pub ctx: *mut c_void,
    pub fn_: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
}
assert_layout!(wsrep_seq_cb_t, size = 16, align = 8, ctx @ 0, fn_ @ 8);
