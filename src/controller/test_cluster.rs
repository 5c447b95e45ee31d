//! A namespace in memory for the controller's unit tests: brokers,
//! topic `t`, and the reconciler's rounds over them.

use std::collections::BTreeMap;

use super::reconciler::{change_txn, plan, PartitionChange, PlanRules};
use crate::cluster::coordination::{Coordination, Op, Txn};
use crate::cluster::image::{snapshot, MetadataImage};
use crate::cluster::keys::{
    self, broker_state, BrokerRegistration, ClusterKeys, PartitionStateValue, TopicValue,
};
use crate::cluster::MemCoordination;

/// A namespace with `brokers` RUNNING and topic `t` of `assignment`, and
/// the states written so far.
pub struct Cluster {
    pub c: MemCoordination,
    pub keys: ClusterKeys,
    pub rt: tokio::runtime::Runtime,
    /// The controller key's create revision.
    pub epoch: i64,
}

impl Cluster {
    pub fn new(brokers: &[i32], assignment: &[&[i32]]) -> Self {
        let clock: crate::clock::SharedClock = crate::clock::MockClock::new(0);
        let me = Self {
            c: MemCoordination::new(clock),
            keys: ClusterKeys::new("/s"),
            rt: tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
            epoch: 0,
        };
        let mut me = me;
        me.epoch = me.put(&me.keys.controller(), b"{}".to_vec());
        for b in brokers {
            me.set_broker(*b, true);
        }
        let topic = TopicValue {
            version: 3,
            topic_id: "AAAAAAAAAAAAAAAAAAAAAQ".into(),
            partitions: assignment
                .iter()
                .enumerate()
                .map(|(p, r)| (p.to_string(), r.to_vec()))
                .collect::<BTreeMap<_, _>>(),
            adding_replicas: BTreeMap::new(),
            removing_replicas: BTreeMap::new(),
        };
        me.put(&me.keys.topic("t"), keys::to_json(&topic));
        me
    }

    /// Put `value` at `key`; the revision.
    pub fn put(&self, key: &str, value: Vec<u8>) -> i64 {
        let txn = Txn { compares: vec![], success: vec![Op::put(key, value)], failure: vec![] };
        self.rt.block_on(self.c.txn(txn)).unwrap().revision
    }

    pub fn set_broker(&self, id: i32, alive: bool) {
        self.set_broker_state(id, alive, broker_state::RUNNING);
    }

    pub fn set_broker_state(&self, id: i32, alive: bool, state: i32) {
        let key = self.keys.broker(id);
        if !alive {
            let op = Op::Delete(crate::cluster::coordination::KeyRange::Key(key));
            let txn = Txn { compares: vec![], success: vec![op], failure: vec![] };
            self.rt.block_on(self.c.txn(txn)).unwrap();
            return;
        }
        let r = BrokerRegistration {
            version: 1,
            incarnation_id: format!("i{id}"),
            directory_id: format!("d{id}"),
            rack: None,
            state,
            endpoints: vec![],
            inter_broker_listener: "PLAINTEXT".into(),
            software_version: "test".into(),
        };
        self.put(&key, r.to_json());
    }

    pub fn plan(&self) -> Vec<PartitionChange> {
        plan(&self.image(), self.epoch, PlanRules::default())
    }

    pub fn image(&self) -> MetadataImage {
        self.rt.block_on(snapshot(&self.c, &self.keys)).unwrap()
    }

    /// Plan and write one round, as the controller does; the states after it.
    pub fn round(&self) -> Vec<PartitionStateValue> {
        for change in self.plan() {
            let r = self.rt.block_on(self.c.txn(change_txn(&self.keys, &change, self.epoch)));
            assert!(r.unwrap().succeeded, "{change:?}");
        }
        assert!(self.plan().is_empty(), "one round settles the states");
        let image = self.image();
        let t = image.topics.topic("t").unwrap();
        t.assignment.keys().map(|p| image.topics.state("t", *p).unwrap().state.clone()).collect()
    }
}
