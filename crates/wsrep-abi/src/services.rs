//! Service structs and enums of the separately exported symbols (contract §1.2).

use core::ffi::c_int;
use core::marker::{PhantomData, PhantomPinned};

use crate::consts::*;
use crate::types::*;

/// What an allowlist check is about.
pub type wsrep_allowlist_key_t = c_int;
/// Remote IP address of an incoming connection (no port).
pub const WSREP_ALLOWLIST_KEY_IP: wsrep_allowlist_key_t = 0;
pub const WSREP_ALLOWLIST_KEY_SSL: wsrep_allowlist_key_t = 1;

/// Server-owned context of the allowlist service. Opaque: we only hand the pointer back.
#[repr(C)]
pub struct wsrep_allowlist_context_t {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Returns `WSREP_OK` if allowed, `WSREP_NOT_ALLOWED` if denied. MariaDB reads `value.ptr` as
/// a NUL-terminated string and ignores `len`, so the value must carry a NUL.
pub type wsrep_allowlist_cb_t = Option<
    unsafe extern "C" fn(
        context: *mut wsrep_allowlist_context_t,
        key: wsrep_allowlist_key_t,
        value: *const wsrep_buf_t,
    ) -> wsrep_status_t,
>;

/// Passed to `wsrep_init_allowlist_service_v1`. It is a static of the server that stays valid
/// until deinit, so the provider keeps the pointer rather than a copy.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_allowlist_service_v1_t {
    pub allowlist_cb: wsrep_allowlist_cb_t,
    pub context: *mut wsrep_allowlist_context_t,
}
assert_layout!(wsrep_allowlist_service_v1_t, size = 16, align = 8, allowlist_cb @ 0, context @ 8);

/// Argument of `wsrep_node_isolation_mode_set_v1` (`enum wsrep_node_isolation_mode`).
pub type wsrep_node_isolation_mode_t = c_int;
pub const WSREP_NODE_ISOLATION_NOT_ISOLATED: wsrep_node_isolation_mode_t = 0;
/// Sent from MariaDB's fatal-signal handler.
pub const WSREP_NODE_ISOLATION_ISOLATED: wsrep_node_isolation_mode_t = 1;
pub const WSREP_NODE_ISOLATION_FORCE_DISCONNECT: wsrep_node_isolation_mode_t = 2;

/// Result of `wsrep_node_isolation_mode_set_v1` (`enum wsrep_node_isolation_result`).
pub type wsrep_node_isolation_result_t = c_int;
pub const WSREP_NODE_ISOLATION_SUCCESS: wsrep_node_isolation_result_t = 0;
pub const WSREP_NODE_ISOLATION_INVALID_VALUE: wsrep_node_isolation_result_t = 1;
