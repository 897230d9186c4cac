//! Chat prompts as the checkpoints' own templates render them: each
//! template under tests/fixtures/chat/ (the GGUFs' `tokenizer.chat_template`,
//! and Qwen3's, DeepSeek-R1-Distill's and Gemma 3's from their
//! tokenizer_config.json), rendered by Jinja2 the way transformers does
//! (scripts/reference/chat_template_reference.py), against stepscore's minijinja
//! rendering of the same template text, for the same message lists, with and
//! without the generation prompt. Strings must be equal byte for byte; a
//! conversation Jinja2's rendering refuses must be refused with its message.
//!
//! The template text is committed with its renderings, so the comparison runs
//! without the model; when a catalog GGUF is in the cache, its template must
//! also be the committed one (so the fixture is the model's real template).

use std::path::PathBuf;

use serde::Deserialize;
use stepscore::engine::{GgufFile, ModelBytes};
use stepscore::prm::chat::{ChatFormat, Message};
use stepscore::testing::find_catalog_model;

#[derive(Deserialize)]
struct Fixture {
    template: String,
    bos_token: String,
    eos_token: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    messages: Vec<Msg>,
    rendered: Option<String>,
    with_generation_prompt: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Msg {
    role: String,
    content: String,
}

fn fixture(name: &str) -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/chat")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn format_of(fx: &Fixture) -> ChatFormat {
    let token = |t: &str| (!t.is_empty()).then(|| t.to_string());
    ChatFormat::from_template(&fx.template, token(&fx.bos_token), token(&fx.eos_token))
        .expect("the template parses")
}

/// Renders every case and compares with Jinja2's; returns the format.
fn check(name: &str) -> ChatFormat {
    let fx = fixture(name);
    let format = format_of(&fx);
    for case in &fx.cases {
        let messages: Vec<Message> = case
            .messages
            .iter()
            .map(|m| Message {
                role: &m.role,
                content: &m.content,
            })
            .collect();
        let roles: Vec<&str> = messages.iter().map(|m| m.role).collect();
        match (&case.rendered, &case.error) {
            (Some(rendered), None) => {
                assert_eq!(
                    &format.render(&messages, false).unwrap(),
                    rendered,
                    "{name}: {roles:?}"
                );
                let prompted = case
                    .with_generation_prompt
                    .as_ref()
                    .expect("both renderings");
                assert_eq!(
                    &format.render(&messages, true).unwrap(),
                    prompted,
                    "{name}: {roles:?}"
                );
            }
            (None, Some(error)) => {
                let got = format.render(&messages, false).unwrap_err().to_string();
                assert!(got.contains(error.as_str()), "{name}: {roles:?}: {got}");
            }
            _ => panic!("{name}: a case has either a rendering or an error"),
        }
    }
    eprintln!("{name}: {} renderings equal Jinja2's", fx.cases.len());
    format
}

/// The committed template is the cached catalog GGUF's own, when cached.
fn check_gguf(name: &str) {
    let fx = fixture(name);
    match find_catalog_model(name) {
        None => eprintln!("{name}: GGUF not cached; its template text not re-checked"),
        Some(model) => {
            let bytes = ModelBytes::open(&model).unwrap();
            let gguf = GgufFile::parse(bytes.as_slice(), &model.display().to_string()).unwrap();
            assert_eq!(
                gguf.opt_str("tokenizer.chat_template").unwrap(),
                Some(fx.template.as_str()),
                "{name}: the GGUF's template is not the committed one"
            );
        }
    }
}

#[test]
fn qwen25_coder_templates() {
    for name in ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        let format = check(name);
        assert_eq!(format.end_of_turn().unwrap(), "<|im_end|>");
        check_gguf(name);
    }
}

#[test]
fn smollm2_template() {
    check("smollm2-135m");
    check_gguf("smollm2-135m");
}

#[test]
fn qwen3_template() {
    // Its last assistant turn carries an empty `<think>` block.
    assert_eq!(check("qwen3").end_of_turn().unwrap(), "<|im_end|>");
}

#[test]
fn deepseek_r1_distill_template() {
    // ThinkPRM-1.5B's base: BOS first, the generation prompt opens `<think>`.
    assert_eq!(
        check("deepseek-r1-distill").end_of_turn().unwrap(),
        "<｜end▁of▁sentence｜>"
    );
}

#[test]
fn gemma3_template() {
    // The system message joins the first user turn; roles must alternate.
    assert_eq!(check("gemma-3-it").end_of_turn().unwrap(), "<end_of_turn>");
}
