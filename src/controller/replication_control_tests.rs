use super::*;
use crate::cluster::keys::broker_state;
use crate::controller::test_cluster::Cluster;

/// Topic `t`'s id in the test namespace ("AAAAAAAAAAAAAAAAAAAAAQ").
const T: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// Brokers 1-3 RUNNING, `t`-0 on [1, 2, 3] led by 1 with the whole ISR.
fn cluster() -> Cluster {
    let c = Cluster::new(&[1, 2, 3], &[&[1, 2, 3]]);
    c.round();
    c
}

/// Partition 0 at its current epochs, asking for `isr` (epochs unknown).
fn ask(image: &MetadataImage, isr: &[i32]) -> IsrRequest {
    let s = &image.topics.state("t", 0).unwrap().state;
    IsrRequest {
        topic_id: T,
        partition: 0,
        leader_epoch: s.leader_epoch,
        partition_epoch: s.partition_epoch,
        isr: isr.iter().map(|m| (*m, -1)).collect(),
        leader_recovery_state: 0,
    }
}

#[test]
fn a_shrink_from_the_leader_raises_the_partition_epoch_and_keeps_the_rest() {
    let c = cluster();
    let image = c.image();
    let before = image.topics.state("t", 0).unwrap().state.clone();
    let change = check(&image, 1, &ask(&image, &[1, 2]), c.epoch).unwrap().unwrap();
    assert_eq!(change.state.isr, vec![1, 2]);
    assert_eq!(change.state.partition_epoch, before.partition_epoch + 1);
    assert_eq!((change.state.leader, change.state.leader_epoch), (1, before.leader_epoch));
    assert_eq!(change.state.controller_epoch, c.epoch);
    // The same ISR again is no change at all.
    assert_eq!(check(&image, 1, &ask(&image, &[1, 2, 3]), c.epoch), Ok(None));
}

#[test]
fn refusals_follow_kafkas_checks() {
    use AlterPartitionError as E;
    let c = cluster();
    let image = c.image();
    let refused = |r: IsrRequest, sender: i32| check(&image, sender, &r, c.epoch).unwrap_err();
    let ok = ask(&image, &[1, 2]);
    assert_eq!(refused(IsrRequest { topic_id: [9; 16], ..ok.clone() }, 1), E::UnknownTopicId);
    assert_eq!(refused(IsrRequest { partition: 7, ..ok.clone() }, 1), E::UnknownTopicOrPartition);
    let newer = IsrRequest { leader_epoch: ok.leader_epoch + 1, ..ok.clone() };
    assert_eq!(refused(newer, 1), E::NotController);
    let newer = IsrRequest { partition_epoch: ok.partition_epoch + 1, ..ok.clone() };
    assert_eq!(refused(newer, 1), E::NotController);
    assert_eq!(refused(ok.clone(), 2), E::InvalidRequest, "only the leader asks");
    assert_eq!(refused(ask(&image, &[1, 4]), 1), E::InvalidRequest, "4 is no replica");
    assert_eq!(refused(ask(&image, &[1, 2, 2]), 1), E::InvalidRequest, "a duplicate");
    assert_eq!(refused(ask(&image, &[2, 3]), 1), E::InvalidRequest, "without the leader");
    let recovering = IsrRequest { leader_recovery_state: 1, ..ask(&image, &[1]) };
    assert_eq!(refused(recovering, 1), E::InvalidRequest, "RECOVERED never goes back");
    let unknown_state = IsrRequest { leader_recovery_state: 5, ..ok.clone() };
    assert_eq!(refused(unknown_state, 1), E::InvalidRequest);

    // The leader epoch and partition epoch move on: the old ones are stale.
    c.set_broker(1, false);
    c.round();
    let later = c.image();
    let s = &later.topics.state("t", 0).unwrap().state;
    assert_eq!(s.leader, 2);
    let stale = |r: &IsrRequest, sender| check(&later, sender, r, c.epoch).unwrap_err();
    assert_eq!(stale(&ok, 1), E::FencedLeaderEpoch);
    let old_partition_epoch = IsrRequest {
        leader_epoch: s.leader_epoch,
        partition_epoch: s.partition_epoch - 1,
        ..ask(&later, &[2, 3])
    };
    assert_eq!(stale(&old_partition_epoch, 2), E::InvalidUpdateVersion);
}

#[test]
fn only_registered_running_members_of_the_named_epoch_join() {
    use AlterPartitionError as E;
    let c = Cluster::new(&[1, 2, 3], &[&[1, 2, 3]]);
    c.set_broker(3, false);
    c.round();
    let image = c.image();
    assert_eq!(image.topics.state("t", 0).unwrap().state.isr, vec![1, 2]);
    // 3 is not registered.
    assert_eq!(check(&image, 1, &ask(&image, &[1, 2, 3]), c.epoch), Err(E::IneligibleReplica));
    // Registered but in controlled shutdown.
    c.set_broker_state(3, true, broker_state::PENDING_CONTROLLED_SHUTDOWN);
    let image = c.image();
    assert_eq!(check(&image, 1, &ask(&image, &[1, 2, 3]), c.epoch), Err(E::IneligibleReplica));
    // RUNNING: it joins, with its epoch or -1, not with another epoch.
    c.set_broker(3, true);
    let image = c.image();
    let epoch3 = image.brokers[&3].epoch;
    let mut r = ask(&image, &[1, 2, 3]);
    assert!(check(&image, 1, &r, c.epoch).unwrap().is_some());
    r.isr[2].1 = epoch3;
    assert!(check(&image, 1, &r, c.epoch).unwrap().is_some());
    r.isr[2].1 = epoch3 - 1;
    assert_eq!(check(&image, 1, &r, c.epoch), Err(E::IneligibleReplica));
    // The leader itself is a member: shutting down, it may not shrink.
    c.set_broker_state(1, true, broker_state::PENDING_CONTROLLED_SHUTDOWN);
    let image = c.image();
    let shrink = IsrRequest { isr: vec![(1, -1)], ..ask(&image, &[1]) };
    assert_eq!(image.topics.state("t", 0).unwrap().state.leader, 1, "no round ran since");
    assert_eq!(check(&image, 1, &shrink, c.epoch), Err(E::IneligibleReplica));
}

#[test]
fn a_leader_elected_uncleanly_reports_recovered_alone_before_its_isr_grows() {
    use super::super::reconciler::{change_txn, plan, PlanRules, RECOVERING};
    use AlterPartitionError as E;
    let c = Cluster::new(&[1, 2], &[&[1, 2]]);
    c.round();
    c.set_broker(2, false);
    c.round();
    c.set_broker(1, false);
    c.round();
    c.set_broker(2, true);
    let unclean = PlanRules { preferred: false, unclean_by_default: true };
    for change in plan(&c.image(), c.epoch, unclean) {
        let r = c.rt.block_on(c.c.txn(change_txn(&c.keys, &change, c.epoch))).unwrap();
        assert!(r.succeeded);
    }
    c.set_broker(1, true);
    let image = c.image();
    let s = image.topics.state("t", 0).unwrap().state.clone();
    assert_eq!((s.leader, s.isr.clone(), s.leader_recovery_state), (2, vec![2], RECOVERING));
    // Still recovering, the ISR may not grow; staying RECOVERING alone is
    // no change.
    let grow = IsrRequest { leader_recovery_state: RECOVERING, ..ask(&image, &[2, 1]) };
    assert_eq!(check(&image, 2, &grow, c.epoch), Err(E::InvalidRequest));
    let stay = IsrRequest { leader_recovery_state: RECOVERING, ..ask(&image, &[2]) };
    assert_eq!(check(&image, 2, &stay, c.epoch), Ok(None));
    // RECOVERED alone is written; then the ISR may grow.
    let recovered = check(&image, 2, &ask(&image, &[2]), c.epoch).unwrap().unwrap();
    assert_eq!((recovered.state.isr.clone(), recovered.state.leader_recovery_state), (vec![2], 0));
}
