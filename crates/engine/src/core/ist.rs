//! The IST this process receives, as `wsrep_ist_receive_status` shows it:
//! from the seqno after its own data to the one before the view that makes
//! it live, fixed once that view is ordered (before, the end is the last
//! seqno seen so far). The status is empty once all of it is applied, as
//! PXC shows it, and the end is logged in Galera's words ("IST received:
//! uuid:seqno"); the metrics keep the last IST's numbers.

use super::NodeCore;
use crate::admission::Plan;
use crate::types::Seqno;

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct IstTrack {
    /// The last seqno of the IST, once the view that ends it is ordered.
    end: Option<Seqno>,
    /// All of it applied.
    received: bool,
}

impl NodeCore {
    /// The IST this process receives or received: first..=last seqno. None
    /// when it joined otherwise, or had nothing to receive.
    pub fn ist_range(&self) -> Option<(Seqno, Seqno)> {
        let Plan::Resume { position } = self.admission.as_ref()?.plan else { return None };
        let last = self.ist.end.unwrap_or(self.last_ordered).max(position + 1);
        match self.ist.end {
            Some(end) if end <= position => None,
            _ => Some((position + 1, last)),
        }
    }

    /// The IST is still being applied (`wsrep_ist_receive_status` is empty
    /// once it is not, as in PXC; the metrics keep the last one).
    pub fn ist_receiving(&self) -> bool {
        self.ist_range().is_some() && !self.ist.received
    }

    /// The view at `view_seqno` made this process live: its IST ends
    /// before it (nothing to receive when the data was already there).
    pub(super) fn ist_ends_before(&mut self, view_seqno: Seqno) {
        let Some(Plan::Resume { position }) = self.admission.as_ref().map(|a| &a.plan) else { return };
        let (first, end) = (*position + 1, view_seqno - 1);
        self.ist.end = Some(end);
        self.ist.received |= end < first;
        if end >= first {
            log::info!("Receiving IST: {} writesets, seqnos {first}-{end}", end - first + 1);
        }
    }

    /// Everything up to `committed` is applied.
    pub(super) fn ist_applied_to(&mut self, committed: Seqno) {
        match self.ist.end {
            Some(end) if !self.ist.received && committed >= end => {
                self.ist.received = true;
                log::info!("IST received: {}:{end}", self.footing.group_uuid);
            }
            _ => {}
        }
    }
}
