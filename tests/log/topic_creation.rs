//! Creating a topic's partitions does not hold the topics lock (issue 28
//! item 4): while a creation is held inside its first partition (a fail
//! point), another topic is created and every topic listed, and a second
//! creation of the same name is refused; released, the held one completes.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use sediment::clock::MockClock;
use sediment::failpoint;
use sediment::log::manager::CREATE_PARTITION_FAILPOINT;
use sediment::log::{LogError, LogManager, LogManagerConfig};

#[test]
fn a_creation_in_progress_leaves_the_topics_lock_free() {
    let dir = tempfile::tempdir().unwrap();
    let clock = MockClock::new(1_700_000_000_000);
    let logs = Arc::new(LogManager::open(LogManagerConfig::new(dir.path()), clock).unwrap());
    let armed = failpoint::arm(CREATE_PARTITION_FAILPOINT, "held-big");
    let creator = {
        let logs = Arc::clone(&logs);
        std::thread::spawn(move || logs.create_topic("held-big", 200, BTreeMap::new()))
    };
    assert!(
        armed.wait_held(CREATE_PARTITION_FAILPOINT, Duration::from_secs(30)),
        "the creation started"
    );

    // Meanwhile, on another thread (the old code would block here for good).
    let (done, answers) = mpsc::channel();
    {
        let logs = Arc::clone(&logs);
        std::thread::spawn(move || {
            let small = logs.create_topic("small", 1, BTreeMap::new()).map(|_| ());
            let again = logs.create_topic("held-big", 1, BTreeMap::new()).map(|_| ());
            let names: Vec<String> = logs.topics().into_iter().map(|t| t.name).collect();
            done.send((small, again, names)).unwrap();
        });
    }
    let (small, again, names) =
        answers.recv_timeout(Duration::from_secs(30)).expect("the topics lock is free");
    assert!(small.is_ok(), "{small:?}");
    assert!(matches!(again, Err(LogError::TopicExists(_))), "{again:?}");
    assert_eq!(names, ["small"], "the held topic is not listed before it is complete");

    drop(armed);
    let big = creator.join().unwrap().expect("the held creation completes");
    assert_eq!(big.partitions, 200);
    assert_eq!(logs.topic("held-big").map(|t| t.partitions), Some(200));
}
