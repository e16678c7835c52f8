//! The one error type of the crate.
//!
//! Damage found while opening a log is not an error: it is repaired and reported in
//! [`crate::RecoveryReport`]. [`LogError::Corrupt`] is for damage met afterwards, when bytes
//! that were valid at open no longer are (or a blob fails its checks), so the caller learns
//! of it instead of receiving altered data.

use crate::format::MAX_PAYLOAD;
use std::{fmt, io};

/// Why a log or blob operation failed.
#[derive(Debug)]
pub enum LogError {
    /// The storage failed; the message names the file and the operation.
    Io(io::Error),
    /// Append with an index that is not last+1. (`u64::MAX` is never accepted: the log would
    /// have no next index.)
    NotContiguous {
        /// The index the log needs next; 0 when the log is empty (it then takes any index
        /// but `u64::MAX`).
        expected: u64,
        /// The index offered.
        got: u64,
    },
    /// The index is below the first retained or above the last record.
    Missing(u64),
    /// A record (or, with index 0, a blob) failed its checks when read: disk corruption
    /// after open. The reason names the file and the offset.
    Corrupt {
        /// The record whose bytes failed (0 for a blob).
        index: u64,
        /// What failed, where: file, offset, check.
        reason: String,
    },
    /// A payload above [`MAX_PAYLOAD`] bytes.
    TooLarge(usize),
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::Io(error) => write!(f, "storage error: {error}"),
            LogError::NotContiguous { expected, got } => {
                write!(f, "append of index {got} where {expected} was expected")
            }
            LogError::Missing(index) => {
                write!(f, "no record {index}: purged, truncated or never written")
            }
            LogError::Corrupt { reason, .. } => write!(f, "corrupt data: {reason}"),
            LogError::TooLarge(len) => {
                write!(f, "payload of {len} bytes is above the maximum of {MAX_PAYLOAD}")
            }
        }
    }
}

impl std::error::Error for LogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LogError::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for LogError {
    fn from(error: io::Error) -> LogError {
        LogError::Io(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn messages_name_what_went_wrong() {
        let got = LogError::NotContiguous { expected: 5, got: 7 }.to_string();
        assert_eq!(got, "append of index 7 where 5 was expected");
        assert_eq!(LogError::Missing(3).to_string(), "no record 3: purged, truncated or never written");
        let corrupt = LogError::Corrupt { index: 9, reason: "log.seg offset 40: bad".into() };
        assert_eq!(corrupt.to_string(), "corrupt data: log.seg offset 40: bad");
        assert!(LogError::TooLarge(2 << 30).to_string().contains("2147483648 bytes"));
    }

    #[test]
    fn io_errors_convert_and_chain() {
        let error: LogError = io::Error::new(io::ErrorKind::NotFound, "f: open").into();
        assert!(matches!(&error, LogError::Io(inner) if inner.kind() == io::ErrorKind::NotFound));
        assert_eq!(error.to_string(), "storage error: f: open");
        assert!(error.source().is_some());
        assert!(LogError::Missing(1).source().is_none());
    }
}
