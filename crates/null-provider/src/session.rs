//! The provider's context between `init` and `free`, and the one
//! connection's life: the first `recv` thread announces a primary view of
//! this member alone and then synced (the order Galera uses for a node
//! that bootstraps); `disconnect` wakes every `recv` thread, one of them
//! delivers the final view, and all return once it has.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::AtomicU64;
use std::sync::{Condvar, Mutex, MutexGuard};

use wsrep_abi::*;

use crate::order::{Order, Seqno};
use crate::stats::StatsArray;
use crate::CAPABILITIES;

/// What the server gave `init`, and the state of the one connection.
pub(crate) struct Null {
    pub(crate) order: Order,
    pub(crate) group: wsrep_uuid_t,
    pub(crate) node: wsrep_uuid_t,
    app_ctx: *mut c_void,
    connected_cb: wsrep_connected_cb_t,
    view_cb: wsrep_view_cb_t,
    synced_cb: wsrep_synced_cb_t,
    name: CString,
    incoming: CString,
    /// `wsrep_provider_options`, as last given.
    pub(crate) options: Mutex<CString>,
    life: Mutex<Life>,
    life_moved: Condvar,
    /// The seqno of the TOI each connection runs, between start and end.
    pub(crate) toi: Mutex<HashMap<wsrep_conn_id_t, Seqno>>,
    /// Status arrays handed to the server, by address, until `stats_free`.
    pub(crate) stats: Mutex<HashMap<usize, StatsArray>>,
    pub(crate) replicated: AtomicU64,
}

#[derive(Default)]
struct Life {
    connected: bool,
    announced: bool,
    closing: bool,
    final_claimed: bool,
    final_delivered: bool,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Null {
    /// # Safety
    /// `args` is the server's, valid for this call; its strings are
    /// NUL-terminated or NULL.
    pub(crate) unsafe fn from_init(args: &wsrep_init_args) -> Null {
        let text = |p: *const std::ffi::c_char| {
            if p.is_null() {
                return CString::default();
            }
            // SAFETY: the caller's promise.
            unsafe { std::ffi::CStr::from_ptr(p) }.to_owned()
        };
        // Continues the history of the data it is given (grastate.dat),
        // or starts a new one, as a bootstrapping Galera node does.
        // SAFETY: NULL or the server's gtid.
        let given = unsafe { args.state_id.as_ref() }.copied().unwrap_or(WSREP_GTID_UNDEFINED);
        let (group, position) = match given {
            g if g.uuid != WSREP_UUID_UNDEFINED && g.seqno >= 0 => (g.uuid, g.seqno),
            _ => (random_uuid(), 0),
        };
        Null {
            order: Order::new(position),
            group,
            node: random_uuid(),
            app_ctx: args.app_ctx,
            connected_cb: args.connected_cb,
            view_cb: args.view_cb,
            synced_cb: args.synced_cb,
            name: text(args.node_name),
            incoming: text(args.node_incoming),
            options: Mutex::new(text(args.options)),
            life: Mutex::new(Life::default()),
            life_moved: Condvar::new(),
            toi: Mutex::new(HashMap::new()),
            stats: Mutex::new(HashMap::new()),
            replicated: AtomicU64::new(0),
        }
    }

    pub(crate) fn connect(&self) {
        *lock(&self.life) = Life { connected: true, ..Life::default() };
    }

    pub(crate) fn disconnect(&self) {
        lock(&self.life).closing = true;
        self.life_moved.notify_all();
    }

    /// One `recv` thread's stay: the first announces the view, every one
    /// waits for the disconnect, one delivers the final view.
    ///
    /// # Safety
    /// `recv_ctx` is the server's for this thread; the callbacks are the
    /// server's own.
    pub(crate) unsafe fn receive(&self, recv_ctx: *mut c_void) -> wsrep_status_t {
        let first = {
            let mut life = lock(&self.life);
            if !life.connected {
                return WSREP_CONN_FAIL;
            }
            !std::mem::replace(&mut life.announced, true)
        };
        // SAFETY: forwarded.
        if first && unsafe { self.announce(recv_ctx) }.is_err() {
            return WSREP_NODE_FAIL;
        }
        let mut life = lock(&self.life);
        life = self.life_moved.wait_while(life, |l| !l.closing).unwrap_or_else(|p| p.into_inner());
        if !std::mem::replace(&mut life.final_claimed, true) {
            drop(life);
            let view = self.view(WSREP_VIEW_NON_PRIMARY, self.order.last_committed(), 0);
            // SAFETY: forwarded; the view outlives the call.
            unsafe { self.deliver_view(recv_ctx, &view) };
            let mut life = lock(&self.life);
            life.final_delivered = true;
            life.connected = false;
            drop(life);
            self.life_moved.notify_all();
            return WSREP_OK;
        }
        let _life = self.life_moved.wait_while(life, |l| !l.final_delivered).unwrap_or_else(|p| p.into_inner());
        WSREP_OK
    }

    /// Connected, a primary view at the next seqno, then synced.
    unsafe fn announce(&self, recv_ctx: *mut c_void) -> Result<(), ()> {
        let seqno = self.order.assign();
        let view = self.view(WSREP_VIEW_PRIMARY, seqno, 1);
        // SAFETY: the server's callbacks with its own contexts and a view
        // that outlives each call.
        unsafe {
            if let Some(connected) = self.connected_cb {
                if connected(self.app_ctx, &view) != WSREP_CB_SUCCESS {
                    return Err(());
                }
            }
            if self.deliver_view(recv_ctx, &view) != WSREP_CB_SUCCESS {
                return Err(());
            }
        }
        // The view's seqno is consumed like a write-set's.
        self.order.enter_commit(seqno);
        self.order.leave_commit(seqno);
        self.order.release(seqno);
        match self.synced_cb {
            // SAFETY: as above.
            Some(synced) if unsafe { synced(self.app_ctx) } != WSREP_CB_SUCCESS => Err(()),
            _ => Ok(()),
        }
    }

    unsafe fn deliver_view(&self, recv_ctx: *mut c_void, view: &wsrep_view_info_t) -> wsrep_cb_status_t {
        match self.view_cb {
            // SAFETY: the caller's promise.
            Some(view_cb) => unsafe { view_cb(self.app_ctx, recv_ctx, view, std::ptr::null(), 0) },
            None => WSREP_CB_SUCCESS,
        }
    }

    /// A view of this member alone (`members` 1), or of nobody (0: the
    /// final view, non-primary, as the server expects at a disconnect).
    fn view(&self, status: wsrep_view_status_t, seqno: Seqno, members: usize) -> wsrep_view_info_t {
        let mut me =
            wsrep_member_info_t { id: self.node, name: [0; WSREP_MEMBER_NAME_LEN], incoming: [0; WSREP_INCOMING_LEN] };
        copy_c(&mut me.name, &self.name);
        copy_c(&mut me.incoming, &self.incoming);
        let primary = status == WSREP_VIEW_PRIMARY;
        wsrep_view_info_t {
            state_id: wsrep_gtid_t { uuid: self.group, seqno: if primary { seqno } else { WSREP_SEQNO_UNDEFINED } },
            view: if primary { 1 } else { WSREP_SEQNO_UNDEFINED },
            status,
            capabilities: CAPABILITIES,
            my_idx: if members == 1 { 0 } else { -1 },
            memb_num: members as i32,
            proto_ver: 4,
            members: [me],
        }
    }
}

/// Copies `text` into a fixed C array, cut to fit with its NUL.
fn copy_c(to: &mut [std::ffi::c_char], text: &CString) {
    let bytes = text.as_bytes();
    let n = bytes.len().min(to.len() - 1);
    for (slot, &b) in to.iter_mut().zip(&bytes[..n]) {
        *slot = b as std::ffi::c_char;
    }
    to[n] = 0;
}

/// A random (version 4) uuid: wsrep-lib prints ids that look like text as
/// text, so they must not.
fn random_uuid() -> wsrep_uuid_t {
    let mut data = [0u8; 16];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut data)).is_err() {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos());
        data = (nanos ^ u128::from(std::process::id()) << 64).to_le_bytes();
    }
    data[6] = (data[6] & 0x0f) | 0x40;
    data[8] = (data[8] & 0x3f) | 0x80;
    wsrep_uuid_t { data }
}
