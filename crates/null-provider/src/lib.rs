//! `libtandem_null.so`: the floor. A wsrep provider for one node that
//! orders commits by a local counter ([`order`]), with no group, no
//! certification index, no network and no log. What a server costs with it
//! loaded is what the server's own wsrep work costs; `tandem bench` reports
//! every provider against it (issue "The hot path at its floor"). It is
//! built for the bench and scripts only and never shipped: it replicates
//! nothing.
//!
//! The server drives it as it drives any provider (the call sequence is in
//! docs/architecture.md and the provider contract): `init`, `connect`, the
//! first `recv` announces a primary view of this one member and then
//! synced, client threads certify and commit in seqno order, `disconnect`
//! ends with a final view from a `recv` thread, then `free`.

pub mod order;
mod session;
mod slots;
mod stats;

use std::ffi::{c_char, c_int};

use wsrep_abi::*;

/// The same capabilities as `libtandem.so`, so that the server does the
/// same work with either (streaming, causal reads, pause, TOI).
pub const CAPABILITIES: wsrep_cap_t = WSREP_CAP_MULTI_MASTER
    | WSREP_CAP_CERTIFICATION
    | WSREP_CAP_PARALLEL_APPLYING
    | WSREP_CAP_TRX_REPLAY
    | WSREP_CAP_ISOLATION
    | WSREP_CAP_PAUSE
    | WSREP_CAP_CAUSAL_READS
    | WSREP_CAP_STREAMING;

/// A `const char*` that may live in a `static`.
#[repr(transparent)]
pub struct CStrPtr(pub *const c_char);
// SAFETY: points to immutable static bytes.
unsafe impl Sync for CStrPtr {}

/// Read by the loader through `char**`.
#[no_mangle]
pub static wsrep_interface_version: CStrPtr = CStrPtr(WSREP_INTERFACE_VERSION.as_ptr() as *const c_char);

/// # Safety
/// Called by the wsrep loader with a writable `wsrep_t`.
#[no_mangle]
pub unsafe extern "C" fn wsrep_loader(hptr: *mut wsrep_t) -> c_int {
    if hptr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: non-null, and the loader allocated a whole `wsrep_t`.
    unsafe { hptr.write(slots::vtable()) };
    0
}

/// MariaDB 10.11 aborts without the allowlist symbols; there is no
/// listener to guard, so the service is not kept.
///
/// # Safety
/// Any pointer: it is not read.
#[no_mangle]
pub unsafe extern "C" fn wsrep_init_allowlist_service_v1(_service: *mut wsrep_allowlist_service_v1_t) -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn wsrep_deinit_allowlist_service_v1() {}

#[no_mangle]
pub extern "C" fn wsrep_node_isolation_mode_set_v1(mode: wsrep_node_isolation_mode_t) -> wsrep_node_isolation_result_t {
    if (WSREP_NODE_ISOLATION_NOT_ISOLATED..=WSREP_NODE_ISOLATION_FORCE_DISCONNECT).contains(&mode) {
        WSREP_NODE_ISOLATION_SUCCESS
    } else {
        WSREP_NODE_ISOLATION_INVALID_VALUE
    }
}
