//! Provider options changed at runtime (`SET GLOBAL wsrep_provider_options`)
//! and what each change does to the running node and its group.

use crate::config::partition_policy;
use crate::node::Node;
use crate::options::OptionAction;

impl Node {
    /// `SET GLOBAL wsrep_provider_options`: only the keys being changed.
    pub fn set_options(&self, text: &str) -> Result<(), String> {
        let (actions, partition) = {
            let mut options = self.inner.options.lock();
            let actions = options.set_at_runtime(text).map_err(|e| e.to_string())?;
            self.inner.hot.update(&options);
            (actions, partition_policy(&options))
        };
        if let Some(group) = self.group() {
            group.set_partition_policy(partition);
        }
        for action in actions {
            match action {
                OptionAction::FreezePurge(value) => self.freeze_purge(&value)?,
                OptionAction::Bootstrap => self.bootstrap_now()?,
                OptionAction::TlsReload => self.reload_tls()?,
                OptionAction::Isolate(to) => self.isolate(to)?,
                OptionAction::Weight(weight) => self.set_weight(weight)?,
            }
        }
        Ok(())
    }

    /// `socket.ssl_reload`: new connections use the re-read files.
    fn reload_tls(&self) -> Result<(), String> {
        let Some(group) = self.group() else { return Err("socket.ssl_reload: not connected to a cluster".into()) };
        group.reload_tls().map_err(|e| {
            log::error!("socket.ssl_reload failed, the certificate in use stays: {e}");
            e.to_string()
        })
    }

    /// `gmcast.isolate`: the group channel stops (or resumes) talking to
    /// the other members; the loss of the primary component follows.
    fn isolate(&self, to: tandem_group::Isolation) -> Result<(), String> {
        let Some(group) = self.group() else { return Err("gmcast.isolate: not connected to a cluster".into()) };
        group.isolate(to).map_err(|e| e.to_string())
    }

    /// `pc.weight`: this node's weight in the quorum, agreed by the group
    /// before the statement returns (while primary).
    fn set_weight(&self, weight: u32) -> Result<(), String> {
        let Some(group) = self.group() else { return Ok(()) }; // taken at connect
        group.set_weight(weight).map_err(|e| {
            log::warn!("pc.weight={weight}: {e}");
            e.to_string()
        })
    }

    /// `pc.bootstrap=YES`: a new primary component of this node alone.
    fn bootstrap_now(&self) -> Result<(), String> {
        let Some(group) = self.group() else { return Err("pc.bootstrap: not connected to a cluster".into()) };
        // Notes: the operator asked for it (MariaDB's suites treat any
        // warning as a failure).
        log::info!("pc.bootstrap=YES: forming a new primary component from this node");
        group.bootstrap().map_err(|e| {
            log::error!("pc.bootstrap failed: {e}");
            e.to_string()
        })
    }

    /// `gcache.freeze_purge_at_seqno`: a seqno this node's log holds, `now`
    /// (the oldest it holds) or -1 ([`crate::retention::freeze_point`]).
    /// The option then shows the seqno it froze at. A value refused leaves
    /// the freeze as it was, and the option showing it.
    pub(crate) fn freeze_purge(&self, value: &str) -> Result<(), String> {
        let next = self.inner.apply.last_left() + 1;
        match crate::retention::freeze_point(value, self.cached_seqnos(), next) {
            Ok(at) => {
                self.set_freeze(at);
                if at < 0 {
                    log::info!("gcache purge unfrozen");
                }
                Ok(())
            }
            Err(e) => {
                let was = self.inner.core.lock().frozen_at().unwrap_or(-1);
                self.inner.options.lock().set_default("gcache.freeze_purge_at_seqno", &was.to_string());
                Err(e)
            }
        }
    }

    /// The configured freeze, at connect: the log's range is not known
    /// until the group opens it, so a seqno is taken as given (it only holds
    /// purging back), and `now` is the node's own position.
    pub(crate) fn freeze_purge_at_start(&self, value: &str) {
        let at = match value.trim().eq_ignore_ascii_case("now") {
            true => self.inner.apply.last_left(),
            false => value.trim().parse().unwrap_or(-1),
        };
        self.set_freeze(at);
    }

    /// Purging holds at `at` (-1: it does not), and the option shows it.
    fn set_freeze(&self, at: crate::types::Seqno) {
        self.inner.options.lock().set_default("gcache.freeze_purge_at_seqno", &at.to_string());
        self.inner.core.lock().freeze_purge_at(at);
        if at >= 0 {
            log::info!("Freezing gcache purge at seqno {at}");
        }
    }

    /// The oldest and newest seqnos this node's log holds, as
    /// `wsrep_local_cached_downto` and `wsrep_last_committed` show them.
    fn cached_seqnos(&self) -> Option<(crate::types::Seqno, crate::types::Seqno)> {
        let last = self.inner.apply.last_left();
        let oldest = crate::retention::cached_downto(self.group()?.cache().replay_from, last);
        (oldest >= 0 && oldest <= last).then_some((oldest, last))
    }

    /// One option's value as it is now.
    pub fn option(&self, key: &str) -> String {
        self.inner.options.lock().get(key).to_string()
    }

    pub fn options_text(&self) -> String {
        self.inner.options.lock().render()
    }
}
