//! The resurrection guard's gauges: per topic and consumer group, the kept
//! tombstones the group has not read whose delete horizons are running, and
//! how long until the first of them may be removed. Summed over the topic's
//! partitions; a (topic, group) with nothing at risk has no series.

use prometheus::{GaugeVec, IntGaugeVec, Opts, Registry};

use crate::cleaner::PartitionCleaningStatus;

#[derive(Debug)]
pub(super) struct TombstoneGauges {
    at_risk: IntGaugeVec,
    horizon: GaugeVec,
}

const LABELS: &[&str] = &["topic", "group"];

impl TombstoneGauges {
    pub(super) fn register(r: &Registry) -> Result<Self, prometheus::Error> {
        let at_risk = IntGaugeVec::new(
            Opts::new(
                "sediment_log_tombstones_at_risk",
                "Tombstones kept with a running delete horizon at or above the group's committed offset: the group has not read them and may read past the deletion once they go",
            ),
            LABELS,
        )?;
        let horizon = GaugeVec::new(
            Opts::new(
                "sediment_log_tombstones_at_risk_horizon_seconds",
                "Seconds until the first tombstone at risk for the group may be removed (negative: its horizon has passed)",
            ),
            LABELS,
        )?;
        r.register(Box::new(at_risk.clone()))?;
        r.register(Box::new(horizon.clone()))?;
        Ok(Self { at_risk, horizon })
    }

    pub(super) fn refresh(&self, partitions: &[PartitionCleaningStatus], now_ms: i64) {
        self.at_risk.reset();
        self.horizon.reset();
        let mut sums: std::collections::BTreeMap<(&str, &str), (i64, i64)> = Default::default();
        for p in partitions {
            for r in &p.tombstones_at_risk {
                let e = sums.entry((&p.topic, &r.group)).or_insert((0, i64::MAX));
                e.0 += r.tombstones as i64;
                e.1 = e.1.min(r.earliest_horizon_ms);
            }
        }
        for ((topic, group), (count, earliest)) in sums {
            self.at_risk.with_label_values(&[topic, group]).set(count);
            let secs = (earliest.saturating_sub(now_ms)) as f64 / 1000.0;
            self.horizon.with_label_values(&[topic, group]).set(secs);
        }
    }
}
