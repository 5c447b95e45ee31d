//! Any bytes as a segment's `.txnindex`, read both ways sediment reads one:
//! as a file opened by `TransactionIndex::open` (a local segment) and as the
//! bytes of a store's `.txnindex` object (`parse_entries`, tiered reads).
//! Neither panics; a trailing partial entry is cut off; both accept or
//! refuse the same bytes and return the same entries; a search for the
//! aborted transactions of a fetch range answers the same from the file
//! and from the parsed entries.
//!
//! Input: base offset (8 bytes, made non-negative), fetch offset and upper
//! bound (8 bytes each), then the index bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sediment::log::transaction_index::{
    parse_entries, TransactionIndex, TxnIndexSearchResult, ENTRY_SIZE,
};

fuzz_target!(|data: &[u8]| {
    let mut f = common::Fields(data);
    let base = f.i64() & i64::MAX;
    let (fetch, upper) = (f.i64(), f.i64());
    let bytes = f.rest();
    let parsed = parse_entries(bytes, base);
    let path = common::scratch_dir().join("00000000000000000000.txnindex");
    std::fs::write(&path, bytes).expect("write");
    let opened = TransactionIndex::open(&path, base);
    let whole = bytes.len() - bytes.len() % ENTRY_SIZE;
    assert_eq!(parsed.is_ok(), opened.is_ok(), "{parsed:?} {opened:?}");
    let (Ok(entries), Ok(index)) = (parsed, opened) else { return };
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), whole as u64);
    assert_eq!(index.len(), entries.len());
    assert_eq!(index.all_aborted_txns().expect("read"), entries);
    assert_eq!(index.last_offset(), entries.last().map(|e| e.last_offset));
    let from_file = index.collect_aborted_txns(fetch, upper).expect("search");
    assert_eq!(from_file, TxnIndexSearchResult::search(&entries, fetch, upper));
    for e in &from_file.aborted {
        assert!(e.last_offset >= fetch && e.first_offset < upper, "{e:?}");
    }
});
