//! No panic may cross the ABI: every exported function runs inside `guard`.

use std::panic::{catch_unwind, AssertUnwindSafe};

pub fn guard<R>(what: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            log::error!("Internal error in {what}: {why}");
            fallback
        }
    }
}
