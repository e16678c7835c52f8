//! The provider vtable `struct wsrep_st` (contract §2.6) and the signatures of the exported
//! entry points (§1.1, §1.2).
//!
//! Slot order is the ABI: slot n lives at offset 8·n. Function slots are `Option<..>` because the
//! loader malloc's this struct and checks slots for NULL; the provider fills every one.

use core::ffi::{c_char, c_int, c_void};

use crate::callbacks::*;
use crate::consts::*;
use crate::services::*;
use crate::types::*;

/// `wsrep_t`: the provider's function table plus loader/provider data, copied by the
/// provider's `wsrep_loader` into memory the loader owns.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct wsrep_st {
    /// Must point to [`WSREP_INTERFACE_VERSION`].
    pub version: *const c_char,
    pub init: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, args: *const wsrep_init_args) -> wsrep_status_t>,
    pub capabilities: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_cap_t>,
    pub options_set: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, conf: *const c_char) -> wsrep_status_t>,
    /// Result is libc-`malloc`ed; the server `free()`s it.
    pub options_get: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> *mut c_char>,
    pub enc_set_key: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, key: *const wsrep_enc_key_t) -> wsrep_status_t>,
    pub connect: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            cluster_name: *const c_char,
            cluster_url: *const c_char,
            state_donor: *const c_char,
            bootstrap: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    pub disconnect: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_status_t>,
    pub recv: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, recv_ctx: *mut c_void) -> wsrep_status_t>,
    pub assign_read_view: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            handle: *mut wsrep_ws_handle_t,
            rv: *const wsrep_gtid_t,
        ) -> wsrep_status_t,
    >,
    pub certify: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            conn_id: wsrep_conn_id_t,
            ws_handle: *mut wsrep_ws_handle_t,
            flags: u32,
            meta: *mut wsrep_trx_meta_t,
        ) -> wsrep_status_t,
    >,
    pub commit_order_enter: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *const wsrep_ws_handle_t,
            meta: *const wsrep_trx_meta_t,
        ) -> wsrep_status_t,
    >,
    pub commit_order_leave: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *const wsrep_ws_handle_t,
            meta: *const wsrep_trx_meta_t,
            error: *const wsrep_buf_t,
        ) -> wsrep_status_t,
    >,
    pub release: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, ws_handle: *mut wsrep_ws_handle_t) -> wsrep_status_t>,
    pub replay_trx: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *const wsrep_ws_handle_t,
            trx_ctx: *mut c_void,
        ) -> wsrep_status_t,
    >,
    pub abort_certification: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            bf_seqno: wsrep_seqno_t,
            victim_trx: wsrep_trx_id_t,
            victim_seqno: *mut wsrep_seqno_t,
        ) -> wsrep_status_t,
    >,
    pub rollback: Option<
        unsafe extern "C" fn(wsrep: *mut wsrep_t, trx: wsrep_trx_id_t, data: *const wsrep_buf_t) -> wsrep_status_t,
    >,
    pub append_key: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *mut wsrep_ws_handle_t,
            keys: *const wsrep_key_t,
            count: usize,
            key_type: wsrep_key_type_t,
            copy: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    pub append_data: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            ws_handle: *mut wsrep_ws_handle_t,
            data: *const wsrep_buf_t,
            count: usize,
            data_type: wsrep_data_type_t,
            copy: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    pub sync_wait: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            upto: *mut wsrep_gtid_t,
            tout: c_int,
            gtid: *mut wsrep_gtid_t,
        ) -> wsrep_status_t,
    >,
    pub last_committed_id: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, gtid: *mut wsrep_gtid_t) -> wsrep_status_t>,
    pub free_connection: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, conn_id: wsrep_conn_id_t) -> wsrep_status_t>,
    pub to_execute_start: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            conn_id: wsrep_conn_id_t,
            keys: *const wsrep_key_t,
            keys_num: usize,
            action: *const wsrep_buf_t,
            count: usize,
            flags: u32,
            meta: *mut wsrep_trx_meta_t,
        ) -> wsrep_status_t,
    >,
    pub to_execute_end: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            conn_id: wsrep_conn_id_t,
            error: *const wsrep_buf_t,
        ) -> wsrep_status_t,
    >,
    pub preordered_collect: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            handle: *mut wsrep_po_handle_t,
            data: *const wsrep_buf_t,
            count: usize,
            copy: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    pub preordered_commit: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            handle: *mut wsrep_po_handle_t,
            source_id: *const wsrep_uuid_t,
            flags: u32,
            pa_range: c_int,
            commit: wsrep_bool_t,
        ) -> wsrep_status_t,
    >,
    pub sst_sent: Option<
        unsafe extern "C" fn(wsrep: *mut wsrep_t, state_id: *const wsrep_gtid_t, rcode: c_int) -> wsrep_status_t,
    >,
    pub sst_received: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            state_id: *const wsrep_gtid_t,
            state: *const wsrep_buf_t,
            rcode: c_int,
        ) -> wsrep_status_t,
    >,
    pub snapshot: Option<
        unsafe extern "C" fn(wsrep: *mut wsrep_t, msg: *const wsrep_buf_t, donor_spec: *const c_char) -> wsrep_status_t,
    >,
    /// NULL-`name`-terminated array, provider-owned until `stats_free`.
    pub stats_get: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> *mut wsrep_stats_var>,
    pub stats_free: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, var_array: *mut wsrep_stats_var)>,
    pub stats_reset: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t)>,
    /// Returns the paused seqno; exactly −1 means failure to wsrep-lib.
    pub pause: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_seqno_t>,
    pub resume: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_status_t>,
    pub desync: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_status_t>,
    pub resync: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t) -> wsrep_status_t>,
    pub lock: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            name: *const c_char,
            shared: wsrep_bool_t,
            owner: u64,
            tout: i64,
        ) -> wsrep_status_t,
    >,
    pub unlock: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t, name: *const c_char, owner: u64) -> wsrep_status_t>,
    pub is_locked: Option<
        unsafe extern "C" fn(
            wsrep: *mut wsrep_t,
            name: *const c_char,
            conn: *mut u64,
            node: *mut wsrep_uuid_t,
        ) -> wsrep_bool_t,
    >,
    pub provider_name: *const c_char,
    pub provider_version: *const c_char,
    pub provider_vendor: *const c_char,
    /// Called twice at unload (second time with `ctx` NULL): must be idempotent.
    pub free: Option<unsafe extern "C" fn(wsrep: *mut wsrep_t)>,
    /// dlopen handle, set by the loader.
    pub dlh: *mut c_void,
    /// Provider private context.
    pub ctx: *mut c_void,
}
pub type wsrep_t = wsrep_st;

assert_layout!(
    wsrep_st, size = 360, align = 8,
    version @ 0, init @ 8, capabilities @ 16, options_set @ 24, options_get @ 32,
    enc_set_key @ 40, connect @ 48, disconnect @ 56, recv @ 64, assign_read_view @ 72,
    certify @ 80, commit_order_enter @ 88, commit_order_leave @ 96, release @ 104,
    replay_trx @ 112, abort_certification @ 120, rollback @ 128, append_key @ 136,
    append_data @ 144, sync_wait @ 152, last_committed_id @ 160, free_connection @ 168,
    to_execute_start @ 176, to_execute_end @ 184, preordered_collect @ 192,
    preordered_commit @ 200, sst_sent @ 208, sst_received @ 216, snapshot @ 224,
    stats_get @ 232, stats_free @ 240, stats_reset @ 248, pause @ 256, resume @ 264,
    desync @ 272, resync @ 280, lock @ 288, unlock @ 296, is_locked @ 304,
    provider_name @ 312, provider_version @ 320, provider_vendor @ 328, free @ 336,
    dlh @ 344, ctx @ 352,
);

// ---------------------------------------------------------------------------------------------
// Signatures of the exported symbols. The provider crate can pin its `#[no_mangle]` functions
// to these with e.g. `const _: wsrep_loader_fun = wsrep_loader;`.

/// `wsrep_loader`: copy the vtable into `*wsrep`, return 0 (errno-style on failure).
pub type wsrep_loader_fun = unsafe extern "C" fn(wsrep: *mut wsrep_t) -> c_int;

/// `wsrep_init_allowlist_service_v1`: must return 0 or the server aborts.
pub type wsrep_init_allowlist_service_v1_fun =
    unsafe extern "C" fn(service: *mut wsrep_allowlist_service_v1_t) -> c_int;

/// `wsrep_deinit_allowlist_service_v1`.
pub type wsrep_deinit_allowlist_service_v1_fun = unsafe extern "C" fn();

/// `wsrep_node_isolation_mode_set_v1`: called from a signal handler, so async-signal-safe.
pub type wsrep_node_isolation_mode_set_v1_fun =
    unsafe extern "C" fn(mode: wsrep_node_isolation_mode_t) -> wsrep_node_isolation_result_t;

/// `wsrep_certify_v1` ([`WSREP_CERTIFY_V1`]): `certify` plus an optional ordering callback.
pub type wsrep_certify_v1_fun = unsafe extern "C" fn(
    wsrep: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    ws_handle: *mut wsrep_ws_handle_t,
    flags: u32,
    meta: *mut wsrep_trx_meta_t,
    seq_cb: *const wsrep_seq_cb_t,
) -> wsrep_status_t;
