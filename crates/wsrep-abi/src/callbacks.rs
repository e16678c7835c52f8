//! Server callbacks (provider → server, contract §2.5) and `struct wsrep_init_args` (§2.4).
//!
//! Every callback is `Option<..>` because the server may leave it NULL (MariaDB 10.11 does so
//! for `encrypt_cb` and `unordered_cb`); a NULL must be representable without UB.
//! The provider must never unwind into any of them.

use core::ffi::{c_char, c_int, c_void};

use crate::consts::*;
use crate::types::*;

/// Log sink; any thread.
pub type wsrep_log_cb_t = Option<unsafe extern "C" fn(level: wsrep_log_level_t, msg: *const c_char)>;

/// First primary view after (re)connect; `view.my_idx` must be valid.
pub type wsrep_connected_cb_t =
    Option<unsafe extern "C" fn(app_ctx: *mut c_void, view: *const wsrep_view_info_t) -> wsrep_cb_status_t>;

/// Every ordered view change, from a thread inside `recv()` with its `recv_ctx`.
pub type wsrep_view_cb_t = Option<
    unsafe extern "C" fn(
        app_ctx: *mut c_void,
        recv_ctx: *mut c_void,
        view: *const wsrep_view_info_t,
        state: *const c_char,
        state_len: usize,
    ) -> wsrep_cb_status_t,
>;

/// Joiner asks the server for its SST request; the returned buffer is libc-`malloc`ed and the
/// provider must `free()` it.
pub type wsrep_sst_request_cb_t = Option<
    unsafe extern "C" fn(app_ctx: *mut c_void, sst_req: *mut *mut c_void, sst_req_len: *mut usize) -> wsrep_cb_status_t,
>;

/// Encryption service hook; never installed by MariaDB 10.11. Returns a plain int.
pub type wsrep_encrypt_cb_t = Option<
    unsafe extern "C" fn(
        app_ctx: *mut c_void,
        enc_ctx: *mut wsrep_enc_ctx_t,
        input: *const wsrep_buf_t,
        output: *mut c_void,
        direction: wsrep_enc_direction_t,
        last: wsrep_bool_t,
    ) -> c_int,
>;

/// Apply and commit one write set inside the call.
pub type wsrep_apply_cb_t = Option<
    unsafe extern "C" fn(
        recv_ctx: *mut c_void,
        ws_handle: *const wsrep_ws_handle_t,
        flags: u32,
        data: *const wsrep_buf_t,
        meta: *const wsrep_trx_meta_t,
        exit_loop: *mut wsrep_bool_t,
    ) -> wsrep_cb_status_t,
>;

/// Unordered data; NULL in MariaDB 10.11, never call it.
pub type wsrep_unordered_cb_t =
    Option<unsafe extern "C" fn(recv_ctx: *mut c_void, data: *const wsrep_buf_t) -> wsrep_cb_status_t>;

/// Donor side of SST/IST; the server starts the donor script and returns quickly.
pub type wsrep_sst_donate_cb_t = Option<
    unsafe extern "C" fn(
        app_ctx: *mut c_void,
        recv_ctx: *mut c_void,
        str_msg: *const wsrep_buf_t,
        state_id: *const wsrep_gtid_t,
        state: *const wsrep_buf_t,
        bypass: wsrep_bool_t,
    ) -> wsrep_cb_status_t,
>;

/// Node is synced: the server becomes ready for clients only after this.
pub type wsrep_synced_cb_t = Option<unsafe extern "C" fn(app_ctx: *mut c_void) -> wsrep_cb_status_t>;

/// Arguments of `init()`. A stack object of the server: copy out everything you keep,
/// including the strings and `*state_id`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_init_args {
    /// Passed back unchanged as `app_ctx` to the app callbacks.
    pub app_ctx: *mut c_void,
    pub node_name: *const c_char,
    pub node_address: *const c_char,
    pub node_incoming: *const c_char,
    /// Provider state directory, with a trailing `/`.
    pub data_dir: *const c_char,
    /// Raw `wsrep_provider_options` string (may be empty).
    pub options: *const c_char,
    /// Maximum application protocol version (4 for MariaDB 10.11).
    pub proto_ver: c_int,
    pub state_id: *const wsrep_gtid_t,
    pub state: *const wsrep_buf_t,
    pub logger_cb: wsrep_log_cb_t,
    pub connected_cb: wsrep_connected_cb_t,
    pub view_cb: wsrep_view_cb_t,
    pub sst_request_cb: wsrep_sst_request_cb_t,
    pub encrypt_cb: wsrep_encrypt_cb_t,
    pub apply_cb: wsrep_apply_cb_t,
    pub unordered_cb: wsrep_unordered_cb_t,
    pub sst_donate_cb: wsrep_sst_donate_cb_t,
    pub synced_cb: wsrep_synced_cb_t,
}
assert_layout!(
    wsrep_init_args, size = 144, align = 8,
    app_ctx @ 0, node_name @ 8, node_address @ 16, node_incoming @ 24, data_dir @ 32,
    options @ 40, proto_ver @ 48, state_id @ 56, state @ 64, logger_cb @ 72, connected_cb @ 80,
    view_cb @ 88, sst_request_cb @ 96, encrypt_cb @ 104, apply_cb @ 112, unordered_cb @ 120,
    sst_donate_cb @ 128, synced_cb @ 136,
);
