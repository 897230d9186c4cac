//! (in progress)
pub fn extract_answer(_text: &str) -> Option<String> {
    None
}
