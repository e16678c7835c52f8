//! The vtable: one function per slot of `struct wsrep_st`, in slot order.
//! Each converts its arguments, calls the engine inside `guard`, and converts
//! the answer back. Slots the server never calls answer as Galera does.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::sync::Mutex;
use tandem_engine::client::TRACKED;
use tandem_engine::node::{ConnectError, GroupFactory, Node, NodeConfig, RecvEnd};
use tandem_engine::saved_state::{local_data, LocalData, SavedState};
use tandem_engine::stats::StatValue;
use tandem_engine::writeset::KeyType;
use wsrep_abi::*;

use crate::convert::*;
use crate::guard::guard;
use crate::server_app::ServerApp;

const NAME: &[u8] = b"Tandem\0";
/// MTR parses `26.<minor>.<release>`; we implement Galera 26.4's behaviour.
const VERSION: &[u8] = concat!("26.4.23(tandem-", env!("CARGO_PKG_VERSION"), ")\0").as_bytes();
const VENDOR: &[u8] = b"Tandem developers\0";

/// What `wsrep->ctx` points to between `init` and `free`.
struct Provider {
    node: Node,
    /// Status arrays handed to the server, by address, until `stats_free`.
    stats: Mutex<HashMap<usize, StatsArray>>,
    /// The health, agent-check and metrics listeners (`health.*`), if any.
    health: Mutex<Option<tandem_health::server::Listeners>>,
}

struct StatsArray {
    vars: Vec<wsrep_stats_var>,
    _strings: Vec<CString>,
}

// SAFETY: the raw pointers in `StatsArray` point into its own `_strings`.
unsafe impl Send for StatsArray {}

/// # Safety
/// `w` is the server's `wsrep_t` (or NULL).
unsafe fn provider<'a>(w: *mut wsrep_t) -> Option<&'a Provider> {
    if w.is_null() || (*w).ctx.is_null() {
        None
    } else {
        Some(&*((*w).ctx as *const Provider))
    }
}

macro_rules! with_node {
    ($w:expr, $name:literal, $fallback:expr, |$node:ident| $body:expr) => {
        guard($name, $fallback, || match unsafe { provider($w) } {
            Some(p) => {
                let $node = &p.node;
                $body
            }
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
        lock: Some(lock),
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

fn group_factory() -> GroupFactory {
    crate::group::factory()
}

unsafe extern "C" fn init(w: *mut wsrep_t, args: *const wsrep_init_args) -> wsrep_status_t {
    guard("init", WSREP_NODE_FAIL, || unsafe {
        if w.is_null() || args.is_null() {
            return WSREP_NODE_FAIL;
        }
        let a = &*args;
        crate::logger::install(a.logger_cb);
        let data_dir = PathBuf::from(string(a.data_dir));
        let start_position = start_position(gtid_from_c(a.state_id), &data_dir);
        let config = NodeConfig {
            name: string(a.node_name),
            node_address: string(a.node_address),
            incoming: string(a.node_incoming),
            data_dir,
            options: string(a.options),
            start_position,
            arbitrator: false,
        };
        let app = ServerApp {
            app_ctx: a.app_ctx as usize,
            connected_cb: a.connected_cb,
            view_cb: a.view_cb,
            sst_request_cb: a.sst_request_cb,
            apply_cb: a.apply_cb,
            sst_donate_cb: a.sst_donate_cb,
            synced_cb: a.synced_cb,
        };
        log::info!(
            "Tandem {} initializing: node '{}' at '{}', data dir '{}'",
            env!("CARGO_PKG_VERSION"),
            config.name,
            config.node_address,
            config.data_dir.display()
        );
        match Node::new(Arc::new(app), config, group_factory()) {
            Ok(node) => {
                let health = match crate::health::start(&node) {
                    Ok(listeners) => listeners,
                    Err(e) => {
                        log::error!("{e}");
                        node.shutdown();
                        return WSREP_NODE_FAIL;
                    }
                };
                let p = Box::new(Provider { node, stats: Mutex::new(HashMap::new()), health: Mutex::new(health) });
                (*w).ctx = Box::into_raw(p) as *mut c_void;
                WSREP_OK
            }
            Err(e) => {
                log::error!("Bad wsrep_provider_options: {e}");
                WSREP_NODE_FAIL
            }
        }
    })
}

/// The server's start position, or the one `--wsrep-recover` reads when
/// the node crashed and the server passed none (the engine refuses to join
/// if that fails too).
fn start_position(given: tandem_engine::types::Gtid, data_dir: &std::path::Path) -> tandem_engine::types::Gtid {
    match local_data(given, SavedState::load(data_dir)) {
        LocalData::Unknown { .. } => match crate::recover::recover_position(data_dir) {
            Ok(position) => position,
            Err(why) => {
                log::warn!("Could not recover the position of the local data: {why}");
                given
            }
        },
        _ => given,
    }
}

unsafe extern "C" fn capabilities(_w: *mut wsrep_t) -> wsrep_cap_t {
    crate::CAPABILITIES
}

unsafe extern "C" fn options_set(w: *mut wsrep_t, conf: *const c_char) -> wsrep_status_t {
    with_node!(w, "options_set", WSREP_NODE_FAIL, |node| {
        let text = unsafe { string(conf) };
        match node.set_options(&text) {
            Ok(()) => WSREP_OK,
            Err(e) => {
                log::error!("{e}");
                WSREP_NODE_FAIL
            }
        }
    })
}

unsafe extern "C" fn options_get(w: *mut wsrep_t) -> *mut c_char {
    with_node!(w, "options_get", std::ptr::null_mut(), |node| malloc_string(&node.options_text()))
}

/// The server frees this with libc `free()`.
fn malloc_string(s: &str) -> *mut c_char {
    let bytes = s.as_bytes();
    // SAFETY: allocate len+1 bytes, copy, terminate.
    unsafe {
        let p = libc::malloc(bytes.len() + 1) as *mut u8;
        if p.is_null() {
            return std::ptr::null_mut();
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        *p.add(bytes.len()) = 0;
        p as *mut c_char
    }
}

unsafe extern "C" fn enc_set_key(_w: *mut wsrep_t, _key: *const wsrep_enc_key_t) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn connect(
    w: *mut wsrep_t,
    name: *const c_char,
    url: *const c_char,
    donor: *const c_char,
    bootstrap: wsrep_bool_t,
) -> wsrep_status_t {
    with_node!(w, "connect", WSREP_NODE_FAIL, |node| {
        let (name, url, donor) = unsafe { (string(name), string(url), string(donor)) };
        match node.connect(&name, &url, &donor, bootstrap) {
            Ok(()) => WSREP_OK,
            // Already logged with its reason.
            Err(ConnectError::Refused(_)) => WSREP_NODE_FAIL,
            // NODE_FAIL too, as Galera answers any failed connect (a bad
            // address, a port in use): the server logs the code, and
            // tooling and MariaDB's tests expect Galera's.
            Err(e) => {
                log::error!("Failed to connect to cluster: {e}");
                WSREP_NODE_FAIL
            }
        }
    })
}

unsafe extern "C" fn disconnect(w: *mut wsrep_t) -> wsrep_status_t {
    with_node!(w, "disconnect", WSREP_OK, |node| {
        node.disconnect();
        WSREP_OK
    })
}

unsafe extern "C" fn recv(w: *mut wsrep_t, ctx: *mut c_void) -> wsrep_status_t {
    with_node!(w, "recv", WSREP_FATAL, |node| match node.recv(ctx as usize) {
        RecvEnd::Closed => WSREP_OK,
        RecvEnd::Fatal => WSREP_FATAL,
        RecvEnd::RestartRequired => {
            // Returning would leave mariadbd waiting forever for a state it
            // will never get (its datadir is already emptied). Galera aborts
            // here too; init systems restart an aborted server (Debian's unit
            // has Restart=on-abort) and the new process asks for a new SST.
            log::error!("Will never receive state. Need to abort.");
            // As Galera does: the server's crash handler would report an
            // orderly abort as a crash (a backtrace, "got signal 6").
            // SAFETY: restoring the default action of a signal is
            // async-signal-safe and touches no Rust state.
            unsafe { libc::signal(libc::SIGABRT, libc::SIG_DFL) };
            std::process::abort()
        }
    })
}

unsafe extern "C" fn assign_read_view(
    _w: *mut wsrep_t,
    _h: *mut wsrep_ws_handle_t,
    _rv: *const wsrep_gtid_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn certify(
    w: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    handle: *mut wsrep_ws_handle_t,
    flags: u32,
    meta: *mut wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_node!(w, "certify", WSREP_NODE_FAIL, |node| unsafe {
        if handle.is_null() {
            return WSREP_NODE_FAIL;
        }
        let trx_id = (*handle).trx_id;
        (*handle).opaque = TRACKED as *mut c_void;
        let (status, ordered) = node.certify(conn_id, trx_id, flags);
        fill_meta(meta, ordered, trx_id, conn_id);
        crate::convert::status(status)
    })
}

/// # Safety
/// `meta` is NULL or the server's meta struct.
unsafe fn fill_meta(meta: *mut wsrep_trx_meta_t, o: tandem_engine::client::Ordered, trx_id: u64, conn_id: u64) {
    if meta.is_null() {
        return;
    }
    (*meta).gtid = gtid_to_c(o.gtid);
    (*meta).stid = wsrep_stid_t { node: wsrep_uuid_t { data: o.source.0 }, trx: trx_id, conn: conn_id };
    (*meta).depends_on = o.depends_on;
}

unsafe extern "C" fn commit_order_enter(
    w: *mut wsrep_t,
    handle: *const wsrep_ws_handle_t,
    meta: *const wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_node!(w, "commit_order_enter", WSREP_NODE_FAIL, |node| unsafe {
        if handle.is_null() || meta.is_null() {
            return WSREP_NODE_FAIL;
        }
        let s = node.commit_order_enter((*handle).trx_id, (*handle).opaque as usize, (*meta).gtid.seqno);
        crate::convert::status(s)
    })
}

unsafe extern "C" fn commit_order_leave(
    w: *mut wsrep_t,
    _handle: *const wsrep_ws_handle_t,
    meta: *const wsrep_trx_meta_t,
    error: *const wsrep_buf_t,
) -> wsrep_status_t {
    with_node!(w, "commit_order_leave", WSREP_NODE_FAIL, |node| unsafe {
        if meta.is_null() {
            return WSREP_NODE_FAIL;
        }
        crate::convert::status(node.commit_order_leave((*meta).gtid.seqno, bytes(error)))
    })
}

unsafe extern "C" fn release(w: *mut wsrep_t, handle: *mut wsrep_ws_handle_t) -> wsrep_status_t {
    with_node!(w, "release", WSREP_OK, |node| unsafe {
        if handle.is_null() || (*handle).opaque.is_null() {
            return WSREP_OK; // the common case: a transaction we never saw
        }
        let s = node.release((*handle).trx_id, (*handle).opaque as usize);
        (*handle).opaque = std::ptr::null_mut();
        crate::convert::status(s)
    })
}

unsafe extern "C" fn replay_trx(
    w: *mut wsrep_t,
    handle: *const wsrep_ws_handle_t,
    trx_ctx: *mut c_void,
) -> wsrep_status_t {
    with_node!(w, "replay_trx", WSREP_NODE_FAIL, |node| unsafe {
        if handle.is_null() {
            return WSREP_NODE_FAIL;
        }
        crate::convert::status(node.replay((*handle).trx_id, trx_ctx as usize))
    })
}

unsafe extern "C" fn abort_certification(
    w: *mut wsrep_t,
    bf_seqno: wsrep_seqno_t,
    victim: wsrep_trx_id_t,
    victim_seqno: *mut wsrep_seqno_t,
) -> wsrep_status_t {
    with_node!(w, "abort_certification", WSREP_OK, |node| unsafe {
        let (status, seqno) = node.abort_certification(bf_seqno, victim);
        if !victim_seqno.is_null() {
            *victim_seqno = seqno;
        }
        crate::convert::status(status)
    })
}

/// Only streaming transactions are rolled back through the provider: their
/// fragments are already on the other nodes. `data` is always NULL from
/// wsrep-lib, and a rollback fragment carries none.
unsafe extern "C" fn rollback(w: *mut wsrep_t, trx: wsrep_trx_id_t, _data: *const wsrep_buf_t) -> wsrep_status_t {
    with_node!(w, "rollback", WSREP_NODE_FAIL, |node| crate::convert::status(node.rollback_stream(trx)))
}

unsafe extern "C" fn append_key(
    w: *mut wsrep_t,
    handle: *mut wsrep_ws_handle_t,
    keys: *const wsrep_key_t,
    count: usize,
    key_type: wsrep_key_type_t,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    with_node!(w, "append_key", WSREP_NODE_FAIL, |node| unsafe {
        let Some(kind) = KeyType::from_wsrep(key_type) else { return WSREP_NODE_FAIL };
        if handle.is_null() || (keys.is_null() && count > 0) {
            return WSREP_NODE_FAIL;
        }
        for i in 0..count {
            node.append_key((*handle).trx_id, key_parts(keys.add(i)), kind);
        }
        (*handle).opaque = TRACKED as *mut c_void;
        WSREP_OK
    })
}

unsafe extern "C" fn append_data(
    w: *mut wsrep_t,
    handle: *mut wsrep_ws_handle_t,
    data: *const wsrep_buf_t,
    count: usize,
    _data_type: wsrep_data_type_t,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    with_node!(w, "append_data", WSREP_NODE_FAIL, |node| unsafe {
        if handle.is_null() {
            return WSREP_NODE_FAIL;
        }
        for i in 0..count {
            node.append_data((*handle).trx_id, bytes(data.add(i)));
        }
        (*handle).opaque = TRACKED as *mut c_void;
        WSREP_OK
    })
}

unsafe extern "C" fn sync_wait(
    w: *mut wsrep_t,
    upto: *mut wsrep_gtid_t,
    tout: c_int,
    gtid: *mut wsrep_gtid_t,
) -> wsrep_status_t {
    with_node!(w, "sync_wait", WSREP_NODE_FAIL, |node| unsafe {
        let upto = if upto.is_null() { None } else { Some(gtid_from_c(upto)) };
        let timeout = match tout {
            t if t < 0 => None,
            c_int::MAX => Some(Duration::from_secs(u64::MAX / 4)),
            t => Some(Duration::from_secs(t as u64)),
        };
        match node.sync_wait(upto, timeout) {
            Ok(now) => {
                if !gtid.is_null() {
                    *gtid = gtid_to_c(now);
                }
                WSREP_OK
            }
            Err(s) => crate::convert::status(s),
        }
    })
}

unsafe extern "C" fn last_committed_id(w: *mut wsrep_t, gtid: *mut wsrep_gtid_t) -> wsrep_status_t {
    with_node!(w, "last_committed_id", WSREP_OK, |node| unsafe {
        if !gtid.is_null() {
            *gtid = gtid_to_c(node.last_committed());
        }
        WSREP_OK
    })
}

unsafe extern "C" fn free_connection(_w: *mut wsrep_t, _conn: wsrep_conn_id_t) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn to_execute_start(
    w: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    keys: *const wsrep_key_t,
    keys_num: usize,
    action: *const wsrep_buf_t,
    count: usize,
    flags: u32,
    meta: *mut wsrep_trx_meta_t,
) -> wsrep_status_t {
    with_node!(w, "to_execute_start", WSREP_NODE_FAIL, |node| unsafe {
        let keys = if keys.is_null() { vec![] } else { (0..keys_num).map(|i| key_parts(keys.add(i))).collect() };
        let data = buffers(action, count);
        let (status, ordered) = node.to_execute_start(conn_id, keys, data, flags);
        fill_meta(meta, ordered, u64::MAX, conn_id);
        crate::convert::status(status)
    })
}

unsafe extern "C" fn to_execute_end(
    w: *mut wsrep_t,
    conn_id: wsrep_conn_id_t,
    error: *const wsrep_buf_t,
) -> wsrep_status_t {
    with_node!(w, "to_execute_end", WSREP_NODE_FAIL, |node| unsafe {
        crate::convert::status(node.to_execute_end(conn_id, bytes(error)))
    })
}

unsafe extern "C" fn preordered_collect(
    _w: *mut wsrep_t,
    _h: *mut wsrep_po_handle_t,
    _d: *const wsrep_buf_t,
    _c: usize,
    _copy: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn preordered_commit(
    _w: *mut wsrep_t,
    _h: *mut wsrep_po_handle_t,
    _src: *const wsrep_uuid_t,
    _f: u32,
    _r: c_int,
    _c: wsrep_bool_t,
) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn sst_sent(w: *mut wsrep_t, state_id: *const wsrep_gtid_t, rcode: c_int) -> wsrep_status_t {
    with_node!(w, "sst_sent", WSREP_OK, |node| {
        node.sst_sent(unsafe { gtid_from_c(state_id) }, rcode);
        WSREP_OK
    })
}

unsafe extern "C" fn sst_received(
    w: *mut wsrep_t,
    state_id: *const wsrep_gtid_t,
    _state: *const wsrep_buf_t,
    rcode: c_int,
) -> wsrep_status_t {
    with_node!(w, "sst_received", WSREP_OK, |node| {
        node.sst_received(unsafe { gtid_from_c(state_id) }, rcode);
        WSREP_OK
    })
}

unsafe extern "C" fn snapshot(_w: *mut wsrep_t, _msg: *const wsrep_buf_t, _donor: *const c_char) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn stats_get(w: *mut wsrep_t) -> *mut wsrep_stats_var {
    guard("stats_get", std::ptr::null_mut(), || {
        let Some(p) = (unsafe { provider(w) }) else { return std::ptr::null_mut() };
        let mut array =
            build_stats(p.node.status().into_iter().filter(|(name, _)| !SERVER_REPORTS.contains(name)).collect());
        let ptr = array.vars.as_mut_ptr();
        p.stats.lock().unwrap_or_else(|e| e.into_inner()).insert(ptr as usize, array);
        ptr
    })
}

/// Statuses the server reports itself under the same `wsrep_` name: from
/// the provider too, `SHOW STATUS` would list the name twice (Galera 4 does
/// not report these; MTR galera_bf_abort_for_update reads one row). The
/// health endpoint still has them.
const SERVER_REPORTS: &[&str] = &["local_bf_aborts"];

fn build_stats(values: Vec<(&'static str, StatValue)>) -> StatsArray {
    let mut strings = Vec::with_capacity(values.len() * 2);
    let mut vars = Vec::with_capacity(values.len() + 1);
    for (name, value) in values {
        let cname = CString::new(name).unwrap_or_default();
        let (type_, v) = match value {
            StatValue::Int(i) => (WSREP_VAR_INT64, wsrep_stats_value { _int64: i }),
            StatValue::Double(d) => (WSREP_VAR_DOUBLE, wsrep_stats_value { _double: d }),
            StatValue::Str(s) => {
                let cs = CString::new(s.replace('\0', " ")).unwrap_or_default();
                let v = wsrep_stats_value { _string: cs.as_ptr() };
                strings.push(cs);
                (WSREP_VAR_STRING, v)
            }
        };
        vars.push(wsrep_stats_var { name: cname.as_ptr(), type_, value: v });
        strings.push(cname);
    }
    vars.push(wsrep_stats_var {
        name: std::ptr::null(),
        type_: WSREP_VAR_INT64,
        value: wsrep_stats_value { _int64: 0 },
    });
    StatsArray { vars, _strings: strings }
}

unsafe extern "C" fn stats_free(w: *mut wsrep_t, vars: *mut wsrep_stats_var) {
    guard("stats_free", (), || {
        if let Some(p) = unsafe { provider(w) } {
            p.stats.lock().unwrap_or_else(|e| e.into_inner()).remove(&(vars as usize));
        }
    })
}

unsafe extern "C" fn stats_reset(w: *mut wsrep_t) {
    with_node!(w, "stats_reset", (), |node| node.reset_stats())
}

unsafe extern "C" fn pause(w: *mut wsrep_t) -> wsrep_seqno_t {
    with_node!(w, "pause", -1, |node| node.pause().max(0))
}

unsafe extern "C" fn resume(w: *mut wsrep_t) -> wsrep_status_t {
    with_node!(w, "resume", WSREP_OK, |node| {
        node.resume();
        WSREP_OK
    })
}

unsafe extern "C" fn desync(w: *mut wsrep_t) -> wsrep_status_t {
    with_node!(w, "desync", WSREP_TRX_FAIL, |node| crate::convert::status(node.desync()))
}

unsafe extern "C" fn resync(w: *mut wsrep_t) -> wsrep_status_t {
    with_node!(w, "resync", WSREP_OK, |node| crate::convert::status(node.resync()))
}

unsafe extern "C" fn lock(_w: *mut wsrep_t, _n: *const c_char, _s: wsrep_bool_t, _o: u64, _t: i64) -> wsrep_status_t {
    WSREP_NOT_IMPLEMENTED
}

unsafe extern "C" fn unlock(_w: *mut wsrep_t, _n: *const c_char, _o: u64) -> wsrep_status_t {
    WSREP_OK
}

unsafe extern "C" fn is_locked(
    _w: *mut wsrep_t,
    _n: *const c_char,
    _c: *mut u64,
    _node: *mut wsrep_uuid_t,
) -> wsrep_bool_t {
    false
}

/// Called twice at unload (the second time with ctx NULL). Stops every
/// thread we own: the library is unmapped right after.
unsafe extern "C" fn free(w: *mut wsrep_t) {
    guard("free", (), || unsafe {
        if w.is_null() || (*w).ctx.is_null() {
            return;
        }
        let p = Box::from_raw((*w).ctx as *mut Provider);
        (*w).ctx = std::ptr::null_mut();
        // The listeners read the node: they stop first.
        let listeners = p.health.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut listeners) = listeners {
            listeners.stop();
        }
        p.node.shutdown();
        drop(p);
    })
}
