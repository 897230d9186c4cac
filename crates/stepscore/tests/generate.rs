//! Generation: greedy decoding equals llama.cpp's token for token on the
//! same GGUF (tests/fixtures/llama_cpp/generate_*.json, written by
//! scripts/reference/llama_generate_reference.py: 5 prompts x 64 tokens on SmolLM2,
//! Qwen2.5-Coder-0.5B and Gemma 3 270M), up to a near-tie: a position where the two tokens'
//! logits are within NEAR_TIE of each other under stepscore's engine, where
//! the engines' stated logit difference (up to 0.56 vs llama.cpp, whose own
//! f16 and f32 KV caches differ by 0.52: tests/llama_cpp_logits.rs) can flip
//! the choice; past one the two texts have different contexts and are not
//! compared. The CPU and WGSL engines write the same tokens when sampling
//! with one seed (llvmpipe), and bad options are typed errors.

#[cfg(feature = "gpu")]
use crate::gpu_support;

use std::path::PathBuf;

use stepscore::engine::Sampling;
use stepscore::prm::{Backend, GenerateOptions, HeadSource, Scorer, ScorerOptions, StopReason};

fn fixture(name: &str) -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/llama_cpp")
        .join(name);
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn open(name: &str, backend: Backend) -> Option<Scorer> {
    let Some(path) = stepscore::testing::find_catalog_model(name) else {
        eprintln!("SKIPPED: {name} not fetched (stepscore fetch {name})");
        return None;
    };
    let options = ScorerOptions {
        backend,
        threads: 2,
        ..ScorerOptions::default()
    };
    Some(Scorer::open_with(path, &HeadSource::Backbone, &options).unwrap())
}

fn raw_greedy(n: usize) -> GenerateOptions {
    GenerateOptions {
        sampling: Sampling::greedy(),
        max_new_tokens: n,
        chat: false,
        ..GenerateOptions::default()
    }
}

/// Logit units: below this, two candidates are a near-tie (see the module docs).
const NEAR_TIE: f32 = 0.56;

/// How many of llama.cpp's tokens stepscore's greedy decoding reproduces per
/// prompt, asserting that every difference is a near-tie.
fn equals_llama_cpp(name: &str, file: &str) -> Vec<usize> {
    let Some(scorer) = open(name, Backend::Cpu) else {
        return Vec::new();
    };
    let want = fixture(file);
    let mut matched = Vec::new();
    for row in want["rows"].as_array().unwrap() {
        let prompt = row["prompt"].as_str().unwrap();
        let ids: Vec<u32> = serde_json::from_value(row["tokens"].clone()).unwrap();
        let prompt_ids: Vec<u32> = serde_json::from_value(row["prompt_tokens"].clone()).unwrap();
        let mut g = scorer.generate(prompt, &raw_greedy(64)).unwrap();
        g.finish().unwrap();
        let ours = g.tokens();
        assert_eq!(g.prompt_tokens(), prompt_ids.len(), "{name}: {prompt:?}");
        let same = ours.iter().zip(&ids).take_while(|(a, b)| a == b).count();
        matched.push(same);
        if same == ours.len() && same == ids.len() {
            let stop = if ids.len() == 64 {
                StopReason::MaxTokens
            } else {
                StopReason::EndOfTurn
            };
            assert_eq!(g.stop_reason(), Some(&stop), "{name}: {prompt:?}");
            continue;
        }
        // Different from position `same` on: the two choices there must be
        // a near-tie under this engine's logits.
        let mut context = prompt_ids.clone();
        context.extend(&ids[..same]);
        let hidden = scorer.forward(&context, None).unwrap();
        let row = hidden.row(context.len() - 1).unwrap();
        let theirs = ids.get(same).copied();
        let mine = ours.get(same).copied();
        let candidates: Vec<u32> = mine.into_iter().chain(theirs).collect();
        let end = scorer.tokenizer().eos_id();
        assert!(
            candidates.len() == 2 || end.is_some(),
            "{name}: {prompt:?}: one side stopped at {same} without an end token"
        );
        let pair: Vec<u32> = match (mine, theirs) {
            (Some(m), Some(t)) => vec![m, t],
            (Some(m), None) | (None, Some(m)) => vec![m, end.unwrap()],
            (None, None) => unreachable!("equal sequences are handled above"),
        };
        let logits = scorer.model().logits_for(row, Some(&pair)).unwrap();
        let gap = (logits[0] - logits[1]).abs();
        assert!(
            gap < NEAR_TIE,
            "{name}: {prompt:?}: token {same}: stepscore chose {:?}, llama.cpp {:?}, \
             {gap} logits apart (not a near-tie)",
            mine,
            theirs
        );
        eprintln!("{name}: {prompt:?}: same {same} tokens, then a near-tie ({gap:.3} logits)");
    }
    matched
}

#[test]
fn greedy_smollm2_equals_llama_cpp() {
    let matched = equals_llama_cpp("smollm2-135m", "generate_smollm2.json");
    eprintln!("smollm2: tokens equal to llama.cpp's per prompt: {matched:?} of 64");
}

#[test]
fn greedy_qwen_0_5b_equals_llama_cpp() {
    let matched = equals_llama_cpp("qwen2.5-coder-0.5b", "generate_qwen2.5-coder-0.5b.json");
    eprintln!("qwen2.5-coder-0.5b: tokens equal to llama.cpp's per prompt: {matched:?} of 64");
}

#[test]
fn greedy_gemma3_270m_equals_llama_cpp() {
    let matched = equals_llama_cpp("gemma-3-270m", "generate_gemma-3-270m.json");
    eprintln!("gemma-3-270m: tokens equal to llama.cpp's per prompt: {matched:?} of 64");
}

#[cfg(feature = "gpu")]
#[test]
fn cpu_and_wgsl_engines_sample_the_same_tokens() {
    if !gpu_support::have_adapter() {
        return;
    }
    let (Some(cpu), Some(gpu)) = (
        open("smollm2-135m", Backend::Cpu),
        open("smollm2-135m", Backend::Gpu),
    ) else {
        return;
    };
    let options = GenerateOptions {
        sampling: Sampling {
            seed: 11,
            ..Sampling::default()
        },
        max_new_tokens: 24,
        ..GenerateOptions::default()
    };
    for prompt in ["What is 15% of 80?", "Name a prime number above 20."] {
        let mut a = cpu.generate(prompt, &options).unwrap();
        let mut b = gpu.generate(prompt, &options).unwrap();
        a.finish().unwrap();
        b.finish().unwrap();
        assert_eq!(a.tokens(), b.tokens(), "{prompt}");
        assert_eq!(a.text(), b.text(), "{prompt}");
    }
}

/// The WGSL engine carries one hidden state to the host per generated token
/// (the vocabulary projection runs on the host's kernels): the prompt's
/// step too, not every row of the prompt.
#[cfg(feature = "gpu")]
#[test]
fn wgsl_generation_reads_back_one_hidden_row_per_token() {
    if !gpu_support::have_adapter() {
        return;
    }
    let Some(gpu) = open("smollm2-135m", Backend::Gpu) else {
        return;
    };
    let row_bytes = gpu.model().config().hidden_size as u64 * 4;
    let prompt = "The capital of France is a city that";
    let before = gpu.gpu_pool_stats().unwrap().read_back_bytes;
    let mut g = gpu.generate(prompt, &raw_greedy(6)).unwrap();
    g.finish().unwrap();
    let read = gpu.gpu_pool_stats().unwrap().read_back_bytes - before;
    let n = g.tokens().len() as u64;
    assert_eq!(n, 6);
    assert_eq!(
        read,
        n * row_bytes,
        "{read} bytes read back for {n} tokens after a prompt of several tokens"
    );
}

#[test]
fn stops_are_reported_and_text_is_streamed_whole() {
    let Some(scorer) = open("smollm2-135m", Backend::Cpu) else {
        return;
    };
    // A stop string: cut from the text, the streamed pieces add up to it.
    let options = GenerateOptions {
        stop: vec![" Paris".into()],
        ..raw_greedy(16)
    };
    let mut g = scorer
        .generate("The capital of France is", &options)
        .unwrap();
    let streamed: String = g.by_ref().map(|t| t.unwrap().text).collect();
    assert_eq!(g.stop_reason(), Some(&StopReason::StopString));
    assert_eq!(g.text(), "");
    assert_eq!(streamed, g.text());
    // The end of a step.
    let options = GenerateOptions {
        stop_at_step: true,
        ..raw_greedy(64)
    };
    let mut g = scorer
        .generate("The capital of France is", &options)
        .unwrap();
    let streamed: String = g.by_ref().map(|t| t.unwrap().text).collect();
    assert_eq!(g.stop_reason(), Some(&StopReason::StepEnd));
    assert_eq!(g.text(), " Paris.\n\n");
    assert_eq!(streamed, g.text());
    // A stop string that never comes: the budget ends it.
    let options = GenerateOptions {
        stop: vec!["never-written-xyzzy".into()],
        ..raw_greedy(5)
    };
    let mut g = scorer
        .generate("The capital of France is", &options)
        .unwrap();
    g.finish().unwrap();
    assert_eq!(g.stop_reason(), Some(&StopReason::MaxTokens));
    assert_eq!(g.tokens().len(), 5);
    // Cancelled before the first token.
    let mut g = scorer
        .generate("The capital of France is", &raw_greedy(5))
        .unwrap();
    g.cancel_flag()
        .store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(g.next().is_none());
    assert_eq!(g.stop_reason(), Some(&StopReason::Cancelled));
}

#[test]
fn bad_generation_requests_are_typed_errors() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/prm/skywork-prm-tiny"
    );
    let backbone =
        Scorer::open_with(dir, &HeadSource::Backbone, &ScorerOptions::default()).unwrap();
    let err = |o: GenerateOptions, prompt: &str| backbone.generate(prompt, &o).unwrap_err();
    assert!(err(raw_greedy(0), "hi")
        .to_string()
        .contains("max_new_tokens"));
    let hot = GenerateOptions {
        sampling: Sampling {
            top_p: 2.0,
            ..Sampling::default()
        },
        ..raw_greedy(4)
    };
    assert!(err(hot, "hi").to_string().contains("top_p"));
    let empty_stop = GenerateOptions {
        stop: vec![String::new()],
        ..raw_greedy(4)
    };
    assert!(err(empty_stop, "hi").to_string().contains("stop string"));
    let long = "word ".repeat(backbone.max_tokens() + 10);
    assert!(matches!(
        err(raw_greedy(4), &long),
        stepscore::Error::TraceTooLong { .. }
    ));
    // A PRM whose value head dropped the LM head cannot generate: it says so.
    let prm = Scorer::open(dir, &ScorerOptions::default()).unwrap();
    if prm.can_generate().is_err() {
        let e = prm.generate("hi", &raw_greedy(4)).unwrap_err().to_string();
        assert!(e.contains("backbone"), "{e}");
    }
    // The tiny backbone generates to its budget or its end token.
    let mut g = backbone.generate("2 + 3 =", &raw_greedy(6)).unwrap();
    g.finish().unwrap();
    assert!(g.tokens().len() <= 6);
    assert!(g.stop_reason().is_some());
}

/// N sequences' decode steps in one pass give each the bits it gets alone:
/// the hidden states of `forward_rows` equal separate forwards, and
/// generations stepped together (`next_tokens`, as search steps them)
/// write the same tokens with the same log-probs as each stepped alone.
#[test]
fn batched_decode_steps_equal_separate_ones() {
    let Some(scorer) = open("smollm2-135m", Backend::Cpu) else {
        return;
    };
    let model = scorer.model();
    let prompts: [&[u32]; 3] = [&[1, 504, 3458], &[1, 2, 3, 4, 5, 6, 7], &[9, 99]];
    let mut alone = Vec::new();
    let (mut caches, mut next) = (Vec::new(), Vec::new());
    for (k, p) in prompts.iter().enumerate() {
        let mut cache = model.new_cache();
        model.forward(p, Some(&mut cache)).unwrap();
        let token = 100 + k as u32;
        let mut solo = cache.clone();
        alone.push(model.forward(&[token], Some(&mut solo)).unwrap().data);
        caches.push(cache);
        next.push(token);
    }
    let mut refs: Vec<&mut _> = caches.iter_mut().collect();
    let together = model.forward_rows(&next, &mut refs).unwrap();
    for (k, row) in alone.iter().enumerate() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(together.row(k).unwrap()), bits(row), "sequence {k}");
        assert_eq!(caches[k].len(), prompts[k].len() + 1);
    }

    let options = |seed| GenerateOptions {
        sampling: Sampling {
            seed,
            ..Sampling::default()
        },
        max_new_tokens: 12,
        ..GenerateOptions::default()
    };
    let asks = ["What is 2 + 2?", "Name a colour.", "Count to three."];
    let mut solo = Vec::new();
    for (k, ask) in asks.iter().enumerate() {
        let mut g = scorer.generate(ask, &options(k as u64)).unwrap();
        let tokens: Vec<_> = g.by_ref().map(|t| t.unwrap()).collect();
        solo.push((tokens, g.stop_reason().cloned()));
    }
    let mut gens: Vec<_> = asks
        .iter()
        .enumerate()
        .map(|(k, ask)| scorer.generate(ask, &options(k as u64)).unwrap())
        .collect();
    let mut written = vec![Vec::new(); asks.len()];
    loop {
        let mut refs: Vec<&mut _> = gens.iter_mut().collect();
        let step = ready(stepscore::prm::generate::next_tokens(&mut refs)).unwrap();
        if step.iter().all(Option::is_none) {
            break;
        }
        for (k, t) in step.into_iter().enumerate() {
            written[k].extend(t);
        }
    }
    for k in 0..asks.len() {
        assert_eq!(written[k], solo[k].0, "generation {k}");
        assert_eq!(gens[k].stop_reason().cloned(), solo[k].1, "generation {k}");
    }
}

/// The CPU engine's futures are ready when first polled.
fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
    use std::task::{Context, Poll, Waker};
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a CPU engine future was pending"),
    }
}

/// `generate_many` runs the prompt once and steps N generations together,
/// and generation i writes what `generate` with seed + i writes alone.
#[test]
fn generate_many_equals_one_by_one_with_consecutive_seeds() {
    let Some(scorer) = open("smollm2-135m", Backend::Cpu) else {
        return;
    };
    let options = GenerateOptions {
        sampling: Sampling {
            seed: 7,
            temperature: 0.8,
            ..Sampling::default()
        },
        max_new_tokens: 10,
        ..GenerateOptions::default()
    };
    let gens = stepscore::prm::generate_many(&scorer, "Name a fruit.", &options, 3).unwrap();
    assert_eq!(gens.len(), 3);
    let mut texts = Vec::new();
    for (i, g) in gens.iter().enumerate() {
        let mut one = options.clone();
        one.sampling.seed = 7 + i as u64;
        let mut alone = scorer.generate("Name a fruit.", &one).unwrap();
        alone.finish().unwrap();
        assert_eq!(g.tokens(), alone.tokens(), "generation {i}");
        assert_eq!(g.text(), alone.text(), "generation {i}");
        assert_eq!(g.stop_reason(), alone.stop_reason(), "generation {i}");
        texts.push(g.text().to_string());
    }
    // Different seeds sample different texts (at T=0.8 over 10 tokens).
    assert!(texts[0] != texts[1] || texts[1] != texts[2], "{texts:?}");
    assert!(stepscore::prm::generate_many(&scorer, "x", &options, 0)
        .unwrap()
        .is_empty());
}
