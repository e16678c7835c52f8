//! The vtable: one function per slot of `struct wsrep_st`, each inside
//! `guard` so that no panic crosses the ABI. Only ordering does any work;
//! the slots a node with no peers has no use for answer as `libtandem.so`
//! does.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::Duration;

use wsrep_abi::*;

use crate::order::Seqno;
use crate::session::{lock, Null};
use crate::CAPABILITIES;

const NAME: &[u8] = b"Tandem null provider\0";
const VERSION: &[u8] = concat!("26.4.23(tandem-null-", env!("CARGO_PKG_VERSION"), ")\0").as_bytes();
const VENDOR: &[u8] = b"Tandem developers\0";

/// A causal wait with no timeout of its own (`repl.causal_read_timeout`'s
/// default).
const CAUSAL_TIMEOUT: Duration = Duration::from_secs(30);

fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// # Safety
/// `w` is the server's `wsrep_t` (or NULL).
unsafe fn null<'a>(w: *mut wsrep_t) -> Option<&'a Null> {
    // SAFETY: the caller's promise; `ctx` is ours from `init` to `free`.
    unsafe { w.as_ref().and_then(|w| (w.ctx as *const Null).as_ref()) }
}

macro_rules! with_null {
    ($w:expr, $fallback:expr, |$n:ident| $body:expr) => {
        guard($fallback, || match unsafe { null($w) } {
            Some($n) => $body,
            None => $fallback,
        })
    };
}

pub fn vtable() -> wsrep_t {
    wsrep_t {
        version: WSREP_INTERFACE_VERSION.as_ptr() as *const c_char,
        init: Some(init),
        capabilities: Some(capabilities),
        options_set: Some(options_set),
        options_get: Some(options_get),
        enc_set_key: Some(enc_set_key),
        connect: Some(connect),
        disconnect: Some(disconnect),
        recv: Some(recv),
        assign_read_view: Some(assign_read_view),
        certify: Some(certify),
        commit_order_enter: Some(commit_order_enter),
        commit_order_leave: Some(commit_order_leave),
        release: Some(release),
        replay_trx: Some(replay_trx),
        abort_certification: Some(abort_certification),
        rollback: Some(rollback),
        append_key: Some(append_key),
        append_data: Some(append_data),
        sync_wait: Some(sync_wait),
        last_committed_id: Some(last_committed_id),
        free_connection: Some(free_connection),
        to_execute_start: Some(to_execute_start),
        to_execute_end: Some(to_execute_end),
        preordered_collect: Some(preordered_collect),
        preordered_commit: Some(preordered_commit),
        sst_sent: Some(sst_sent),
        sst_received: Some(sst_received),
        snapshot: Some(snapshot),
        stats_get: Some(stats_get),
        stats_free: Some(stats_free),
        stats_reset: Some(stats_reset),
        pause: Some(pause),
        resume: Some(resume),
        desync: Some(desync),
        resync: Some(resync),
        lock: Some(lock_slot),
        unlock: Some(unlock),
        is_locked: Some(is_locked),
        provider_name: NAME.as_ptr() as *const c_char,
        provider_version: VERSION.as_ptr() as *const c_char,
        provider_vendor: VENDOR.as_ptr() as *const c_char,
        free: Some(free),
        dlh: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

unsafe extern "C" fn init(w: *mut wsrep_t, args: *const wsrep_init_args) -> wsrep_status_t {
    guard(WSREP_NODE_FAIL, || {
        // SAFETY: the server's handle and init arguments, or NULL.
        let (Some(w), Some(args)) = (unsafe { w.as_mut() }, unsafe { args.as_ref() }) else {
            return WSREP_NODE_FAIL;
        };
        // SAFETY: the server's arguments, valid for this call.
        let null = unsafe { Null::from_init(args) };
        if let Some(log) = args.logger_cb {
            let line = c"Tandem null provider: one node, commits ordered by a local counter; replicates nothing (for measurement only)";
            // SAFETY: the server's logger with a NUL-terminated line.
            unsafe { log(WSREP_LOG_INFO, line.as_ptr()) };
        }
        w.ctx = Box::into_raw(Box::new(null)) as *mut c_void;
        WSREP_OK
    })
}

unsafe extern "C" fn free(w: *mut wsrep_t) {
    guard((), || {
        // SAFETY: the server's handle; a second call finds `ctx` NULL.
        let Some(w) = (unsafe { w.as_mut() }) else { return };
        if !w.ctx.is_null() {
            // SAFETY: made by `init` with `Box::into_raw`; every recv thread
            // returned before the server frees the provider.
            drop(unsafe { Box::from_raw(w.ctx as *mut Null) });
            w.ctx = std::ptr::null_mut();
        }
    })
}

unsafe extern "C" fn capabilities(_w: *mut wsrep_t) -> wsrep_cap_t {
    CAPABILITIES
}

/// Every option is taken and none has an effect: this provider has nothing
/// to tune, and the bench hands it the same my.cnf as the others. It keeps
/// only the string set last, which `options_get` shows back (a real
/// provider merges each `SET` into what it holds).
unsafe extern "C" fn options_set(w: *mut wsrep_t, conf: *const c_char) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| {
        if !conf.is_null() {
            // SAFETY: the server's NUL-terminated string.
            *lock(&n.options) = unsafe { CStr::from_ptr(conf) }.to_owned();
        }
        WSREP_OK
    })
}

/// libc-allocated: the server frees it.
unsafe extern "C" fn options_get(w: *mut wsrep_t) -> *mut c_char {
    with_null!(w, std::ptr::null_mut(), |n| {
        let options: CString = lock(&n.options).clone();
        // SAFETY: a NUL-terminated string; strdup copies it into malloc'd memory.
        unsafe { libc::strdup(options.as_ptr()) }
    })
}

unsafe extern "C" fn enc_set_key(_w: *mut wsrep_t, _key: *const wsrep_enc_key_t) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn connect(
    w: *mut wsrep_t,
    _cluster_name: *const c_char,
    _cluster_url: *const c_char,
    _state_donor: *const c_char,
    _bootstrap: wsrep_bool_t,
) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| {
        n.connect();
        WSREP_OK
    })
}

unsafe extern "C" fn disconnect(w: *mut wsrep_t) -> wsrep_status_t {
    with_null!(w, WSREP_OK, |n| {
        n.disconnect();
        WSREP_OK
    })
}

unsafe extern "C" fn recv(w: *mut wsrep_t, recv_ctx: *mut c_void) -> wsrep_status_t {
    // SAFETY: the server's context for this applier thread.
    with_null!(w, WSREP_NODE_FAIL, |n| unsafe { n.receive(recv_ctx) })
}

unsafe extern "C" fn assign_read_view(
    _w: *mut wsrep_t,
    _handle: *mut wsrep_ws_handle_t,
    _rv: *const wsrep_gtid_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

/// # Safety
/// `meta` is NULL or the server's.
unsafe fn fill_meta(n: &Null, meta: *mut wsrep_trx_meta_t, seqno: Seqno, trx: u64, conn: u64) {
    // SAFETY: the caller's promise.
    if let Some(meta) = unsafe { meta.as_mut() } {
        meta.gtid = wsrep_gtid_t { uuid: n.group, seqno };
        meta.stid = wsrep_stid_t { node: n.node, trx, conn };
        meta.depends_on = seqno - 1;
    }
}

unsafe extern "C" fn certify(
    w: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    handle: *mut wsrep_ws_handle_t,
    _flags: u32,
    meta: *mut wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| {
        // SAFETY: the server's handle, or NULL.
        let Some(handle) = (unsafe { handle.as_mut() }) else { return WSREP_NODE_FAIL };
        let seqno = n.order.assign();
        n.replicated.fetch_add(1, Ordering::Relaxed);
        // The seqno rides in the handle to `release`.
        handle.opaque = seqno as usize as *mut c_void;
        // SAFETY: the server's meta, or NULL.
        unsafe { fill_meta(n, meta, seqno, handle.trx_id, conn_id) };
        WSREP_OK
    })
}

/// # Safety
/// `meta` is NULL or the server's.
unsafe fn seqno_of(meta: *const wsrep_trx_meta_t) -> Option<Seqno> {
    // SAFETY: the caller's promise.
    unsafe { meta.as_ref() }.map(|m| m.gtid.seqno).filter(|&s| s > 0)
}

unsafe extern "C" fn commit_order_enter(
    w: *mut wsrep_t,
    _handle: *const wsrep_ws_handle_t,
    meta: *const wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| match unsafe { seqno_of(meta) } {
        Some(seqno) => {
            n.order.enter_commit(seqno);
            WSREP_OK
        }
        None => WSREP_NODE_FAIL,
    })
}

unsafe extern "C" fn commit_order_leave(
    w: *mut wsrep_t,
    _handle: *const wsrep_ws_handle_t,
    meta: *const wsrep_trx_meta_t,
    _error: *const wsrep_buf_t,
) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| match unsafe { seqno_of(meta) } {
        Some(seqno) => {
            n.order.leave_commit(seqno);
            WSREP_OK
        }
        None => WSREP_NODE_FAIL,
    })
}

/// Called for every statement, mostly with handles never certified
/// (`opaque` NULL): those are nothing to release.
unsafe extern "C" fn release(w: *mut wsrep_t, handle: *mut wsrep_ws_handle_t) -> wsrep_status_t {
    with_null!(w, WSREP_OK, |n| {
        // SAFETY: the server's handle, or NULL.
        if let Some(handle) = unsafe { handle.as_mut() } {
            if !handle.opaque.is_null() {
                n.order.release(handle.opaque as usize as Seqno);
                handle.opaque = std::ptr::null_mut();
            }
        }
        WSREP_OK
    })
}

unsafe extern "C" fn replay_trx(
    _w: *mut wsrep_t,
    _handle: *const wsrep_ws_handle_t,
    _trx_ctx: *mut c_void,
) -> wsrep_status_t {
    // Nothing is ever aborted by a peer's write-set: there are no peers.
    WSREP_NODE_FAIL
}

unsafe extern "C" fn abort_certification(
    _w: *mut wsrep_t,
    _bf_seqno: wsrep_seqno_t,
    _victim_trx: wsrep_trx_id_t,
    victim_seqno: *mut wsrep_seqno_t,
) -> wsrep_status_t {
    guard(WSREP_OK, || {
        // SAFETY: the server's out-parameter, or NULL.
        if let Some(out) = unsafe { victim_seqno.as_mut() } {
            *out = WSREP_SEQNO_UNDEFINED;
        }
        WSREP_OK
    })
}

unsafe extern "C" fn rollback(_w: *mut wsrep_t, _trx: wsrep_trx_id_t, _data: *const wsrep_buf_t) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn append_key(
    _w: *mut wsrep_t,
    _handle: *mut wsrep_ws_handle_t,
    _keys: *const wsrep_key_t,
    _count: usize,
    _key_type: wsrep_key_type_t,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn append_data(
    _w: *mut wsrep_t,
    _handle: *mut wsrep_ws_handle_t,
    _data: *const wsrep_buf_t,
    _count: usize,
    _data_type: wsrep_data_type_t,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn sync_wait(
    w: *mut wsrep_t,
    upto: *mut wsrep_gtid_t,
    tout: c_int,
    gtid: *mut wsrep_gtid_t,
) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| {
        let timeout = u64::try_from(tout).map_or(CAUSAL_TIMEOUT, Duration::from_secs);
        // SAFETY: the server's gtid, or NULL.
        let upto = unsafe { upto.as_ref() }.map(|g| g.seqno).filter(|&s| s >= 0);
        match n.order.wait_causal(upto, timeout) {
            Ok(position) => {
                // SAFETY: the server's out-parameter, or NULL.
                if let Some(out) = unsafe { gtid.as_mut() } {
                    *out = wsrep_gtid_t { uuid: n.group, seqno: position };
                }
                WSREP_OK
            }
            Err(_) => WSREP_TRX_FAIL,
        }
    })
}

unsafe extern "C" fn last_committed_id(w: *mut wsrep_t, gtid: *mut wsrep_gtid_t) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| {
        // SAFETY: the server's out-parameter, or NULL.
        if let Some(out) = unsafe { gtid.as_mut() } {
            *out = wsrep_gtid_t { uuid: n.group, seqno: n.order.last_committed() };
        }
        WSREP_OK
    })
}

unsafe extern "C" fn free_connection(_w: *mut wsrep_t, _conn_id: wsrep_conn_id_t) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn to_execute_start(
    w: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    _keys: *const wsrep_key_t,
    _keys_num: usize,
    _action: *const wsrep_buf_t,
    _count: usize,
    _flags: u32,
    meta: *mut wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| {
        let seqno = n.order.assign();
        n.order.enter_isolation(seqno);
        lock(&n.toi).insert(conn_id, seqno);
        // SAFETY: the server's meta, or NULL.
        unsafe { fill_meta(n, meta, seqno, u64::MAX, conn_id) };
        WSREP_OK
    })
}

unsafe extern "C" fn to_execute_end(
    w: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    _error: *const wsrep_buf_t,
) -> wsrep_status_t {
    with_null!(w, WSREP_NODE_FAIL, |n| {
        let seqno = lock(&n.toi).remove(&conn_id);
        match seqno {
            Some(seqno) => {
                n.order.leave_isolation(seqno);
                WSREP_OK
            }
            None => WSREP_NODE_FAIL,
        }
    })
}

unsafe extern "C" fn preordered_collect(
    _w: *mut wsrep_t,
    _handle: *mut wsrep_po_handle_t,
    _data: *const wsrep_buf_t,
    _count: usize,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn preordered_commit(
    _w: *mut wsrep_t,
    _handle: *mut wsrep_po_handle_t,
    _source_id: *const wsrep_uuid_t,
    _flags: u32,
    _pa_range: c_int,
    _commit: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn sst_sent(_w: *mut wsrep_t, _state_id: *const wsrep_gtid_t, _rcode: c_int) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn sst_received(
    _w: *mut wsrep_t,
    _state_id: *const wsrep_gtid_t,
    _state: *const wsrep_buf_t,
    _rcode: c_int,
) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn snapshot(
    _w: *mut wsrep_t,
    _msg: *const wsrep_buf_t,
    _donor_spec: *const c_char,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn stats_get(w: *mut wsrep_t) -> *mut wsrep_stats_var {
    with_null!(w, std::ptr::null_mut(), |n| n.stats())
}

unsafe extern "C" fn stats_free(w: *mut wsrep_t, vars: *mut wsrep_stats_var) {
    with_null!(w, (), |n| n.free_stats(vars))
}

unsafe extern "C" fn stats_reset(_w: *mut wsrep_t) {}

/// The committed position, all commits held; exactly −1 is a failure.
unsafe extern "C" fn pause(w: *mut wsrep_t) -> wsrep_seqno_t {
    with_null!(w, -1, |n| n.order.pause())
}

unsafe extern "C" fn resume(w: *mut wsrep_t) -> wsrep_status_t {
    with_null!(w, WSREP_OK, |n| {
        n.order.resume();
        WSREP_OK
    })
}

unsafe extern "C" fn desync(_w: *mut wsrep_t) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn resync(_w: *mut wsrep_t) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn lock_slot(
    _w: *mut wsrep_t,
    _name: *const c_char,
    _shared: wsrep_bool_t,
    _owner: u64,
    _tout: i64,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn unlock(_w: *mut wsrep_t, _name: *const c_char, _owner: u64) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn is_locked(
    _w: *mut wsrep_t,
    _name: *const c_char,
    _conn: *mut u64,
    _node: *mut wsrep_uuid_t,
) -> wsrep_bool_t {
    false
}
