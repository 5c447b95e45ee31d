pub mod dump_log;
