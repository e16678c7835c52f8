//! A WAN emulator: the links between sites of a test cluster, with the
//! delay, jitter, loss and rate cap a real wide-area link has.
//!
//! This machine's kernel has neither netem nor fq, so the emulator works in
//! user space. A router namespace joins one bridge per site; packets routed
//! from one site to another are sent, by policy routing, into a TUN device
//! this program holds. It reads each packet, decides its fate on the link
//! between the two sites ([`link::Link`], a pure model, tested on its own),
//! and writes it back into the device when its time comes; the kernel then
//! routes it on to its destination site. Traffic within a site never
//! crosses the router, so it stays at LAN speed.
//!
//! Both providers see the same network: the nodes and their addresses do
//! not change, only the links between their sites.
//!
//! - [`link`]: one direction of a link, when each packet leaves or whether it is lost;
//! - [`topology`]: sites by subnet, links between them, and which link a packet takes;
//! - [`emulate`]: the TUN device and the threads that read and release packets;
//! - [`layout`]: the namespaces, bridges and routes of sites on one machine;
//! - [`netns`]: commands in namespaces of ours, and the removal of stale ones;
//! - [`probe`]: a UDP echo and a prober measuring round trips, loss and reordering,
//!   with which the emulator is tested and users check their own settings.

pub mod cli;
pub mod emulate;
pub mod layout;
pub mod link;
pub mod netns;
pub mod probe;
pub mod spec;
pub mod topology;
