//! The server side of the engine's `Application`: calls the callbacks that
//! MariaDB passed to `init()`.

use std::ffi::c_void;

use tandem_engine::app::{Application, Applied, ApplyJob};
use tandem_engine::types::Gtid;
use tandem_engine::view::{View, ViewStatus};
use wsrep_abi::*;

use crate::convert::{fill_chars, gtid_to_c};

/// The callbacks and `app_ctx` from `wsrep_init_args`.
pub struct ServerApp {
    pub app_ctx: usize,
    pub connected_cb: wsrep_connected_cb_t,
    pub view_cb: wsrep_view_cb_t,
    pub sst_request_cb: wsrep_sst_request_cb_t,
    pub apply_cb: wsrep_apply_cb_t,
    pub sst_donate_cb: wsrep_sst_donate_cb_t,
    pub synced_cb: wsrep_synced_cb_t,
}

// SAFETY: the callbacks are plain C functions that the server allows to be
// called from any provider thread; `app_ctx` is an opaque token.
unsafe impl Send for ServerApp {}
unsafe impl Sync for ServerApp {}

/// A `wsrep_view_info_t` with room for all members, 8-byte aligned.
struct ViewBuffer(Vec<u64>);

impl ViewBuffer {
    fn new(view: &View) -> ViewBuffer {
        let size = wsrep_view_info_size(view.members.len());
        let mut buf = ViewBuffer(vec![0u64; size.div_ceil(8)]);
        let info = buf.ptr();
        // SAFETY: the buffer is zeroed, aligned and large enough for the
        // header plus `members.len()` member records.
        unsafe {
            (*info).state_id = gtid_to_c(view.state_id);
            (*info).view = view.view_no;
            (*info).status = match view.status {
                ViewStatus::Primary => WSREP_VIEW_PRIMARY,
                ViewStatus::NonPrimary => WSREP_VIEW_NON_PRIMARY,
                ViewStatus::Disconnected => WSREP_VIEW_DISCONNECTED,
            };
            (*info).capabilities = crate::CAPABILITIES;
            (*info).my_idx = view.my_idx;
            (*info).memb_num = view.members.len() as i32;
            (*info).proto_ver = tandem_engine::status::PROTOCOL_VERSION as i32;
            let members = (*info).members.as_mut_ptr();
            for (i, m) in view.members.iter().enumerate() {
                let slot = &mut *members.add(i);
                slot.id = wsrep_uuid_t { data: m.node_id().0 };
                fill_chars(&mut slot.name, &m.name);
                fill_chars(&mut slot.incoming, &m.incoming);
            }
        }
        buf
    }

    fn ptr(&mut self) -> *mut wsrep_view_info_t {
        self.0.as_mut_ptr() as *mut wsrep_view_info_t
    }
}

impl Application for ServerApp {
    fn connected(&self, view: &View) -> bool {
        let mut buf = ViewBuffer::new(view);
        let Some(cb) = self.connected_cb else { return true };
        // SAFETY: callback from init args; the view buffer lives across the call.
        unsafe { cb(self.app_ctx as *mut c_void, buf.ptr()) == WSREP_CB_SUCCESS }
    }

    fn view(&self, recv_ctx: usize, view: &View) -> bool {
        let mut buf = ViewBuffer::new(view);
        let Some(cb) = self.view_cb else { return true };
        // SAFETY: as above; the server ignores state/state_len.
        unsafe {
            cb(self.app_ctx as *mut c_void, recv_ctx as *mut c_void, buf.ptr(), std::ptr::null(), 0) == WSREP_CB_SUCCESS
        }
    }

    fn sst_request(&self) -> Option<Vec<u8>> {
        // No callback: the server wants no transfer (as with an empty request).
        let Some(cb) = self.sst_request_cb else { return Some(vec![]) };
        let mut req: *mut c_void = std::ptr::null_mut();
        let mut len: usize = 0;
        // SAFETY: the server writes a malloc'ed buffer (or NULL) and its length.
        let rc = unsafe { cb(self.app_ctx as *mut c_void, &mut req, &mut len) };
        if rc != WSREP_CB_SUCCESS {
            log::debug!("sst_request_cb returned {rc}");
            return None;
        }
        if req.is_null() {
            return Some(vec![]);
        }
        // SAFETY: `req` points to `len` bytes allocated with malloc by the server,
        // which hands ownership to us.
        let bytes = unsafe { std::slice::from_raw_parts(req as *const u8, len).to_vec() };
        unsafe { libc::free(req) };
        Some(bytes)
    }

    fn apply(&self, recv_ctx: usize, job: &ApplyJob<'_>) -> Applied {
        let Some(cb) = self.apply_cb else { return Applied { ok: false, exit_loop: false } };
        let handle = wsrep_ws_handle_t { trx_id: job.trx_id, opaque: job.opaque as *mut c_void };
        let data = wsrep_buf_t { ptr: job.data.as_ptr() as *const c_void, len: job.data.len() };
        let meta = wsrep_trx_meta_t {
            gtid: gtid_to_c(job.gtid),
            stid: wsrep_stid_t { node: wsrep_uuid_t { data: job.source.0 }, trx: job.trx_id, conn: job.conn_id },
            depends_on: job.depends_on,
        };
        let mut exit_loop = false;
        // SAFETY: all pointers refer to locals that outlive the call.
        let rc = unsafe { cb(recv_ctx as *mut c_void, &handle, job.flags, &data, &meta, &mut exit_loop) };
        Applied { ok: rc == WSREP_CB_SUCCESS, exit_loop }
    }

    fn sst_donate(&self, recv_ctx: usize, request: &[u8], state: Gtid, bypass: bool) -> bool {
        let Some(cb) = self.sst_donate_cb else { return false };
        let msg = wsrep_buf_t { ptr: request.as_ptr() as *const c_void, len: request.len() };
        let gtid = gtid_to_c(state);
        // SAFETY: locals outlive the call; `state` may be NULL per the contract.
        unsafe {
            cb(self.app_ctx as *mut c_void, recv_ctx as *mut c_void, &msg, &gtid, std::ptr::null(), bypass)
                == WSREP_CB_SUCCESS
        }
    }

    fn synced(&self) -> bool {
        let Some(cb) = self.synced_cb else { return true };
        // SAFETY: callback from init args.
        unsafe { cb(self.app_ctx as *mut c_void) == WSREP_CB_SUCCESS }
    }

    fn peer_allowed(&self, ip: &str) -> bool {
        crate::peer_allowed(ip)
    }

    /// Hands back the free pages a burst of write-sets left in the
    /// allocator's arenas (`tandem_engine::quiet` says why). On a follower
    /// after 30 s of writes: RssAnon 192 -> 167 thousand kB.
    fn quiet(&self) {
        // SAFETY: malloc_trim takes no pointers; it only returns whole free
        // pages of glibc's arenas to the kernel, under the arenas' locks.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
