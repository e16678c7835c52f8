//! Scalar typedefs, enum values, bit values and string constants (contract §2.1, §2.2).

use core::ffi::c_int;

// ---------------------------------------------------------------------------------------------
// Scalars.

/// Global sequence number; −1 ([`WSREP_SEQNO_UNDEFINED`]) means "none" everywhere.
pub type wsrep_seqno_t = i64;
pub type wsrep_trx_id_t = u64;
pub type wsrep_conn_id_t = u64;
/// Capability bit set. 32 bits wide in v26 (not 64).
pub type wsrep_cap_t = u32;
/// C `_Bool`: one byte, only 0 or 1, so Rust `bool` has the same ABI and validity.
pub type wsrep_bool_t = bool;

// ---------------------------------------------------------------------------------------------
// Enums. All are plain `c_int` so that any value the server passes is a valid Rust value.

/// Result of provider calls. An int alias, not a Rust enum: wsrep-lib maps unknown values
/// (including negative errno) to its own "error_unknown", so C may legitimately see anything.
pub type wsrep_status_t = c_int;
pub const WSREP_OK: wsrep_status_t = 0;
pub const WSREP_WARNING: wsrep_status_t = 1;
pub const WSREP_TRX_MISSING: wsrep_status_t = 2;
pub const WSREP_TRX_FAIL: wsrep_status_t = 3;
pub const WSREP_BF_ABORT: wsrep_status_t = 4;
pub const WSREP_SIZE_EXCEEDED: wsrep_status_t = 5;
pub const WSREP_CONN_FAIL: wsrep_status_t = 6;
pub const WSREP_NODE_FAIL: wsrep_status_t = 7;
pub const WSREP_FATAL: wsrep_status_t = 8;
pub const WSREP_NOT_IMPLEMENTED: wsrep_status_t = 9;
pub const WSREP_NOT_ALLOWED: wsrep_status_t = 10;

/// Result of server callbacks; any non-zero value is critical, hence an int alias.
pub type wsrep_cb_status_t = c_int;
pub const WSREP_CB_SUCCESS: wsrep_cb_status_t = 0;
pub const WSREP_CB_FAILURE: wsrep_cb_status_t = 1;

pub type wsrep_member_status_t = c_int;
pub const WSREP_MEMBER_UNDEFINED: wsrep_member_status_t = 0;
pub const WSREP_MEMBER_JOINER: wsrep_member_status_t = 1;
pub const WSREP_MEMBER_DONOR: wsrep_member_status_t = 2;
pub const WSREP_MEMBER_JOINED: wsrep_member_status_t = 3;
pub const WSREP_MEMBER_SYNCED: wsrep_member_status_t = 4;
pub const WSREP_MEMBER_ERROR: wsrep_member_status_t = 5;
/// Count of member states, not a state.
pub const WSREP_MEMBER_MAX: wsrep_member_status_t = 6;

pub type wsrep_view_status_t = c_int;
pub const WSREP_VIEW_PRIMARY: wsrep_view_status_t = 0;
pub const WSREP_VIEW_NON_PRIMARY: wsrep_view_status_t = 1;
pub const WSREP_VIEW_DISCONNECTED: wsrep_view_status_t = 2;
/// Count of view states, not a state.
pub const WSREP_VIEW_MAX: wsrep_view_status_t = 3;

/// Which member of [`crate::wsrep_stats_value`] is live.
pub type wsrep_var_type_t = c_int;
pub const WSREP_VAR_STRING: wsrep_var_type_t = 0;
pub const WSREP_VAR_INT64: wsrep_var_type_t = 1;
pub const WSREP_VAR_DOUBLE: wsrep_var_type_t = 2;

/// Certification key strength, weakest first (the order the certification matrix uses).
pub type wsrep_key_type_t = c_int;
pub const WSREP_KEY_SHARED: wsrep_key_type_t = 0;
pub const WSREP_KEY_REFERENCE: wsrep_key_type_t = 1;
pub const WSREP_KEY_UPDATE: wsrep_key_type_t = 2;
pub const WSREP_KEY_EXCLUSIVE: wsrep_key_type_t = 3;

pub type wsrep_data_type_t = c_int;
pub const WSREP_DATA_ORDERED: wsrep_data_type_t = 0;
pub const WSREP_DATA_UNORDERED: wsrep_data_type_t = 1;
pub const WSREP_DATA_ANNOTATION: wsrep_data_type_t = 2;

pub type wsrep_log_level_t = c_int;
pub const WSREP_LOG_FATAL: wsrep_log_level_t = 0;
pub const WSREP_LOG_ERROR: wsrep_log_level_t = 1;
pub const WSREP_LOG_WARN: wsrep_log_level_t = 2;
pub const WSREP_LOG_INFO: wsrep_log_level_t = 3;
pub const WSREP_LOG_DEBUG: wsrep_log_level_t = 4;

pub type wsrep_enc_direction_t = c_int;
pub const WSREP_ENC: wsrep_enc_direction_t = 0;
pub const WSREP_DEC: wsrep_enc_direction_t = 1;

// ---------------------------------------------------------------------------------------------
// Capability bits (returned by `capabilities()`; bit n as in the contract).

pub const WSREP_CAP_MULTI_MASTER: wsrep_cap_t = 1 << 0;
pub const WSREP_CAP_CERTIFICATION: wsrep_cap_t = 1 << 1;
pub const WSREP_CAP_PARALLEL_APPLYING: wsrep_cap_t = 1 << 2;
pub const WSREP_CAP_TRX_REPLAY: wsrep_cap_t = 1 << 3;
pub const WSREP_CAP_ISOLATION: wsrep_cap_t = 1 << 4;
pub const WSREP_CAP_PAUSE: wsrep_cap_t = 1 << 5;
pub const WSREP_CAP_CAUSAL_READS: wsrep_cap_t = 1 << 6;
pub const WSREP_CAP_CAUSAL_TRX: wsrep_cap_t = 1 << 7;
pub const WSREP_CAP_INCREMENTAL_WRITESET: wsrep_cap_t = 1 << 8;
pub const WSREP_CAP_SESSION_LOCKS: wsrep_cap_t = 1 << 9;
pub const WSREP_CAP_DISTRIBUTED_LOCKS: wsrep_cap_t = 1 << 10;
pub const WSREP_CAP_CONSISTENCY_CHECK: wsrep_cap_t = 1 << 11;
pub const WSREP_CAP_UNORDERED: wsrep_cap_t = 1 << 12;
pub const WSREP_CAP_ANNOTATION: wsrep_cap_t = 1 << 13;
pub const WSREP_CAP_PREORDERED: wsrep_cap_t = 1 << 14;
pub const WSREP_CAP_STREAMING: wsrep_cap_t = 1 << 15;
pub const WSREP_CAP_SNAPSHOT: wsrep_cap_t = 1 << 16;
pub const WSREP_CAP_NBO: wsrep_cap_t = 1 << 17;

/// Every capability bit with its name (the C constant without `WSREP_CAP_`), in bit order.
/// Kept next to the bits so that logs and tests cannot drift from them.
pub const WSREP_CAPS: [(wsrep_cap_t, &str); 18] = [
    (WSREP_CAP_MULTI_MASTER, "MULTI_MASTER"),
    (WSREP_CAP_CERTIFICATION, "CERTIFICATION"),
    (WSREP_CAP_PARALLEL_APPLYING, "PARALLEL_APPLYING"),
    (WSREP_CAP_TRX_REPLAY, "TRX_REPLAY"),
    (WSREP_CAP_ISOLATION, "ISOLATION"),
    (WSREP_CAP_PAUSE, "PAUSE"),
    (WSREP_CAP_CAUSAL_READS, "CAUSAL_READS"),
    (WSREP_CAP_CAUSAL_TRX, "CAUSAL_TRX"),
    (WSREP_CAP_INCREMENTAL_WRITESET, "INCREMENTAL_WRITESET"),
    (WSREP_CAP_SESSION_LOCKS, "SESSION_LOCKS"),
    (WSREP_CAP_DISTRIBUTED_LOCKS, "DISTRIBUTED_LOCKS"),
    (WSREP_CAP_CONSISTENCY_CHECK, "CONSISTENCY_CHECK"),
    (WSREP_CAP_UNORDERED, "UNORDERED"),
    (WSREP_CAP_ANNOTATION, "ANNOTATION"),
    (WSREP_CAP_PREORDERED, "PREORDERED"),
    (WSREP_CAP_STREAMING, "STREAMING"),
    (WSREP_CAP_SNAPSHOT, "SNAPSHOT"),
    (WSREP_CAP_NBO, "NBO"),
];

// ---------------------------------------------------------------------------------------------
// Write-set flags (`uint32_t flags` of certify, to_execute_start, apply_cb, preordered_commit).

pub const WSREP_FLAG_TRX_END: u32 = 1 << 0;
pub const WSREP_FLAG_ROLLBACK: u32 = 1 << 1;
pub const WSREP_FLAG_ISOLATION: u32 = 1 << 2;
pub const WSREP_FLAG_PA_UNSAFE: u32 = 1 << 3;
/// Dropped by wsrep-lib in both directions; never expect it from, or send it to, the server.
pub const WSREP_FLAG_COMMUTATIVE: u32 = 1 << 4;
/// Dropped by wsrep-lib in both directions; never expect it from, or send it to, the server.
pub const WSREP_FLAG_NATIVE: u32 = 1 << 5;
pub const WSREP_FLAG_TRX_START: u32 = 1 << 6;
pub const WSREP_FLAG_TRX_PREPARE: u32 = 1 << 7;
pub const WSREP_FLAG_SNAPSHOT: u32 = 1 << 8;
pub const WSREP_FLAG_IMPLICIT_DEPS: u32 = 1 << 9;
/// All defined flag bits; anything outside is not part of the v26 ABI.
pub const WSREP_FLAGS_MASK: u32 = 0x3FF;

// ---------------------------------------------------------------------------------------------
// Sizes and sentinels.

pub const WSREP_SEQNO_UNDEFINED: wsrep_seqno_t = -1;
/// Length of `wsrep_member_info_t::name`, including the NUL.
pub const WSREP_MEMBER_NAME_LEN: usize = 32;
/// Length of `wsrep_member_info_t::incoming`, including the NUL.
pub const WSREP_INCOMING_LEN: usize = 256;
/// Characters of a printed UUID (`8-4-4-4-12`), without NUL.
pub const WSREP_UUID_STR_LEN: usize = 36;
/// Characters of a printed GTID (`uuid:seqno`, seqno up to 20 chars), without NUL.
pub const WSREP_GTID_STR_LEN: usize = 57;

// ---------------------------------------------------------------------------------------------
// Strings. NUL-terminated byte strings so they can be handed to C as `const char*` directly.

/// Value of `wsrep_t::version` and of the exported `wsrep_interface_version` object.
pub const WSREP_INTERFACE_VERSION: &[u8] = b"26\0";
/// Provider spec meaning "no provider" (the loader then uses its built-in dummy).
pub const WSREP_NONE: &[u8] = b"none\0";
/// SST request sent by a joiner with `wsrep_sst_method=skip`.
pub const WSREP_STATE_TRANSFER_TRIVIAL: &[u8] = b"trivial\0";
pub const WSREP_STATE_TRANSFER_NONE: &[u8] = b"none\0";
/// Symbol name of the optional exported `wsrep_certify_v1` entry point.
pub const WSREP_CERTIFY_V1: &[u8] = b"wsrep_certify_v1\0";
