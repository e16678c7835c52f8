//! `stats_get`: the few provider status variables a 1-node provider has.
//! The server keeps the array until `stats_free`; its strings live in it.

use std::ffi::CString;
use std::sync::atomic::Ordering;

use wsrep_abi::*;

use crate::session::Null;

pub(crate) struct StatsArray {
    vars: Vec<wsrep_stats_var>,
    _strings: Vec<CString>,
}

enum Value {
    Text(String),
    Int(i64),
}

impl Null {
    /// A NULL-name-terminated array, owned here until [`Null::free_stats`].
    pub(crate) fn stats(&self) -> *mut wsrep_stats_var {
        let uuid = uuid_text(&self.group);
        let values = [
            ("local_state_uuid", Value::Text(uuid)),
            ("protocol_version", Value::Int(10)),
            ("last_committed", Value::Int(self.order.last_committed())),
            ("replicated", Value::Int(self.replicated.load(Ordering::Relaxed) as i64)),
            ("local_state", Value::Int(4)),
            ("local_state_comment", Value::Text("Synced".into())),
        ];
        let mut strings = Vec::new();
        let mut keep = |s: String| {
            let c = CString::new(s).unwrap_or_default();
            let p = c.as_ptr();
            strings.push(c);
            p
        };
        let mut vars: Vec<wsrep_stats_var> = values
            .into_iter()
            .map(|(name, value)| {
                let name = keep(name.to_string());
                match value {
                    Value::Text(s) => {
                        wsrep_stats_var { name, type_: WSREP_VAR_STRING, value: wsrep_stats_value { _string: keep(s) } }
                    }
                    Value::Int(i) => {
                        wsrep_stats_var { name, type_: WSREP_VAR_INT64, value: wsrep_stats_value { _int64: i } }
                    }
                }
            })
            .collect();
        vars.push(wsrep_stats_var {
            name: std::ptr::null(),
            type_: WSREP_VAR_INT64,
            value: wsrep_stats_value { _int64: 0 },
        });
        let array = StatsArray { vars, _strings: strings };
        let ptr = array.vars.as_ptr() as *mut wsrep_stats_var;
        crate::session::lock(&self.stats).insert(ptr as usize, array);
        ptr
    }

    pub(crate) fn free_stats(&self, ptr: *mut wsrep_stats_var) {
        crate::session::lock(&self.stats).remove(&(ptr as usize));
    }
}

fn uuid_text(u: &wsrep_uuid_t) -> String {
    let hex: String = u.data.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}
