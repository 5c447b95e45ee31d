pub mod dump_log;
pub mod health;
