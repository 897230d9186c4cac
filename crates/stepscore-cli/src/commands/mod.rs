//! One module per subcommand.

pub mod aggregate;
pub mod bench;
pub mod doctor;
pub mod eval;
pub mod features;
pub mod fetch;
pub mod generate;
pub mod read;
pub mod score;
pub mod search;
pub mod segment;
pub mod select;
pub mod serve;
pub mod train;
pub mod verify_stream;
