//! The cleaner's JSON views: the `/cleaner-status` document, and which
//! replica it and `/key-audit` describe in a cluster
//! (docs/design/multi-broker.md, 8.4): this broker and, per partition, the
//! local replica's role, the leader epoch it knows and its high watermark.
//! Each replica cleans its own copy, so a key "erased" on one says nothing
//! of another's.

use super::{cluster, Metrics, MetricsError};

impl Metrics {
    /// The `/cleaner-status` document.
    ///
    /// # Errors
    /// Serialization failures (a bug).
    pub fn cleaner_status_json(&self) -> Result<String, MetricsError> {
        let mut doc = serde_json::json!({
            "manager": self.cleaner.manager_status(),
            "threads": self.cleaner.threads_status(),
            "config": {
                "enable": self.cleaner.config().enable,
                "threads": self.cleaner.config().num_threads,
                "backoff_ms": self.cleaner.config().backoff_ms,
            },
        });
        if let Some(cluster) = &self.cluster {
            self.name_replicas(cluster.as_ref(), &mut doc);
        }
        Ok(serde_json::to_string_pretty(&doc)?)
    }

    /// In a cluster, which replica the document describes: this broker's
    /// id, and per partition its role, the leader epoch it knows and its
    /// high watermark (each replica cleans its own copy, up to that mark).
    fn name_replicas(&self, cluster: &dyn cluster::ClusterStatus, doc: &mut serde_json::Value) {
        doc["broker"] = cluster.node_id().into();
        let partitions = doc["manager"]["partitions"].as_array_mut().into_iter().flatten();
        for p in partitions {
            let (Some(topic), Some(partition)) = (p["topic"].as_str(), p["partition"].as_i64())
            else {
                continue;
            };
            let topic = topic.to_string();
            self.name_replica_of(cluster, p, &topic, partition as i32);
        }
    }

    /// A key audit of `topic`-`partition`, in a cluster: the replica it read
    /// (as [`Self::name_replicas`]); "erased" here says nothing of another
    /// replica's copy.
    pub(crate) fn name_replica(&self, doc: &mut serde_json::Value, topic: &str, partition: i32) {
        if let Some(cluster) = &self.cluster {
            doc["broker"] = cluster.node_id().into();
            self.name_replica_of(cluster.as_ref(), doc, topic, partition);
        }
    }

    fn name_replica_of(
        &self,
        cluster: &dyn cluster::ClusterStatus,
        p: &mut serde_json::Value,
        topic: &str,
        partition: i32,
    ) {
        let tp = crate::log::TopicPartition::new(topic, partition);
        let hw = self.logs.get_log(&tp).map(|l| l.read().high_watermark());
        let role = cluster.replica_role(topic, partition);
        p["role"] = role.map_or("none", |(r, _)| r.name()).into();
        p["leader_epoch"] = role.map_or(-1, |(_, e)| e).into();
        p["high_watermark"] = hw.unwrap_or(-1).into();
    }
}
