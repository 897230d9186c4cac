//! Chat prompts as the checkpoints' own templates render them: each GGUF's
//! `tokenizer.chat_template`, rendered by Jinja2 the way transformers does
//! (scripts/chat_template_reference.py, committed under tests/fixtures/chat/),
//! against stepscore's [`ChatFormat`] detected from the same template text,
//! for the same message lists. Strings must be equal byte for byte.
//!
//! The template text is committed with its renderings, so the comparison runs
//! without the model; when the GGUF is in the cache, its template must also be
//! the committed one (so the fixture is the model's real template).

use std::path::PathBuf;

use serde::Deserialize;
use stepscore::format::{GgufFile, ModelBytes};
use stepscore::prm::chat::{ChatFormat, Message};
use stepscore::testing::find_catalog_model;

#[derive(Deserialize)]
struct Fixture {
    template: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    messages: Vec<Msg>,
    rendered: String,
}

#[derive(Deserialize)]
struct Msg {
    role: String,
    content: String,
}

fn check(name: &str, default_system: Option<&str>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/chat")
        .join(format!("{name}.json"));
    let fx: Fixture = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let format = ChatFormat::from_template(&fx.template).expect("a known chat format");
    assert_eq!(
        format,
        ChatFormat::ChatMl {
            default_system: default_system.map(str::to_string)
        }
    );
    for case in &fx.cases {
        let messages: Vec<Message> = case
            .messages
            .iter()
            .map(|m| Message {
                role: &m.role,
                content: &m.content,
            })
            .collect();
        assert_eq!(
            format.render(&messages),
            case.rendered,
            "{name}: {:?}",
            case.messages
                .iter()
                .map(|m| (&m.role, &m.content))
                .collect::<Vec<_>>()
        );
    }
    eprintln!("{name}: {} renderings equal Jinja2's", fx.cases.len());
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

const QWEN_SYSTEM: &str = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

#[test]
fn qwen25_coder_05b_template() {
    check("qwen2.5-coder-0.5b", Some(QWEN_SYSTEM));
}

#[test]
fn qwen25_coder_15b_template() {
    check("qwen2.5-coder-1.5b", Some(QWEN_SYSTEM));
}

#[test]
fn smollm2_template() {
    check(
        "smollm2-135m",
        Some("You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
    );
}
