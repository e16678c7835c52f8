//! `pc.ignore_sb` and `pc.ignore_quorum`: what the members still in touch
//! after a partition (or after the others died) may do without a majority
//! of the last primary component.
//!
//! Galera's rule, which we keep: a component goes on when it holds more
//! than half of the last primary component's voters. Members that left
//! gracefully are no longer voters, so they count for nobody. Exactly half
//! is a split brain: with `pc.ignore_sb` that half goes on; with
//! `pc.ignore_quorum` any part goes on. Both sides of a real partition
//! then take writes: the operator chose that, knowing the other side is
//! dead or idle.
//!
//! Galera delivers a primary view of the survivors directly, with no
//! non-primary view between: a 2-node cluster that loses a node keeps
//! serving. Raft cannot shrink a membership without a majority of it, so
//! the survivors form a new one from their durable logs (as `pc.bootstrap`
//! does) around the most advanced of them, while the detector keeps telling
//! the engine it is primary. Uncommitted entries of that member's log
//! commit with the new membership: a commit that was waiting completes.

use std::sync::Arc;
use tokio::time::Instant;

use log::{info, warn};

use crate::raft::rebootstrap;
use crate::raft::types::LogId;
use crate::shared::Shared;
use crate::{MemberId, MemberInfo, PartitionPolicy};

/// Where the members still in touch stand against the last primary
/// component's voters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// More than half: the primary component itself.
    Majority,
    /// Exactly half.
    SplitBrain,
    Minority,
}

/// What the voters in `reachable` (this member included) weigh against all
/// `voters` weigh, each by its `pc.weight`: Galera's weighted quorum. When
/// every weight is 0 the heads count instead.
pub fn standing(voters: &[(MemberId, u32)], reachable: &[MemberId]) -> Standing {
    let (here, total) = weigh(voters, reachable);
    if total == 0 {
        let ids: Vec<MemberId> = voters.iter().map(|(id, _)| *id).collect();
        return heads(&ids, reachable);
    }
    compare(here, total)
}

/// The weight of the voters in `reachable`, and of all voters.
pub fn weigh(voters: &[(MemberId, u32)], reachable: &[MemberId]) -> (u64, u64) {
    let weight = |(_, w): &(MemberId, u32)| u64::from(*w);
    let here = voters.iter().filter(|(id, _)| reachable.contains(id)).map(weight).sum();
    (here, voters.iter().map(weight).sum())
}

/// How many of `voters` are in `reachable`: Raft's own quorum.
pub fn heads(voters: &[MemberId], reachable: &[MemberId]) -> Standing {
    let here = voters.iter().filter(|v| reachable.contains(v)).count();
    compare(here as u64, voters.len() as u64)
}

fn compare(here: u64, total: u64) -> Standing {
    match (here * 2).cmp(&total) {
        std::cmp::Ordering::Greater => Standing::Majority,
        std::cmp::Ordering::Equal => Standing::SplitBrain,
        std::cmp::Ordering::Less => Standing::Minority,
    }
}

/// Why the policy lets a component in this standing go on, in Galera's
/// words; `None`: it waits for a majority.
pub fn may_go_on(policy: PartitionPolicy, standing: Standing) -> Option<&'static str> {
    match standing {
        Standing::Majority => None,
        Standing::SplitBrain if policy.ignore_split_brain => {
            Some("Ignoring possible split-brain (allowed by configuration)")
        }
        Standing::SplitBrain | Standing::Minority if policy.ignore_quorum => {
            Some("Ignoring lack of quorum (allowed by configuration)")
        }
        Standing::SplitBrain | Standing::Minority => None,
    }
}

/// The member that forms the new component: the most advanced log, so that
/// nothing any of them holds is dropped; the lowest id among equals, so
/// that every member picks the same one from the same answers.
pub fn former(positions: &[(MemberId, Option<LogId>)]) -> Option<MemberId> {
    positions.iter().max_by(|(a_id, a_last), (b_id, b_last)| a_last.cmp(b_last).then(b_id.cmp(a_id))).map(|(id, _)| *id)
}

/// Run by the detector on each member of a component the policy lets go
/// on: the chosen member forms it; the others wait for it to take them in
/// (its new term's leader reaches them). Tries until `deadline`.
pub async fn go_on(shared: Arc<Shared>, members: Vec<MemberId>, deadline: Instant) {
    while Instant::now() < deadline {
        match positions(&shared, &members).await {
            Some(positions) => {
                let chosen = former(&positions);
                if chosen != Some(shared.me) {
                    info!("Member {:?} forms the new primary component of members {members:?}; waiting for it", chosen);
                    return;
                }
                let purpose = "a new primary component without a majority";
                match rebootstrap::form(shared.clone(), &members, purpose).await {
                    Ok(()) => {
                        info!(
                            "Member {} ({}) formed a new primary component of members {members:?} \
                             without a majority of the last one",
                            shared.me, shared.config.me.name
                        );
                        return;
                    }
                    Err(e) => warn!("Could not form a new primary component: {e}"),
                }
            }
            None => info!("Not every member of {members:?} answered with its log position yet"),
        }
        tokio::time::sleep(shared.retry_pause()).await;
    }
}

/// Each member's last log id (ours from our log); `None` when one of them
/// did not answer.
async fn positions(shared: &Shared, members: &[MemberId]) -> Option<Vec<(MemberId, Option<LogId>)>> {
    let membership = shared.metrics().membership_config.membership().clone();
    let others: Vec<(MemberId, MemberInfo)> = members
        .iter()
        .filter(|id| **id != shared.me)
        .map(|id| Some((*id, membership.get_node(id)?.clone())))
        .collect::<Option<_>>()?;
    let answers = rebootstrap::log_positions(shared, &others).await;
    let mut all = vec![(shared.me, shared.log.vote_and_last().1)];
    for ((id, _), answer) in others.iter().zip(answers) {
        all.push((*id, answer?));
    }
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_id(term: u64, index: u64) -> Option<LogId> {
        Some(LogId::new(openraft::impls::leader_id_adv::LeaderId { term, node_id: 1 }, index))
    }

    fn ones(ids: &[MemberId]) -> Vec<(MemberId, u32)> {
        ids.iter().map(|id| (*id, 1)).collect()
    }

    #[test]
    fn standing_counts_reachable_voters_against_all_voters() {
        assert_eq!(standing(&ones(&[1, 2, 3]), &[1, 2]), Standing::Majority);
        assert_eq!(standing(&ones(&[1, 2]), &[1]), Standing::SplitBrain);
        assert_eq!(standing(&ones(&[1, 2, 3, 4]), &[3, 4]), Standing::SplitBrain);
        assert_eq!(standing(&ones(&[1, 2, 3]), &[1]), Standing::Minority);
        // Learners and strangers heard from do not count.
        assert_eq!(standing(&ones(&[1, 2, 3]), &[1, 7, 8]), Standing::Minority);
        for (voters, reachable) in [(&[1, 2, 3][..], &[1, 2][..]), (&[1, 2], &[2]), (&[1, 2, 3], &[3])] {
            assert_eq!(
                standing(&ones(voters), reachable),
                heads(voters, reachable),
                "equal weights are Raft's head count"
            );
        }
    }

    #[test]
    fn weights_decide_where_heads_and_weights_disagree() {
        // galera_pc_weight: node 1 weighs 3, nodes 2 and 3 weigh 1 each.
        let w = [(1, 3), (2, 1), (3, 1)];
        assert_eq!(standing(&w, &[1]), Standing::Majority);
        assert_eq!(heads(&[1, 2, 3], &[1]), Standing::Minority);
        assert_eq!(standing(&w, &[2, 3]), Standing::Minority);
        assert_eq!(heads(&[1, 2, 3], &[2, 3]), Standing::Majority);
        // galera_shutdown_nonprim: 2 against 1 in a two-node cluster.
        assert_eq!(standing(&[(1, 2), (2, 1)], &[1]), Standing::Majority);
        assert_eq!(standing(&[(1, 2), (2, 1)], &[2]), Standing::Minority);
        // Exactly half of the weight is a split brain, whatever the heads.
        assert_eq!(standing(&[(1, 2), (2, 1), (3, 1)], &[1]), Standing::SplitBrain);
        // A member of weight 0 counts for nothing.
        assert_eq!(standing(&[(1, 1), (2, 1), (3, 0)], &[1, 3]), Standing::SplitBrain);
        // All weights 0: the heads count.
        assert_eq!(standing(&[(1, 0), (2, 0), (3, 0)], &[1, 2]), Standing::Majority);
        assert_eq!(weigh(&w, &[1, 2]), (4, 5));
    }

    #[test]
    fn only_the_policy_lets_a_split_or_a_minority_go_on() {
        let none = PartitionPolicy::default();
        let sb = PartitionPolicy { ignore_split_brain: true, ignore_quorum: false };
        let quorum = PartitionPolicy { ignore_split_brain: false, ignore_quorum: true };
        for policy in [none, sb, quorum] {
            assert_eq!(may_go_on(policy, Standing::Majority), None, "a majority needs no permission");
        }
        assert_eq!(may_go_on(none, Standing::SplitBrain), None);
        assert_eq!(may_go_on(none, Standing::Minority), None);
        assert!(may_go_on(sb, Standing::SplitBrain).is_some_and(|w| w.contains("split-brain")));
        assert_eq!(may_go_on(sb, Standing::Minority), None, "ignore_sb is about exactly half");
        assert!(may_go_on(quorum, Standing::SplitBrain).is_some());
        assert!(may_go_on(quorum, Standing::Minority).is_some_and(|w| w.contains("quorum")));
    }

    #[test]
    fn the_most_advanced_log_forms_and_ties_go_to_the_lowest_id() {
        assert_eq!(former(&[(3, log_id(2, 10)), (1, log_id(2, 9))]), Some(3));
        assert_eq!(former(&[(3, log_id(2, 10)), (1, log_id(2, 10)), (2, log_id(2, 10))]), Some(1));
        // A later term outranks a longer log of an earlier term.
        assert_eq!(former(&[(1, log_id(2, 50)), (2, log_id(3, 40))]), Some(2));
        assert_eq!(former(&[(5, None), (4, log_id(1, 1))]), Some(4));
        assert_eq!(former(&[]), None);
    }
}
