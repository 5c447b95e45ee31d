//! ListTransactions (v0–2): the transactional ids the coordinator holds, with
//! their producer id and state, filtered as Kafka's
//! `TransactionStateManager.listTransactionStates`:
//! * state filters: the names of `TransactionState`; a name that is not one
//!   is returned in `unknown_state_filters` (and matches nothing);
//! * producer id filters: only those producer ids;
//! * (v1) `duration_filter` >= 0: only transactions running longer than it,
//!   counted from the transaction's start time;
//! * (v2) `transactional_id_pattern`, unless null or empty: only ids the
//!   whole of which it matches. Kafka compiles it with RE2/J; RE2's syntax is
//!   the one `regex-syntax` parses. One that does not parse, or compiles to
//!   more than `PATTERN_SIZE_LIMIT` bytes, is INVALID_REGULAR_EXPRESSION;
//! * Dead ids (being expired) are never listed;
//! * only ids the principal may DESCRIBE are listed (each refused one is
//!   recorded as a denial, as Kafka's `handleListTransactionsRequest` logs it).
//!
//! COORDINATOR_LOAD_IN_PROGRESS until `__transaction_state` is loaded.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTransaction;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use regex_automata::meta::Regex;
use regex_syntax::hir::{Hir, Look};

use super::error::{txn_error_code, TxnApi};
use super::{str_bytes, RequestContext};
use crate::api::KafkaApis;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::{TransactionMetadata, TransactionState};

/// The most memory a compiled id pattern may take (its NFA).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

pub fn handle(
    broker: &KafkaApis,
    ctx: &RequestContext<'_>,
    request: &ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    // Kafka answers a load in progress before it looks at the pattern.
    let transactions = match broker.txn.state_manager().snapshot() {
        Ok(t) => t,
        Err(e) => {
            let code = txn_error_code(&e, TxnApi::ListTransactions, version);
            return ListTransactionsResponse::default().with_error_code(code.code());
        }
    };
    let pattern = request.transactional_id_pattern.as_ref().filter(|_| version >= 2);
    let id_pattern = match IdPattern::new(pattern.map(|p| p.as_str())) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!("ListTransactions: {e}");
            let code = ResponseError::InvalidRegularExpression.code();
            return ListTransactionsResponse::default().with_error_code(code);
        }
    };
    let mut states = BTreeSet::new();
    let mut unknown = Vec::new();
    for name in &request.state_filters {
        match TransactionState::from_name(name.as_str()) {
            Some(state) => {
                states.insert(state);
            }
            None => unknown.push(name.clone()),
        }
    }
    let filter = Filter {
        producer_ids: request.producer_id_filters.iter().map(|p| p.0).collect(),
        by_state: !request.state_filters.is_empty(),
        states,
        duration_ms: if version >= 1 { request.duration_filter } else { -1 },
        now: broker.logs.clock().now_ms(),
    };
    let listed = transactions
        .values()
        .filter(|t| filter.includes(t) && id_pattern.matches(&t.transactional_id))
        .filter(|t| {
            ctx.authorize(
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &t.transactional_id,
            )
        })
        .map(|t| {
            ListedTransaction::default()
                .with_transactional_id(TransactionalId(str_bytes(t.transactional_id.clone())))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(str_bytes(t.state().name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(listed)
}

/// A v2 transactional id pattern, matching whole ids (RE2/J's `matches`).
struct IdPattern(Option<Regex>);

impl IdPattern {
    /// `None` or an empty pattern matches every id.
    fn new(pattern: Option<&str>) -> Result<Self, String> {
        let Some(pattern) = pattern.filter(|p| !p.is_empty()) else {
            return Ok(Self(None));
        };
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .map_err(|e| format!("pattern {pattern:?}: {e}"))?;
        // Anchored on both sides as a tree, so no text of the pattern (a
        // comment, an unbalanced group) can escape the anchors.
        let whole = Hir::concat(vec![Hir::look(Look::Start), hir, Hir::look(Look::End)]);
        Regex::builder()
            .configure(Regex::config().nfa_size_limit(Some(PATTERN_SIZE_LIMIT)))
            .build_from_hir(&whole)
            .map(|re| Self(Some(re)))
            .map_err(|e| format!("pattern {pattern:?}: {e}"))
    }

    fn matches(&self, id: &str) -> bool {
        self.0.as_ref().is_none_or(|re| re.is_match(id))
    }
}

struct Filter {
    producer_ids: BTreeSet<i64>,
    /// Whether any state filter was given (all of them unknown filters all out).
    by_state: bool,
    states: BTreeSet<TransactionState>,
    duration_ms: i64,
    now: i64,
}

impl Filter {
    fn includes(&self, t: &TransactionMetadata) -> bool {
        let state = t.state();
        state != TransactionState::Dead
            && (self.producer_ids.is_empty() || self.producer_ids.contains(&t.producer_id))
            && (!self.by_state || self.states.contains(&state))
            && (self.duration_ms < 0 || self.now - t.txn_start_timestamp > self.duration_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(producer_ids: &[i64], states: &[TransactionState], duration_ms: i64) -> Filter {
        Filter {
            producer_ids: producer_ids.iter().copied().collect(),
            by_state: !states.is_empty(),
            states: states.iter().copied().collect(),
            duration_ms,
            now: 10_000,
        }
    }

    fn txn(pid: i64, start: i64) -> TransactionMetadata {
        let mut t = TransactionMetadata::new("a", pid, 0, 60_000, 0);
        t.txn_start_timestamp = start;
        t
    }

    #[test]
    fn filters_combine_as_kafkas() {
        let t = txn(7, 4_000);
        assert!(filter(&[], &[], -1).includes(&t));
        assert!(filter(&[7, 8], &[], -1).includes(&t));
        assert!(!filter(&[8], &[], -1).includes(&t));
        assert!(filter(&[], &[TransactionState::Empty], -1).includes(&t));
        assert!(!filter(&[], &[TransactionState::Ongoing], -1).includes(&t));
        // Running 6000 ms: longer than 5999, not longer than 6000.
        assert!(filter(&[], &[], 5_999).includes(&t));
        assert!(!filter(&[], &[], 6_000).includes(&t));
    }

    #[test]
    fn an_id_pattern_matches_whole_ids() {
        let p = IdPattern::new(Some("app-[0-9]+|other")).unwrap();
        assert!(p.matches("app-12") && p.matches("other"));
        assert!(!p.matches("my-app-12") && !p.matches("app-12x") && !p.matches("others"));
        for every in [None, Some("")] {
            assert!(IdPattern::new(every).unwrap().matches("anything"));
        }
        for invalid in ["app-(", "a)|(b", "[z-a]", "a{5000}{5000}"] {
            assert!(IdPattern::new(Some(invalid)).is_err(), "{invalid}");
        }
    }

    #[test]
    fn only_unknown_state_names_match_nothing() {
        let mut f = filter(&[], &[], -1);
        f.by_state = true;
        assert!(!f.includes(&txn(7, 0)));
    }
}
