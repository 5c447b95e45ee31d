pub mod add_scram;
pub mod dump_log;
pub mod health;
