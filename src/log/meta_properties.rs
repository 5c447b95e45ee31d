//! Kafka's MetaProperties: `meta.properties` in every log dir, naming the
//! cluster the data belongs to and the node that wrote it.
//!
//! Invariants:
//! * The cluster id is generated once, on the first start with no
//!   `meta.properties` anywhere, and kept from then on: an existing file is
//!   never rewritten.
//! * Every log dir has the file after a start; a dir added later gets the
//!   cluster id the others already carry (the first dir, in `log.dirs` order,
//!   whose file names one).
//! * A file is written whole or not at all ([`write_atomically`]).

use std::path::{Path, PathBuf};

use super::checkpoint::write_atomically;
use super::error::{LogError, Result};
use super::manager::{random_topic_id, topic_id_to_string};

/// The file's name in each log dir.
pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// What `meta.properties` holds (version 1 of the format, as a KRaft broker writes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
}

impl MetaProperties {
    /// Read the cluster id from the log dirs or generate one, and write
    /// `meta.properties` into every dir that lacks it (creating the dir).
    ///
    /// # Errors
    /// I/O errors creating a dir or writing its file.
    pub fn load_or_create(dirs: &[PathBuf], node_id: i32) -> Result<Self> {
        let cluster_id = dirs
            .iter()
            .find_map(|dir| read_cluster_id(dir))
            .unwrap_or_else(|| topic_id_to_string(&random_topic_id()));
        let meta = Self { cluster_id, node_id };
        for dir in dirs {
            std::fs::create_dir_all(dir).map_err(LogError::io(dir))?;
            let path = dir.join(META_PROPERTIES_FILE);
            if !path.exists() {
                write_atomically(&path, meta.to_text().as_bytes())?;
            }
        }
        Ok(meta)
    }

    /// Replace the cluster id in every dir's file (a broker without data
    /// joining a cluster takes the cluster's id).
    ///
    /// # Errors
    /// I/O errors writing a file.
    pub fn rewrite(dirs: &[PathBuf], node_id: i32, cluster_id: &str) -> Result<Self> {
        let meta = Self { cluster_id: cluster_id.to_string(), node_id };
        for dir in dirs {
            write_atomically(&dir.join(META_PROPERTIES_FILE), meta.to_text().as_bytes())?;
        }
        Ok(meta)
    }

    /// The file's text (also what a restore writes into a fresh log dir).
    pub fn to_text(&self) -> String {
        format!(
            "#\n#sediment\nnode.id={}\nversion=1\ncluster.id={}\n",
            self.node_id, self.cluster_id
        )
    }
}

/// The cluster id in `dir`'s file; `None` when it is missing, unreadable or
/// names none.
fn read_cluster_id(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(META_PROPERTIES_FILE)).ok()?;
    text.lines().find_map(|l| l.strip_prefix("cluster.id=")).map(|id| id.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dir: &Path) -> String {
        std::fs::read_to_string(dir.join(META_PROPERTIES_FILE)).unwrap()
    }

    #[test]
    fn a_fresh_dir_gets_a_file_that_reads_back() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        let meta = MetaProperties::load_or_create(std::slice::from_ref(&dir), 3).unwrap();
        assert_eq!(meta.node_id, 3);
        assert_eq!(meta.cluster_id.len(), 22);
        assert_eq!(
            read(&dir),
            format!("#\n#sediment\nnode.id=3\nversion=1\ncluster.id={}\n", meta.cluster_id)
        );
        let again = MetaProperties::load_or_create(std::slice::from_ref(&dir), 3).unwrap();
        assert_eq!(again, meta);
    }

    #[test]
    fn an_existing_file_is_kept_and_its_cluster_id_spreads() {
        let root = tempfile::tempdir().unwrap();
        let (old, new) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir(&old).unwrap();
        let text = "version=1\nnode.id=1\ncluster.id= kept-cluster-id \nextra=x\n";
        std::fs::write(old.join(META_PROPERTIES_FILE), text).unwrap();
        let meta = MetaProperties::load_or_create(&[new.clone(), old.clone()], 1).unwrap();
        assert_eq!(meta.cluster_id, "kept-cluster-id");
        assert_eq!(read(&old), text);
        assert!(read(&new).contains("cluster.id=kept-cluster-id\n"));
    }

    #[test]
    fn a_file_without_a_cluster_id_is_kept_and_an_id_generated() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(META_PROPERTIES_FILE), "version=1\n").unwrap();
        let meta = MetaProperties::load_or_create(std::slice::from_ref(&dir), 1).unwrap();
        assert!(!meta.cluster_id.is_empty());
        assert_eq!(read(&dir), "version=1\n");
    }

    #[test]
    fn a_dir_that_cannot_be_created_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = MetaProperties::load_or_create(&[file.join("data")], 1).unwrap_err();
        assert!(matches!(err, LogError::Io { .. }), "{err}");
    }
}
