//! Our own `repr(C)` definitions of the wsrep provider ABI, interface version "26", as loaded by
//! MariaDB 10.11 (wsrep-lib `wsrep_provider_v26`).
//!
//! Written from the facts in `wsrep-provider-contract.md` (§1.2, §2), not from the GPL header.
//! Types and constants only: the exported entry points and all pointer handling live in the
//! provider crate.
//!
//! C names are kept verbatim so that the contract, traces and logs can be read side by side with
//! the Rust code. Every enum that crosses the boundary is a `c_int` alias with `pub const`
//! values, never a Rust `enum`: C may hand us any int, and an out-of-range Rust enum is UB.
//!
//! Every size, alignment and field offset listed in the contract is checked at compile time
//! next to its definition.

#![allow(non_camel_case_types)]
#![forbid(unsafe_code)]

// The contract's layouts were measured on x86-64 LP64; we make no claim about anything else.
#[cfg(not(target_pointer_width = "64"))]
compile_error!("wsrep-abi describes the LP64 layout only");

/// Compile-time check of a type's size, alignment and (optionally) field offsets.
macro_rules! assert_layout {
    ($t:ty, size = $size:expr, align = $align:expr $(, $field:ident @ $off:expr)* $(,)?) => {
        const _: () = {
            assert!(core::mem::size_of::<$t>() == $size);
            assert!(core::mem::align_of::<$t>() == $align);
            $(assert!(core::mem::offset_of!($t, $field) == $off);)*
        };
    };
}

mod callbacks;
mod consts;
mod services;
mod types;
mod vtable;

pub use callbacks::*;
pub use consts::*;
pub use services::*;
pub use types::*;
pub use vtable::*;

#[cfg(test)]
mod tests;
