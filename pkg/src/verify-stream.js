// scorer.verifyStream(): an external generator's answer verified while it is
// written. The core (StreamVerifierOf) cuts the stream into steps by the
// blank-line rule, scores each on one session the moment it completes and
// says `stopped` when a step falls below the threshold; this module only
// reads the source and hands its pieces over, in one of three forms:
// - SSE bytes: a fetch `Response` or a `ReadableStream` of bytes from an
//   OpenAI-compatible server (llama.cpp's server, vLLM);
// - chunk objects: an async iterable of OpenAI `chat.completion.chunk`
//   objects (WebLLM's `chat.completions.create({ stream: true })`, wllama's
//   `createChatCompletion({ stream: true })`);
// - plain text: an async iterable of strings (any token streamer).
// On `stopped` (and on abort or a `break`) the source is cancelled: a
// ReadableStream's reader is cancelled, an iterator is returned.

import { StepscoreError } from './errors.js';
import { throwIfAborted } from './abort.js';

function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? (v.constructor?.name ?? 'an object') : typeof v;
}

/**
 * The source as an async iterator of `[kind, data]` (kind: 'bytes', 'chunk',
 * 'text', then 'close' after bytes or 'end' after chunks and text) with a
 * `cancel()` that stops it.
 */
export function sourceFeed(source) {
  if (typeof Response === 'function' && source instanceof Response) {
    if (!source.ok) {
      throw new StepscoreError('FETCH_FAILED', `verifyStream: the response is HTTP ${source.status} ${source.statusText}`.trim());
    }
    if (!source.body) throw new StepscoreError('INVALID_ARGUMENT', 'verifyStream: the response has no body');
    return readerFeed(source.body.getReader());
  }
  if (typeof ReadableStream === 'function' && source instanceof ReadableStream) return readerFeed(source.getReader());
  if (source && typeof source[Symbol.asyncIterator] === 'function') return iteratorFeed(source[Symbol.asyncIterator]());
  throw new StepscoreError(
    'INVALID_ARGUMENT',
    `verifyStream: the source must be a Response, a ReadableStream or an async iterable, got ${typeName(source)}`,
  );
}

const encoder = new TextEncoder();

function bytesOf(value) {
  if (value instanceof Uint8Array) return value;
  if (typeof value === 'string') return encoder.encode(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  throw new StepscoreError('INVALID_ARGUMENT', `verifyStream: a ReadableStream must give bytes or strings of SSE, got ${typeName(value)}`);
}

function readerFeed(reader) {
  let done = false;
  return {
    async next() {
      if (done) return { done: true };
      const r = await reader.read();
      if (r.done) {
        done = true;
        return { value: ['close', null] };
      }
      return { value: ['bytes', bytesOf(r.value)] };
    },
    async cancel() {
      done = true;
      await reader.cancel().catch(() => undefined);
    },
  };
}

function iteratorFeed(it) {
  let done = false;
  return {
    async next() {
      if (done) return { done: true };
      const r = await it.next();
      if (r.done) {
        done = true;
        return { value: ['end', null] };
      }
      const v = r.value;
      if (typeof v === 'string') return { value: ['text', v] };
      if (v instanceof Uint8Array) return { value: ['bytes', v] };
      if (v && typeof v === 'object') return { value: ['chunk', JSON.stringify(v)] };
      throw new StepscoreError('INVALID_ARGUMENT', `verifyStream: an async iterable must give chunk objects, strings or bytes, got ${typeName(v)}`);
    },
    async cancel() {
      done = true;
      await it.return?.();
    },
  };
}

/**
 * The events of verifying `source` with the verifier `start()` gives (with
 * the abort signal): an engine's verifier, whose `feed(kind, data)` resolves
 * to the events that input completed. Runs until the stream finishes or a
 * step stops it; the source is cancelled on the way out.
 */
export async function* verifyEvents(start, source) {
  const { verifier, signal } = start();
  let feed = null;
  try {
    throwIfAborted(signal, 'the stream verification');
    feed = sourceFeed(source);
    for (;;) {
      const next = await feed.next();
      throwIfAborted(signal, 'the stream verification');
      if (next.done) return;
      const [kind, data] = next.value;
      for (const event of await verifier.feed(kind, data)) {
        yield event;
        throwIfAborted(signal, 'the stream verification');
        if (event.event === 'stopped' || event.event === 'finished') return;
      }
    }
  } finally {
    await feed?.cancel();
    verifier.dispose();
  }
}
