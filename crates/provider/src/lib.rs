//! libtandem.so: the wsrep provider (interface 26) that MariaDB loads with
//! `wsrep_provider=`. A thin shell: it converts C types, guards against
//! panics, and hands every call to the engine. All `unsafe` of the project
//! lives in this crate.

mod convert;
mod group;
mod guard;
mod health;
mod logger;
mod recover;
mod server_app;
mod slots;

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use wsrep_abi::*;

pub use slots::vtable;

/// Capabilities of Galera 4's base protocol, and streaming replication
/// (`wsrep_trx_fragment_size > 0`; the server refuses it without STREAMING).
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

/// Read by the loader and by MTR's version check through `char**`.
#[no_mangle]
pub static wsrep_interface_version: CStrPtr = CStrPtr(WSREP_INTERFACE_VERSION.as_ptr() as *const c_char);

/// # Safety
/// Called by the wsrep loader with a writable `wsrep_t`.
#[no_mangle]
pub unsafe extern "C" fn wsrep_loader(hptr: *mut wsrep_t) -> c_int {
    guard::guard("wsrep_loader", libc::EINVAL, || {
        if hptr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-null, and the loader allocated a whole `wsrep_t`.
        unsafe { hptr.write(vtable()) };
        0
    })
}

/// The allowlist service the server lends us until deinit.
static ALLOWLIST: AtomicPtr<wsrep_allowlist_service_v1_t> = AtomicPtr::new(std::ptr::null_mut());

/// # Safety
/// `service` is the server's static allowlist service struct.
#[no_mangle]
pub unsafe extern "C" fn wsrep_init_allowlist_service_v1(service: *mut wsrep_allowlist_service_v1_t) -> c_int {
    ALLOWLIST.store(service, Ordering::Release);
    0
}

#[no_mangle]
pub extern "C" fn wsrep_deinit_allowlist_service_v1() {
    ALLOWLIST.store(std::ptr::null_mut(), Ordering::Release);
}

/// Asks the server's allowlist whether a peer at `ip` may connect to the
/// group port. No service (or no list configured): allowed, as with Galera.
/// The server's check may start a thread and read a table: call it off the
/// async runtime.
pub(crate) fn peer_allowed(ip: &str) -> bool {
    let service = ALLOWLIST.load(Ordering::Acquire);
    if service.is_null() {
        return true;
    }
    // MariaDB reads the value as a C string: it must end in NUL.
    let Ok(value) = std::ffi::CString::new(ip) else { return false };
    let buf = wsrep_buf_t { ptr: value.as_ptr() as *const std::ffi::c_void, len: ip.len() };
    // SAFETY: the server's static service struct stays valid until deinit,
    // which comes after free() has stopped every thread of ours.
    let service = unsafe { *service };
    let Some(check) = service.allowlist_cb else { return true };
    // SAFETY: a callback of the server, with its own context and a buffer
    // that outlives the call.
    unsafe { check(service.context, WSREP_ALLOWLIST_KEY_IP, &buf) == WSREP_OK }
}

static ISOLATION: AtomicI32 = AtomicI32::new(WSREP_NODE_ISOLATION_NOT_ISOLATED);

/// Called from the server's fatal-signal handler: async-signal-safe, so it
/// only records the mode.
#[no_mangle]
pub extern "C" fn wsrep_node_isolation_mode_set_v1(mode: wsrep_node_isolation_mode_t) -> wsrep_node_isolation_result_t {
    if !(WSREP_NODE_ISOLATION_NOT_ISOLATED..=WSREP_NODE_ISOLATION_FORCE_DISCONNECT).contains(&mode) {
        return WSREP_NODE_ISOLATION_INVALID_VALUE;
    }
    ISOLATION.store(mode, Ordering::Relaxed);
    WSREP_NODE_ISOLATION_SUCCESS
}
