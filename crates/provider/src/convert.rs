//! Conversions between the C ABI and engine types. Every raw pointer from the
//! server is checked for NULL before use.

use std::ffi::{c_char, CStr};

use tandem_engine::client::Status;
use tandem_engine::types::{Gtid, Uuid};
use wsrep_abi::*;

/// # Safety
/// `p` must be NULL or a NUL-terminated string valid for the call.
pub unsafe fn string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// # Safety
/// `b` must be NULL or point to a `wsrep_buf_t` whose `ptr`/`len` are valid.
pub unsafe fn bytes<'a>(b: *const wsrep_buf_t) -> &'a [u8] {
    if b.is_null() || (*b).ptr.is_null() || (*b).len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts((*b).ptr as *const u8, (*b).len)
    }
}

/// # Safety
/// `bufs` must be NULL or point to `count` valid buffers.
pub unsafe fn buffers(bufs: *const wsrep_buf_t, count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    if !bufs.is_null() {
        for i in 0..count {
            out.extend_from_slice(bytes(bufs.add(i)));
        }
    }
    out
}

/// # Safety
/// `key` must point to a valid `wsrep_key_t`.
pub unsafe fn key_parts(key: *const wsrep_key_t) -> Vec<Vec<u8>> {
    let k = &*key;
    if k.key_parts.is_null() {
        return vec![];
    }
    (0..k.key_parts_num).map(|i| bytes(k.key_parts.add(i)).to_vec()).collect()
}

pub fn gtid_to_c(g: Gtid) -> wsrep_gtid_t {
    wsrep_gtid_t { uuid: wsrep_uuid_t { data: g.uuid.0 }, seqno: g.seqno }
}

/// # Safety
/// `g` must be NULL or point to a valid gtid.
pub unsafe fn gtid_from_c(g: *const wsrep_gtid_t) -> Gtid {
    if g.is_null() {
        Gtid::UNDEFINED
    } else {
        Gtid { uuid: Uuid((*g).uuid.data), seqno: (*g).seqno }
    }
}

pub fn status(s: Status) -> wsrep_status_t {
    match s {
        Status::Ok => WSREP_OK,
        Status::TrxMissing => WSREP_TRX_MISSING,
        Status::TrxFail => WSREP_TRX_FAIL,
        Status::BfAbort => WSREP_BF_ABORT,
        Status::SizeExceeded => WSREP_SIZE_EXCEEDED,
        Status::ConnFail => WSREP_CONN_FAIL,
        Status::NodeFail => WSREP_NODE_FAIL,
        Status::NotAllowed => WSREP_NOT_ALLOWED,
    }
}

/// Copies `s` into `dst` as a NUL-terminated, truncated C string.
pub fn fill_chars(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    dst[n] = 0;
}
